"""The controller's learned speed table: refreshed from the accounting history, kept in its state.

Every ``[throughput].learn_refresh_h`` hours (default 24: daily; 0: never) a cycle reads the
last ``[throughput].learn_days`` days of ``sacct -X`` (through the adapter), turns the completed
GPU runs into observations of their group (user + job name + GPUs) on the type they ran on, and
learns every group's speeds with the one learner (:func:`slurm_fair.estimates.learn.learn`),
FAILED / OUT_OF_MEMORY runs included: a type a group fails on gets speed 0
(:func:`slurm_fair.estimates.learn.fails_on`), so no later decision sends it there. Each job
name's pool over users (user ``*``) is kept too: the belief for a group that never completed.
The same read gives each group's **use ratios** (elapsed / time limit of its completed runs, and
1.0 for a run that hit its limit: TIMEOUT), its pool's and the site's
(:func:`slurm_fair.estimates.runtime.learn_ratios`): the history from which a job's run time is
predicted from its time limit (:func:`slurm_fair.fairness.known_remaining`), kept in the table
too. That history holds the jobs the controller itself placed, so what it learns while it runs (where
each job ran, for how long, that it completed) needs no user cooperation and no tag.

The table is ``learned-speeds.json`` in the state directory, written atomically; ``decide``
reads it through :class:`~.decide.DecideSettings` (``learned``). A dry run reads it and never
refreshes it. A failed refresh keeps the last table and says why (a warning, not a failed cycle),
and **backs off**: the next try is :data:`RETRY_S` later, doubling with each failure in a row up
to the refresh interval (recorded in the table), so a ``sacct`` over months that times out is not
run again inside every cycle.

Failures are learned **within a minute**, not at the next refresh: every
``[throughput].failures_check_s`` seconds (default 60; 0: off) a cycle reads only the jobs of the
accounting since :data:`OVERLAP_S` before its last check (``sacct -S``: a short window, cheap;
slurmdbd records an end late when busy, and a failure already read is remembered, so it calls
for one relearn, not one per check) and, when one of
them ran OUT_OF_MEMORY or FAILED at its start on a type its group is not yet marked as failing on,
relearns the table from the whole history at once (as the refresh: at most once per check), with
the same learner and its same rule (a run that failed at its start on one type marks it:
:func:`slurm_fair.estimates.learn.fails_on`). So the next job of the group, a resubmission or a
requeued one, is not sent there again (issue 39: a 4-GPU ResNet-50 that died at its start on K80
was sent there again for a day).

A type marked as failing for a group is **re-offered after a bound**: each mark is kept with the
time it was first seen with its number of failed runs, and once it is :data:`FAIL_MARK_DAYS` old
without a new failure there, the learner no longer counts those failures (the type gets its
learned or prior speed again), so the next job of the group may run there; a completion there
clears the mark for good (the learner's rule), a new failure marks it again for as long. Why a
bound and not a decay: the mark is a yes/no (speed 0 keeps the group off the type), and the
failures stay in the ``learn_days`` history for months, so without a bound the one way to clear it
(a completion there) could never happen, since the type is never offered.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Mapping

from .. import atomic
from ..errors import SlurmFairError
from ..estimates.history import failures_from_history, runs_from_history, timed_runs
from ..estimates.learn import ANY_USER, FAST_FAIL_S, GroupKey, GroupSpeeds, fails_on, learn
from ..estimates.runtime import learn_ratios
from ..slurm.port import SlurmPort

FILE = "learned-speeds.json"
#: when the recent failures were last read (a file of its own: the table, which may be large,
#: is written only when relearned)
CHECKED_FILE = "failures-checked-at"
DEFAULT_REFRESH_H = 24.0
DEFAULT_DAYS = 90.0
#: the wait before the first retry of a failed refresh (doubled per failure in a row, at most the
#: refresh interval)
RETRY_S = 900.0
#: how long a type marked as failing for a group stays marked without a new failure there
FAIL_MARK_DAYS = 14.0
#: how far before the last failure check the next one reads: slurmdbd records a job's end after
#: slurmctld, seconds late on a quiet site and minutes when its agent queue is long (a check
#: that read 5 s before the last one missed a failure recorded late, on a loaded test machine)
OVERLAP_S = 600.0

#: (group, GPU type) -> (failed runs that marked it, when first seen with that many)
Marks = Mapping[tuple[GroupKey, str], tuple[int, float]]


@dataclass(frozen=True)
class LearnedTable:
    """Speeds per group (``{(user, name, gpus): {type: speed}}``, each a
    :class:`~slurm_fair.estimates.learn.GroupSpeeds` with its runs per type and failing types),
    runs per group, when made."""

    speeds: Mapping[GroupKey, GroupSpeeds] = field(default_factory=dict)
    runs: Mapping[GroupKey, int] = field(default_factory=dict)
    refreshed_at: float = 0.0
    #: failing types per group and since when (module docstring), expired ones included
    marks: Marks = field(default_factory=dict)
    #: failed refreshes in a row, and not before when the next is tried
    failed_refreshes: int = 0
    retry_at: float = 0.0
    #: per group, pool and the site: the use ratios (elapsed / time limit) of the finished runs,
    #: sorted (:mod:`slurm_fair.estimates.runtime`: what a hidden job's size is predicted from)
    ratios: Mapping[GroupKey, tuple[float, ...]] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        return {"refreshed_at": self.refreshed_at, "failed_refreshes": self.failed_refreshes,
                "retry_at": self.retry_at, "groups": [
                    {"user": g[0], "job_name": g[1], "gpus": g[2], "speed": dict(s), "runs": self.runs.get(g, 0),
                     "runs_per_type": dict(s.runs), "fails_on": dict(s.fails)}
                    for g, s in sorted(self.speeds.items())],
                "marks": [{"user": g[0], "job_name": g[1], "gpus": g[2], "type": k, "fails": n, "since": t}
                          for (g, k), (n, t) in sorted(self.marks.items())],
                "run_ratios": [{"user": g[0], "job_name": g[1], "gpus": g[2], "ratios": list(rs)}
                               for g, rs in sorted(self.ratios.items())]}

    def due(self, now: float, refresh_h: float) -> bool:
        """Whether a refresh is due at ``now`` (the interval passed, and any back-off)."""
        return now - self.refreshed_at >= refresh_h * 3600 and now >= self.retry_at


def load(state_dir: str | Path) -> LearnedTable:
    """The table in ``state_dir`` (empty when there is none or it cannot be read: it is ours, a
    cache of what sacct says, so a bad one is rebuilt at the next refresh, never an error)."""
    path = Path(state_dir) / FILE
    try:
        doc = json.loads(path.read_text())
        speeds = {(g["user"], g["job_name"], int(g["gpus"])): GroupSpeeds(
            {k: float(v) for k, v in g["speed"].items()},
            {k: int(v) for k, v in g.get("runs_per_type", {}).items()},
            {k: int(v) for k, v in g.get("fails_on", {}).items()}, g["user"] == ANY_USER) for g in doc["groups"]}
        runs = {(g["user"], g["job_name"], int(g["gpus"])): int(g.get("runs", 0)) for g in doc["groups"]}
        marks = {((m["user"], m["job_name"], int(m["gpus"])), str(m["type"])): (int(m["fails"]), float(m["since"]))
                 for m in doc.get("marks", [])}
        ratios = {(r["user"], r["job_name"], int(r["gpus"])): tuple(sorted(min(1.0, max(0.0, float(x)))
                                                                             for x in r["ratios"]))
                  for r in doc.get("run_ratios", [])}
        return LearnedTable(speeds, runs, float(doc["refreshed_at"]), marks, int(doc.get("failed_refreshes", 0)),
                            float(doc.get("retry_at", 0.0)), ratios)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return LearnedTable()


def settings(config: Any) -> tuple[float, float]:
    """(refresh hours, history days) of ``[throughput]``."""
    th = config["throughput"]
    return float(th.get("learn_refresh_h", DEFAULT_REFRESH_H)), float(th.get("learn_days", DEFAULT_DAYS))


def new_failures(port: SlurmPort, table: LearnedTable, since: float) -> dict[str, tuple[GroupKey, str]]:
    """The runs of the accounting since ``since`` that may mark a type on their own
    (OUT_OF_MEMORY, or FAILED at the start: :data:`FAST_FAIL_S`) and that the table does not yet
    mark as failing, by job id: (group, type) (raises SlurmFairError when Slurm cannot say). Only
    these call for a relearn before the refresh: a failure on a marked type changes nothing the
    table decides (the mark holds), and a later failure waits for the refresh, so a site where
    jobs fail all day does not relearn its 90 days of history every minute for them."""
    history = port.accounting_history(datetime.fromtimestamp(since))
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if len(n.gpus_total) == 1}
    out: dict[str, tuple[GroupKey, str]] = {}
    for f in failures_from_history(history.failed, node_types):
        alone = f.state == "OUT_OF_MEMORY" or (f.elapsed_s is not None and f.elapsed_s <= FAST_FAIL_S)
        known = table.speeds.get(f.group)
        if alone and (known is None or known.get(f.gpu_type, 1.0) > 0):
            out[f.job_id] = (f.group, f.gpu_type)
    return out


def build(port: SlurmPort, types: list[str], days: float, now: float, before: Marks | None = None) -> LearnedTable:
    """Learn from the last ``days`` of accounting (raises SlurmFairError when Slurm cannot say);
    ``before``: the previous table's marks (their age decides which are re-offered)."""
    history = port.accounting_history(datetime.fromtimestamp(now) - timedelta(days=days))
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if len(n.gpus_total) == 1}
    runs, _ = runs_from_history(history.rows, node_types)
    failures = failures_from_history(history.failed, node_types)
    marks = aged_marks(fails_on(runs, failures, types), before or {}, now)
    expired = {key for key, (_, since) in marks.items() if now - since >= FAIL_MARK_DAYS * 86400}
    failures = [f for f in failures if (f.group, f.gpu_type) not in expired]
    model = learn(runs, types, failures) if runs or failures else None
    ratios = learn_ratios(timed_runs(history.rows + [r for r in history.ended if r.state == "TIMEOUT" and r.gpus > 0]))
    if model is None:
        return LearnedTable(refreshed_at=now, marks=marks, ratios=ratios)
    every = {**model.pools, **model.groups}
    return LearnedTable({g: v.table_value() for g, v in every.items()},
                        {g: sum(v.runs.values()) for g, v in every.items()}, now, marks, ratios=ratios)


