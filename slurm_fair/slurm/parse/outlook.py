"""One job's outlook in Slurm: ``squeue -j`` (state, reason, start) and ``sprio -j`` (factors).

Both are asked with a random separator like every other read. sprio prints nothing but the
columns asked for (job ids, partition names and numbers: no user text), and says "Unable to
find jobs matching user/id(s) specified" on stdout when the job is not pending or not yet
eligible (held, begin time in the future): that is an empty answer, not an error.
"""

from __future__ import annotations

from ...errors import SlurmOutputError
from ..model import JobOutlook, PriorityFactors
from .fields import NONE, parse_int, parse_time
from .records import split_records

#: squeue -O fields for :func:`parse_outlook`
OUTLOOK_FIELDS: tuple[str, ...] = ("JobID", "State", "Reason", "PriorityLong", "StartTime")

#: sprio -o fields (%i job, %r partition, %Y priority, then the weighted factors, %N nice, %T TRES)
SPRIO_FIELDS: tuple[str, ...] = ("%i", "%r", "%Y", "%A", "%F", "%J", "%P", "%Q", "%S", "%N", "%T")
#: the weighted factors, in the order of SPRIO_FIELDS after the priority
FACTOR_NAMES = ("age", "fairshare", "jobsize", "partition", "qos", "site")
_NO_JOBS = "unable to find jobs matching"


def sprio_format(fs: str) -> str:
    """The ``-o`` argument: the fields joined by ``fs`` (sprio copies literal text as is)."""
    return fs.join(SPRIO_FIELDS)


def parse_outlook(text: str, fs: str) -> list[JobOutlook]:
    """squeue's records -> one :class:`JobOutlook` each (several for an array's tasks)."""
    out = []
    for job_id, state, reason, priority, start in split_records(text, fs, len(OUTLOOK_FIELDS)):
        out.append(JobOutlook(job_id=job_id.strip(), state=state.strip(), reason=reason.strip(),
                              priority=parse_int(priority), start=parse_time(start)))
    return out


def parse_sprio(text: str, fs: str) -> list[PriorityFactors]:
    """sprio's lines -> one :class:`PriorityFactors` per (job, partition); [] when sprio found
    no pending job (module docstring). A line in another form raises SlurmOutputError."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.strip().lower().startswith(_NO_JOBS):
            continue
        f = [x.strip() for x in line.split(fs)]
        if len(f) != len(SPRIO_FIELDS):
            raise SlurmOutputError(f"sprio: expected {len(SPRIO_FIELDS)} fields, got {len(f)} in {line[:120]!r}")
        job_id, partition, priority, *weighted, nice, tres = f
        out.append(PriorityFactors(
            job_id=job_id, partition=partition, priority=_number(priority),
            factors=dict(zip(FACTOR_NAMES, (_number(w) for w in weighted))),
            nice=parse_int(nice), tres="" if tres.lower() in NONE else tres,
        ))
    return out


def _number(text: str) -> float:
    t = text.strip()
    if t.lower() in NONE:
        return 0.0
    try:
        return float(t)
    except ValueError:
        raise SlurmOutputError(f"sprio: not a number: {t!r}") from None
