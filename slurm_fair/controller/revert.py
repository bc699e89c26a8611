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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import Config
from ..errors import JobGone, SlurmError, SlurmUnavailable
from ..slurm.parse.fields import fold_hostlist
from ..slurm.port import SlurmPort
from .audit import AuditLog
from .cycle import new_cycle_id
from .decide import in_scope
from .lock import ControllerLock
from .plan.limits import is_gpu_tres
from .settings import Settings
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
        # a dry run reads the store read-only: it never creates, migrates or writes it
        opened = (StateStore.read_only(StateStore.existing(s.state_dir, "revert to undo")) if dry_run
                  else StateStore.in_dir(s.state_dir))
        with opened as store:
            return _revert(port, store, AuditLog(s.audit_log), s, dry_run, clock,
                           workers=int(config["slurm"]["parallel_calls"]))
    finally:
        if lock:
            lock.release()


#: job fields restored for many jobs at once, in this order: step kind -> scontrol field
_JOB_FIELDS = (("partition", "Partition"), ("qos", "QOS"), ("nice", "Nice"))


def _revert(port: SlurmPort, store: StateStore, audit: AuditLog, s: Settings, dry_run: bool,
            clock: Callable[[], float], workers: int = 8) -> RevertResult:
    res = RevertResult("revert-" + new_cycle_id(clock()), dry_run=dry_run)
    snapshot = in_scope(port.snapshot(), s.accounts)  # SlurmUnavailable: nothing done, exit 1
    jobs = {j.job_id: j for j in snapshot.jobs}
    prioritised = {
        str(e.get("job")) for e in audit.entries() if e.get("kind") == "set_priority" and e.get("applied")
    }
    down = ""

    def entry(kind: str, tenant: str, job: str, before: Any, after: Any) -> dict[str, Any]:
        return {"kind": "revert_" + kind, "tenant": tenant, "job": job, "target": job or tenant,
                "before": before, "after": after, "applied": False, "skipped": False, "error": ""}

    def settle(e: dict[str, Any], exc: BaseException | None) -> bool:
        """Fill in the outcome of an attempted step (``exc`` None: it worked)."""
        nonlocal down
        if exc is None:
            e["applied"] = True
        elif isinstance(exc, JobGone):
            e["skipped"], e["error"] = True, f"job ended: {exc}"
        elif isinstance(exc, SlurmUnavailable):
            down = str(exc)
            e["error"] = down
        else:
            e["error"] = str(exc)
        return bool(e["applied"] or e["skipped"])

    def run(e: dict[str, Any], fn: Callable[[], None] | None) -> bool:
        """One step: skipped (fn None), not attempted (Slurm down), listed (dry run) or done."""
        if fn is None:
            e["skipped"] = True
        elif down:
            e["error"] = f"not attempted: {down}"
        elif not dry_run:
            try:
                fn()
            except (SlurmError, ValueError) as exc:
                return settle(e, exc)
            return settle(e, None)
        return bool(e["applied"] or e["skipped"])

    def step(kind: str, tenant: str, job: str, before: Any, after: Any, fn: Callable[[], None] | None,
             into: list[dict[str, Any]] | None = None) -> bool:
        e = entry(kind, tenant, job, before, after)
        (res.steps if into is None else into).append(e)
        return run(e, fn)

    ok: dict[str, bool] = {}
    # field -> original value -> [(job, tenant, current value)]: one scontrol call per group
    batches: dict[str, dict[str, list[tuple[str, str, Any]]]] = {kind: {} for kind, _ in _JOB_FIELDS}
    for job_id, orig in sorted(store.originals().items()):
        job = jobs.get(job_id)
        if job is None:
            step("job", orig.account, job_id, None, None, None)
            res.steps[-1]["error"] = "job ended"
            ok[job_id] = True
            continue
        if not job.pending:
            step("job", orig.account, job_id, job.state, None, None)
            res.steps[-1]["error"] = f"{job.state.lower()}: Slurm cannot change it"
            continue
        ok[job_id] = True
        req = job.gpu_request
        if orig.gres_raw and req is not None and (req.raw != orig.gres_raw or req.gpu_type != orig.gpu_type):
            ok[job_id] &= step("gpu_request", orig.account, job_id, req.raw, orig.gres_raw,
                               lambda j=job, raw=orig.gres_raw: port.restore_gpu_request(j, raw))
        if orig.partition and job.partition != orig.partition:
            batches["partition"].setdefault(orig.partition, []).append((job_id, orig.account, job.partition))
        if orig.qos and job.qos != orig.qos:
            batches["qos"].setdefault(orig.qos, []).append((job_id, orig.account, job.qos))
        if fold_hostlist(job.req_nodes) != orig.req_nodes:
            ok[job_id] &= step("nodes", orig.account, job_id, fold_hostlist(job.req_nodes), orig.req_nodes,
                               lambda j=job_id, n=orig.req_nodes: port.update_job(j, {"ReqNodeList": n}))
        if job.nice != orig.nice:
            batches["nice"].setdefault(str(int(orig.nice)), []).append((job_id, orig.account, job.nice))
    for kind, fld in _JOB_FIELDS:
        for value, members in batches[kind].items():
            after: Any = int(value) if kind == "nice" else value
            entries = [entry(kind, tenant, job_id, before, after) for job_id, tenant, before in members]
            res.steps.extend(entries)
            if down or dry_run:
                for e in entries:
                    run(e, lambda: None)
                continue
            try:
                failed: dict[str, BaseException] = dict(port.update_jobs([m[0] for m in members], {fld: value}))
            except (SlurmError, ValueError) as exc:
                failed = {m[0]: exc for m in members}
            for e, (job_id, _, _) in zip(entries, members):
                ok[job_id] &= settle(e, failed.get(job_id))
    for job_id in sorted(prioritised & set(ok)):
        job = jobs.get(job_id)
        if job is not None and job.pending:
            ok[job_id] &= step("priority", job.account, job_id, job.priority, "multifactor",
                               lambda j=job_id: port.set_priority(j, None))
    if not dry_run:
        store.forget_originals(j for j, good in ok.items() if good)

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

    def undo_qos(name: str, m: Any) -> tuple[list[dict[str, Any]], bool]:
        """The steps of one managed QOS (run beside other tenants'; touches no store)."""
        steps: list[dict[str, Any]] = []
        good = True
        acct = accounts.get(m.account)
        if acct is not None and acct.default_qos == name and m.prev_default_qos:
            good &= step("default_qos", m.account, "", name, m.prev_default_qos,
                         lambda: port.attach_qos(m.account, m.prev_default_qos, default=True), steps)
        if acct is not None and name in acct.qos and not m.account_had_qos:
            good &= step("detach_qos", m.account, "", name, None, lambda: port.detach_qos(m.account, name), steps)
        current = qos_now.get(name)
        if current is not None:
            if m.existed_before:
                ours = {k: m.prev_grp_tres.get(k) for k in current.grp_tres if is_gpu_tres(k)}
                if any(current.grp_tres.get(k) != v for k, v in ours.items()):
                    good &= step("qos_limits", m.account, "", dict(current.grp_tres), ours,
                                 lambda: port.ensure_qos(name, ours, exists=True), steps)
            else:
                limits = {k: None for k in current.grp_tres if is_gpu_tres(k)}
                if limits:
                    good &= step("qos_limits", m.account, "", dict(current.grp_tres), None,
                                 lambda: port.ensure_qos(name, limits, exists=True), steps)
                good &= step("delete_qos", m.account, "", name, None, lambda: port.delete_qos(name), steps)
        return steps, good

    managed = sorted(store.managed_qos().items())
    if dry_run or workers <= 1 or len(managed) <= 1:
        outcomes = [undo_qos(name, m) for name, m in managed]
    else:  # tenants are independent; each step waits on slurmdbd round trips
        with ThreadPoolExecutor(min(workers, len(managed)), thread_name_prefix="slurm-fair-revert") as pool:
            outcomes = list(pool.map(lambda item: undo_qos(*item), managed))
    for (name, _), (steps, good) in zip(managed, outcomes):
        res.steps.extend(steps)
        if good and not dry_run:
            store.forget_qos(name)

    if not dry_run:
        s.plan_path.unlink(missing_ok=True)
        now = clock()
        audit.write([{"ts": now, "cycle": res.cycle_id, "dry_run": False, **e} for e in res.steps])
    return res
