"""What the Slurm adapter may write, and how a GPU request is written: rules the real adapter
(:mod:`.cli`) and the fake (:mod:`.fake`) share, so unit tests see the same refusals as Slurm.

Every value is checked before anything is sent: a name, a job id, a field of a pending job, a
GPU request (its field, its ``gres:``/``gres/`` prefix) and whether this Slurm can retype it.
"""

from __future__ import annotations

import re
from typing import Mapping

from ..inputs import fullmatch
from ..names import SLURM_NAME
from ..errors import SlurmCommandError
from .model import SlurmJob
from .parse.gres import PREFIX, split_top_level

#: pending-job fields update_job may change (anything else is a programming error)
UPDATABLE_FIELDS = frozenset({"Partition", "QOS", "ReqNodeList", "ExcNodeList", "Features"})
#: fields a batched update (``SlurmCli.update_jobs``) sets on many jobs in one call. Not the node
#: lists: ``scontrol update JobId=a,b ReqNodeList=n`` is refused as "Invalid job ID a,b" (22.05),
#: so a node list is written one job at a time
BATCH_FIELDS = (UPDATABLE_FIELDS - {"ReqNodeList", "ExcNodeList"}) | {"Nice", "Priority", "SiteFactor"}

_JOB_ID = re.compile(r"^\d+(_\d+)?(\+\d+)?$")
_INT = re.compile(r"-?\d{1,10}")
_VALUE = re.compile(r"^[^\s=]{0,4096}$")
#: a GPU request may carry '=' (Slurm 24.11's TRES form ``gres/gpu:v100=1``), nothing else odd
_TRES_VALUE = re.compile(r"^[A-Za-z0-9_./:=,()-]{0,4096}$")
_TRES_FIELDS = frozenset({"TresPerJob", "TresPerNode", "TresPerTask", "Gres"})


def check_name(kind: str, value: str) -> str:
    if not fullmatch(SLURM_NAME, value or ""):
        raise ValueError(f"invalid {kind} name {value!r}")
    return value


def check_job_id(job_id: str) -> str:
    if not fullmatch(_JOB_ID, str(job_id)):
        raise ValueError(f"invalid job id {job_id!r}")
    return str(job_id)


def check_value(key: str, value: str) -> None:
    """ValueError for a value that could smuggle another ``Key=Value`` into scontrol's argv."""
    if not (_TRES_VALUE if key in _TRES_FIELDS else _VALUE).fullmatch(str(value)):
        raise ValueError(f"invalid value for {key}: {value!r}")


def batch_items(fields: Mapping[str, str]) -> list[str]:
    """``Key=Value`` arguments of a batched update; ValueError for a field or value that is
    not allowed (checked before anything runs)."""
    bad = set(fields) - BATCH_FIELDS
    if bad:
        raise ValueError(f"cannot update {', '.join(sorted(bad))} (allowed: {sorted(BATCH_FIELDS)})")
    items = []
    for key, value in fields.items():
        pattern = _INT if key in ("Nice", "Priority", "SiteFactor") else (_TRES_VALUE if key in _TRES_FIELDS else _VALUE)
        if not pattern.fullmatch(str(value)):
            raise ValueError(f"invalid value for {key}: {value!r}")
        items.append(f"{key}={value}")
    return items


def refuse_retype(job: SlurmJob, have: str | None, want: str | None, can_retype: bool, slurm: str) -> None:
    """Refuse, before anything is sent, a GPU-request change this Slurm cannot undo or honour.

    Slurm before 23.11 cannot change a ``--gpus-per-task`` request of a pending job, nor a typed
    request (it would then ask for *both* types and wait forever). The fake applies the same
    rule, so unit tests see what the real adapter would refuse.
    """
    per = job.gpu_request.per if job.gpu_request else "node"
    if per == "task" and not can_retype:
        raise SlurmCommandError(
            ["scontrol", "update", f"JobId={job.job_id}"], 1,
            f"job {job.job_id} asks for GPUs per task; Slurm before 23.11 cannot change "
            "a --gpus-per-task request (TresPerTask) of a pending job",
        )
    if have is not None and have != want and not can_retype:
        raise SlurmCommandError(
            ["scontrol", "update", f"JobId={job.job_id}"], 1,
            f"job {job.job_id} already asks for {have} GPUs; {slurm} cannot "
            f"change a typed GPU request to {want or 'untyped'} (it would ask for both types)",
        )


def norm_spec(spec: str) -> str:
    """A request written the ``gres/`` way, to compare two requests whatever their prefix."""
    return with_prefix(spec, "gres/")


def with_prefix(spec: str, prefix: str) -> str:
    """Every item of a request written with ``prefix`` (``gres:`` or ``gres/``)."""
    return ",".join(
        prefix + PREFIX.sub("", item) for item in split_top_level(spec)
    )


def split_raw(raw: str, per: str) -> tuple[str, str]:
    """``TresPerNode=gres:gpu:2`` -> (field, spec); a bare spec gets the field of ``per``."""
    default = {"job": "TresPerJob", "node": "TresPerNode", "task": "TresPerTask"}.get(per, "TresPerNode")
    if "=" in raw:
        field, spec = raw.split("=", 1)
        if field not in _TRES_FIELDS:
            raise ValueError(f"not a GPU request field: {field!r}")
        return field, spec
    return default, raw
