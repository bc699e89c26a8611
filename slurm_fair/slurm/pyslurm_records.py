"""pyslurm's records -> the Slurm view (:mod:`.model`), the same objects the command line gives.

:class:`~.pyslurm_port.PyslurmPort` reads slurmctld through pyslurm (Slurm's C library) and hands
the plain dicts it gets to these pure functions (no pyslurm import here, so they are unit-tested
from recorded dicts on any machine). Each one re-creates what Slurm's own command prints for the
same record and then goes through the very parsers of :mod:`.parse` that read that command's
output: the two backends share every normalisation, and a job, node or partition reads the same
whichever backend read it (``tests/slurm/test_backends_agree.py`` compares them field by field).

What squeue, sinfo and scontrol compute rather than copy, re-done here from Slurm's source:

* ``squeue -r`` prints one line per array task, the pending ones too (slurmctld keeps them as one
  record with ``array_task_str``, ``1-5,7`` or ``0-9:2``, ``%N`` a throttle): expanded here, each
  task ``<array job>_<task>``; a heterogeneous job's component is ``<het job>+<offset>``;
* its NumNodes of a pending job is the larger of the node count asked and the nodes named, and
  one node per ``--ntasks-per-node`` tasks when only tasks were asked; of a running job, the
  nodes it holds; MaxNodes is that when the job set no maximum (0);
* its MinMemory drops Slurm's per-CPU flag bit; its Reason is the job's ``state_desc`` when it
  has one, else the reason code's name;
* sinfo's state is ``mixed`` when some but not all CPUs of an allocated node are in use
  (pyslurm's legacy node read computes it so), then every flag of the complete state string.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, Iterator, Mapping, Sequence

from .model import Node, Partition, SlurmJob
from .parse.fields import NONE, expand_hostlist, parse_minutes
from .parse.gres import gpu_request, gpus_by_type, gpus_in_tres_map, parse_tres_map
from .parse.squeue import state_name
from .parse.tags import parse_tags

#: Slurm's "no value" markers of 16- and 32-bit fields (slurm.h NO_VAL16, NO_VAL, INFINITE)
NO_VAL16 = 0xFFFE
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
#: the bit of pn_min_memory saying "per CPU" (slurm.h MEM_PER_CPU)
MEM_PER_CPU = 0x8000000000000000
_NO_VALUES = frozenset((NO_VAL, INFINITE, NO_VAL16))

Raw = Mapping[str, Any]


def _text(value: Any) -> str:
    """A string field: None (NULL in Slurm) and Slurm's "nothing" words are empty."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    return "" if s.strip().lower() in ("(null)",) else s


def _joined(value: Any) -> str:
    """A list pyslurm split at commas (``req_nodes``, ``features``...) joined back: the string
    Slurm holds (a hostlist like ``v100-[1,3]`` was cut inside its brackets)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return ",".join(str(v) for v in value)


def _int(value: Any, default: int = 0) -> int:
    if value.__class__ is int:  # the usual case, first: pyslurm gives C integers as ints
        return default if value in _NO_VALUES else value
    if value is None or isinstance(value, str):
        try:
            return int(value) if value is not None and value.strip().lower() not in NONE else default
        except ValueError:
            return default
    v = int(value)
    return default if v in _NO_VALUES else v


@lru_cache(maxsize=65536)
def _local(epoch: int) -> datetime:
    """An epoch -> local time; cached, as a queue's jobs share their submit seconds."""
    return datetime.fromtimestamp(epoch)


def _time(epoch: Any) -> datetime | None:
    """An epoch (0: not set) -> local time, as squeue prints it (``SLURM_TIME_FORMAT=standard``)."""
    v = _int(epoch)
    return _local(v) if v > 0 else None


