"""One controller cycle: numbered phases over one snapshot (Kueue's ``schedule()`` shape).

1. lock          one controller per cluster (:mod:`.lock`; not taken for ``--dry-run``)
2. snapshot      read Slurm through the port; unreadable -> no change, exit 1
3. estimate      throughput per job, service received, the problem    \\
4. policy        the configured policy, then the rounding step          } :func:`.decide.decide`,
5. plan          the desired state (:mod:`.plan`)                       } pure, from the snapshot
6. diff + apply  only the differences (:mod:`.diff`, :mod:`.apply`)    /  and the history
7. record        what the decision observed, audit log, state store, plan file

The cycle reads the history once (:func:`.history.read_history`), decides, applies and records;
this module only sequences the phases, times them and turns failures into a
:class:`CycleResult` with an exit code. When the policy fails the decision keeps the last good
plan (or leaves Slurm as it is when there is none); the cycle then exits 1 so cron mail shows it.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import policies, rounding
from ..config import Config
from ..errors import SlurmError, SlurmFairError, StateWriteError, UserError
from ..estimates.classes import load_class_table
from ..estimates.estimate import Estimate
from ..estimates.rules import Rules
from ..slurm.model import Snapshot
from ..slurm.port import SlurmPort
from . import learned, planfile
from .apply import ActionResult, apply, counts
from .audit import AuditLog, new_cycle_id
from .decide import AllocateFn, DecideSettings, Decision, PlaceFn, Timer, decide
from .diff import Action
from .legacy import finished_qos
from .history import policy_state_key, read_history, read_history_at
from .lock import ControllerLock, held_elsewhere
from .plan.types import Plan
from .settings import Settings
from .state import DB_NAME, StateStore
from .state.identity import check_store

#: the store is pruned (``[controller] keep_days``) at most this often
PRUNE_EVERY_S = 3600.0
DAY_S = 86400.0


@dataclass
class CycleResult:
    """What a cycle did; ``--json`` prints :meth:`to_dict`."""

    cycle_id: str
    status: str = "running"
    exit_code: int = 0
    message: str = ""
    dry_run: bool = False
    policy: str = ""
    #: ``live`` (applies) or ``shadow`` (decides and records only)
    mode: str = "live"
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
            "message": self.message, "dry_run": self.dry_run, "policy": self.policy, "mode": self.mode,
            "timings_s": {k: round(v, 6) for k, v in self.timings.items()},
            "counts": counts(self.results) if self.results else {"actions": len(self.planned), "applied": 0,
                                                                 "skipped": 0, "failed": 0},
            "actions": actions, "warnings": self.warnings, "left_out": self.left_out,
            "plan": self.plan.to_dict() if self.plan else None,
        }


def can_retype(port: SlurmPort) -> bool:
    """Whether the port says a typed GPU request can be changed back (False when it cannot say)."""
    try:
        return bool(port.can_retype_gpu())
    except SlurmError:
        return False


def decide_settings(config: Config, s: Settings, port: SlurmPort) -> DecideSettings:
    """The class table and rules the configuration names, and what this Slurm can do; raises
    InputError/ConfigError (exit 2) for a bad table or rule."""
    retype = can_retype(port) if s.pin_gres_type in (True, "auto") else False
    return DecideSettings(s, load_class_table(s.class_table or None), Rules.from_config(config), retype)


def without_overwritten_pushes(ds: DecideSettings, port: SlurmPort, warnings: list[str]) -> DecideSettings:
    """``order = "none"`` when a site-factor plugin sets jobs' site factors: it would overwrite
    every push (each then read as someone else's change and released), so the controller
    pushes none and says so. A Slurm that cannot say is taken to have none."""
    if ds.settings.order != "site_factor":
        return ds
    try:
        plugin = port.site_factor_plugin()
    except SlurmError:
        return ds
    if not plugin:
        return ds
    warnings.append(f"PrioritySiteFactorPlugin={plugin} sets jobs' site factors and would overwrite the "
                    "controller's: its order is not pushed (as with [controller] order = \"none\")")
    return replace(ds, settings=replace(ds.settings, order="none"))


def run_cycle(
    port: SlurmPort,
    config: Config,
    *,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
    allocate: AllocateFn = policies.allocate,
    place: PlaceFn = rounding.place,
    take_lock: bool = True,
    shadow: bool | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> CycleResult:
    """Run one cycle. Raises LockHeld (nothing done); every other failure is in the result.

    ``shadow`` (None: ``[controller] mode``): decide and record, change nothing in Slurm.
    ``stop``: asked between writes (SIGTERM, SIGINT); when it says so, nothing further is
    written and the cycle ends ``interrupted`` (its intents are in the store: the next cycle or
    ``revert`` settles them)."""
    s = Settings.from_config(config)
    if shadow is not None:
        s = replace(s, mode="shadow" if shadow else "live")
    lock = ControllerLock(s.state_dir) if take_lock and not dry_run else None
    # a state file that is not the controller's is refused before the lock, Slurm or the store
    # (nothing is created beside it); an empty one another controller is creating right now
    # under the lock is that controller's: the lock is held
    try:
        check_store(Path(s.state_dir) / DB_NAME)
    except UserError:
        if lock is not None and held_elsewhere(s.state_dir):
            lock.acquire()  # raises LockHeld naming the holder
        raise
    if lock:
        lock.acquire()
    try:
        return _cycle(port, config, s, dry_run, clock, allocate, place, stop)
    finally:
        if lock:
            lock.release()


def _cycle(
    port: SlurmPort, config: Config, s: Settings, dry_run: bool, clock: Callable[[], float],
    allocate: AllocateFn, place: PlaceFn, stop: Callable[[], bool] = lambda: False,
) -> CycleResult:
    started = clock()
    res = CycleResult(new_cycle_id(started), dry_run=dry_run, policy=s.policy, mode=s.mode)
    timer = Timer(res.timings)
    # a dry run changes nothing, the state store included: it reads the history read-only
    # (empty when the controller never ran) and never creates the store or its directory
    store = None if dry_run else StateStore.in_dir(s.state_dir)
    try:
        if store is not None:
            _store_step(lambda: _begin(store, res, s, started))
        with timer.phase("snapshot"):
            try:
                whole = port.snapshot()
                res.warnings += unknown_accounts(whole, s.accounts)
            except SlurmError as exc:
                res.status, res.exit_code = "slurm-unavailable", 1
                res.message = f"cannot read Slurm, nothing changed: {exc}"
                return res
        with timer.phase("estimate"):
            ds = decide_settings(config, s, port)
            ds = without_overwritten_pushes(ds, port, res.warnings)
            types = sorted(k for k, c in whole.capacity().items() if c > 0)
            table, learn_warnings = learned.refresh(port, config, s.state_dir, types, dry_run, started)
            ds = replace(ds, learned=table.speeds, run_ratios=table.ratios)
            res.warnings += learn_warnings
            history = read_history(store, s.policy) if store is not None else read_history_at(s.state_dir, s.policy)
        d = decide(whole, history, ds, allocate=allocate, place=place)
        _take(res, d)
        if store is None:
            return res
        pilot = d.pilot
        assert pilot is not None

        def settle() -> None:
            # what Slurm shows of the rows is settled first: a cycle killed later still leaves
            # the rows as Slurm shows them
            store.settle(pilot.reading.updates, d.now)
            store.forget_fields(pilot.reading.ended)

        _store_step(settle)
        audit = AuditLog(s.audit_log)
        if s.mode == "shadow":
            res.status = "ok" if d.allocation is not None else "policy-failed"
            res.exit_code = 0 if d.allocation is not None else 1
            res.warnings += _shadow_leftovers(pilot.reading.ours, s)
            _store_step(lambda: audit.write([{"ts": clock(), "cycle": res.cycle_id, "dry_run": False, "shadow": True,
                                              **a.to_dict(), "applied": False, "skipped": False, "error": ""}
                                             for a in res.planned]))
        else:
            _live(port, config, store, audit, res, d, whole, clock, timer, stop)
        with timer.phase("record"):
            _store_step(lambda: _record(store, res, d, pilot.view.snapshot, s, ds, clock))
        return res
    except StateWriteError as exc:
        res.status, res.exit_code = "failed", 1
        res.message = (res.message + "; " if res.message else "") + exc.message()
        return res
    except SlurmFairError as exc:
        res.status, res.exit_code = "error", exc.exit_code
        res.message = exc.message()
        if not dry_run and exc.exit_code == 2:
            raise
        return res
    finally:
        if store is not None:
            try:
                store.finish_cycle(res.cycle_id, clock(), res.status, counts(res.results), res.timings, res.message)
            except (sqlite3.Error, OSError):
                pass  # the store cannot be written: the next cycle marks this one interrupted
            store.close()


def _shadow_leftovers(ours: Mapping[tuple[str, str], str], s: Settings) -> list[str]:
    """A shadow cycle tends nothing in Slurm: the plan file a live cycle left goes (the submit
    plugin stops steering now, not at the file's expiry), and what live cycles still hold is
    said. It is given back by the failsafe once the last *live* cycle is ``fail_open_after_s``
    old (shadow cycles do not reset that clock) or by ``revert`` at once."""
    try:
        s.plan_path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only directory: the plugin ignores the file past its expiry anyway
    if not ours:
        return []
    return [f"shadow mode: {len(ours)} field(s) of pending jobs are still set by earlier live cycles; "
            f"the failsafe gives them back {s.fail_open_after_s:.0f} s after the last live cycle "
            "(fail_open_after_s), or run `slurm-fair revert` now"]


def _begin(store: StateStore, res: CycleResult, s: Settings, started: float) -> None:
    """Cycles a killed process left running are interrupted; this one starts; the store is
    pruned at most once an hour."""
    for cycle_id in store.interrupt_stale(started):
        res.warnings.append(f"cycle {cycle_id} was interrupted (the process ended before it finished); "
                            "this cycle settles what it left")
    store.start_cycle(res.cycle_id, started, s.policy, res.dry_run, s.mode)
    last = float(store.get_meta("last_prune_at") or 0.0)
    if started - last >= PRUNE_EVERY_S:
        store.prune(started - s.keep_days * DAY_S)
        store.set_meta("last_prune_at", repr(started))


def _take(res: CycleResult, d: Decision) -> None:
    for name, secs in d.timings.items():
        res.timings[name] = res.timings.get(name, 0.0) + secs
    res.warnings += d.warnings
    res.estimates = dict(d.observed.estimates)
    res.left_out = dict(d.observed.built.left_out)
    res.message = d.message
    res.plan = d.plan
    res.planned = list(d.actions)
    if d.plan is None:
        res.status, res.exit_code = "policy-failed", 1
    elif res.dry_run:
        res.status = "dry-run" if d.allocation is not None else "dry-run-policy-failed"
        res.exit_code = 0 if d.allocation is not None else 1


def _live(port: SlurmPort, config: Config, store: StateStore, audit: AuditLog, res: CycleResult, d: Decision,
          whole: Snapshot, clock: Callable[[], float], timer: Timer, stop: Callable[[], bool]) -> None:
    """Apply the decision's actions: their intents go to the audit log first (a killed cycle
    leaves a trace), then the writes (each job field's intent in the store before it,
    :mod:`.apply`), then the outcomes."""
    plan = d.plan

    def requeued(a: Action) -> None:
        j = a.job
        store.record_requeue(j, res.cycle_id, d.now, a.before, tuple(a.params.get("for") or ()),
                             "move-up" if a.params.get("to_type") else "make-room", a.params.get("to_type"))

    _store_step(lambda: audit.write([{"ts": clock(), "cycle": res.cycle_id, "dry_run": False, "intent": True,
                                      **a.to_dict()} for a in res.planned]))
    with timer.phase("apply"):
        try:
            res.results = apply(res.planned, port, whole, store, res.cycle_id, clock(),
                                workers=int(config["slurm"]["parallel_calls"]), stop=stop, on_requeue=requeued)
        finally:
            _store_step(lambda: audit.write([{"ts": clock(), "cycle": res.cycle_id, "dry_run": False,
                                              **r.to_dict()} for r in res.results]))
    managed = store.managed_qos()
    if managed:
        done = finished_qos(managed, res.results, {q.name for q in whole.qos})

        def forget() -> None:
            for name in done:
                store.forget_qos(name)

        _store_step(forget)
    c = counts(res.results)
    if any(r.error.startswith("not attempted: interrupted") for r in res.results):
        res.status, res.exit_code = "interrupted", 1
        res.message = (res.message + "; " if res.message else "") + (
            f"stopped by a signal after {c['applied']} of {c['actions']} actions; the next cycle or revert "
            "completes it")
    elif c["failed"]:
        res.status, res.exit_code = "partial", 1
        res.message = (res.message + "; " if res.message else "") + (
            f"{c['failed']} of {c['actions']} actions failed, {c['applied']} applied, "
            f"{c['skipped']} skipped (see the actions)"
        )
    elif d.allocation is None or plan is None:
        res.status, res.exit_code = "policy-failed", 1
    else:
        res.status = "ok"


def _store_step(fn: Callable[[], object]) -> None:
    """A write to the state store or the audit log; a full disk or a read-only file system is
    a :class:`StateWriteError` (the cycle is recorded failed where it still can be, and the loop
    goes on), never a traceback."""
    try:
        fn()
    except StateWriteError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise StateWriteError("the controller state (state_dir / audit_log)", str(exc)) from None


def unknown_accounts(snapshot: Snapshot, accounts: tuple[str, ...]) -> list[str]:
    """A warning per ``[controller].accounts`` entry that Slurm does not know (a misspelt
    ``physcis`` would otherwise manage nothing, silently), with a did-you-mean against Slurm's
    accounts. A warning, not a refusal: accounts are created and removed while the controller
    runs, so an entry may become valid at the next cycle; nothing is said when Slurm listed
    no account and no job (nothing to compare against)."""
    known = sorted({a.name for a in snapshot.accounts} | {j.account for j in snapshot.jobs})
    if not accounts or not known:
        return []
    out = []
    for name in accounts:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"[controller].accounts: {name!r} is not a Slurm account{hint}; it is not managed")
    if len(out) == len(accounts):
        out.append("[controller].accounts names no Slurm account: this cycle manages no job")
    return out


def _record(store: StateStore, res: CycleResult, d: Decision, snapshot: Snapshot,
            s: Settings, ds: DecideSettings, clock: Callable[[], float]) -> None:
    """Phase 7: what the decision observed (estimates, service, sightings, refusals, the
    policy's memory), the decisions for ``explain`` and the reports, and the plan (a shadow
    cycle keeps its plan too, for ``report --shadow``; only a live one writes the plan file)."""
    obs, now = d.observed, d.now
    store.save_online(obs.online)
    store.add_received(res.cycle_id, now, obs.tenant_service)
    store.add_job_service(obs.job_service)
    store.see_jobs(obs.running, now)
    store.set_meta("last_snapshot_at", repr(now))
    for job_id, (k, part) in obs.refused.items():
        store.refuse_type(job_id, k, part, now)
    if d.policy_state is not None:  # dynamic policies keep memory in options.state: its plain
        # JSON entries are persisted (oef's in-process memo is not, its equilibrium prices are)
        store.set_meta(policy_state_key(s.policy), json.dumps(_plain_json(d.policy_state)))
    plan = d.plan
    if plan is None:
        return
    if d.allocation is not None and d.placement is not None:
        _record_decisions(store, res.cycle_id, d, snapshot)
        if d.round_boundary:
            store.set_meta("round_started_at", repr(now))
    if res.status == "ok":
        store.save_plan(res.cycle_id, now, plan.to_dict())
        if s.mode == "live":
            assert d.pilot is not None
            entries = planfile.plan_entries(plan, snapshot, ds.table, {p.name: p for p in d.pilot.whole.partitions},
                                            s.accounts)
            planfile.write(
                s.plan_path,
                planfile.render(entries, now, max(3 * s.interval_s, 180.0), res.cycle_id),
            )


def _record_decisions(store: StateStore, cycle_id: str, d: Decision, snapshot: Snapshot) -> None:
    assert d.allocation is not None and d.placement is not None and d.plan is not None
    built, plan = d.observed.built, d.plan
    by_id = {j.job_id: j for j in snapshot.jobs}
    placed, deficit = d.placement.types, d.placement.priority
    rows = []
    for j in built.problem.jobs:
        e = d.observed.estimates.get(j.id)
        jp = plan.jobs.get(j.id)
        rows.append({
            "job_id": j.id, "tenant": j.tenant, "state": by_id[j.id].state, "gpus": j.gpus,
            "class": e.klass if e else None,
            "estimate": {
                "throughput": dict(j.throughput), "class_source": e.class_source if e else None,
                # the runs behind each learned / failing number (explain: "learned (3 runs)")
                "runs": dict(e.runs) if e else {},
                # how the type is enforced: fixed (the job's own), a partition, or the gres request
                "fixed_type": built.fixed_type.get(j.id),
                "partition": jp.partition if jp else None, "pin_gres": bool(jp and jp.gpu_type),
            },
            "sources": dict(e.sources) if e else {},
            "allocation": {k: float(v) for k, v in d.allocation.x.get(j.id, {}).items()},
            "placed_type": placed.get(j.id), "deficit": float(deficit.get(j.id, 0.0)),
            "planned_type": (jp.planned_type or jp.gpu_type) if jp else None,
            "rank": jp.rank if jp else None,
        })
    store.record_jobs(cycle_id, rows)
    store.record_tenants(cycle_id, [
        {"tenant": t, "weight": tp.weight, "fair_share": dict(tp.fair_share), "bundle": dict(tp.bundle),
         "limits": {}}
        for t, tp in plan.tenants.items()
    ])


def _plain_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a policy state that are plain JSON (one entry that is not no longer
    drops the whole state)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        out[key] = value
    return out
