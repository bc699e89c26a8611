"""``slurm-fair failsafe``: fail open when the controller has stopped.

The rendered cron entry / systemd timer runs it every minute beside the loop. While the loop
completes cycles it does nothing. Once no cycle has completed for ``[controller]
fail_open_after_s`` (the loop crashed, was killed -9, hangs, or its host is down and the
failsafe runs on another host sharing the state directory), it gives back everything the
controller holds in Slurm, exactly as ``revert`` does (:func:`.revert.give_back_all`): jobs
steered to one GPU type's partition go back to the partitions they asked for (so an idle GPU of
another type can take them), node pins and site-factor pushes are lifted, and what versions
before 0.2 set (QOS limits) is given back. The store's memory (service received, estimates)
stays, so a loop that comes back resumes where it was. The plan file is removed, so the submit
plugin stops steering (it also ignores a plan past its own expiry).

A loop that is stuck holding the lock cannot block the failsafe: when the lock is held and no
cycle has completed for that long, the failsafe goes on without it and says so. Two failsafe runs
never give back side by side (a slow one and the next minute's): each first takes the failsafe's
own lock (:class:`.lock.FailsafeLock`), and a run that finds it held does nothing.

It fails open, depending on nothing that fails with the controller: a full disk or a read-only
state directory (the store is read read-only, every record is best effort,
:func:`.revert.open_for_give_back`), a Slurm without ``sprio`` (``PriorityType=priority/basic``,
or sprio failing: the snapshot carries no site factors and recorded ones are given back as
recorded), the policy stack (this module and :mod:`.revert` import nothing of the cycle).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import Config
from ..errors import LockHeld, UserError
from ..slurm.port import SlurmPort
from .audit import AuditLog
from .lock import ControllerLock, FailsafeLock
from .revert import RevertResult, give_back_all, open_for_give_back, remove_plan_file
from .settings import Settings
from .state import DB_NAME, StateStore
from .state.identity import check_store


@dataclass
class FailsafeResult:
    """What the failsafe found and did (``lifted`` None: nothing needed lifting)."""

    message: str
    last_cycle_age_s: float | None = None
    lifted: RevertResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.lifted.exit_code if self.lifted is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "last_cycle_age_s": self.last_cycle_age_s, "notes": self.notes,
                "lifted": self.lifted.to_dict() if self.lifted is not None else None,
                "exit_code": self.exit_code}


def failsafe(port: SlurmPort, config: Config, *, dry_run: bool = False, clock: Callable[[], float] = time.time,
             stop: Callable[[], bool] = lambda: False) -> FailsafeResult:
    """Lift everything the controller set once it has not completed a cycle for
    ``fail_open_after_s`` (module docstring); a no-op otherwise."""
    s = Settings.from_config(config, policies=False)
    path = Path(s.state_dir) / DB_NAME
    if not check_store(path):
        return FailsafeResult(f"no controller state at {path}: slurm-fair has set nothing; nothing to lift")
    one = FailsafeLock(s.state_dir)
    taken = None if dry_run else one.acquire()
    if taken is False:
        return FailsafeResult(f"another failsafe run holds {s.state_dir} (it is giving back now): nothing done")
    try:
        res = _failsafe(port, config, s, path, dry_run, clock, stop)
    finally:
        one.release()
    if taken is None and not dry_run:
        res.notes.append(f"cannot lock {s.state_dir} against another failsafe run (no flock there); went on alone")
    return res


def _failsafe(port: SlurmPort, config: Config, s: Settings, path: Path, dry_run: bool,
              clock: Callable[[], float], stop: Callable[[], bool]) -> FailsafeResult:
    now = clock()
    with StateStore.read_only(path) as ro:
        last = ro.last_completed_at()
        owned, managed = ro.owned(), ro.managed_qos()
    age = None if last is None else max(0.0, now - last)
    if age is not None and age < s.fail_open_after_s:
        return FailsafeResult(f"the controller completed a cycle {age:.0f} s ago (fail_open_after_s "
                              f"{s.fail_open_after_s:.0f}): nothing to do", age)
    when = "never" if age is None else f"{age:.0f} s ago"
    held = not owned and not managed and not s.plan_path.exists()
    if held and last is None:
        # a controller that only ever ran shadow cycles (the weeks before going live): nothing
        # of its in Slurm, no plan file for the submit plugin, so no reading of Slurm each minute
        return FailsafeResult("no live cycle has completed and the controller holds nothing in Slurm: "
                              "nothing to lift")
    lock = None if dry_run else ControllerLock(s.state_dir)
    notes = []
    if lock is not None:
        try:
            lock.acquire()
        except LockHeld as exc:
            lock = None
            notes.append(f"{exc.message()}; it completed no cycle for that long, so the failsafe goes on without "
                         "the lock")
        except UserError as exc:  # a read-only state directory without a lock file
            lock = None
            notes.append(f"{exc.message()}; the failsafe goes on without it")
    try:
        if dry_run:
            opened, writable = StateStore.read_only(path), False
        else:
            opened, writable = open_for_give_back(s.state_dir, notes)
        with opened as store:
            res = give_back_all(port, store, AuditLog(s.audit_log), "failsafe", dry_run, clock,
                                int(config["slurm"]["parallel_calls"]), stop, writable=writable)
        notes += res.notes
        if not dry_run and not res.failed:
            remove_plan_file(s.plan_path, notes)
    finally:
        if lock is not None:
            lock.release()
    n = len([x for x in res.steps if x["applied"] or (dry_run and not x["skipped"])])
    if held and not n:
        msg = f"the controller last completed a cycle {when}; it holds nothing in Slurm: nothing to lift"
    else:
        verb = "would give back" if dry_run else "gave back"
        msg = (f"the controller last completed a cycle {when} (fail_open_after_s {s.fail_open_after_s:.0f}): "
               f"{verb} {n} change(s)")
    return FailsafeResult(msg, age, res, notes)
