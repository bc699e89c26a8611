"""One controller cycle: numbered phases over one snapshot (Kueue's ``schedule()`` shape).

1. lock          one controller per cluster (:mod:`.lock`; not taken for ``--dry-run``)
2. snapshot      read Slurm through the port; unreadable -> no change, exit 1
3. estimate      throughput per job (:mod:`.estimates`), service received, the problem
4. policy        the configured policy, then the rounding step for this round
5. plan          the desired state (:mod:`.plan`, pure)
6. diff + apply  only the differences (:mod:`.diff`, :mod:`.apply`)
7. record        audit log, state store, plan file

Every phase is a plain function of its inputs; this module only sequences them, times them and
turns failures into a :class:`CycleResult` with an exit code. When the policy fails (solver
error, time limit) the last good plan is kept for the jobs that still exist, or Slurm is left as
it is when there is none; the cycle then exits 1 so cron mail shows it.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import policies, rounding
from ..config import Config
from ..errors import SlurmError, SlurmFairError, SolverError
from ..model import Allocation, Problem, Snapshot
from ..slurm.port import SlurmPort
from . import planfile
from .apply import ActionResult, apply, counts
from .audit import AuditLog
from .diff import Action, diff
from .estimates import ClassTable, Estimate, Rules, estimate_job, load_class_table, observations
from .lock import ControllerLock
from .plan import Plan, PlanSettings, gres_key, make_plan, qos_name, tenant_limits
from .problem import build_problem
from .state import StateStore
from .requeue import eligible as rq_eligible
from .steer import partition_type, partition_types, submitted_partition, type_partitions

AllocateFn = Callable[[str, Problem, policies.PolicyOptions], Allocation]
PlaceFn = Callable[..., rounding.Placement]


@dataclass
class CycleResult:
    """What a cycle did; ``--json`` prints :meth:`to_dict`."""

    cycle_id: str
    status: str = "running"
    exit_code: int = 0
    message: str = ""
    dry_run: bool = False
    policy: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    results: list[ActionResult] = field(default_factory=list)
    planned: list[Action] = field(default_factory=list)
    plan: Plan | None = None
    warnings: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    estimates: dict[str, Estimate] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        actions = (
            [r.to_dict() for r in self.results]
            if self.results or not self.dry_run
            else [{**a.to_dict(), "applied": False, "skipped": False, "error": ""} for a in self.planned]
        )
        return {
            "cycle": self.cycle_id, "status": self.status, "exit_code": self.exit_code,
            "message": self.message, "dry_run": self.dry_run, "policy": self.policy,
            "timings_s": {k: round(v, 6) for k, v in self.timings.items()},
            "counts": counts(self.results) if self.results else {"actions": len(self.planned), "applied": 0, "skipped": 0, "failed": 0},
            "actions": actions, "warnings": self.warnings, "left_out": self.left_out,
            "plan": self.plan.to_dict() if self.plan else None,
        }


@dataclass(frozen=True)
class Settings:
    """The configuration keys a cycle uses, read once."""

    policy: str
    solver: str
    time_limit_s: float
    round_s: float
    interval_s: float
    slack: float
    order: str
    ewma_alpha: float
    state_dir: Path
    audit_log: Path
    class_table: str
    weights: dict[str, float]
    accounts: tuple[str, ...] = ()
    total_limit: bool = True
    pin_gres_type: bool | str = "auto"  # True, False or "auto" (where Slurm can undo it)
    min_run_s: float = 0.0
    requeue_cost_s: float = 150.0
    move_up_gain: float = 0.25
    plan_file: Path | None = None

    @property
    def plan_path(self) -> Path:
        return self.plan_file or self.state_dir / planfile.PLAN_FILE

    @classmethod
    def from_config(cls, config: Config) -> "Settings":
        c, t = config["controller"], config["throughput"]
        return cls(
            c["policy"], c["solver"], float(c["time_limit_s"]), float(c["round_s"]),
            float(c["interval_s"]), float(c["slack"]), c["order"], float(t["ewma_alpha"]),
            Path(c["state_dir"]), Path(c["audit_log"]), t["class_table"],
            {name: float(spec["weight"]) for name, spec in config.tenants.items()},
            tuple(str(a) for a in c["accounts"]), bool(c["total_limit"]), c["pin_gres_type"],
            float(c["min_run_s"]), float(c["requeue_cost_s"]), float(c["move_up_gain"]),
            Path(c["plan_file"]) if c["plan_file"] else None,
        )


def new_cycle_id(now: float) -> str:
    stamp = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


class _Timer:
    def __init__(self, timings: dict[str, float]):
        self.timings = timings

    def phase(self, name: str) -> "_Phase":
        return _Phase(self.timings, name)


class _Phase:
    def __init__(self, timings: dict[str, float], name: str):
        self.timings, self.name = timings, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timings[self.name] = self.timings.get(self.name, 0.0) + time.perf_counter() - self.t0


def estimate_all(
    snapshot: Snapshot, table: ClassTable, rules: Rules, online: dict[str, dict[str, float]]
) -> tuple[dict[str, Estimate], list[str]]:
    """Phase 3 over every GPU job of the snapshot (pure)."""
    types = sorted(k for k, c in snapshot.capacity().items() if c > 0)
    warnings: set[str] = set()
    est = {j.job_id: estimate_job(j, types, table, rules, online, warnings) for j in snapshot.gpu_jobs()}
    return est, sorted(warnings)


def service_since(snapshot: Snapshot, last_at: float | None) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """GPU-seconds per tenant/type and seconds per job/type run since the previous cycle (pure).

    A job running now is counted from the later of its start and the previous snapshot; jobs
    that started and ended between two cycles are not seen (reports use sacct for those).
    """
    now = snapshot.taken_at.timestamp()
    tenants: dict[str, dict[str, float]] = {}
    jobs: dict[str, dict[str, float]] = {}
    for j in snapshot.gpu_jobs():
        if not j.running or not j.gpu_type_running:
            continue
        start = j.start_time.timestamp() if j.start_time else now
        since = max(start, last_at) if last_at is not None else start
        secs = max(now - since, 0.0)
        if secs <= 0:
            continue
        k = j.gpu_type_running
        g = j.gpu_request.total if j.gpu_request else 0
        jobs.setdefault(j.job_id, {})[k] = jobs.get(j.job_id, {}).get(k, 0.0) + secs
        tenants.setdefault(j.account, {})[k] = tenants.get(j.account, {}).get(k, 0.0) + secs * g
    return tenants, jobs


def idle_tenant_limits(plan: Plan, idle: dict[str, float], capacity: dict[str, int], slack: float,
                       total: bool = False) -> dict[str, dict[str, int]]:
    """Limits for tenants whose QOS we manage but who have no job now: the share they would
    get by joining (``w / (W + w)`` of every type), so a returning tenant is neither locked out
    by an old zero limit nor unlimited until the next cycle."""
    weights = sum(tp.weight for tp in plan.tenants.values())
    out = {}
    for t, w in idle.items():
        share = {k: w / (weights + w) * c for k, c in capacity.items()}
        out[t] = tenant_limits(share, {}, capacity, slack, total)
    return out


def run_cycle(
    port: SlurmPort,
    config: Config,
    *,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
    allocate: AllocateFn = policies.allocate,
    place: PlaceFn = rounding.place,
    take_lock: bool = True,
) -> CycleResult:
    """Run one cycle. Raises LockHeld (nothing done); every other failure is in the result."""
    s = Settings.from_config(config)
    lock = ControllerLock(s.state_dir) if take_lock and not dry_run else None
    if lock:
        lock.acquire()
    try:
        return _cycle(port, config, s, dry_run, clock, allocate, place)
    finally:
        if lock:
            lock.release()


def refused_now(snapshot: Snapshot, originals: Mapping[str, Any],
                ptypes: Mapping[str, frozenset[str]]) -> dict[str, tuple[str, str]]:
    """Pending jobs Slurm marks ``BadConstraints`` in a single-type partition they did not ask
    for (so we, or the submit plugin, sent them there): job -> (that type, partition). Our own
    check (:func:`.steer.partition_holds`) should prevent it; this catches what it cannot see
    (features, licences, a node that changed), so the job is sent back and never there again."""
    out = {}
    for sj in snapshot.gpu_jobs():
        if not sj.pending or sj.reason != "BadConstraints":
            continue
        o = originals.get(sj.job_id)
        asked = o.partition if o is not None and o.partition else submitted_partition(sj)
        k = partition_type(sj.partition, ptypes)
        if k and sj.partition != asked:
            out[sj.job_id] = (k, sj.partition)
    return out


def staying(snapshot: Snapshot, built: Any, round_s: float, min_run_s: float,
            last_requeued: Mapping[str, float]) -> dict[str, str]:
    """Running jobs the controller will not stop this cycle -> their type: those not opted in
    to time-sharing or not run long enough (:func:`.requeue.eligible`). The rounding step keeps
    them on their nodes, so it never plans a pending job into GPUs that will not be freed."""
    now = snapshot.taken_at.timestamp()
    min_run = min_run_s or round_s
    in_problem = {j.id for j in built.problem.jobs}
    out = {}
    for sj in snapshot.gpu_jobs():
        if not sj.running or not sj.gpu_type_running or sj.job_id not in in_problem:
            continue
        if not rq_eligible(sj, now, min_run, last_requeued):
            out[sj.job_id] = sj.gpu_type_running
    return out


def in_scope(snapshot: Snapshot, accounts: tuple[str, ...]) -> Snapshot:
    """Only the jobs of ``[controller].accounts`` (all when empty): other jobs are neither
    planned nor touched, and only these accounts' QOS are managed. Capacity stays the whole
    cluster's."""
    if not accounts:
        return snapshot
    keep = set(accounts)
    return replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.account in keep))


