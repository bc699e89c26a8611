"""Pure parsers of Slurm's command output (no I/O): text in, model objects out.

The formats seen in the field, all accepted:

* TRES request strings: ``gres:gpu:v100:2`` (Slurm 22.05), ``gres/gpu:v100:2`` (24.05+),
  ``gpu:v100:2``, untyped ``gres:gpu:2`` / ``gpu``, several entries separated by commas;
* node gres (sinfo ``Gres``/``GresUsed``): ``gpu:v100:4(S:0-1)``, ``gpu:v100:2(IDX:0,2-3)``,
  ``gpu:a100:2,gpu:v100:2`` (several types on one node), ``(null)``;
* TRES maps (``AllocTRES``, ``tres-alloc``, ``GrpTRES``): ``cpu=2,gres/gpu=2,gres/gpu:v100=2``;
* hostlists through ClusterShell's ``NodeSet``.

Free text (job names and comments) is user-controlled: records are delimited by a random
per-call separator (see :func:`split_records`), so no byte a user can type breaks a parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Iterable, Iterator, Mapping, Sequence

from ClusterShell.NodeSet import NodeSet, NodeSetException

from ..errors import SlurmOutputError
from .model import Account, AccountingRecord, GpuRequest, Node, Qos, SlurmJob

#: what an untyped GPU (``Gres=gpu:4`` on a node) is called in capacities and problems
UNTYPED = "gpu"

# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def split_records(text: str, fs: str, nfields: int) -> list[list[str]]:
    """Split command output into records of exactly ``nfields`` fields separated by ``fs``.

    Fields may contain newlines (job names and comments are user text). ``fs`` is a random
    token the user cannot know, so it never occurs inside a field. A record is complete once it
    holds ``nfields - 1`` separators; after that, a line *without* ``fs`` continues its last
    field, a line with ``fs`` starts the next record. A trailing newline is Slurm's, not data.
    """
    if nfields < 1:
        raise ValueError("nfields must be >= 1")
    records: list[list[str]] = []
    current: str | None = None
    count = 0
    if text.endswith("\n"):
        text = text[:-1]  # the newline Slurm ends its output with
    for line in text.split("\n"):
        if current is None:
            if line == "":
                continue
            current, count = line, line.count(fs)
        elif count < nfields - 1 or fs not in line:
            current += "\n" + line
            count += line.count(fs)
        else:
            records.append(_finish(current, fs, nfields))
            current, count = line, line.count(fs)
    if current is not None:
        records.append(_finish(current, fs, nfields))
    return records


def _finish(record: str, fs: str, nfields: int) -> list[str]:
    fields = record.split(fs)
    if len(fields) != nfields:
        raise SlurmOutputError(
            f"expected {nfields} fields, got {len(fields)} in {record[:120]!r}"
        )
    return fields


# --------------------------------------------------------------------------------------------
# Scalars
# --------------------------------------------------------------------------------------------

_NONE = {"", "n/a", "none", "unknown", "(null)", "invalid"}


def parse_time(text: str) -> datetime | None:
    """``2024-05-01T12:00:00`` (``SLURM_TIME_FORMAT=standard``); Unknown/N/A/None -> None."""
    t = text.strip()
    if t.lower() in _NONE:
        return None
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        raise SlurmOutputError(f"not a Slurm time: {t!r}") from None


def parse_int(text: str, default: int = 0) -> int:
    """An integer field; N/A and friends give ``default``."""
    t = text.strip()
    if t.lower() in _NONE:
        return default
    try:
        return int(t)
    except ValueError:
        try:
            return int(float(t))
        except ValueError:
            raise SlurmOutputError(f"not an integer: {t!r}") from None


_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_MEM_MB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def parse_memory_mb(text: str) -> int:
    """``1000M``, ``4G``, ``64000`` (MB) -> MB; N/A and friends -> 0."""
    t = text.strip()
    if t.lower() in _NONE:
        return 0
    m = _MEM.match(t)
    if not m:
        raise SlurmOutputError(f"not a Slurm memory size: {t!r}")
    return int(round(float(m.group(1)) * _MEM_MB[m.group(2).upper()]))


def parse_elapsed(text: str) -> float:
    """``[D-]HH:MM:SS[.sss]``, ``MM:SS`` or plain seconds -> seconds."""
    t = text.strip()
    if t.lower() in _NONE or t.upper() in {"INVALID", "UNLIMITED"}:
        return 0.0
    days = 0
    if "-" in t:
        d, t = t.split("-", 1)
        days = int(d)
    parts = [float(p) for p in t.split(":")]
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return days * 86400 + seconds


_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_MULT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def _count(text: str) -> int:
    m = _COUNT.match(text.strip())
    if not m:
        raise SlurmOutputError(f"not a gres count: {text!r}")
    return int(m.group(1)) * _MULT[m.group(2).upper()]


# --------------------------------------------------------------------------------------------
# TRES and gres
# --------------------------------------------------------------------------------------------


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses (``gpu:v100:2(IDX:0,2),gpu:a100:1``)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p for p in (s.strip() for s in out) if p]


@dataclass(frozen=True)
class GresEntry:
    """One ``name[:type][:count][(suffix)]`` item of a gres or TRES request list."""

    name: str
    gpu_type: str | None
    count: int
    #: ``gres:`` (22.05), ``gres/`` (24.05+) or empty: kept so a rewrite keeps Slurm's form
    prefix: str = ""
    suffix: str = ""
    #: what separates the count: ``:`` (``gpu:v100:2``), or ``=`` in the TRES form Slurm 24.11
    #: prints for ``--gpus-per-task`` (``TresPerTask=gres/gpu:v100=1``); a rewrite keeps it
    count_sep: str = ":"


_PREFIX = re.compile(r"^(gres[:/]|tres[:/])", re.IGNORECASE)


@lru_cache(maxsize=4096)
def parse_gres(text: str) -> tuple[GresEntry, ...]:
    """Parse a gres/TRES list: every item, GPU or not, typed or not.

    ``gpu`` alone means one GPU; ``gpu:2`` two untyped; ``gpu:v100:2`` two V100;
    ``gpu:v100`` one V100. A ``(S:0-1)``/``(IDX:...)`` suffix is kept, never counted.
    """
    t = text.strip()
    if t.lower() in _NONE:
        return ()
    entries = []
    for item in split_top_level(t):
        suffix = ""
        paren = item.find("(")
        if paren >= 0:
            item, suffix = item[:paren], item[paren:]
        m = _PREFIX.match(item)
        prefix = m.group(1) if m else ""
        body = item[len(prefix):]
        sep = ":"
        if "=" in body:  # TRES form: name[:type]=count
            body, _, n = body.partition("=")
            sep, parts = "=", [*body.split(":"), n]
        else:
            parts = body.split(":")
        name = parts[0]
        if not name:
            raise SlurmOutputError(f"empty gres name in {text!r}")
        gpu_type: str | None = None
        count = 1
        if sep == "=":
            gpu_type = ":".join(parts[1:-1]) or None
            count = _count(parts[-1])
        elif len(parts) == 2:
            if _COUNT.match(parts[1]):
                count = _count(parts[1])
            else:
                gpu_type = parts[1]
        elif len(parts) >= 3:
            gpu_type = ":".join(parts[1:-1]) or None
            count = _count(parts[-1])
        entries.append(GresEntry(name, gpu_type, count, prefix, suffix, sep))
    return tuple(entries)


def gpus_by_type(text: str) -> dict[str, int]:
    """GPUs per type in a node gres string; untyped GPUs count under :data:`UNTYPED`."""
    out: dict[str, int] = {}
    for e in parse_gres(text):
        if e.name == "gpu":
            key = e.gpu_type or UNTYPED
            out[key] = out.get(key, 0) + e.count
    return out


def gpu_request_of(text: str) -> tuple[int, str | None]:
    """(GPU count, type or None) of one TRES request string (``gres:gpu:v100:2``).

    Several typed GPU items (rare) sum their counts; the type is kept only when all agree.
    """
    count, types = 0, set()
    for e in parse_gres(text):
        if e.name == "gpu":
            count += e.count
            types.add(e.gpu_type)
    gpu_type = types.pop() if len(types) == 1 else None
    return count, gpu_type


def retype_request(text: str, gpu_type: str | None) -> str:
    """The same request with every GPU item pinned to ``gpu_type`` (None: untyped).

    Keeps the count, the other gres items and Slurm's own prefix form (``gres:`` or ``gres/``).
    """
    items = []
    for e in parse_gres(text):
        t = gpu_type if e.name == "gpu" else e.gpu_type
        body = f"{e.name}:{t}{e.count_sep}{e.count}" if t else f"{e.name}{e.count_sep}{e.count}"
        items.append(f"{e.prefix}{body}")
    return ",".join(items)


def parse_tres_map(text: str) -> dict[str, str]:
    """``cpu=2,mem=4G,gres/gpu:v100=2`` -> ``{"cpu": "2", ..., "gres/gpu:v100": "2"}``."""
    out: dict[str, str] = {}
    t = text.strip()
    if t.lower() in _NONE:
        return out
    for item in t.split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def gpus_in_tres_map(tres: Mapping[str, str]) -> tuple[int, str | None]:
    """(GPUs, type) from an allocated-TRES map: typed entries win over the untyped total.

    ``gres/gpu=2,gres/gpu:v100=2`` -> (2, "v100"); ``gres/gpu=2`` -> (2, None).
    """
    typed: dict[str, int] = {}
    total = 0
    for k, v in tres.items():
        key = k.replace("gres:", "gres/", 1)
        if key == "gres/gpu":
            total = parse_int(v)
        elif key.startswith("gres/gpu:"):
            typed[key.split(":", 1)[1]] = typed.get(key.split(":", 1)[1], 0) + parse_int(v)
    typed = {t: n for t, n in typed.items() if n > 0}
    if len(typed) == 1:
        ((gpu_type, n),) = typed.items()
        return max(n, total), gpu_type
    return (total or sum(typed.values())), None


def grp_tres_gpus(text: str) -> dict[str, int]:
    """``GrpTRES`` of a QOS -> ``{"gres/gpu:v100": 8, "cpu": 100}`` (ints; others kept too)."""
    out: dict[str, int] = {}
    for k, v in parse_tres_map(text).items():
        try:
            out[k.replace("gres:", "gres/", 1)] = int(v)
        except ValueError:
            continue
    return out


@lru_cache(maxsize=4096)
def expand_hostlist(text: str) -> tuple[str, ...]:
    """``a100-[1-2],v100-1`` -> node names (ClusterShell NodeSet; empty/None -> ())."""
    t = text.strip()
    if t.lower() in _NONE or t.startswith("("):
        return ()
    try:
        return tuple(NodeSet(t))
    except NodeSetException as exc:
        raise SlurmOutputError(f"bad hostlist {t!r}: {exc}") from None


# --------------------------------------------------------------------------------------------
# Comment tags (user text: parsed defensively)
# --------------------------------------------------------------------------------------------

_TAG = re.compile(r"(?<![^\s,;])fair:([A-Za-z][A-Za-z0-9_.-]{0,31})(?:=([^\s,;]{0,256}))?(?![^\s,;])")
MAX_TAGS = 16


def parse_tags(comment: str) -> dict[str, str]:
    """``fair:class=resnet50 fair:tput=12.5 fair:preemptible`` -> tags; the one parser of them.

    Only well-formed ``fair:`` tokens separated by whitespace, ``,`` or ``;`` count; anything
    else in the comment is ignored. Keys are lower-cased; the first occurrence of a key wins;
    at most :data:`MAX_TAGS`. A bare flag is present with the value ``""``: it has no value, and
    inventing one (``"true"``) would turn a bare ``fair:class`` into a class named ``true``.
    Values are kept as text: their meaning is :mod:`slurm_fair.estimates.tags`' business.
    """
    tags: dict[str, str] = {}
    for m in _TAG.finditer(comment or ""):
        key = m.group(1).lower()
        if key in tags:
            continue
        tags[key] = m.group(2) or ""
        if len(tags) >= MAX_TAGS:
            break
    return tags


# --------------------------------------------------------------------------------------------
# Command layouts: the columns we ask for, in order (free text last)
# --------------------------------------------------------------------------------------------

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
    "admin_comment",
    "Name",
    "Comment",
)

#: sinfo -N -O fields
SINFO_FIELDS: tuple[str, ...] = (
    "NodeList",
    "StateComplete",
    "CPUs",
    "Gres",
    "GresUsed",
    "Partition",
    "Features",
    "Memory",
    "PriorityTier",
)

#: sacct -X -o fields (JobName and Comment, user text, last)
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "Account",
    "User",
    "State",
    "Partition",
    "AllocTRES",
    "ElapsedRaw",
    "Submit",
    "Start",
    "End",
    "NNodes",
    "JobName",
    "Comment",
)

ASSOC_FIELDS: tuple[str, ...] = ("Cluster", "Account", "User", "Partition", "Share", "QOS", "DefaultQOS")
QOS_FIELDS: tuple[str, ...] = ("Name", "Priority", "GrpTRES")

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


# --------------------------------------------------------------------------------------------
# Records -> model objects
# --------------------------------------------------------------------------------------------


def gpu_request(
    per_job: str, per_node: str, per_task: str, num_nodes: int, num_tasks: int
) -> GpuRequest | None:
    """Normalise the three TRES request columns of a job into one :class:`GpuRequest`.

    ``--gpus`` sets tres-per-job, ``--gres``/``--gpus-per-node`` tres-per-node,
    ``--gpus-per-task`` tres-per-task. ``raw`` is the ``scontrol`` assignment that restores the
    request exactly (``TresPerNode=gres:gpu:2``).
    """
    for field_name, text, per in (
        ("TresPerJob", per_job, "job"),
        ("TresPerNode", per_node, "node"),
        ("TresPerTask", per_task, "task"),
    ):
        count, gpu_type = gpu_request_of(text)
        if count > 0:
            return GpuRequest(
                count=count,
                gpu_type=gpu_type,
                per=per,
                nodes=max(1, num_nodes),
                raw=f"{field_name}={text.strip()}",
                tasks=max(1, num_tasks),
            )
    return None


def _text(value: str) -> str:
    """A plain text column; Slurm's ``(null)`` means empty."""
    v = value.strip()
    return "" if v == "(null)" else v


