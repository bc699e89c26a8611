"""``slurm-fair revert`` (and ``failsafe``): give back everything slurm-fair holds in Slurm.

Revert is a plan applied by the same machinery as a cycle (:mod:`.apply`): the actions that put
back every field the controller still holds on a pending job (:func:`.diff.give_backs`: its
partition, GPU request, node list, site factor, and the QOS, nice and priority versions before
0.2 set), the partition of every pending job the submit plugin moved (its admin comment records
what it asked for), and what versions before 0.2 changed in accounting, in the order that never
strands a job (:mod:`.legacy`). A field someone else changed after the controller is theirs and
is left as they set it; a running job cannot be changed (Slurm refuses) and is reported; a job
that ended needs nothing.

Every intent is in the audit log and the state store before its write, so a revert stopped by
SIGTERM/SIGINT (or killed) leaves a state the next revert completes. Both fail open: when the
state directory cannot be written (a full disk, a read-only file system) the store is read
read-only and the give-back goes on unrecorded, each record being best effort (said in
``notes``): a give-back puts a field back to its original, which the next reading of Slurm
settles by itself (:func:`.ownership.reconcile`), so no record is needed to undo it. Neither
needs ``sprio`` (a site factor Slurm did not show is given back as recorded), nor anything of
the cycle (the policies, the solver). Afterwards revert reads
Slurm again and checks every job it touched and every job carrying something slurm-fair made:
its QOS, partitions and account exist, and nothing of the controller's is left on a pending
job. The exit code is 1, naming each, when anything could not be given back.

``failsafe`` (:mod:`.failsafe`) runs the same give-back when the loop has not finished a cycle
for ``[controller] fail_open_after_s``; it keeps the store's memory (service, estimates).
"""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import Config
from ..errors import LockHeld, SlurmError, UserError
from ..slurm.model import Snapshot
from ..slurm.port import SlurmPort
from .apply import ActionResult, apply
from .asked import Request, requests
from .audit import AuditLog, new_cycle_id
from .diff import Action, give_backs, order, routed_back
from .legacy import finished_qos, legacy_actions
from .lock import ControllerLock
from .ownership import reconcile
from .scope import settled
from .settings import Settings
from .state import DB_NAME, StateStore
from .state.identity import check_store


@dataclass
class RevertResult:
    cycle_id: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False
    #: what the check after the give-back found still wrong (job or object: why)
    problems: list[str] = field(default_factory=list)
    #: records that could not be written (the give-back went on without them)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        if self.dry_run:  # nothing was attempted
            return [s for s in self.steps if s["error"] and not s["skipped"]]
        return [s for s in self.steps if not s["applied"] and not s["skipped"]]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.problems else 0

    def to_dict(self) -> dict[str, Any]:
        return {"cycle": self.cycle_id, "dry_run": self.dry_run, "exit_code": self.exit_code,
                "steps": self.steps, "failed": len(self.failed), "problems": self.problems, "notes": self.notes}


def revert(port: SlurmPort, config: Config, *, dry_run: bool = False,
           clock: Callable[[], float] = time.time, stop: Callable[[], bool] = lambda: False,
           notify: Callable[[str], None] = lambda _m: None,
           sleep: Callable[[float], None] = time.sleep) -> RevertResult:
    """Give back everything recorded in the state store (see the module docstring)."""
    s = Settings.from_config(config, policies=False)
    lock = None if dry_run else ControllerLock(s.state_dir)
    notes: list[str] = []
    if lock:
        try:
            lock.acquire()
        except LockHeld:
            raise
        except UserError as exc:  # no lock file and a directory nobody can write: no one else locks either
            lock = None
            notes.append(f"{exc.message()}; going on without it")
    try:
        # a dry run reads the store read-only: it never creates, migrates or writes it
        if dry_run:
            opened, writable = StateStore.read_only(StateStore.existing(s.state_dir, "revert to undo")), False
        else:
            opened, writable = open_for_give_back(s.state_dir, notes)
        with opened as store:
            res = give_back_all(port, store, AuditLog(s.audit_log), "revert", dry_run, clock,
                                int(config["slurm"]["parallel_calls"]), stop, sleep, notify, writable)
        res.notes[:0] = notes
        if not dry_run and not res.failed:
            remove_plan_file(s.plan_path, res.notes)  # the submit plugin stops steering new jobs
        return res
    finally:
        if lock:
            lock.release()


def open_for_give_back(state_dir: Path, notes: list[str]) -> tuple[StateStore, bool]:
    """The store to give back from, and whether it can be written: read-only (a note says why)
    when the state directory cannot be written, so a full disk or a read-only file system
    never stops a give-back. A missing store that cannot be created is the UserError it was."""
    try:
        return StateStore.in_dir(state_dir), True
    except UserError as exc:
        path = Path(state_dir) / DB_NAME
        if not check_store(path):
            raise
        try:
            ro = StateStore.read_only(path)
        except sqlite3.Error:
            raise exc from None
        notes.append(f"{exc.message()}: it is read read-only and the give-back goes on without recording")
        return ro, False


