"""``sacct -P -X`` text with its header -> the rows ``speeds learn`` uses.

The columns are found by name in the header (``JobID|User|JobName|AllocTRES|NodeList|State`` and
``Elapsed`` or ``ElapsedRaw`` at least; ``Account`` and ``Partition`` when there; more allowed, any
order: sites and tools ask sacct for their own column sets). A site's history is messy: rows of
job steps, pending or cancelled jobs, jobs without GPUs are *not usable* (counted, not errors);
a row that cannot be read (wrong number of fields, an unreadable time) is *junk*: skipped with
its line number, or an error with ``strict``. A missing header column is an error naming the
file. A job name holding the delimiter is put back together (the only free-text column).

The :data:`TIMING` columns (``Submit|Start|End|Timelimit|NNodes``) are read when the header has
them: ``simulate --sacct-file`` replays the history (:mod:`slurm_fair.sim.accounting`) from the
same rows, so the rows of other end states are kept too (:attr:`History.ended`).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from dataclasses import dataclass, field, replace

from ...errors import Finding, InputError
from .fields import expand_hostlist, parse_elapsed, parse_int, parse_minutes, parse_time
from .gres import gpus_in_tres_map, parse_tres_map

#: the columns a history must have (and one of :data:`ELAPSED`)
REQUIRED = ("JobID", "User", "JobName", "AllocTRES", "NodeList", "State")
#: the run time, either as text or in seconds
ELAPSED = ("Elapsed", "ElapsedRaw")
#: columns read when present: when each job was submitted, started and ended, its time limit and
#: nodes (``simulate --sacct-file`` replays the history with them; ``speeds learn`` needs none)
TIMING = ("Submit", "Start", "End", "Timelimit", "NNodes")
#: what ``--from-slurm`` asks sacct for (ElapsedRaw: seconds, no parsing)
HISTORY_FIELDS = ("JobID", "User", "Account", "JobName", "Partition", "AllocTRES", "NodeList", "Elapsed",
                  "State", "ElapsedRaw") + TIMING
#: states whose elapsed time measures the work (sacct(1): everything else did not complete)
MEASURING = "COMPLETED"
#: end states that may blame the GPU type (kept as :attr:`History.failed` for the learner)
FAILING = ("FAILED", "OUT_OF_MEMORY")


@dataclass(frozen=True)
class HistoryRow:
    """One usable completed GPU run of the history."""

    line: int
    job_id: str
    user: str
    account: str
    job_name: str
    gpus: int
    gpu_type: str | None
    nodes: tuple[str, ...]
    elapsed_s: float
    #: earlier runs of a job requeued or preempted before it completed (``sacct -D``):
    #: (GPU type or None, nodes, elapsed seconds) each; its work is spread over all of them
    earlier: tuple[tuple[str | None, tuple[str, ...], float], ...] = ()
    #: COMPLETED, or one of :data:`FAILING` (then the row is in :attr:`History.failed`), or any
    #: other end state or RUNNING (then in :attr:`History.ended`)
    state: str = MEASURING
    #: the :data:`TIMING` columns when the history has them (seconds since the epoch, the time
    #: limit in seconds; None: column absent, Unknown or UNLIMITED; ``nnodes`` 0: absent)
    submit_s: float | None = None
    start_s: float | None = None
    end_s: float | None = None
    time_limit_s: float | None = None
    nnodes: int = 0


@dataclass
class History:
    """The usable rows, why the others were left out (``skipped[reason]``), and junk lines."""

    rows: list[HistoryRow] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    junk: list[Finding] = field(default_factory=list)
    #: runs that ended requeued or preempted, by job id
    partial: dict[str, list[tuple[str | None, tuple[str, ...], float]]] = field(default_factory=dict)
    #: GPU runs that ended FAILED or OUT_OF_MEMORY (still counted in ``skipped``): they say
    #: nothing about speed, but may say a group cannot run on a type
    failed: list[HistoryRow] = field(default_factory=list)
    #: rows of every other state (TIMEOUT, CANCELLED, NODE_FAIL, RUNNING, PENDING, ...; still
    #: counted in ``skipped``), GPUs or not: a replay of the history simulates those that ran
    ended: list[HistoryRow] = field(default_factory=list)
    #: rows of :attr:`ended` that could not be read (the learner never needs them)
    ended_junk: list[Finding] = field(default_factory=list)
    #: the earliest submit time of each job's runs (a requeue resets Slurm's SubmitTime)
    first_submit: dict[str, float] = field(default_factory=dict)
    #: whether the history has the :data:`TIMING` columns Submit, Start and End
    timed: bool = False


#: delimiters tried when the header has no ``|`` (``sacct --delimiter=...``)
OTHER_DELIMITERS = ("\t", ";", "\u2603")  # not ",": TRES values hold commas
#: every column name this module reads, by its lower-case spelling (sacct takes any case)
_CANONICAL = {c.lower(): c for c in HISTORY_FIELDS}


def _delimiter(line: str, delimiter: str) -> str:
    """The header's delimiter: ``delimiter``, or when the header lacks it another that splits it
    into every required column (a site's ``sacct --delimiter``)."""
    if delimiter in line:
        return delimiter
    for d in OTHER_DELIMITERS:
        names = {c.strip().lower() for c in line.split(d)}
        if all(c.lower() in names for c in REQUIRED):
            return d
    return delimiter


def _header(line: str, delimiter: str, source: str) -> dict[str, int]:
    cols = [c.strip() for c in line.split(delimiter)]
    if len(cols) > 1 and cols[-1] == "":  # ``sacct -p``: a delimiter after the last column
        cols.pop()
    index = {_CANONICAL.get(c.lower(), c): i for i, c in enumerate(cols)}
    missing = [c for c in REQUIRED if c not in index]
    if not any(c in index for c in ELAPSED):
        missing.append(" or ".join(ELAPSED))
    if missing:
        raise InputError(source, [Finding("line 1", f"the header lacks column(s) {', '.join(missing)} (expected "
                                          f"the output of sacct -P -X -o {','.join(HISTORY_FIELDS)}, header included)")])
    return index


def _fields(line: str, delimiter: str, index: dict[str, int]) -> list[str] | None:
    """The fields of a row; a job name holding the delimiter is joined back; None if unreadable.
    ``sacct -p`` (not ``-P``) ends every line with the delimiter: that last empty field is not data."""
    parts = line.split(delimiter)
    if len(parts) > len(index) and parts[-1] == "":
        parts.pop()
    extra = len(parts) - len(index)
    if extra == 0:
        return parts
    if extra < 0:
        return None
    j = index["JobName"]
    return parts[:j] + [delimiter.join(parts[j:j + extra + 1])] + parts[j + extra + 1:]


def _elapsed(f: list[str], index: dict[str, int]) -> float:
    if "ElapsedRaw" in index and f[index["ElapsedRaw"]].strip().isdigit():
        return float(f[index["ElapsedRaw"]])
    if "Elapsed" not in index:
        return 0.0
    return parse_elapsed(f[index["Elapsed"]])


def _row(lineno: int, f: list[str], index: dict[str, int], history: History) -> None:
    """Classify one row: usable (appended), not usable (counted) or junk (ValueError)."""
    job_id = f[index["JobID"]].strip()
    if "." in job_id:
        history.skipped["job step"] += 1
        return
    state = f[index["State"]].strip().split(" ")[0].upper()
    if state != MEASURING:
        history.skipped[f"state {state or 'empty'}"] += 1
        if state in ("REQUEUED", "PREEMPTED"):
            _, gpu_type = gpus_in_tres_map(parse_tres_map(f[index["AllocTRES"]]))
            history.partial.setdefault(job_id, []).append(
                (gpu_type, expand_hostlist(f[index["NodeList"]]), _elapsed(f, index)))
            submit = _timing(f, index, "Submit") if "Submit" in index else None
            if submit is not None:
                history.first_submit[job_id] = min(submit, history.first_submit.get(job_id, submit))
        elif state in FAILING:
            try:
                _run(lineno, f, index, history, state)
            except Exception:  # noqa: BLE001
                pass  # a failed run's unreadable cell: it was counted by its state already
        else:
            try:
                _run(lineno, f, index, history, state)
            except Exception as exc:  # noqa: BLE001  (counted by its state; a replay names it)
                history.ended_junk.append(Finding(f"line {lineno}", f"unreadable row ({str(exc)[:120]})"))
        return
    _run(lineno, f, index, history, state)


#: a history names the same node lists over and over: each expanded once (ClusterShell's parse
#: was most of the time of reading 100,000 rows)
_hosts = lru_cache(maxsize=65536)(expand_hostlist)


def _timing(f: list[str], index: dict[str, int], column: str) -> float | None:
    """A :data:`TIMING` time column as seconds since the epoch (None: Unknown, None, ...)."""
    when = parse_time(f[index[column]])
    return when.timestamp() if when is not None else None


def _run(lineno: int, f: list[str], index: dict[str, int], history: History, state: str) -> None:
    """A completed or failed row: a GPU run (appended to ``rows`` or ``failed``), else counted;
    a row of another state goes to ``ended`` whatever it holds (the replay sorts it out)."""
    job_id = f[index["JobID"]].strip()
    gpus, gpu_type = gpus_in_tres_map(parse_tres_map(f[index["AllocTRES"]]))
    ended = state != MEASURING and state not in FAILING
    if gpus <= 0 and not ended:
        if state == MEASURING:
            history.skipped["no GPU"] += 1
        return
    seconds = _elapsed(f, index)
    if not seconds > 0 and state == MEASURING:
        history.skipped["no elapsed time"] += 1
        return
    user = f[index["User"]].strip()
    if not user:
        raise ValueError("empty User")
    nodes = _hosts(f[index["NodeList"]])
    account = f[index["Account"]].strip() if "Account" in index else ""
    times = {c: _timing(f, index, c) for c in ("Submit", "Start", "End") if c in index}
    limit = parse_minutes(f[index["Timelimit"]]) if "Timelimit" in index else None
    row = HistoryRow(lineno, job_id, user, account, f[index["JobName"]],
                     gpus, gpu_type, nodes, seconds, state=state,
                     submit_s=times.get("Submit"), start_s=times.get("Start"), end_s=times.get("End"),
                     time_limit_s=limit * 60.0 if limit is not None else None,
                     nnodes=parse_int(f[index["NNodes"]]) if "NNodes" in index else 0)
    (history.rows if state == MEASURING else history.ended if ended else history.failed).append(row)


def _records(lines: list[str], start: int, delimiter: str, width: int) -> list[tuple[int, str]]:
    """(line number, record text) of the rows: a row with too few fields continues on the next
    line when that completes it (a job name holding a newline: names are user text)."""
    out: list[tuple[int, str]] = []
    i = start
    while i < len(lines):
        line, lineno = lines[i], i + 1
        i += 1
        if not line.strip():
            continue
        while line.count(delimiter) < width - 1 and i < len(lines) and \
                line.count(delimiter) + lines[i].count(delimiter) <= width - 1:
            line += "\n" + lines[i]
            i += 1
        out.append((lineno, line))
    return out


def parse_history(text: str, source: str, delimiter: str = "|", strict: bool = False) -> History:
    """Every row of ``text`` (see the module docstring); InputError for a missing/bad header,
    or any junk row with ``strict``. Column names are matched in any case; a header without
    ``delimiter`` is tried with :data:`OTHER_DELIMITERS`."""
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        raise InputError(source, [Finding("line 1", "empty: expected sacct -P -X output with its header")])
    delimiter = _delimiter(lines[first], delimiter)
    index = _header(lines[first], delimiter, source)
    history = History(timed=all(c in index for c in ("Submit", "Start", "End")))
    for lineno, line in _records(lines, first + 1, delimiter, len(index)):
        f = _fields(line, delimiter, index)
        try:
            if f is None:
                raise ValueError(f"{len(line.split(delimiter))} fields, the header has {len(index)}")
            _row(lineno, f, index, history)
        except Exception as exc:  # any unreadable cell: the row is junk, named by its line
            history.junk.append(Finding(f"line {lineno}", f"unreadable row ({str(exc)[:120]})"))
            history.skipped["junk"] += 1
    if strict and history.junk:
        raise InputError(source, history.junk)
    _drop_partial(history)
    return history


def _drop_partial(history: History) -> None:
    """A job requeued or preempted before it completed (``sacct -D`` lists those runs) did its
    work over all its runs: they are attached to its completed row (``earlier``), and to a
    failed row (it ran on those types before it failed)."""
    if not history.partial:
        return
    for name in ("rows", "failed", "ended"):
        out = []
        for r in getattr(history, name):
            earlier = history.partial.get(r.job_id)
            out.append(replace(r, earlier=tuple(earlier)) if earlier else r)
        setattr(history, name, out)
