"""``slurm-fair revert``: put Slurm back as if slurm-fair had never run.

From the state store, for every job we rewrote that is still pending, and for every pending
job whose partitions the submit plugin chose (its admin comment records what it asked for): its original GPU request
(the raw string, so the form ``--gres``/``--gpus`` comes back too; only ever changed where Slurm
can undo it), its original partition (the default steering), its QOS, its nice value, and
its priority handed back to priority/multifactor when we had fixed it. Jobs that ended are
skipped (nothing to restore); running jobs cannot be changed by Slurm and are reported.

Then every QOS we created or changed: the account's previous default QOS is restored, our QOS
is detached from the account when the account did not have it before, its limits are removed,
and a QOS we created is deleted (a QOS still used by running jobs cannot be deleted: it is kept
without limits and reported, and ``revert`` can be run again later). The plan file is removed
so the submit plugin stops steering new jobs.

Each step is recorded in the audit log (``kind`` prefixed ``revert_``); the exit code is 1 when
anything could not be restored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import Config
from ..errors import JobGone, SlurmError, SlurmUnavailable
from ..slurm.port import SlurmPort
from .audit import AuditLog
from .cycle import Settings, in_scope, new_cycle_id
from .lock import ControllerLock
from .plan import is_gpu_tres
from .state import StateStore
from .steer import submitted_partition


@dataclass
class RevertResult:
    cycle_id: str
    steps: list[dict[str, Any]] = field(default_factory=list)

    dry_run: bool = False

    @property
    def failed(self) -> list[dict[str, Any]]:
        if self.dry_run:  # nothing was attempted
            return [s for s in self.steps if s["error"] and not s["skipped"]]
        return [s for s in self.steps if not s["applied"] and not s["skipped"]]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        return {"cycle": self.cycle_id, "dry_run": self.dry_run, "exit_code": self.exit_code,
                "steps": self.steps, "failed": len(self.failed)}


def revert(port: SlurmPort, config: Config, *, dry_run: bool = False,
           clock: Callable[[], float] = time.time) -> RevertResult:
    """Undo everything recorded in the state store (see the module docstring)."""
    s = Settings.from_config(config)
    lock = None if dry_run else ControllerLock(s.state_dir)
    if lock:
        lock.acquire()
    try:
        with StateStore.in_dir(s.state_dir) as store:
            return _revert(port, store, AuditLog(s.audit_log), s, dry_run, clock)
    finally:
        if lock:
            lock.release()


def _revert(port: SlurmPort, store: StateStore, audit: AuditLog, s: Settings, dry_run: bool,
            clock: Callable[[], float]) -> RevertResult:
    res = RevertResult("revert-" + new_cycle_id(clock()), dry_run=dry_run)
    snapshot = in_scope(port.snapshot(), s.accounts)  # SlurmUnavailable: nothing done, exit 1
    jobs = {j.job_id: j for j in snapshot.jobs}
    prioritised = {
        str(e.get("job")) for e in audit.entries() if e.get("kind") == "set_priority" and e.get("applied")
    }
    down = ""

    def step(kind: str, tenant: str, job: str, before: Any, after: Any, fn: Callable[[], None] | None) -> bool:
        nonlocal down
        entry = {"kind": "revert_" + kind, "tenant": tenant, "job": job, "target": job or tenant,
                 "before": before, "after": after, "applied": False, "skipped": False, "error": ""}
        if fn is None:
            entry["skipped"] = True
        elif down:
            entry["error"] = f"not attempted: {down}"
        elif not dry_run:
            try:
                fn()
                entry["applied"] = True
            except JobGone as exc:
                entry["skipped"], entry["error"] = True, f"job ended: {exc}"
            except SlurmUnavailable as exc:
                down = str(exc)
                entry["error"] = down
            except (SlurmError, ValueError) as exc:
                entry["error"] = str(exc)
        res.steps.append(entry)
        return bool(entry["applied"] or entry["skipped"])

    for job_id, orig in sorted(store.originals().items()):
        job = jobs.get(job_id)
        if job is None:
            step("job", orig.account, job_id, None, None, None)
            res.steps[-1]["error"] = "job ended"
            if not dry_run:
                store.forget_original(job_id)
            continue
        if not job.pending:
            step("job", orig.account, job_id, job.state, None, None)
            res.steps[-1]["error"] = f"{job.state.lower()}: Slurm cannot change it"
            continue
        ok = True
        req = job.gpu_request
        if orig.gres_raw and req is not None and (req.raw != orig.gres_raw or req.gpu_type != orig.gpu_type):
            ok &= step("gpu_request", orig.account, job_id, req.raw, orig.gres_raw,
                       lambda j=job, raw=orig.gres_raw: port.restore_gpu_request(j, raw))
        if orig.partition and job.partition != orig.partition:
            ok &= step("partition", orig.account, job_id, job.partition, orig.partition,
                       lambda: port.update_job(job_id, {"Partition": orig.partition}))
        if orig.qos and job.qos != orig.qos:
            ok &= step("qos", orig.account, job_id, job.qos, orig.qos,
                       lambda: port.update_job(job_id, {"QOS": orig.qos}))
        if job.nice != orig.nice:
            ok &= step("nice", orig.account, job_id, job.nice, orig.nice,
                       lambda: port.set_nice(job_id, orig.nice))
        if job_id in prioritised:
            ok &= step("priority", orig.account, job_id, job.priority, "multifactor",
                       lambda: port.set_priority(job_id, None))
        if ok and not dry_run:
            store.forget_original(job_id)

    # jobs only the submit plugin touched: their partition back to what they asked for
    recorded = store.originals()
    for job_id, job in sorted(jobs.items()):
        asked = submitted_partition(job)
        if job_id in recorded or not job.pending or asked == job.partition:
            continue
        step("partition", job.account, job_id, job.partition, asked,
             lambda j=job_id, p=asked: port.update_job(j, {"Partition": p}))

    accounts = {a.name: a for a in snapshot.accounts}
    qos_now = {q.name: q for q in snapshot.qos}
    for name, m in sorted(store.managed_qos().items()):
        ok = True
        acct = accounts.get(m.account)
        if acct is not None and acct.default_qos == name and m.prev_default_qos:
            ok &= step("default_qos", m.account, "", name, m.prev_default_qos,
                       lambda: port.attach_qos(m.account, m.prev_default_qos, default=True))
        if acct is not None and name in acct.qos and not m.account_had_qos:
            ok &= step("detach_qos", m.account, "", name, None, lambda: port.detach_qos(m.account, name))
        current = qos_now.get(name)
        if current is not None:
            if m.existed_before:
                ours = {k: m.prev_grp_tres.get(k) for k in current.grp_tres if is_gpu_tres(k)}
                if any(current.grp_tres.get(k) != v for k, v in ours.items()):
                    ok &= step("qos_limits", m.account, "", dict(current.grp_tres), ours,
                               lambda: port.ensure_qos(name, ours))
            else:
                limits = {k: None for k in current.grp_tres if is_gpu_tres(k)}
                if limits:
                    ok &= step("qos_limits", m.account, "", dict(current.grp_tres), None,
                               lambda: port.ensure_qos(name, limits))
                ok &= step("delete_qos", m.account, "", name, None, lambda: port.delete_qos(name))
        if ok and not dry_run:
            store.forget_qos(name)

    if not dry_run:
        s.plan_path.unlink(missing_ok=True)
        now = clock()
        audit.write([{"ts": now, "cycle": res.cycle_id, "dry_run": False, **e} for e in res.steps])
    return res
