"""Phase 6b: carry out the actions through the port, recording each one's outcome.

Rules, so a plan is never half-applied *silently*:

* before the first write to a job, its original request is in the state store (``revert`` needs
  it, and a crash right after the write must not lose it); likewise a QOS and its account's
  previous settings before slurm-fair first changes them;
* a job that ended or vanished (:class:`JobGone`) is *skipped*: not a failure, and the job's
  remaining actions are skipped too;
* a failing command marks that action failed and the cycle partial (exit 1); when a QOS could
  not be set up, the job moves into it are not attempted;
* when Slurm becomes unreachable mid-way, nothing further is attempted and every remaining
  action is reported as not applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import JobGone, SlurmError, SlurmUnavailable
from ..model import Snapshot, SlurmJob
from ..slurm.port import SlurmPort
from .diff import Action
from .state import ManagedQos, OriginalRequest, StateStore
from .steer import submitted_partition


@dataclass(frozen=True)
class ActionResult:
    action: Action
    applied: bool
    skipped: bool = False
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.action.to_dict(), "applied": self.applied, "skipped": self.skipped, "error": self.error}


def original_of(job: SlurmJob) -> OriginalRequest:
    req = job.gpu_request
    return OriginalRequest(
        job_id=job.job_id, account=job.account, gres_raw=req.raw if req else "",
        gpu_type=req.gpu_type if req else None, gpu_count=req.count if req else 0,
        gpu_per=req.per if req else "node", priority=job.priority, nice=job.nice,
        # what the user asked for, also when the submit plugin already chose the partitions
        partition=submitted_partition(job), qos=job.qos,
    )


def _call(port: SlurmPort, action: Action, job: SlurmJob | None) -> None:
    k, p = action.kind, action.params
    if k == "ensure_qos":
        port.ensure_qos(p["qos"], dict(action.after))
    elif k == "attach_qos":
        port.attach_qos(p["account"], p["qos"], default=True)
    elif k == "set_job_qos":
        port.update_job(action.job, {"QOS": p["qos"]})
    elif k == "set_partition":
        port.update_job(action.job, {"Partition": p["partition"]})
    elif k == "set_gpu_type":
        assert job is not None
        port.set_gpu_type(job, action.after)
    elif k == "set_nice":
        port.set_nice(action.job, int(action.after))
    elif k == "set_priority":
        port.set_priority(action.job, int(action.after))
    elif k == "requeue":
        port.requeue(action.job)
    else:  # pragma: no cover - diff only produces the kinds above
        raise ValueError(f"unknown action kind {k!r}")


def apply(
    actions: list[Action],
    port: SlurmPort,
    snapshot: Snapshot,
    store: StateStore,
    cycle_id: str,
    now: float,
    on_result: Callable[[ActionResult], None] | None = None,
) -> list[ActionResult]:
    """Run ``actions`` in order; one result per action, in the same order."""
    jobs = {j.job_id: j for j in snapshot.jobs}
    qos_now = {q.name: q for q in snapshot.qos}
    accounts = {a.name: a for a in snapshot.accounts}
    results: list[ActionResult] = []
    gone: set[str] = set()
    not_requeued: set[str] = set()
    failed_qos: set[str] = set()
    unavailable = ""
    for action in actions:
        if unavailable:
            results.append(ActionResult(action, False, False, f"not attempted: {unavailable}"))
            continue
        if action.job and action.job in gone:
            results.append(ActionResult(action, False, True, "job ended"))
            continue
        if action.job in not_requeued and action.params.get("after_requeue"):
            results.append(ActionResult(action, False, True, "not requeued: still running"))
            continue
        if action.kind == "set_job_qos" and action.params.get("qos") in failed_qos:
            results.append(ActionResult(action, False, False, "not attempted: its QOS could not be set up"))
            continue
        job = jobs.get(action.job) if action.job else None
        if job is not None and action.kind != "requeue":
            store.record_original(original_of(job), cycle_id, now)
        if action.kind in ("ensure_qos", "attach_qos"):
            name = action.params["qos"]
            acct = accounts.get(action.tenant)
            prev = qos_now.get(name)
            store.record_qos(
                ManagedQos(
                    name, action.tenant, prev is not None,
                    bool(acct and name in acct.qos), acct.default_qos if acct else "",
                    dict(prev.grp_tres) if prev else {},
                ),
                now,
            )
        try:
            _call(port, action, job)
        except JobGone as exc:
            gone.add(action.job)
            result = ActionResult(action, False, True, f"job ended: {exc}")
        except SlurmUnavailable as exc:
            unavailable = str(exc)
            result = ActionResult(action, False, False, str(exc))
        except (SlurmError, ValueError) as exc:
            # ValueError: the adapter refused a name or value before running anything
            if action.kind in ("ensure_qos", "attach_qos"):
                failed_qos.add(action.params["qos"])
            result = ActionResult(action, False, False, str(exc))
        else:
            result = ActionResult(action, True)
        if action.kind == "requeue" and not result.applied:
            not_requeued.add(action.job)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def counts(results: list[ActionResult]) -> dict[str, int]:
    return {
        "actions": len(results),
        "applied": sum(r.applied for r in results),
        "skipped": sum(r.skipped for r in results),
        "failed": sum(1 for r in results if not r.applied and not r.skipped),
    }