def can_retype(port: SlurmPort) -> bool:
    """Whether the port says a typed GPU request can be changed back (False when it cannot say)."""
    fn = getattr(port, "can_retype_gpu", None)
    if fn is None:
        return False
    try:
        return bool(fn())
    except SlurmError:
        return False


def _cycle(
    port: SlurmPort, config: Config, s: Settings, dry_run: bool, clock: Callable[[], float],
    allocate: AllocateFn, place: PlaceFn,
) -> CycleResult:
    started = clock()
    res = CycleResult(new_cycle_id(started), dry_run=dry_run, policy=s.policy)
    timer = _Timer(res.timings)
    store = StateStore.in_dir(s.state_dir)
    audit = AuditLog(s.audit_log)
    try:
        if not dry_run:
            store.start_cycle(res.cycle_id, started, s.policy, dry_run)
        # 2. snapshot
        with timer.phase("snapshot"):
            try:
                snapshot = port.snapshot()
            except SlurmError as exc:
                res.status, res.exit_code = "slurm-unavailable", 1
                res.message = f"cannot read Slurm, nothing changed: {exc}"
                return res
            snapshot = in_scope(snapshot, s.accounts)
        now = snapshot.taken_at.timestamp()
        ptypes = partition_types(snapshot.nodes)
        retype_ok = False
        if s.pin_gres_type in (True, "auto"):
            retype_ok = can_retype(port)
            if not retype_ok and s.pin_gres_type is True:
                res.warnings.append(
                    "pin_gres_type is set but this Slurm cannot undo a typed GPU request (before "
                    "23.11): jobs are steered by partition instead")
        # 3. estimates, service, problem
        with timer.phase("estimate"):
            table = load_class_table(s.class_table or None)
            rules = Rules.from_config(config)
            est, _ = estimate_all(snapshot, table, rules, store.estimates())
            if not dry_run:
                for job_id, key, k, v in observations(snapshot.jobs, est):
                    store.observe(job_id, key, k, v, s.ewma_alpha, now)
            est, warnings = estimate_all(snapshot, table, rules, store.estimates())
            res.warnings += warnings
            res.estimates = est
            last_at_raw = store.get_meta("last_snapshot_at")
            t_service, j_service = service_since(snapshot, float(last_at_raw) if last_at_raw else None)
            if not dry_run:
                store.add_received(res.cycle_id, now, t_service)
                store.add_job_service(j_service)
                store.see_jobs({j.job_id: j.gpu_type_running for j in snapshot.gpu_jobs()}, now)
                store.set_meta("last_snapshot_at", repr(now))
            seen = store.jobs_seen()
            originals = store.originals()
            refused = refused_now(snapshot, originals, ptypes)
            if not dry_run:
                for job_id, (k, part) in refused.items():
                    store.refuse_type(job_id, k, part, now)
            bad = store.refused_types()
            for job_id, (k, _) in refused.items():
                bad.setdefault(job_id, set()).add(k)
            built = build_problem(
                snapshot, est, originals, s.weights, store.job_service(),
                {j: r["first_seen"] for j, r in seen.items()},
                {j: r["last_type"] for j, r in seen.items()},
                ptypes, retype_ok, bad,
            )
            res.left_out = dict(built.left_out)
        # 4. policy + rounding
        plan: Plan | None = None
        allocation: Allocation | None = None
        placement = None
        round_start = float(store.get_meta("round_started_at") or 0.0)
        round_boundary = now - round_start >= s.round_s
        last_requeued = store.last_requeues()
        with timer.phase("policy"):
            try:
                if built.problem.jobs:
                    pstate = _load_policy_state(store, s.policy)
                    options = policies.PolicyOptions(
                        solver=s.solver, time_limit_s=s.time_limit_s, keep_lp_dir=str(s.state_dir),
                        round_s=s.round_s, state=pstate,
                    )
                    allocation = allocate(s.policy, built.problem, options)
                    if not dry_run:
                        _save_policy_state(store, s.policy, pstate)
                else:
                    allocation = Allocation(policy=s.policy, x={}, status="empty")
                with timer.phase("rounding"):
                    held = staying(snapshot, built, s.round_s, s.min_run_s, last_requeued)
                    placement = place(built.problem, allocation, built.received, built.prev,
                                      built.prev_nodes, held, sticky=True)
            except (SolverError, ArithmeticError, ValueError) as exc:
                res.message = f"policy {s.policy!r} failed: {exc}"
                allocation = None
        # 5. plan
        with timer.phase("plan"):
            if allocation is not None and placement is not None:
                base_nice = {j: o.nice for j, o in originals.items()}
                settings = PlanSettings(
                    s.slack, s.order, s.round_s, ptypes, type_partitions(snapshot.nodes), retype_ok,
                    s.total_limit, s.min_run_s or None, s.requeue_cost_s, s.move_up_gain,
                    tuple(n for n in snapshot.nodes if n.schedulable),
                )
                plan = make_plan(
                    snapshot, built.problem, allocation, placement.types, placement.priority,
                    built.fixed_type, base_nice, settings, round_boundary,
                    {j: o.partition for j, o in originals.items() if o.partition},
                    last_requeued,
                )
                plan = _with_idle_tenants(plan, store, snapshot, s.slack, s.total_limit)
                for job_id, k in sorted(dict(plan.info.get("unsteered", {})).items()):
                    res.warnings.append(f"job {job_id}: no partition has only {k} GPUs, so it cannot "
                                        "be steered there; left in its own partition")
            else:
                last = store.last_plan()
                live = {j.job_id for j in snapshot.jobs}
                if last is None:
                    res.status, res.exit_code = "policy-failed", 1
                    res.message += "; no earlier plan: Slurm left as it is"
                    return res
                plan = Plan.from_dict(last[1]).restricted_to(live)
                res.message += f"; keeping the last good plan of cycle {last[0]}"
            res.plan = plan
        # 6. diff + apply
        with timer.phase("diff"):
            res.planned = diff(plan, snapshot)
        if dry_run:
            res.status = "dry-run" if allocation is not None else "dry-run-policy-failed"
            res.exit_code = 0 if allocation is not None else 1
            return res
        with timer.phase("apply"):
            res.results = apply(res.planned, port, snapshot, store, res.cycle_id, clock(),
                                workers=int(config["slurm"]["parallel_calls"]))
        c = counts(res.results)
        if c["failed"]:
            res.status, res.exit_code = "partial", 1
            res.message = (res.message + "; " if res.message else "") + (
                f"{c['failed']} of {c['actions']} actions failed, {c['applied']} applied, "
                f"{c['skipped']} skipped (see the actions)"
            )
        elif allocation is None:
            res.status, res.exit_code = "policy-failed", 1
        else:
            res.status = "ok"
        # 7. record
        with timer.phase("record"):
            audit.write([
                {"ts": clock(), "cycle": res.cycle_id, "dry_run": False, **r.to_dict()} for r in res.results
            ])
            requeue_for = dict(plan.info.get("requeue_for", {})) if plan is not None else {}
            moves = dict(plan.info.get("move_up", {})) if plan is not None else {}
            for r in res.results:
                if r.applied and r.action.kind == "requeue":
                    j = r.action.job
                    store.record_requeue(j, res.cycle_id, now, r.action.before, requeue_for.get(j, ()),
                                         "move-up" if j in moves else "make-room", moves.get(j))
            if allocation is not None and placement is not None:
                _record_decisions(store, res, snapshot, built, allocation, placement.types, placement.priority, plan)
                if round_boundary:
                    store.set_meta("round_started_at", repr(now))
            if res.status == "ok":
                store.save_plan(res.cycle_id, now, plan.to_dict())
                entries = planfile.plan_entries(plan, snapshot, table)
                planfile.write(
                    s.plan_path,
                    planfile.render(entries, now, max(3 * s.interval_s, 180.0), res.cycle_id),
                )
        return res
    except SlurmFairError as exc:
        res.status, res.exit_code = "error", exc.exit_code
        res.message = exc.message()
        if not dry_run and exc.exit_code == 2:
            raise
        return res
    finally:
        if not dry_run:
            store.finish_cycle(res.cycle_id, clock(), res.status, counts(res.results), res.timings, res.message)
        store.close()