def job_from_record(f: Sequence[str]) -> SlurmJob:
    """One squeue record (:data:`SQUEUE_FIELDS` order) -> :class:`SlurmJob`."""
    (job_id, state, account, user, partition, qos, reason, submit, start, priority, nice,
     num_nodes, num_tasks, per_job, per_node, per_task, tres_alloc, nodelist, requeue,
     min_cpus, min_memory, max_nodes, admin_comment, name, comment) = f
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
    )


def parse_squeue(text: str, fs: str) -> list[SlurmJob]:
    return [job_from_record(r) for r in split_records(text, fs, len(SQUEUE_FIELDS))]


def parse_sinfo(text: str, fs: str) -> list[Node]:
    """sinfo -N lists a node once per partition: merge those lines into one Node each."""
    merged: dict[str, dict] = {}
    for f in split_records(text, fs, len(SINFO_FIELDS)):
        nodelist, state, cpus, gres, gres_used, partition, features, memory, tier = f
        for name in expand_hostlist(nodelist):
            n = merged.get(name)
            if n is None:
                n = merged[name] = {
                    "name": name,
                    "state": state.strip().lower(),
                    "gpus_total": gpus_by_type(gres),
                    "gpus_used": gpus_by_type(gres_used),
                    "partitions": [],
                    "features": tuple(
                        x for x in features.strip().split(",") if x and x.lower() not in _NONE
                    ),
                    "cpus": parse_int(cpus),
                    "memory_mb": parse_memory_mb(memory),
                    "tiers": {},
                }
            p = partition.strip().rstrip("*")
            if p and p not in n["partitions"]:
                n["partitions"].append(p)
                n["tiers"][p] = parse_int(tier)
    return [Node(**{**n, "partitions": tuple(n["partitions"])}) for n in merged.values()]