def aged_marks(marked: Mapping[GroupKey, Mapping[str, int]], before: Marks,
               now: float) -> dict[tuple[GroupKey, str], tuple[int, float]]:
    """The learner's marks with the time each was first seen with its count: kept from
    ``before`` while no new failure came (the count did not grow), ``now`` otherwise."""
    out = {}
    for g, by in marked.items():
        for k, n in by.items():
            old = before.get((g, k))
            out[(g, k)] = (n, old[1]) if old is not None and n <= old[0] else (n, now)
    return out


def refresh(port: SlurmPort, config: Any, state_dir: str | Path, types: list[str], dry_run: bool,
            now: float | None = None) -> tuple[LearnedTable, list[str]]:
    """The table to decide with: the stored one, rebuilt first when older than the refresh
    interval (not in a dry run). Returns it and any warning."""
    now = time.time() if now is None else now
    table = load(state_dir)
    refresh_h, days = settings(config)
    check_s = float(config["throughput"].get("failures_check_s", 60.0))
    if dry_run or refresh_h <= 0:
        return table, []
    if not table.due(now, refresh_h):
        checked_at = checked(state_dir)
        backing_off = table.failed_refreshes > 0 and now < table.retry_at  # sacct fails: not every minute
        if check_s <= 0 or now - checked_at < check_s or backing_off:
            return table, []
        # the window since the last check (the first: one interval), OVERLAP_S wider: slurmdbd
        # records a job's end after slurmctld, so a failure that ended before the last check may
        # have reached the accounting only after it; one already read calls for no relearn again
        since = (checked_at or now - check_s) - OVERLAP_S
        try:
            read = new_failures(port, table, since)
        except SlurmFairError as exc:
            _mark_checked(state_dir, now, seen_failures(state_dir))
            return table, [f"recent failures not read (next try in {check_s:.0f} s): {exc}"]
        seen = frozenset(read)
        if not seen - seen_failures(state_dir):
            saved = _mark_checked(state_dir, now, seen)
            return table, ([] if saved is None else [f"failure check not recorded: {saved}"])
    else:
        seen = seen_failures(state_dir)
    try:
        fresh = build(port, types, days, now, table.marks)
    except SlurmFairError as exc:
        failed = table.failed_refreshes + 1
        wait = min(refresh_h * 3600, RETRY_S * 2 ** min(failed - 1, 30))
        kept = replace(table, failed_refreshes=failed, retry_at=now + wait)
        saved = _save(state_dir, kept)
        return kept, [f"learned speeds not refreshed (kept the table of {table.refreshed_at:.0f}; next try in "
                      f"{wait:.0f} s{'' if saved is None else ', not recorded: ' + saved}): {exc}"]
    saved = _save(state_dir, fresh) or _mark_checked(state_dir, now, seen)
    return fresh, ([] if saved is None else [f"learned speeds not saved: {saved}"])


