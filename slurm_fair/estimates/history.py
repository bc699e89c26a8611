"""Accounting history -> learner runs: a completed run's group and the GPU type it ran on.

The type is the typed gres of AllocTRES (``gres/gpu:a100=4``) when the history has it, else
the type of the nodes in NodeList (the cluster's inventory: ``node_types``, completed by the
nodes the history's typed runs used). A run whose type
cannot be told (no typed gres, nodes unknown or of several types) is counted, not guessed.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from ..slurm.parse.history import HistoryRow
from .learn import Failure, GroupKey, Run, equivalent_seconds


def run_type(row: HistoryRow, node_types: Mapping[str, str]) -> str | None:
    """The GPU type of a run: typed AllocTRES, else its nodes' single type."""
    if row.gpu_type:
        return row.gpu_type
    types = {node_types.get(n) for n in row.nodes}
    if len(types) == 1 and None not in types:
        return types.pop()
    return None


def nodes_seen_typed(rows: Iterable[HistoryRow]) -> dict[str, str]:
    """Node -> GPU type, from the runs whose AllocTRES was typed: a history is its own inventory
    for the nodes typed runs used (a node seen with two types is left out)."""
    seen: dict[str, set[str]] = {}
    for r in rows:
        if r.gpu_type:
            for n in r.nodes:
                seen.setdefault(n, set()).add(r.gpu_type)
    return {n: next(iter(ts)) for n, ts in seen.items() if len(ts) == 1}


def seconds_by_type(row: HistoryRow, node_types: Mapping[str, str]) -> dict[str, float] | None:
    """Seconds a job ran on each GPU type over its runs (a requeued job's earlier runs too);
    None when the type of one of them cannot be told."""
    parts = [(run_type(row, node_types), row.elapsed_s)] + [
        (t or run_type(HistoryRow(0, "", "", "", "", 0, None, n, 0.0), node_types), e) for t, n, e in row.earlier]
    seconds: dict[str, float] = {}
    for t, e in parts:
        if t is None:
            return None
        seconds[t] = seconds.get(t, 0.0) + e
    return seconds


def runs_from_history(rows: Iterable[HistoryRow], node_types: Mapping[str, str]) -> tuple[list[Run], Counter]:
    """Runs grouped by user + job name + GPUs; ``skipped["GPU type unknown"]`` counts the rest.

    A job that was requeued did its work over several runs, perhaps on several types: it is one
    run on the type it spent most time on, the time on other types converted by the type priors
    (:func:`equivalent_seconds`; the simulator does the same with its current belief)."""
    rows = list(rows)
    node_types = {**nodes_seen_typed(rows), **node_types}
    runs: list[Run] = []
    skipped: Counter = Counter()
    for r in rows:
        k = run_type(r, node_types)
        seconds = seconds_by_type(r, node_types)
        if seconds is None:
            skipped["GPU type unknown"] += 1
            continue
        main, total = equivalent_seconds(seconds)
        if r.earlier:
            skipped["requeued: runs joined"] += 1
        runs.append(Run((r.user, r.job_name, r.gpus), main, total, r.nodes if main == k else (), r.job_id))
    return runs, skipped


def timed_runs(rows: Iterable[HistoryRow]) -> list[tuple[GroupKey, float, float | None]]:
    """The finished runs as the run-time estimate reads them (:func:`.runtime.learn_ratios`):
    (group, seconds run over all its runs, time limit) of each row, oldest end first. A row with
    no time limit (column absent, UNLIMITED) is kept with None (the estimate skips it)."""
    ordered = sorted(rows, key=lambda r: (r.end_s if r.end_s is not None else 0.0, r.job_id))
    return [((r.user, r.job_name, r.gpus), r.elapsed_s + sum(e for _, _, e in r.earlier), r.time_limit_s)
            for r in ordered]


def failures_from_history(rows: Iterable[HistoryRow], node_types: Mapping[str, str]) -> list[Failure]:
    """The FAILED / OUT_OF_MEMORY runs (:attr:`History.failed`) whose GPU type can be told, as
    :class:`~.learn.Failure` of their group (the learner judges which mark a type)."""
    out = []
    for r in rows:
        k = run_type(r, node_types)
        if k is not None:
            before = (t or run_type(HistoryRow(0, "", "", "", "", 0, None, n, 0.0), node_types) for t, n, _ in r.earlier)
            out.append(Failure((r.user, r.job_name, r.gpus), k, r.state, r.job_id, tuple(t for t in before if t),
                               r.elapsed_s))
    return out
