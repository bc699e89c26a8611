"""Accounting history -> learner runs: a completed run's group and the GPU type it ran on.

The type is the typed gres of AllocTRES (``gres/gpu:a100=4``) when the history has it, else
the type of the nodes in NodeList (the cluster's inventory: ``node_types``). A run whose type
cannot be told (no typed gres, nodes unknown or of several types) is counted, not guessed.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from ..slurm.parse.history import HistoryRow
from .learn import Run


def run_type(row: HistoryRow, node_types: Mapping[str, str]) -> str | None:
    """The GPU type of a run: typed AllocTRES, else its nodes' single type."""
    if row.gpu_type:
        return row.gpu_type
    types = {node_types.get(n) for n in row.nodes}
    if len(types) == 1 and None not in types:
        return types.pop()
    return None


def runs_from_history(rows: Iterable[HistoryRow], node_types: Mapping[str, str]) -> tuple[list[Run], Counter]:
    """Runs grouped by user + job name + GPUs; ``skipped["GPU type unknown"]`` counts the rest."""
    runs: list[Run] = []
    skipped: Counter = Counter()
    for r in rows:
        k = run_type(r, node_types)
        if k is None:
            skipped["GPU type unknown"] += 1
            continue
        runs.append(Run((r.user, r.job_name, r.gpus), k, r.elapsed_s, r.nodes, r.job_id))
    return runs, skipped