def _with_idle_tenants(plan: Plan, store: StateStore, snapshot: Snapshot, slack: float,
                       total: bool = False) -> Plan:
    from .plan import TenantPlan

    managed = {m.account for m in store.managed_qos().values()}
    idle = {t: 1.0 for t in managed if t not in plan.tenants}
    if not idle:
        return plan
    capacity = {k: int(c) for k, c in snapshot.capacity().items() if c > 0}
    limits = idle_tenant_limits(plan, idle, capacity, slack, total)
    tenants = dict(plan.tenants)
    for t, lim in limits.items():
        tenants[t] = TenantPlan(t, qos_name(t), lim, {}, {}, 1.0)
    return Plan(tenants, plan.jobs, plan.requeue, plan.gpu_types, plan.policy, plan.status, plan.info)


def _record_decisions(
    store: StateStore, res: CycleResult, snapshot: Snapshot, built: Any, allocation: Allocation,
    placed: Any, deficit: Any, plan: Plan,
) -> None:
    by_id = {j.job_id: j for j in snapshot.jobs}
    rows = []
    for j in built.problem.jobs:
        e = res.estimates.get(j.id)
        jp = plan.jobs.get(j.id)
        rows.append({
            "job_id": j.id, "tenant": j.tenant, "state": by_id[j.id].state, "gpus": j.gpus,
            "class": e.klass if e else None,
            "estimate": {
                "throughput": dict(j.throughput), "class_source": e.class_source if e else None,
                # how the type is enforced: fixed (the job's own), a partition, or the gres request
                "fixed_type": built.fixed_type.get(j.id),
                "partition": jp.partition if jp else None, "pin_gres": bool(jp and jp.gpu_type),
            },
            "sources": dict(e.sources) if e else {},
            "allocation": {k: float(v) for k, v in allocation.x.get(j.id, {}).items()},
            "placed_type": placed.get(j.id), "deficit": float(deficit.get(j.id, 0.0)),
            "planned_type": (jp.planned_type or jp.gpu_type) if jp else None,
            "rank": jp.rank if jp else None,
        })
    store.record_jobs(res.cycle_id, rows)
    store.record_tenants(res.cycle_id, [
        {"tenant": t, "weight": tp.weight, "fair_share": dict(tp.fair_share), "bundle": dict(tp.bundle),
         "limits": dict(tp.limits)}
        for t, tp in plan.tenants.items()
    ])


def _load_policy_state(store: StateStore, policy: str) -> dict[str, Any]:
    raw = store.get_meta(f"policy_state:{policy}")
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        value = {}
    return value if isinstance(value, dict) else {}


def _save_policy_state(store: StateStore, policy: str, state: dict[str, Any]) -> None:
    """Dynamic policies keep memory in ``options.state``; persisted when it is plain JSON."""
    try:
        store.set_meta(f"policy_state:{policy}", json.dumps(state))
    except (TypeError, ValueError):
        pass


__all__ = ["CycleResult", "Settings", "run_cycle", "estimate_all", "service_since", "gres_key"]