def array_tasks(text: str) -> list[int]:
    """``1-5,7``, ``0-9:2``, ``1-3%2`` -> the task ids (what ``squeue -r`` prints one by one)."""
    t = text.split("%", 1)[0].strip()
    out: list[int] = []
    for item in filter(None, (x.strip() for x in t.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item)
        if not m:
            raise ValueError(f"not an array task list: {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        out.extend(range(lo, hi + 1, int(m.group(3) or 1)))
    return out


def job_ids(raw: Raw) -> list[str]:
    """The id(s) ``squeue -r`` prints for one record (JobArrayID): several for the pending
    tasks of an array, ``<array>_<task>`` for a task, ``<het>+<offset>`` for a het component."""
    array_job = _int(raw.get("array_job_id"))
    if array_job:
        task_str = raw.get("array_task_str")
        if task_str:
            return [f"{array_job}_{t}" for t in array_tasks(str(task_str))]
        task = raw.get("array_task_id")
        if task is not None and _int(task, -1) >= 0:
            return [f"{array_job}_{_int(task)}"]
    het = _int(raw.get("het_job_id"))
    if het:
        return [f"{het}+{_int(raw.get('het_job_offset'))}"]
    return [str(raw["job_id"])]


def node_count(raw: Raw, pending: bool) -> int:
    """squeue's NumNodes (module docstring)."""
    if not pending:
        return len(expand_hostlist(_text(raw.get("nodes")))) or _int(raw.get("num_nodes"), 1)
    req = raw.get("req_nodes")
    count = max(len(expand_hostlist(_joined(req))) if req else 0, _int(raw.get("num_nodes")))
    per_node = _int(raw.get("ntasks_per_node"))
    cpus = _int(raw.get("num_cpus"))
    if count == 1 and cpus > 1 and per_node:
        per_task = raw.get("cpus_per_task")
        tasks = cpus // per_task if isinstance(per_task, int) and per_task not in (0, NO_VAL16) else cpus
        count = (tasks + 1) // per_node
        count = min(count, tasks) or 1
    return count


def _memory_mb(raw: Raw) -> int:
    return int(_int(raw.get("pn_min_memory")) & ~MEM_PER_CPU)


def _minutes(value: Any) -> int | None:
    """A time limit: pyslurm gives minutes as an int, or ``UNLIMITED``/``Partition_Limit``."""
    if isinstance(value, int):
        return None if value in (NO_VAL, INFINITE) else value
    return parse_minutes(str(value or ""))


def _str(value: Any) -> str:
    """A string field as squeue prints it ("" for NULL: pyslurm's None)."""
    return value if value.__class__ is str else _text(value)


#: the fields of pyslurm's legacy job record a job is made of, fetched in one call
_FIELDS = ("job_state", "tres_per_job", "tres_per_node", "tres_per_task", "tres_alloc_str", "comment",
           "state_reason", "req_nodes", "exc_nodes", "nodes", "name", "user_id", "account", "partition", "qos",
           "submit_time", "start_time", "priority", "nice", "requeue", "pn_min_cpus", "max_nodes",
           "admin_comment", "time_limit", "resv_name", "dependency", "features", "num_tasks")
_fetch = itemgetter(*_FIELDS)
#: a request seen once is the same GpuRequest (frozen) for every job asking for it
_request = lru_cache(maxsize=4096)(gpu_request)


def job_records(raw: Raw, user_of: Callable[[int], str],
                reason_of: Callable[[str], str] | None = None,
                site: Mapping[str, int] | None = None) -> list[SlurmJob]:
    """One pyslurm job record (its legacy ``job().get()`` dict) -> the job(s) squeue lists.

    ``user_of`` names a uid as squeue does; ``reason_of`` gives the exact reason of a job whose
    legacy record had its spaces turned into ``_`` (pyslurm does so with ``state_desc``);
    ``site`` holds the site factors of pending jobs (sprio's; None: none read, every job's
    ``site_factor`` None). Written for speed (a snapshot converts every queued job): the fields
    in one lookup, typed values taken as they are (no string round trip), a field parsed only
    when it is set, and each job built once (no copy to add its site factor)."""
    try:
        values = _fetch(raw)
    except KeyError:  # another pyslurm's record without some field: None, as Slurm's NULL
        values = tuple(raw.get(k) for k in _FIELDS)
    (state, per_job, per_node, per_task, alloc, comment, reason, req_nodes, exc_nodes, allocated, name, uid,
     account, partition, qos, submit, start, priority, nice, requeue, min_cpus, max_nodes, admin_comment,
     time_limit, resv, dependency, features, num_tasks) = values
    st = state_name(_str(state))
    pending = st == "PENDING"
    nodes = node_count(raw, pending)
    request = _request(_str(per_job), _str(per_node), _str(per_task), nodes, _int(num_tasks, 1) or 1) \
        if per_job or per_node or per_task else None
    running_type = None
    if request is not None and st in ("RUNNING", "COMPLETING", "SUSPENDED"):
        _, running_type = gpus_in_tres_map(parse_tres_map(_str(alloc)))
    comment = _str(comment)
    ids = job_ids(raw)
    reason = _str(reason)
    if reason_of is not None and "_" in reason:
        reason = reason_of(ids[0] if len(ids) == 1 else str(raw["job_id"]))
    fields = dict(
        name=_str(name),
        user=user_of(_int(uid)),
        account=_str(account),
        partition=_str(partition),
        qos=_str(qos),
        state=st,
        reason=reason,
        submit_time=_time(submit),
        start_time=None if pending else _time(start),
        priority=_int(priority),
        nice=_int(nice),
        gpu_request=request,
        gpu_type_running=running_type,
        nodes=expand_hostlist(_str(allocated)) if allocated and not pending else (),
        comment=comment,
        tags=parse_tags(comment) if "fair:" in comment else {},
        requeue=bool(requeue),
        min_cpus=_int(min_cpus),
        min_memory_mb=_memory_mb(raw),
        max_nodes=_int(max_nodes) or nodes,
        admin_comment=_str(admin_comment),
        req_nodes=expand_hostlist(_joined(req_nodes)) if req_nodes else (),
        exc_nodes=expand_hostlist(_joined(exc_nodes)) if exc_nodes and pending else (),
        time_limit_min=_minutes(time_limit),
        reservation=_str(resv),
        dependency=_str(dependency),
        features=_joined(features),
    )
    if not pending or not site:
        return [SlurmJob(job_id=i, **fields) for i in ids]  # type: ignore[arg-type]
    return [SlurmJob(job_id=i, site_factor=site.get(i), **fields) for i in ids]  # type: ignore[arg-type]


def jobs_from(records: Mapping[Any, Raw], states: Sequence[str], user_of: Callable[[int], str],
              reason_of: Callable[[str], str] | None = None,
              site: Mapping[str, int] | None = None) -> Iterator[SlurmJob]:
    """Every job of the legacy read in one of ``states`` (all with none), as squeue lists them,
    pending ones with their site factor from ``site`` (:func:`job_records`)."""
    wanted = {s.upper() for s in states}
    for raw in records.values():
        if wanted and state_name(_str(raw.get("job_state"))) not in wanted:
            continue
        yield from job_records(raw, user_of, reason_of, site)


def node_state(legacy: str, complete: str) -> str:
    """sinfo's StateComplete: the base state of pyslurm's legacy read (``MIXED`` computed from
    the CPUs in use) and every flag of Slurm's complete state string, lower-cased."""
    base = legacy.split("+", 1)[0]
    flags = complete.split("+")[1:] if complete else legacy.split("+")[1:]
    return "+".join([base, *flags]).lower()


def node_record(raw: Raw, complete_state: str, tiers: Mapping[str, int]) -> Node:
    """One node of pyslurm's legacy ``node().get()`` (plus the complete state string of its
    newer read and the partitions' tiers) -> :class:`Node`, as sinfo's lines give it."""
    parts = tuple(p for p in (raw.get("partitions") or ()) if p)
    feats = _joined(raw.get("features"))
    return Node(
        name=_text(raw.get("name")),
        state=node_state(_text(raw.get("state")), complete_state),
        gpus_total=gpus_by_type(_joined(raw.get("gres"))),
        gpus_used=gpus_by_type(_joined(raw.get("gres_used"))),
        partitions=parts,
        features=tuple(x for x in feats.split(",") if x and x.lower() not in NONE),
        cpus=_int(raw.get("cpus")),
        memory_mb=_int(raw.get("real_memory")),
        tiers={p: tiers.get(p, 1) for p in parts},
    )


def _names(values: Any) -> frozenset[str] | None:
    """An allow list (``["ALL"]`` or nothing: no restriction, None)."""
    items = [v for v in (values or ()) if v]
    if not items or any(v.upper() == "ALL" for v in items):
        return None
    return frozenset(items)


def _limit(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and value.upper() in ("UNLIMITED", "INFINITE")):
        return None
    return _int(value) or None


def partition_record(raw: Raw) -> Partition:
    """A partition read through pyslurm (the attributes of ``pyslurm.Partition`` as a dict)
    -> :class:`Partition`, with the meanings ``scontrol show partition`` gives them."""
    max_time = raw.get("max_time")
    return Partition(
        name=_text(raw.get("name")),
        nodes=expand_hostlist(_text(raw.get("nodes"))),
        state=_text(raw.get("state")).upper() or "UP",
        priority_tier=_int(raw.get("priority_tier"), 1),
        allow_accounts=_names(raw.get("allowed_accounts")),
        deny_accounts=_names(raw.get("denied_accounts")) or frozenset(),
        allow_qos=_names(raw.get("allowed_qos")),
        deny_qos=_names(raw.get("denied_qos")) or frozenset(),
        allow_groups=_names(raw.get("allowed_groups")),
        max_time_min=None if max_time is None else parse_minutes(str(max_time)),
        max_nodes=_limit(raw.get("max_nodes")),
        default=bool(raw.get("is_default")),
    )
