"""Everything a report is computed from, loaded once: accounting, capacity, weights, speeds.

Slurm's accounting (``sacct`` through the port) is the source of truth for who used which GPUs
when. The controller's state store, when one exists, adds what accounting cannot know: the
throughput estimate the controller used for each job, its online estimates per class, and its
cycle timings. Without a store the report still works: every job's speed comes from the same
order of precedence the controller uses (:func:`slurm_fair.estimates.estimate.estimate_job`:
class tag, site rules, ``default_class``, else *flat*), so the two never disagree.

The store is opened **read-only** (:meth:`StateStore.read_only`, SQLite ``mode=ro``) and read
through its methods: a report must never create, migrate or lock the controller's file while a
cycle runs, nor know its tables.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from ..gangs import can_hold
from ..model import frozen_map, normalised_throughput
from ..slurm.model import AccountingRecord, GpuRequest, SlurmJob
from ..slurm.parse.tags import parse_tags
from ..slurm.port import SlurmPort
from .window import Window

#: the GPU type name of an accounting record without a typed GPU (``--gres=gpu:2``)
UNTYPED = "gpu"

@dataclass(frozen=True)
class JobSpeed:
    """``n_jk`` of one job on every GPU type of the cluster, and where it came from."""

    n: Mapping[str, float]
    #: controller (the estimate the controller recorded for this job) | observed | class-table |
    #: assumed | flat (see docs/reports.md)
    source: str
    klass: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", frozen_map(self.n))


@dataclass(frozen=True)
class ReportInputs:
    """The inputs of one report, immutable; :mod:`.tables` computes everything from them."""

    window: Window
    records: tuple[AccountingRecord, ...]
    #: GPUs per type of every node the port lists (installed capacity, drained nodes included)
    capacity: Mapping[str, int]
    #: ``w_u`` of every tenant seen in the records
    weights: Mapping[str, float]
    #: job id -> speed
    speeds: Mapping[str, JobSpeed]
    #: controller cycles that started inside the window (empty without a state store)
    cycles: tuple[Mapping[str, Any], ...] = ()
    #: path of the state store that was read, or None
    store: str | None = None
    #: where the speeds came from when no store exists (class table source)
    class_table: str = ""
    #: problems met while loading, shown in the "not computed" list
    notes: tuple[str, ...] = ()
    #: the wall-clock time the report was made (running jobs count up to min(until, now))
    now: datetime = field(default_factory=datetime.now)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", frozen_map(self.capacity))
        object.__setattr__(self, "weights", frozen_map(self.weights))
        object.__setattr__(self, "speeds", frozen_map(self.speeds))


# --- the state store (read-only) -------------------------------------------------------------


@dataclass(frozen=True)
class StoreView:
    """What the reports read from the controller's SQLite file (schema: docs/controller.md)."""

    path: str
    #: job id -> (class, {type: T}) of the newest non-dry-run cycle that saw the job
    job_estimates: Mapping[str, tuple[str | None, Mapping[str, float]]]
    #: online estimates: key (class or ``job:<id>``) -> {type: T}
    online: Mapping[str, Mapping[str, float]]
    cycles: tuple[Mapping[str, Any], ...]


def read_store(path: Path, window: Window) -> StoreView:
    """Read the store at ``path`` without writing to it; raises sqlite3.Error when unreadable."""
    from ..controller.state import StateStore

    with StateStore.read_only(path) as store:
        return StoreView(
            str(path), store.job_estimates(), store.estimates(),
            tuple(store.cycles_between(window.since.timestamp(), window.until.timestamp())),
        )


# --- speeds -----------------------------------------------------------------------------------


def normalise(tput: Mapping[str, float], types: list[str]) -> dict[str, float]:
    """``n_jk`` (:func:`~slurm_fair.model.normalised_throughput`) over ``types``, the best of
    ``types`` being 1: the cluster's types are the problem's, as in the controller."""
    on_types = {k: float(tput.get(k, 0.0)) for k in types}
    return {k: normalised_throughput(on_types, k) for k in types}


def _as_job(rec: AccountingRecord) -> SlurmJob:
    """The fields of a record that the controller's estimator looks at (account, name, comment,
    and the GPU count: a gang's class row is the one measured at its size)."""
    return SlurmJob(
        job_id=rec.job_id, name=rec.name, user=rec.user, account=rec.account,
        partition=rec.partition, qos="", state=rec.state, comment=rec.comment,
        gpu_request=GpuRequest(max(1, rec.gpus), None, per="job") if rec.gpus else None,
        tags=parse_tags(rec.comment),
    )


