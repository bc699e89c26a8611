"""The controller's live gauges: what the last cycle decided, per tenant and GPU type.

The window metrics (:mod:`.prometheus`) say what tenants *received* over days, from accounting;
these say what the controller holds *now*, from its state store, so a dashboard can put a
tenant's share beside its entitlement and an alert can see a stalled controller. Labels are
``account`` (the Slurm account, as Slurm's own exporters label it) and ``gpu_type``.

* ``tenant_entitled_gpus``: the tenant's fair share of the type (``tenant_cycle.fair_share``);
* ``tenant_allocated_gpus``: GPUs of the tenant's RUNNING jobs, on the type the cycle placed
  them on (their fixed type when they have one);
* ``tenant_planned_gpus``: the tenant's bundle in the last cycle's plan (``sum_j g_j x_jk``,
  GPUs per type averaged over the round); slurm-fair writes no QOS limit, so this is what the
  plan aims at, not a cap;
* ``tenant_pending_gpus``: GPUs of PENDING jobs on the type the plan sends them to
  (``gpu_type="any"`` when the plan names none);
* controller health: the last success, the last cycle's duration and its applied/failed actions.

The store is opened read-only (SQLite ``mode=ro``); no store means no live gauges (absent, not
zero), only ``build_info``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

from .. import __version__
from ..controller.state import StateStore
from .prometheus import Family
from ..statuses import CycleStatus

GPU_PREFIX = "gres/gpu:"


def _running_type(job: dict) -> str:
    est = job.get("estimate") or {}
    return str(job.get("placed_type") or est.get("fixed_type") or job.get("planned_type") or "unknown")


def live_families(store_path: Path | None) -> list[Family]:
    """Every live family from the store at ``store_path`` (read-only), plus ``build_info``."""
    P = "slurm_fair_"
    build = Family(P + "build_info", "slurm-fair's version (value 1).")
    build.add(1, version=__version__)
    out = [build]
    if store_path is None or not Path(store_path).is_file():
        return out
    try:
        with StateStore.read_only(store_path) as st:
            last = st.last_finished_cycle()
            success = st.last_success_at()
            decisions = st.last_decisions()
    except sqlite3.Error:
        return out
    return out + store_families(last, success, decisions)


def store_families(last: dict | None, success: float | None,
                   decisions: tuple[str, list[dict], list[dict]] | None) -> list[Family]:
    """The gauges from what :meth:`StateStore.last_finished_cycle`, ``last_success_at`` and
    ``last_decisions`` returned (pure: tests feed it rows)."""
    P = "slurm_fair_"
    entitled = Family(P + "tenant_entitled_gpus", "Tenant's fair share of the GPU type in the last cycle's plan.")
    allocated = Family(P + "tenant_allocated_gpus", "GPUs of the tenant's running jobs, per GPU type (last cycle).")
    planned = Family(P + "tenant_planned_gpus", "Tenant's bundle in the last cycle's plan, per GPU type (not a cap).")
    pending = Family(P + "tenant_pending_gpus", "GPUs of the tenant's pending jobs, per GPU type the plan sends them to.")
    ok_at = Family(P + "controller_last_success_timestamp_seconds", "When the last cycle that ended ok finished (Unix time).")
    duration = Family(P + "controller_cycle_duration_seconds", "Wall time of the last finished controller cycle.")
    applied = Family(P + "controller_actions_applied", "Actions applied by the last finished controller cycle.")
    failed = Family(P + "controller_actions_failed", "Actions that failed in the last finished controller cycle.")
    last_ok = Family(P + "controller_last_cycle_ok", "1 when the last finished cycle ended ok, else 0 (status label).")
    ok_at.add(success)
    if last is not None:
        if last.get("finished_at") is not None:
            duration.add(float(last["finished_at"]) - float(last["started_at"]))
        applied.add(last.get("applied"))
        failed.add(last.get("failed"))
        last_ok.add(1 if last.get("status") == CycleStatus.OK else 0, status=str(last.get("status")))
    if decisions is not None:
        _, tenants, jobs = decisions
        for t in tenants:
            u = str(t["tenant"])
            for k, v in sorted((t.get("fair_share") or {}).items()):
                entitled.add(v, account=u, gpu_type=str(k))
            for k, v in sorted((t.get("bundle") or {}).items()):
                planned.add(v, account=u, gpu_type=str(k))
        run: dict[tuple[str, str], float] = defaultdict(float)
        wait: dict[tuple[str, str], float] = defaultdict(float)
        for j in jobs:
            if j["state"] == "RUNNING":
                run[(str(j["tenant"]), _running_type(j))] += float(j["gpus"])
            elif j["state"] == "PENDING":
                wait[(str(j["tenant"]), str(j.get("planned_type") or "any"))] += float(j["gpus"])
        for t in tenants:  # a tenant of the plan with nothing running shows 0, not nothing
            for k in (t.get("fair_share") or {}):
                run.setdefault((str(t["tenant"]), str(k)), 0.0)
        for (u, k), g in sorted(run.items()):
            allocated.add(g, account=u, gpu_type=k)
        for (u, k), g in sorted(wait.items()):
            pending.add(g, account=u, gpu_type=k)
    return [entitled, allocated, planned, pending, ok_at, duration, applied, failed, last_ok]