def parse_sacct(text: str, fs: str) -> list[AccountingRecord]:
    out = []
    for f in split_records(text, fs, len(SACCT_FIELDS)):
        job_id, account, user, state, partition, alloc, elapsed, submit, start, end, nnodes, name, comment = f
        gpus, gpu_type = gpus_in_tres_map(parse_tres_map(alloc))
        out.append(
            AccountingRecord(
                job_id=job_id.strip(),
                account=account.strip(),
                user=user.strip(),
                state=state.strip().split(" ")[0],
                gpu_type=gpu_type,
                gpus=gpus,
                submit_time=parse_time(submit),
                start_time=parse_time(start),
                end_time=parse_time(end),
                elapsed_s=float(parse_int(elapsed)),
                partition=partition.strip(),
                name=name,
                comment=comment,
                nodes=max(1, parse_int(nnodes, 1)),
            )
        )
    return out


def _share(text: str) -> float:
    t = text.strip().lower()
    if t in ("", "parent"):
        return 1.0
    try:
        v = float(t)
    except ValueError:
        return 1.0
    return v if v > 0 else 1.0


def parse_assoc(text: str, fs: str = "|") -> list[Account]:
    """Account-level associations (empty User) -> :class:`Account`; ``root`` is skipped.

    An account listed on several clusters/partitions keeps its first row's share and the union
    of its QOS.
    """
    accounts: dict[str, Account] = {}
    for f in split_records(text, fs, len(ASSOC_FIELDS)):
        _cluster, account, user, _partition, share, qos, default_qos = (x.strip() for x in f)
        if user or not account or account == "root":
            continue
        qos_list = tuple(q for q in qos.split(",") if q)
        prev = accounts.get(account)
        if prev is None:
            accounts[account] = Account(account, _share(share), qos_list, default_qos)
        else:
            union = tuple(dict.fromkeys(prev.qos + qos_list))
            accounts[account] = Account(account, prev.shares, union, prev.default_qos or default_qos)
    return list(accounts.values())


def parse_qos(text: str, fs: str = "|") -> list[Qos]:
    out = []
    for f in split_records(text, fs, len(QOS_FIELDS)):
        name, priority, grp = (x.strip() for x in f)
        if name:
            out.append(Qos(name=name, grp_tres=grp_tres_gpus(grp), priority=parse_int(priority)))
    return out


def iter_lines(text: str) -> Iterator[str]:
    """Non-empty lines (for the simple commands that print one value per line)."""
    return (line for line in text.splitlines() if line.strip())


def format_fields(values: Iterable[str], fs: str) -> str:
    """The inverse of a record split: how Slurm prints one record (used by the fake)."""
    return fs.join(values)
