"""``squeue -O``: the columns asked for and a record -> :class:`~slurm_fair.model.SlurmJob`."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from ..model import SlurmJob
from .fields import expand_hostlist, parse_int, parse_memory_mb, parse_minutes, parse_time
from .gres import gpu_request, gpus_in_tres_map, parse_tres_map
from .records import split_records
from .tags import parse_tags

#: squeue -O fields; Name and Comment (user text) come last
SQUEUE_FIELDS: tuple[str, ...] = (
    "JobArrayID",
    "StateCompact",
    "Account",
    "UserName",
    "Partition",
    "QOS",
    "Reason",
    "SubmitTime",
    "StartTime",
    "PriorityLong",
    "Nice",
    "NumNodes",
    "NumTasks",
    "tres-per-job",
    "tres-per-node",
    "tres-per-task",
    "tres-alloc",
    "NodeList",
    "Requeue",
    "MinCpus",
    "MinMemory",
    "MaxNodes",
    "ReqNodes",
    "TimeLimit",
    "Reservation",
    "Dependency",
    "Feature",
    "admin_comment",
    "Name",
    "Comment",
)


_STATE_CODES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "CF": "CONFIGURING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "PR": "PREEMPTED",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RF": "REQUEUE_FED",
    "RS": "RESIZING",
    "RD": "RESV_DEL_HOLD",
    "RV": "REVOKED",
    "SE": "SPECIAL_EXIT",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
}


def state_name(text: str) -> str:
    """``PD`` or ``PENDING`` -> ``PENDING``."""
    t = text.strip().upper()
    return _STATE_CODES.get(t, t)


def _text(value: str) -> str:
    """A plain text column; Slurm's ``(null)`` means empty."""
    v = value.strip()
    return "" if v == "(null)" else v


def job_from_record(f: Sequence[str]) -> SlurmJob:
    """One squeue record (:data:`SQUEUE_FIELDS` order) -> :class:`SlurmJob`."""
    (job_id, state, account, user, partition, qos, reason, submit, start, priority, nice,
     num_nodes, num_tasks, per_job, per_node, per_task, tres_alloc, nodelist, requeue,
     min_cpus, min_memory, max_nodes, req_nodes, time_limit, reservation, dependency, features,
     admin_comment, name, comment) = f
    st = state_name(state)
    if comment == "(null)":  # how squeue prints "no comment"
        comment = ""
    qos, partition, reason = (_text(x) for x in (qos, partition, reason))
    nodes = parse_int(num_nodes, 1)
    request = gpu_request(per_job, per_node, per_task, nodes, parse_int(num_tasks, 1))
    running_type = None
    if st in ("RUNNING", "COMPLETING", "SUSPENDED") and request is not None:
        _, running_type = gpus_in_tres_map(parse_tres_map(tres_alloc))
    return SlurmJob(
        job_id=job_id.strip(),
        name=name,
        user=user.strip(),
        account=account.strip(),
        partition=partition.strip(),
        qos=qos.strip(),
        state=st,
        reason=reason.strip(),
        submit_time=parse_time(submit),
        start_time=parse_time(start) if st != "PENDING" else None,
        priority=parse_int(priority),
        nice=parse_int(nice),
        gpu_request=request,
        gpu_type_running=running_type,
        nodes=expand_hostlist(nodelist) if st != "PENDING" else (),
        comment=comment,
        tags=parse_tags(comment),
        requeue=requeue.strip().lower() in {"1", "yes", "true"},
        min_cpus=parse_int(min_cpus),
        min_memory_mb=parse_memory_mb(min_memory),
        max_nodes=parse_int(max_nodes, nodes),
        admin_comment=_text(admin_comment),
        req_nodes=expand_hostlist(req_nodes),
        time_limit_min=parse_minutes(time_limit),
        reservation=_text(reservation),
        dependency=_text(dependency),
        features=_text(features),
    )


def parse_squeue(text: str, fs: str) -> list[SlurmJob]:
    return [job_from_record(r) for r in split_records(text, fs, len(SQUEUE_FIELDS))]


def parse_excluded(text: str, fs: str) -> dict[str, tuple[str, ...]]:
    """``squeue -o %i<fs>%x``: job -> the nodes it excludes (jobs without any left out)."""
    out = {}
    for job_id, nodes in split_records(text, fs, 2):
        hosts = expand_hostlist(nodes)
        if hosts:
            out[job_id.strip()] = hosts
    return out


def with_pending_extras(job: SlurmJob, excluded: Mapping[str, tuple[str, ...]],
                        site: Mapping[str, int]) -> SlurmJob:
    """A pending job with its excluded nodes and site factor (from the two extra reads)."""
    if not job.pending:
        return job
    return replace(job, exc_nodes=excluded.get(job.job_id, ()), site_factor=site.get(job.job_id))