def job_speeds(
    records: list[AccountingRecord],
    types: list[str],
    config: Any,
    store: StoreView | None,
    warnings: set[str],
) -> tuple[dict[str, JobSpeed], str]:
    """Speeds of every record's job; returns them and the class table's source name."""
    from ..estimates.classes import load_class_table
    from ..estimates.estimate import estimate_job
    from ..estimates.rules import Rules

    table = load_class_table(config["throughput"]["class_table"] or None)
    rules = Rules.from_config(config)
    from ..controller.learned import load as load_learned

    online = store.online if store else {}
    learned = load_learned(config["controller"]["state_dir"]).speeds
    out: dict[str, JobSpeed] = {}
    for rec in records:
        known = store.job_estimates.get(rec.job_id) if store else None
        if known is not None:
            klass, tput = known
            if any(tput.get(k, 0.0) > 0 for k in types):
                out[rec.job_id] = JobSpeed(normalise(tput, types), "controller", klass)
                continue
        e = estimate_job(_as_job(rec), types, table, rules, online, warnings, learned)
        out[rec.job_id] = JobSpeed(normalise(e.throughput, types), e.source, e.klass)
    return out, table.source


# --- weights and capacity -------------------------------------------------------------------


def installed_capacity(port: SlurmPort) -> tuple[dict[str, int], dict[str, list[int]]]:
    """GPUs per type over every node the port lists (see docs/reports.md: capacity), and the
    GPUs of each node per type (what a gang can be held by)."""
    cap: dict[str, int] = {}
    sizes: dict[str, list[int]] = {}
    for node in port.nodes():
        for k, n in node.gpus_total.items():
            cap[k] = cap.get(k, 0) + int(n)
            sizes.setdefault(k, []).append(int(n))
    return cap, sizes


def gang_feasible(speeds: dict[str, JobSpeed], records: list[AccountingRecord],
                  node_sizes: Mapping[str, list[int]]) -> dict[str, JobSpeed]:
    """``n_jk = 0`` where no node of type ``k`` could hold the job's gang as it ran (sacct's
    GPUs and NNodes): the window's equal share must not count time an 8-GPU single-node job
    could never have had on 4-GPU nodes (the problem's rule, :func:`slurm_fair.gangs.can_hold`)."""
    out = dict(speeds)
    for rec in records:
        sp = out.get(rec.job_id)
        if sp is None or not node_sizes:
            continue
        n = {k: (v if k not in node_sizes or can_hold(rec.shape, node_sizes[k]) else 0.0) for k, v in sp.n.items()}
        if n != dict(sp.n):
            # n_jk is relative to the best type it can use
            out[rec.job_id] = JobSpeed(normalise(n, list(n)), sp.source, sp.klass)
    return out


def load(port: SlurmPort, config: Any, window: Window, store_path: Path | None = None,
         now: datetime | None = None) -> ReportInputs:
    """Read accounting, nodes and accounts through the port, and the state store when present.

    ``store_path`` defaults to ``[controller].state_dir``/state.sqlite; a missing store is
    normal (the controller never ran), an unreadable one is reported in the notes, and a file
    there that is not a store (empty, another program's database) is a UserError naming it,
    before Slurm is read: the state_dir is wrong, and a report without it would hide that.
    """
    from ..controller.problem import configured_weights, tenant_weights
    from ..controller.state import DB_NAME
    from ..controller.state.identity import check_store

    now = now or datetime.now().replace(microsecond=0)
    notes: list[str] = []
    path = store_path or Path(config["controller"]["state_dir"]) / DB_NAME
    check_store(path)
    records = [r for r in port.accounting(window.since, window.until) if r.gpus > 0]
    capacity, node_sizes = installed_capacity(port)
    try:
        shares = {a.name: a.shares for a in port.accounts()}
    except Exception as exc:  # noqa: BLE001 - weights fall back to 1; say so
        shares = {}
        notes.append(f"Slurm shares unreadable ({exc}); weights from the configuration or 1")
    store = None
    if path.is_file():
        try:
            store = read_store(path, window)
        except sqlite3.Error as exc:
            notes.append(f"state store {path} unreadable ({exc}); using accounting alone")
    else:  # normal where the controller never ran; said with the path, in case it is misspelt
        notes.append(f"no controller state store at {path} ([controller].state_dir): using accounting alone")
    types = sorted(set(capacity) | {r.gpu_type or UNTYPED for r in records})
    warnings: set[str] = set()
    speeds, table_source = job_speeds(records, types, config, store, warnings)
    speeds = gang_feasible(speeds, records, node_sizes)
    notes += sorted(warnings)
    weights = tenant_weights(sorted({r.account for r in records}), configured_weights(config), shares)
    return ReportInputs(
        window=window, records=tuple(records), capacity=capacity, weights=weights, speeds=speeds,
        cycles=store.cycles if store else (), store=store.path if store else None,
        class_table=table_source, notes=tuple(notes), now=now,
    )
