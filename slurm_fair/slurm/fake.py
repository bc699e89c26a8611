"""A fake SlurmPort: loaded from recorded real output, keeping state for writes.

Unit tests, the controller's tests and dry runs use it instead of a cluster. It is *built from
what Slurm really printed* (``recordings/<name>/``, parsed by the same :mod:`.parse` functions as
the real adapter), and every write changes its state the way Slurm would, so a test writes,
reads back and sees the effect. The contract suite (``tests/slurm/test_contract.py``) runs the
same scenarios against this fake and the real testbed, which keeps the two honest.

Recordings: ``meta.json`` (``fs``: the separator used, ``slurm_version``, ``constructed``: true
for hand-written variants of formats the testbed cannot produce) and one file per read:
``sinfo.txt``, ``squeue.txt``, ``squeue_exc.txt`` (excluded nodes), ``sprio.txt`` (site factors),
``partitions.txt``, ``assoc.txt``, ``qos.txt``, ``sacct.txt`` (each optional).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import JobGone, SlurmError
from .model import (
    Account, AccountingRecord, GpuRequest, JobOutlook, Node, Partition, PriorityFactors, Qos, SlurmJob, Snapshot,
)
from .parse.gres import gpu_request_of, retype_request
from .parse.outlook import FACTOR_NAMES, parse_sprio
from .parse.partitions import parse_partitions
from .parse.fields import expand_hostlist
from .parse.history import History, parse_history
from .parse.sacct import parse_sacct
from .parse.sacctmgr import parse_assoc, parse_qos
from .parse.sinfo import parse_sinfo
from .parse.squeue import job_from_record, parse_excluded, parse_squeue, with_pending_extras
from .sbatch_args import sbatch_request
from .write_rules import UPDATABLE_FIELDS, batch_items, refuse_retype, split_raw

#: reasons Slurm gives a held job
HELD_ADMIN, HELD_USER = "JobHeldAdmin", "JobHeldUser"


def recordings_dir() -> Path:
    """Where the recordings shipped with the package live."""
    return Path(str(resources.files("slurm_fair.slurm").joinpath("recordings")))


def list_recordings() -> list[str]:
    return sorted(p.name for p in recordings_dir().iterdir() if (p / "meta.json").is_file())


class FakeSlurm:
    """In-memory Slurm. Reads return the current state; writes change it like Slurm would."""

    def __init__(
        self,
        nodes: Sequence[Node] = (),
        jobs: Sequence[SlurmJob] = (),
        accounts: Sequence[Account] = (),
        qos: Sequence[Qos] = (),
        accounting_records: Sequence[AccountingRecord] = (),
        cluster: str = "fake",
        now: datetime | None = None,
        slurm_version: str = "",
        partitions: Sequence[Partition] = (),
    ) -> None:
        self._nodes = {n.name: n for n in nodes}
        #: the partitions as scontrol shows them (default: one UP partition per name the nodes
        #: carry, no restriction, tier 1, so tests without partition rules need not build any)
        self._partitions = {p.name: p for p in partitions} or _partitions_of(nodes)
        self._jobs = {j.job_id: j for j in jobs}
        self._accounts = {a.name: a for a in accounts}
        self._qos = {q.name: q for q in qos}
        self._accounting = list(accounting_records)
        self.cluster = cluster
        self.now = now
        #: the Slurm release whose rules the fake follows ("" = newest: typed requests can change)
        self.slurm_version = slurm_version
        #: priority multifactor would give each job (restored by set_priority(None) / release)
        self._base_priority = {j.job_id: j.priority for j in jobs}
        #: other pending-job fields set by update_job (ReqNodeList, Features...)
        self.job_fields: dict[str, dict[str, str]] = {}
        #: every write, in order: (method, args) — tests assert on it, dry runs print it
        self.calls: list[tuple[str, tuple]] = []
        #: what sprio would print for a job (tests set it; default: :meth:`job_priority_factors`)
        self.priority_factors: dict[str, list[PriorityFactors]] = {}
        #: slurm.conf's PrioritySiteFactorPlugin ("" for none; tests set it)
        self.site_factor_plugin_name = ""
        #: the backfill scheduler's expected start of pending jobs (tests set it; default none)
        self.expected_starts: dict[str, datetime] = {}
        self._next_id = max((_int_id(j) for j in jobs), default=1000) + 1

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_recording(cls, name_or_path: str | Path) -> "FakeSlurm":
        """Load ``recordings/<name>`` (or a directory path) through the real parsers."""
        path = Path(name_or_path)
        if not path.is_dir():
            path = recordings_dir() / str(name_or_path)
        meta = json.loads((path / "meta.json").read_text())
        fs = meta.get("fs", "|")

        def text(name: str) -> str:
            f = path / name
            return f.read_text() if f.is_file() else ""

        taken = meta.get("taken_at")
        excluded = parse_excluded(text("squeue_exc.txt"), fs)
        site = {f.job_id: int(f.factors.get("site", 0.0)) for f in parse_sprio(text("sprio.txt"), fs)}
        return cls(
            nodes=parse_sinfo(text("sinfo.txt"), fs),
            jobs=[with_pending_extras(j, excluded, site) for j in parse_squeue(text("squeue.txt"), fs)],
            accounts=parse_assoc(text("assoc.txt"), meta.get("sacctmgr_fs", "|")),
            qos=parse_qos(text("qos.txt"), meta.get("sacctmgr_fs", "|")),
            accounting_records=parse_sacct(text("sacct.txt"), fs),
            cluster=meta.get("cluster", "fake"),
            now=datetime.fromisoformat(taken) if taken else None,
            slurm_version=meta.get("slurm_version", ""),
            partitions=parse_partitions(text("partitions.txt")),
        )

    # --- read ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return Snapshot(
            taken_at=self.now or datetime.now(),
            nodes=tuple(self.nodes()),
            jobs=tuple(self.jobs()),
            accounts=tuple(self.accounts()),
            qos=tuple(self.qos()),
            cluster=self.cluster,
            partitions=tuple(self.partitions()),
        )

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def set_partition(self, partition: Partition) -> None:
        """Test helper: add or change a partition (its rules)."""
        self._partitions[partition.name] = partition

    def jobs(self, states: Sequence[str] = ("PENDING", "RUNNING")) -> list[SlurmJob]:
        wanted = {s.upper() for s in states}
        return [j for j in self._jobs.values() if not wanted or j.state.upper() in wanted]

    def job(self, job_id: str) -> SlurmJob:
        """One job as Slurm would show it now (JobGone when it is not there)."""
        try:
            return self._jobs[str(job_id)]
        except KeyError:
            raise JobGone(f"job {job_id} is gone") from None

    def accounts(self) -> list[Account]:
        return list(self._accounts.values())

    def qos(self) -> list[Qos]:
        return list(self._qos.values())

    def accounting(self, since: datetime, until: datetime | None = None) -> list[AccountingRecord]:
        """Records whose run overlaps ``[since, until)`` (sacct's window semantics)."""
        out = []
        for r in self._accounting:
            start, end = r.start_time, r.end_time
            if start is None:
                continue
            if (end is None or end >= since) and (until is None or start < until):
                out.append(r)
        return out

    def sacct_history(self, since: datetime) -> tuple[str, str]:
        """The recorded accounting as ``sacct -X -P`` history text (no node names: typed gres)."""
        fs = "|"
        lines = [fs.join(("JobID", "User", "Account", "JobName", "Partition", "AllocTRES", "NodeList", "Elapsed",
                          "State", "ElapsedRaw", "Timelimit"))]
        for r in self.accounting(since):
            tres = f"gres/gpu={r.gpus}" + (f",gres/gpu:{r.gpu_type}={r.gpus}" if r.gpu_type else "")
            lines.append(fs.join((r.job_id, r.user, r.account, r.name.replace(fs, "_"), r.partition, tres, "None",
                                  "", r.state, str(int(r.elapsed_s)),
                                  str(r.time_limit_min) if r.time_limit_min else "UNLIMITED")))
        return "\n".join(lines) + "\n", fs

    def accounting_history(self, since: datetime) -> History:
        text, fs = self.sacct_history(since)
        return parse_history(text, "sacct", fs)

    def job_outlook(self, job_id: str) -> JobOutlook:
        job = self.job(job_id)
        start = job.start_time if job.running else self.expected_starts.get(job.job_id)
        return JobOutlook(job_id=job.job_id, state=job.state, reason=job.reason, priority=job.priority, start=start)

    def job_priority_factors(self, job_id: str) -> list[PriorityFactors]:
        """As sprio: nothing for a job that is not pending, held (priority 0) or waiting for its
        begin time; otherwise what a test set, or the job's priority with every factor 0 (the
        fake does not model multifactor)."""
        job = self._jobs.get(str(job_id))
        if job is None or not job.pending or job.priority == 0 or job.reason == "BeginTime":
            return []
        if job.job_id in self.priority_factors:
            return list(self.priority_factors[job.job_id])
        return [PriorityFactors(job_id=job.job_id, partition=p, priority=float(job.priority),
                                factors=dict.fromkeys(FACTOR_NAMES, 0.0),
                                nice=job.nice) for p in job.partition.split(",")]

    # --- write (pending jobs) -----------------------------------------------------------------
    def _pending(self, job_id: str) -> SlurmJob:
        job = self.job(job_id)
        if not job.pending:
            raise JobGone(f"job {job_id} is no longer pending ({job.state})")
        return job

    def _put(self, job: SlurmJob, **changes: Any) -> None:
        self._jobs[job.job_id] = replace(job, **changes)

    def set_gpu_type(self, job: SlurmJob, gpu_type: str | None) -> None:
        self.calls.append(("set_gpu_type", (job.job_id, gpu_type)))
        self._set_gpu_type(job, gpu_type)

    def set_gpu_types(self, changes: Sequence[tuple[SlurmJob, str | None]]) -> dict[str, SlurmError | ValueError]:
        """Every job as :meth:`set_gpu_type` would, in what counts as one call."""
        self.calls.append(("set_gpu_types", tuple((j.job_id, t) for j, t in changes)))
        return self._each(changes, self._set_gpu_type)

    def restore_gpu_requests(self, changes: Sequence[tuple[SlurmJob, str]]) -> dict[str, SlurmError | ValueError]:
        self.calls.append(("restore_gpu_requests", tuple((j.job_id, r) for j, r in changes)))
        return self._each(changes, self._restore_gpu_request)

    @staticmethod
    def _each(changes: Sequence[tuple[SlurmJob, Any]],
              one: Callable[[SlurmJob, Any], None]) -> dict[str, SlurmError | ValueError]:
        failed: dict[str, SlurmError | ValueError] = {}
        for job, value in changes:
            try:
                one(job, value)
            except (SlurmError, ValueError) as exc:
                failed[job.job_id] = exc
        return failed

    def _set_gpu_type(self, job: SlurmJob, gpu_type: str | None) -> None:
        current = self._pending(job.job_id)
        req = current.gpu_request
        if req is None:
            raise ValueError(f"job {job.job_id} has no GPU request")
        if req.gpu_type == gpu_type:
            return
        self._refuse_retype(current, req.gpu_type, gpu_type)
        field, spec = split_raw(req.raw, req.per)
        new_spec = retype_request(spec, gpu_type)
        self._put(current, gpu_request=replace(req, gpu_type=gpu_type, raw=f"{field}={new_spec}"),
                  priority=self._after_rewrite(current))

    def site_factor_plugin(self) -> str:
        """As slurm.conf's PrioritySiteFactorPlugin (tests set :attr:`site_factor_plugin_name`)."""
        return self.site_factor_plugin_name

    def can_retype_gpu(self) -> bool:
        """Slurm before 23.11 cannot change a typed request (see SlurmCli.set_gpu_type)."""
        m = re.match(r"(\d+)\.(\d+)", self.slurm_version)
        return m is None or (int(m.group(1)), int(m.group(2))) >= (23, 11)

    def _refuse_retype(self, job: SlurmJob, have: str | None, want: str | None) -> None:
        refuse_retype(job, have, want, self.can_retype_gpu(), f"Slurm {self.slurm_version}")

    def _after_rewrite(self, job: SlurmJob) -> int:
        """Like the real adapter, a request rewrite holds and releases a job that was not held,
        which gives its priority back to multifactor."""
        if job.reason in (HELD_ADMIN, HELD_USER):
            return job.priority
        return self._base_priority.get(job.job_id, job.priority)

    def restore_gpu_request(self, job: SlurmJob, raw: str) -> None:
        self.calls.append(("restore_gpu_request", (job.job_id, raw)))
        self._restore_gpu_request(job, raw)

    def _restore_gpu_request(self, job: SlurmJob, raw: str) -> None:
        current = self._pending(job.job_id)
        req = current.gpu_request or job.gpu_request
        per = req.per if req else "node"
        field, spec = split_raw(raw, per)
        per = {"TresPerJob": "job", "TresPerTask": "task"}.get(field, "node")
        count, gpu_type = gpu_request_of(spec)
        if req is not None and req.gpu_type == gpu_type and req.count == count:
            return
        self._refuse_retype(current, req.gpu_type if req else None, gpu_type)
        nodes, tasks = (req.nodes, req.tasks) if req else (1, 1)
        self._put(current, gpu_request=GpuRequest(count, gpu_type, per, nodes, f"{field}={spec}", tasks),
                  priority=self._after_rewrite(current))

    def set_priority(self, job_id: str, priority: int | None) -> None:
        self.calls.append(("set_priority", (job_id, priority)))
        self._set_priority(job_id, priority)

    def _set_priority(self, job_id: str, priority: int | None) -> None:
        job = self._pending(job_id)
        if priority is None:
            held = job.reason in (HELD_ADMIN, HELD_USER)
            self._put(job, priority=0 if held else self._base_priority.get(job_id, 1))
        else:
            self._put(job, priority=int(priority), reason="None" if job.priority == 0 else job.reason)

    def set_nice(self, job_id: str, nice: int) -> None:
        self.calls.append(("set_nice", (job_id, nice)))
        self._set_nice(job_id, nice)

    def _set_nice(self, job_id: str, nice: int) -> None:
        job = self._pending(job_id)
        base = self._base_priority.get(job_id, job.priority)
        site = job.site_factor or 0
        self._put(job, nice=int(nice), priority=max(1, base - int(nice) + site) if job.priority else 0)

    def _set_site_factor(self, job_id: str, value: int) -> None:
        """Like Slurm: the site factor is added to the multifactor priority (floored at 1)."""
        job = self._pending(job_id)
        base = self._base_priority.get(job_id, job.priority)
        prio = max(1, base - job.nice + value) if job.priority else 0
        self._put(job, site_factor=value, priority=prio)

    def hold(self, job_id: str) -> None:
        self.calls.append(("hold", (job_id,)))
        job = self._pending(job_id)
        self._put(job, priority=0, reason=HELD_ADMIN)

    def release(self, job_id: str) -> None:
        self.calls.append(("release", (job_id,)))
        job = self._pending(job_id)
        self._put(job, priority=self._base_priority.get(job_id, 1) or 1, reason="None")

    def requeue(self, job_id: str) -> None:
        self.calls.append(("requeue", (job_id,)))
        job = self.job(job_id)
        if not job.running:
            raise JobGone(f"job {job_id} is not running ({job.state})")
        now = self.now or datetime.now()
        self._record(job, "REQUEUED", now)  # Slurm keeps the run in accounting (sacct -D)
        # and resets Submit (the next run's record starts there)
        self._put(job, state="PENDING", reason="BeginTime", nodes=(), start_time=None, gpu_type_running=None,
                  submit_time=now)

    def update_job(self, job_id: str, fields: Mapping[str, str]) -> None:
        self.calls.append(("update_job", (job_id, dict(fields))))
        bad = set(fields) - UPDATABLE_FIELDS
        if bad:
            raise ValueError(f"cannot update {', '.join(sorted(bad))}")
        self._update_job(job_id, fields)

    def _update_job(self, job_id: str, fields: Mapping[str, str]) -> None:
        job = self._pending(job_id)
        changes: dict[str, object] = {}
        if "Partition" in fields:
            changes["partition"] = fields["Partition"]
        if "QOS" in fields:
            changes["qos"] = fields["QOS"]
        if "ReqNodeList" in fields:
            changes["req_nodes"] = expand_hostlist(fields["ReqNodeList"])
        if changes:
            self._put(job, **changes)
        rest = {k: v for k, v in fields.items() if k not in ("Partition", "QOS", "ReqNodeList")}
        if rest:
            self.job_fields.setdefault(job_id, {}).update(rest)

    def update_jobs(self, job_ids: Sequence[str], fields: Mapping[str, str]) -> dict[str, SlurmError]:
        """What the real adapter does in one call per chunk: every job it can, the others
        returned with their errors (the same checks as one job at a time)."""
        self.calls.append(("update_jobs", (list(job_ids), dict(fields))))
        batch_items(fields)  # the same refusals as the real adapter, before anything changes
        plain = {k: v for k, v in fields.items() if k in UPDATABLE_FIELDS}
        failed: dict[str, SlurmError] = {}
        for job_id in dict.fromkeys(job_ids):
            try:
                if plain:
                    self._update_job(job_id, plain)
                if "Nice" in fields:
                    self._set_nice(job_id, int(fields["Nice"]))
                if "Priority" in fields:
                    self._set_priority(job_id, int(fields["Priority"]))
                if "SiteFactor" in fields:
                    self._set_site_factor(job_id, int(fields["SiteFactor"]))
            except SlurmError as exc:
                failed[job_id] = exc
        return failed

    # --- QOS ----------------------------------------------------------------------------------
    def ensure_qos(self, name: str, grp_tres: Mapping[str, int | None], exists: bool | None = None) -> None:
        self.calls.append(("ensure_qos", (name, dict(grp_tres))))
        q = self._qos.get(name) or Qos(name)
        limits = dict(q.grp_tres)
        for key, value in grp_tres.items():
            key = key.replace("gres:", "gres/", 1)
            if value is None or value < 0:
                limits.pop(key, None)
            else:
                limits[key] = int(value)
        self._qos[name] = replace(q, grp_tres=limits)

    def delete_qos(self, name: str) -> None:
        self.calls.append(("delete_qos", (name,)))
        self._qos.pop(name, None)
        for a in list(self._accounts.values()):
            if name in a.qos:
                self.detach_qos(a.name, name)

    def attach_qos(self, account: str, qos: str, default: bool = True) -> None:
        self.calls.append(("attach_qos", (account, qos, default)))
        if qos not in self._qos:
            raise ValueError(f"no QOS {qos!r}")
        a = self._accounts.get(account) or Account(account)
        self._accounts[account] = replace(
            a, qos=tuple(dict.fromkeys(a.qos + (qos,))), default_qos=qos if default else a.default_qos
        )

    def detach_qos(self, account: str, qos: str) -> None:
        self.calls.append(("detach_qos", (account, qos)))
        a = self._accounts.get(account)
        if a is None:
            return
        self._accounts[account] = replace(
            a, qos=tuple(q for q in a.qos if q != qos), default_qos="" if a.default_qos == qos else a.default_qos
        )

    # --- test helpers (not part of the port) --------------------------------------------------
    def submit(
        self,
        account: str,
        gpu_args: Sequence[str] | str = (),
        *,
        hold: bool = True,
        name: str = "job",
        comment: str = "",
        user: str = "root",
        partition: str = "",
        qos: str = "normal",
        priority: int = 1000,
        nodelist: str = "",
        exclude: str = "",
        time_limit: str = "UNLIMITED",
        reservation: str = "",
        dependency: str = "",
        features: str = "",
        admin_comment: str = "",
    ) -> str:
        """Add a pending job as ``sbatch`` with these GPU options (and ``-w nodelist``,
        ``-x exclude``, ``-t``, ``--reservation``, ``-d``, ``-C``) would (Slurm 22.05 forms)."""
        r = sbatch_request(gpu_args)
        job_id = str(self._next_id)
        self._next_id += 1
        default = next((p.name for p in self._partitions.values() if p.default), "")
        part = partition or r.partition or default or next(
            iter(sorted({p for n in self._nodes.values() for p in n.partitions})), "gpu")
        qos = r.qos or qos
        nodelist, exclude = nodelist or r.nodelist, exclude or r.exclude
        time_limit = r.time_limit or time_limit
        reservation, dependency, features = (reservation or r.reservation, dependency or r.dependency,
                                             features or r.features)
        reason = HELD_ADMIN if hold else ("Dependency" if dependency else "Priority")
        fields = [
            job_id, "PD", account, user, part, qos, reason,
            (self.now or datetime.now()).strftime("%Y-%m-%dT%H:%M:%S"), "N/A",
            "0" if hold else str(priority), "0", str(r.nodes), str(r.tasks), r.per_job, r.per_node,
            r.per_task, "", "", "0", str(r.cpus), r.mem, str(r.nodes), nodelist, time_limit,
            reservation or "(null)", dependency or "(null)", features or "(null)", admin_comment or "(null)",
            name, comment,
        ]
        job = replace(job_from_record(fields), exc_nodes=expand_hostlist(exclude),
                      site_factor=None if hold else 0)
        self._jobs[job_id] = job
        self._base_priority[job_id] = priority
        return job_id

    def finish(self, job_id: str, end: datetime | None = None, state: str = "COMPLETED") -> None:
        """The job ends (``state``: COMPLETED, FAILED, ...): it leaves the queue (as from squeue)
        and, if it ran, enters accounting (as sacct would show it)."""
        job = self._jobs.pop(str(job_id), None)
        if job is None or job.start_time is None or job.gpu_request is None:
            return
        self._record(job, state, end or self.now or datetime.now())

    def _record(self, job: SlurmJob, state: str, end: datetime) -> None:
        """One run of a job into accounting, as sacct -D shows it."""
        if job.start_time is None or job.gpu_request is None:
            return
        self._accounting.append(
            AccountingRecord(
                job_id=job.job_id, account=job.account, user=job.user, state=state,
                gpu_type=job.gpu_type_running, gpus=job.gpu_request.total,
                submit_time=job.submit_time, start_time=job.start_time, end_time=end,
                elapsed_s=max(0.0, (end - job.start_time).total_seconds()),
                partition=job.partition, name=job.name, comment=job.comment,
                nodes=max(1, len(job.nodes)), time_limit_min=job.time_limit_min,
            )
        )

    def start(self, job_id: str, node: str, gpu_type: str) -> None:
        """The job starts on ``node`` with GPUs of ``gpu_type``."""
        job = self.job(job_id)
        self._put(job, state="RUNNING", reason="None", nodes=(node,), gpu_type_running=gpu_type,
                  start_time=self.now or datetime.now())


def _int_id(job: SlurmJob) -> int:
    try:
        return int(job.job_id.split("_")[0])
    except ValueError:
        return 0


def _partitions_of(nodes: Sequence[Node]) -> dict[str, Partition]:
    """One unrestricted UP partition per name the nodes carry (the nodes' ``tiers`` kept)."""
    members: dict[str, list[Node]] = {}
    for n in nodes:
        for p in n.partitions:
            members.setdefault(p, []).append(n)
    return {p: Partition(p, tuple(n.name for n in ns), priority_tier=max((n.tiers.get(p, 1) for n in ns), default=1))
            for p, ns in sorted(members.items())}