def _checked_lines(state_dir: str | Path) -> list[str]:
    try:
        return (Path(state_dir) / CHECKED_FILE).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def checked(state_dir: str | Path) -> float:
    """When the recent failures were last read (0: never, or unreadable: read again)."""
    lines = _checked_lines(state_dir)
    try:
        return float(lines[0].strip()) if lines else 0.0
    except ValueError:
        return 0.0


def seen_failures(state_dir: str | Path) -> frozenset[str]:
    """The job ids of the failures the last check read (its second line; none when unreadable:
    at worst one relearn too many)."""
    lines = _checked_lines(state_dir)
    return frozenset(lines[1].split()) if len(lines) > 1 else frozenset()


def _mark_checked(state_dir: str | Path, now: float, seen: frozenset[str] = frozenset()) -> str | None:
    try:
        atomic.write_text(Path(state_dir) / CHECKED_FILE, f"{now:.3f}\n{' '.join(sorted(seen))}\n")
    except atomic.AtomicWriteError as exc:
        return exc.message()
    except OSError as exc:
        return str(exc)
    return None


def _save(state_dir: str | Path, table: LearnedTable) -> str | None:
    """Write the table atomically; the error text when it cannot be (a full disk)."""
    try:
        atomic.write_text(Path(state_dir) / FILE, json.dumps(table.to_doc(), indent=1) + "\n")
    except atomic.AtomicWriteError as exc:  # a full disk, no directory: the table is a cache
        return exc.message()
    except OSError as exc:
        return str(exc)
    return None
