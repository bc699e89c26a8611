"""The spread of a replay: each policy's figures over draws and backfill phases.

One replay of a history is one draw of what a history does not say: the speeds of a group on the
types it never completed on (drawn, ``--seed``) and the phase of Slurm's backfill timer (a history
does not reveal when ``bf_interval``'s ticks fell). On a small history in small nodes either moves
a policy's average JCT by tenths (docs/results.md, issue 42), so ``simulate --draws K
--bf-jitter S`` runs each policy on ``K`` draws, and the modelled Slurm's ``agnostic`` at five
backfill intervals around the site's; this module reduces those runs to a mean and a range per
policy and per tenant, so an admin sees the model's spread beside its answer.

Pure: the runs' metric documents in (:func:`slurm_fair.sim.results.policy_metrics`), plain data
out.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from rich.table import Table

#: the figures whose spread is shown, overall and per tenant
FIGURES = ("avg_jct_s", "avg_wait_s")


def bf_intervals(interval_s: float, jitter_s: float) -> list[float]:
    """The backfill intervals an ``agnostic`` arm runs at: the site's first, then ``jitter_s``
    and half of it either side (30 s, jitter 2: 30, 28, 29, 31, 32), none below a second."""
    if jitter_s <= 0:
        return [interval_s]
    out = [interval_s]
    for d in (-jitter_s, -jitter_s / 2, jitter_s / 2, jitter_s):
        v = max(1.0, interval_s + d)
        if v not in out:
            out.append(v)
    return out


def _range(values: Sequence[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def spread(runs: Mapping[str, Sequence[Mapping[str, Any]]], draws: int, intervals: Sequence[float]) -> dict[str, Any]:
    """Per policy, over its runs (``runs[policy]``: each run's metrics, with ``tenants``): how
    many runs, and the mean, least and most of each of :data:`FIGURES`, overall and per tenant
    (a tenant's over the runs where it finished a job)."""
    out: dict[str, Any] = {}
    for name, docs in runs.items():
        row: dict[str, Any] = {"runs": len(docs)}
        for key in FIGURES:
            vals = [d[key] for d in docs if d.get(key) is not None]
            row[key] = _range(vals) if vals else None
        tenants: dict[str, Any] = {}
        for t in sorted({t for d in docs for t in d.get("tenants", {})}):
            cell: dict[str, Any] = {}
            for key in FIGURES:
                vals = [d["tenants"][t][key] for d in docs
                        if t in d.get("tenants", {}) and d["tenants"][t].get(key) is not None]
                cell[key] = _range(vals) if vals else None
            tenants[t] = cell
        row["tenants"] = tenants
        out[name] = row
    return {"draws": draws, "bf_intervals_s": list(intervals), "policies": out}


def _cell(r: Mapping[str, float] | None) -> str:
    if r is None:
        return "-"
    return f"{r['mean'] / 3600:.2f} ({r['min'] / 3600:.2f}-{r['max'] / 3600:.2f})"


def spread_table(doc: Mapping[str, Any]) -> Table:
    """Average JCT per policy and per tenant over the runs: mean (least-most), hours."""
    s = doc["spread"]
    pols = s["policies"]
    table = Table(title=f"average JCT over {s['draws']} draw(s) of the unseen speeds"
                        + (f" and backfill intervals {', '.join(f'{v:g}' for v in s['bf_intervals_s'])} s (agnostic)"
                           if len(s["bf_intervals_s"]) > 1 else "")
                        + ": mean (least-most), hours")
    table.add_column("tenant", style="bold")
    for name, row in pols.items():
        table.add_column(f"{name} ({row['runs']} runs)", justify="right")
    table.add_row("all", *[_cell(row["avg_jct_s"]) for row in pols.values()])
    for t in sorted({t for row in pols.values() for t in row["tenants"]}):
        table.add_row(t, *[_cell(row["tenants"].get(t, {}).get("avg_jct_s")) for row in pols.values()])
    return table
