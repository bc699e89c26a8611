"""The controller's learned speed table: refreshed from the accounting history, kept in its state.

Every ``[throughput].learn_refresh_h`` hours (default 24: daily; 0: never) a cycle reads the
last ``[throughput].learn_days`` days of ``sacct -X`` (through the adapter), turns the completed
GPU runs into observations of their group (user + job name + GPUs) on the type they ran on, and
learns every group's speeds with the one learner (:func:`slurm_fair.estimates.learn.learn`),
FAILED / OUT_OF_MEMORY runs included: a type a group fails on gets speed 0
(:func:`slurm_fair.estimates.learn.fails_on`), so no later decision sends it there. Each job
name's pool over users (user ``*``) is kept too: the belief for a group that never completed.
That history holds the jobs the controller itself placed, so what it learns while it runs (where
each job ran, for how long, that it completed) needs no user cooperation and no tag.

The table is ``learned-speeds.json`` in the state directory, written atomically; ``decide``
reads it through :class:`~.decide.DecideSettings` (``learned``). A dry run reads it and never
refreshes it. A failed refresh keeps the last table and says why (a warning, not a failed cycle).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Mapping

from .. import atomic
from ..errors import SlurmFairError
from ..estimates.history import failures_from_history, runs_from_history
from ..estimates.learn import ANY_USER, GroupKey, GroupSpeeds, learn
from ..slurm.parse.history import parse_history
from ..slurm.port import SlurmPort

FILE = "learned-speeds.json"
DEFAULT_REFRESH_H = 24.0
DEFAULT_DAYS = 90.0


@dataclass(frozen=True)
class LearnedTable:
    """Speeds per group (``{(user, name, gpus): {type: speed}}``, each a
    :class:`~slurm_fair.estimates.learn.GroupSpeeds` with its runs per type and failing types),
    runs per group, when made."""

    speeds: Mapping[GroupKey, GroupSpeeds] = field(default_factory=dict)
    runs: Mapping[GroupKey, int] = field(default_factory=dict)
    refreshed_at: float = 0.0

    def to_doc(self) -> dict[str, Any]:
        return {"refreshed_at": self.refreshed_at, "groups": [
            {"user": g[0], "job_name": g[1], "gpus": g[2], "speed": dict(s), "runs": self.runs.get(g, 0),
             "runs_per_type": dict(s.runs), "fails_on": dict(s.fails)}
            for g, s in sorted(self.speeds.items())]}


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
        return LearnedTable(speeds, runs, float(doc["refreshed_at"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return LearnedTable()


def settings(config: Any) -> tuple[float, float]:
    """(refresh hours, history days) of ``[throughput]``."""
    th = config["throughput"]
    return float(th.get("learn_refresh_h", DEFAULT_REFRESH_H)), float(th.get("learn_days", DEFAULT_DAYS))


def build(port: SlurmPort, types: list[str], days: float, now: float) -> LearnedTable:
    """Learn from the last ``days`` of accounting (raises SlurmFairError when Slurm cannot say)."""
    history_of = getattr(port, "sacct_history", None)
    if history_of is None:
        return LearnedTable(refreshed_at=now)
    text, fs = history_of(datetime.fromtimestamp(now) - timedelta(days=days))
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if len(n.gpus_total) == 1}
    history = parse_history(text, "sacct", fs)
    runs, _ = runs_from_history(history.rows, node_types)
    failures = failures_from_history(history.failed, node_types)
    model = learn(runs, types, failures) if runs or failures else None
    if model is None:
        return LearnedTable(refreshed_at=now)
    every = {**model.pools, **model.groups}
    return LearnedTable({g: v.table_value() for g, v in every.items()},
                        {g: sum(v.runs.values()) for g, v in every.items()}, now)


def refresh(port: SlurmPort, config: Any, state_dir: str | Path, types: list[str], dry_run: bool,
            now: float | None = None) -> tuple[LearnedTable, list[str]]:
    """The table to decide with: the stored one, rebuilt first when older than the refresh
    interval (not in a dry run). Returns it and any warning."""
    now = time.time() if now is None else now
    table = load(state_dir)
    refresh_h, days = settings(config)
    if dry_run or refresh_h <= 0 or now - table.refreshed_at < refresh_h * 3600:
        return table, []
    try:
        fresh = build(port, types, days, now)
    except SlurmFairError as exc:
        return table, [f"learned speeds not refreshed (kept the table of {table.refreshed_at:.0f}): {exc}"]
    try:
        atomic.write_text(Path(state_dir) / FILE, json.dumps(fresh.to_doc(), indent=1) + "\n")
    except OSError as exc:
        return fresh, [f"learned speeds not saved: {exc}"]
    return fresh, []