def remove_plan_file(path: Path, notes: list[str]) -> None:
    """The submit plugin stops steering new jobs (it also ignores a plan past its expiry, so a
    file that cannot be removed is a note, not a failure)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        notes.append(f"cannot remove the plan file {path} ({exc.strerror or exc}); the submit plugin "
                     "ignores it once it is past its expiry")


class _Records:
    """The records of one give-back, each best effort when the store is not ``writable``
    (module docstring): a write that fails is said once in ``notes`` and no more are tried."""

    def __init__(self, store: StateStore, audit: AuditLog, writable: bool, notes: list[str]) -> None:
        self.store, self.audit, self.notes = store, audit, notes
        self.store_ok, self.audit_ok = writable, True

    def to_store(self, fn: Callable[[StateStore], object]) -> None:
        if not self.store_ok:
            return
        try:
            fn(self.store)
        except (sqlite3.Error, OSError) as exc:
            self.store_failed(f"the state store cannot be written ({exc}): the give-back goes on without recording")

    def store_failed(self, note: str) -> None:
        self.store_ok = False
        self.notes.append(note)

    def to_audit(self, entries: list[Mapping[str, Any]]) -> None:
        if not self.audit_ok:
            return
        try:
            self.audit.write(entries)
        except OSError as exc:
            self.audit_ok = False
            self.notes.append(f"the audit log {self.audit.path} cannot be written ({exc.strerror or exc}): "
                              "the give-back goes on without it")


def marked_jobs(snapshot: Snapshot, asked: Mapping[str, Request]) -> list[Action]:
    """Pending jobs the submit plugin moved and nobody moved since, that the controller holds
    no partition row of (:attr:`.asked.Request.routed`): back to what they asked for. A job
    its user moved after the plugin stays where they put it."""
    out = []
    for job in snapshot.jobs:
        req = asked.get(job.job_id)
        if job.pending and req is not None and req.routed:
            out.append(routed_back(job, req))
    return out


def give_back_all(port: SlurmPort, store: StateStore, audit: AuditLog, label: str, dry_run: bool,
                  clock: Callable[[], float], workers: int = 8,
                  stop: Callable[[], bool] = lambda: False, sleep: Callable[[float], None] = time.sleep,
                  notify: Callable[[str], None] = lambda _m: None, writable: bool = True) -> RevertResult:
    """Revert's work on an open store (``label``: ``revert`` or ``failsafe``, the audit kind
    prefix); raises SlurmUnavailable (nothing done) when Slurm cannot be read. ``writable``
    False: the store was opened read-only; nothing is recorded in it (module docstring), and any
    record that fails on a writable one is skipped from then on.

    A write that timed out may still land in Slurm for a while (:mod:`.state.fields`): when
    any is in doubt after the give-back, it waits (``notify`` says so; a stop ends the wait)
    until none can land any more, then gives back what landed meanwhile."""
    res = RevertResult(f"{label}-" + new_cycle_id(clock()), dry_run=dry_run)
    rec = _Records(store, audit, writable and not dry_run, res.notes)
    managed = store.managed_qos()
    touched = _give_back_pass(port, rec, label, res, clock, workers, stop)
    if dry_run:
        return res
    doubts = [r for r in store.owned().values() if r.doubt_open(clock()) is not None]
    if doubts and not stop():
        left = max(r.doubt_until for r in doubts) - clock()
        notify(f"{label}: {len(doubts)} write(s) that Slurm did not answer in time may still land; "
               f"waiting {max(0.0, left):.0f} s to give back any that do")
        while left > 0 and not stop():
            step = min(1.0, left)
            sleep(step)
            left -= step
        if not stop():
            # what shows a doubted value now landed within its doubt: read as of its end
            ends = min(r.doubt_until for r in doubts) - 1e-3
            touched |= _give_back_pass(port, rec, label, res, clock, workers, stop, ends)
    res.problems = check(port, store, managed, touched, clock())
    return res


def _give_back_pass(port: SlurmPort, rec: _Records, label: str, res: RevertResult,
                    clock: Callable[[], float], workers: int, stop: Callable[[], bool],
                    before: float | None = None) -> set[str]:
    """Read Slurm, settle the rows as of ``clock()`` (or ``before`` when earlier), and give
    back what the controller holds (steps into ``res``); the jobs it acted on."""
    dry_run, store = res.dry_run, rec.store
    read_at = clock() if before is None else min(before, clock())
    snapshot = port.snapshot()
    owned = store.owned()
    reading = reconcile(owned, {j.job_id: j for j in snapshot.jobs}, read_at)
    rows = settled(owned, reading)
    managed = store.managed_qos()
    if not dry_run:
        settled_at = clock()
        rec.to_store(lambda st: st.settle(reading.updates, settled_at))
        rec.to_store(lambda st: st.forget_fields(reading.ended))
    asked = requests(snapshot.jobs, rows)
    actions = sorted(give_backs(snapshot, rows, reading.ours, asked) + marked_jobs(snapshot, asked)
                     + legacy_actions(snapshot, managed, rows), key=order)
    jobs = {j.job_id: j for j in snapshot.jobs}
    for (job_id, name), row in sorted(rows.items()):
        job = jobs.get(job_id)
        if job is not None and not job.pending and not row.released and (job_id, name) in reading.ours:
            res.steps.append(_step(label, "job", row.account, job_id, row.written, row.original, skipped=True,
                                   error=f"{job.state.lower()}: Slurm cannot change it; given back when "
                                         "it is pending again, or needs nothing once it ends"))
    if dry_run:
        res.steps += [_step(label, a.kind, a.tenant, a.job, a.before, a.after) for a in actions]
        return set()
    now = clock()
    rec.to_audit([{"ts": now, "cycle": res.cycle_id, "dry_run": False, "intent": True,
                   **_prefixed(label, a.to_dict())} for a in actions])
    results: list[ActionResult] = []
    try:
        results = apply(actions, port, snapshot, store if rec.store_ok else None, res.cycle_id, now,
                        workers=workers, stop=stop, on_store_error=rec.store_failed)
    finally:
        done = [_prefixed(label, r.to_dict()) for r in results]
        res.steps += done
        rec.to_audit([{"ts": clock(), "cycle": res.cycle_id, "dry_run": False, **e} for e in done])
    for name in finished_qos(managed, results, {q.name for q in snapshot.qos}):
        rec.to_store(partial(_forget_qos, name=name))
    return {a.job for a in actions if a.job}


def check(port: SlurmPort, store: StateStore, managed: dict[str, Any], touched: set[str], at: float) -> list[str]:
    """Read Slurm again: every job touched and every job carrying something slurm-fair made
    must be able to run (its QOS, partitions and account exist), no pending job may keep a
    field of the controller's, and no write of one may still be in doubt at ``at`` (a stop
    ended the wait). One line per problem."""
    try:
        snap = port.snapshot()
    except SlurmError as exc:
        return [f"cannot read Slurm to check the result: {exc}"]
    problems = []
    qos = {q.name for q in snap.qos}
    parts = {p.name for p in snap.partitions} | {p for n in snap.nodes for p in n.partitions}
    accounts = {a.name for a in snap.accounts}
    for j in snap.jobs:
        if j.job_id not in touched and j.qos not in managed:
            continue  # the site's own jobs: not revert's to judge
        if qos and j.qos and j.qos not in qos:
            problems.append(f"job {j.job_id}: its QOS {j.qos} does not exist")
        elif j.qos in managed and j.pending:
            problems.append(f"job {j.job_id}: still carries {j.qos}, a QOS an older slurm-fair made")
        missing = [p for p in j.partition.split(",") if p and parts and p not in parts]
        if missing:
            problems.append(f"job {j.job_id}: partition {','.join(missing)} does not exist")
        if accounts and j.account not in accounts:
            problems.append(f"job {j.job_id}: account {j.account} does not exist")
    pending = {j.job_id for j in snap.jobs if j.pending}
    owned = store.owned()
    # judged from Slurm, not from the rows alone: a give-back the store could not record
    # (a full disk) shows the original again, which is no problem
    ours = reconcile(owned, {j.job_id: j for j in snap.jobs}, at).ours
    for (job_id, name), row in sorted(owned.items()):
        if job_id not in pending or row.released:
            continue
        if (job_id, name) in ours:
            problems.append(f"job {job_id}: its {name} is still slurm-fair's ({ours[(job_id, name)]}; "
                            f"was {row.original or '-'})")
        elif row.doubt_open(at) is not None:
            problems.append(f"job {job_id}: a write of its {name} ({row.doubt}) that Slurm did not answer "
                            f"in time may still land for {row.doubt_until - at:.0f} s; run revert again then")
    for a in snap.accounts:
        if a.default_qos in managed:
            problems.append(f"account {a.name}: its default QOS is still {a.default_qos}")
    return problems


def _forget_qos(store: StateStore, name: str) -> None:
    store.forget_qos(name)


def _prefixed(label: str, d: dict[str, Any]) -> dict[str, Any]:
    return {**d, "kind": f"{label}_{d['kind']}"}


def _step(label: str, kind: str, tenant: str, job: str, before: Any, after: Any, skipped: bool = False,
          error: str = "") -> dict[str, Any]:
    return {"kind": f"{label}_{kind}", "tenant": tenant, "job": job, "target": job or tenant,
            "before": before, "after": after, "applied": False, "skipped": skipped, "error": error}
