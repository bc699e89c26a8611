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

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import JobGone, SlurmError, SlurmUnavailable
from ..slurm.model import Snapshot, SlurmJob
from ..slurm.parse.fields import fold_hostlist
from ..slurm.port import SlurmPort
from .diff import Action
from .state import StateStore
from .state.originals import ManagedQos, OriginalRequest
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
        partition=submitted_partition(job), qos=job.qos, req_nodes=fold_hostlist(job.req_nodes),
    )


def _call(port: SlurmPort, action: Action, job: SlurmJob | None, exists: bool | None = None) -> None:
    k, p = action.kind, action.params
    if k == "ensure_qos":
        port.ensure_qos(p["qos"], dict(action.after), exists=exists)
    elif k == "attach_qos":
        port.attach_qos(p["account"], p["qos"], default=True)
    elif k == "set_job_qos":
        port.update_job(action.job, {"QOS": p["qos"]})
    elif k == "set_partition":
        port.update_job(action.job, {"Partition": p["partition"]})
    elif k == "set_gpu_type":
        assert job is not None
        port.set_gpu_type(job, action.after)
    elif k == "set_nodes":  # one job per call: scontrol refuses a node list for several jobs
        port.update_job(action.job, {"ReqNodeList": p["nodes"]})
    elif k == "set_nice":
        port.set_nice(action.job, int(action.after))
    elif k == "set_priority":
        port.set_priority(action.job, None if action.after is None else int(action.after))
    elif k == "requeue":
        port.requeue(action.job)
    else:  # pragma: no cover - diff only produces the kinds above
        raise ValueError(f"unknown action kind {k!r}")


#: job actions carried out for many jobs at once: kind -> the ``scontrol update`` field it sets
_BATCHED = {"set_job_qos": "QOS", "set_partition": "Partition", "set_nice": "Nice", "set_priority": "Priority"}
#: per-tenant accounting changes: independent between tenants, so run side by side
_PER_TENANT = ("ensure_qos", "attach_qos")
#: sacctmgr calls in flight at once (each waits on slurmdbd round trips, not on CPU)
DEFAULT_WORKERS = 8


class _Run:
    """The bookkeeping one :func:`apply` keeps between actions."""

    def __init__(self, snapshot: Snapshot, store: StateStore, cycle_id: str, now: float) -> None:
        self.jobs = {j.job_id: j for j in snapshot.jobs}
        self.qos_now = {q.name: q for q in snapshot.qos}
        self.accounts = {a.name: a for a in snapshot.accounts}
        self.store, self.cycle_id, self.now = store, cycle_id, now
        self.gone: set[str] = set()
        self.not_requeued: set[str] = set()
        self.failed_qos: set[str] = set()
        self.unavailable = ""

    def precheck(self, action: Action) -> ActionResult | None:
        """The result of an action that is not attempted at all (None: attempt it)."""
        if self.unavailable:
            return ActionResult(action, False, False, f"not attempted: {self.unavailable}")
        if action.job and action.job in self.gone:
            return ActionResult(action, False, True, "job ended")
        if action.job in self.not_requeued and action.params.get("after_requeue"):
            return ActionResult(action, False, True, "not requeued: still running")
        if action.kind == "set_job_qos" and action.params.get("qos") in self.failed_qos:
            return ActionResult(action, False, False, "not attempted: its QOS could not be set up")
        return None

    def remember(self, action: Action) -> None:
        """What ``revert`` needs, stored before the write (one job or one QOS)."""
        job = self.jobs.get(action.job) if action.job else None
        if job is not None and action.kind != "requeue":
            self.store.record_original(original_of(job), self.cycle_id, self.now)
        if action.kind in _PER_TENANT:
            name = action.params["qos"]
            acct = self.accounts.get(action.tenant)
            prev = self.qos_now.get(name)
            self.store.record_qos(
                ManagedQos(
                    name, action.tenant, prev is not None,
                    bool(acct and name in acct.qos), acct.default_qos if acct else "",
                    dict(prev.grp_tres) if prev else {},
                ),
                self.now,
            )

    def attempt(self, port: SlurmPort, action: Action) -> BaseException | None:
        """Carry out one action; the error it raised (None: it worked). Safe from threads."""
        job = self.jobs.get(action.job) if action.job else None
        try:
            _call(port, action, job, action.params.get("qos") in self.qos_now)
        except (SlurmError, ValueError) as exc:
            return exc
        return None

    def outcome(self, action: Action, exc: BaseException | None) -> ActionResult:
        """The result of an attempted action from the error it raised (None: applied)."""
        if exc is None:
            result = ActionResult(action, True)
        elif isinstance(exc, JobGone):
            self.gone.add(action.job)
            result = ActionResult(action, False, True, f"job ended: {exc}")
        elif isinstance(exc, SlurmUnavailable):
            self.unavailable = str(exc)
            result = ActionResult(action, False, False, str(exc))
        elif isinstance(exc, (SlurmError, ValueError)):
            # ValueError: the adapter refused a name or value before running anything
            if action.kind in _PER_TENANT:
                self.failed_qos.add(action.params["qos"])
            result = ActionResult(action, False, False, str(exc))
        else:  # pragma: no cover - anything else is a bug and propagates
            raise exc
        if action.kind == "requeue" and not result.applied:
            self.not_requeued.add(action.job)
        return result


def apply(
    actions: list[Action],
    port: SlurmPort,
    snapshot: Snapshot,
    store: StateStore,
    cycle_id: str,
    now: float,
    on_result: Callable[[ActionResult], None] | None = None,
    workers: int = DEFAULT_WORKERS,
) -> list[ActionResult]:
    """Run ``actions`` in order; one result per action, in the same order.

    Actions come sorted by kind (:func:`..diff.diff`), and a run of one kind is carried out
    as a whole: per-tenant QOS changes with up to ``workers`` sacctmgr calls in flight (they
    touch different tenants; each costs slurmdbd round trips, ~0.2-0.5 s on the testbed), and
    job changes of one kind grouped by value into one ``scontrol update`` per group (the
    originals of the whole group are stored first, in one transaction). Thousands of pending
    jobs then cost a few calls instead of one per job and field. Order between kinds, and so
    every rule of the module docstring, is kept.
    """
    st = _Run(snapshot, store, cycle_id, now)
    results: list[ActionResult | None] = [None] * len(actions)

    def done(i: int, result: ActionResult) -> None:
        results[i] = result
        if on_result:
            on_result(result)

    i = 0
    while i < len(actions):
        j = i
        while j < len(actions) and actions[j].kind == actions[i].kind and \
                bool(actions[j].params.get("after_requeue")) == bool(actions[i].params.get("after_requeue")):
            j += 1
        run = list(range(i, j))
        kind = actions[i].kind
        if kind in _PER_TENANT:
            _per_tenant(st, port, actions, run, done, max(1, workers))
        elif kind in _BATCHED:
            _batched(st, port, actions, run, done)
        else:
            for k in run:
                _one(st, port, actions[k], k, done)
        i = j
    return [r for r in results if r is not None]


def _one(st: _Run, port: SlurmPort, action: Action, index: int, done: Callable[[int, ActionResult], None]) -> None:
    skip = st.precheck(action)
    if skip is not None:
        done(index, skip)
        return
    st.remember(action)
    done(index, st.outcome(action, st.attempt(port, action)))


def _per_tenant(st: _Run, port: SlurmPort, actions: list[Action], run: list[int],
                done: Callable[[int, ActionResult], None], workers: int) -> None:
    todo: list[int] = []
    for k in run:
        skip = st.precheck(actions[k])
        if skip is not None:
            done(k, skip)
        else:
            st.remember(actions[k])  # the store is written from this thread only
            todo.append(k)
    if workers == 1 or len(todo) <= 1:
        errors = [st.attempt(port, actions[k]) for k in todo]
    else:
        with ThreadPoolExecutor(min(workers, len(todo)), thread_name_prefix="slurm-fair-qos") as pool:
            errors = list(pool.map(lambda k: st.attempt(port, actions[k]), todo))
    for k, exc in zip(todo, errors):
        done(k, st.outcome(actions[k], exc))


def _batch_value(action: Action) -> str | None:
    """The value a batched action sets (None: this one goes alone)."""
    if action.kind == "set_job_qos":
        return str(action.params["qos"])
    if action.kind == "set_partition":
        return str(action.params["partition"])
    if action.after is None:  # set_priority None: back to multifactor (hold + release, per job)
        return None
    return str(int(action.after))


def _batched(st: _Run, port: SlurmPort, actions: list[Action], run: list[int],
             done: Callable[[int, ActionResult], None]) -> None:
    groups: dict[str, list[int]] = {}
    for k in run:
        value = _batch_value(actions[k])
        if value is None:
            _one(st, port, actions[k], k, done)
        else:
            groups.setdefault(value, []).append(k)
    for value, members in groups.items():
        todo = []
        for k in members:
            skip = st.precheck(actions[k])
            if skip is not None:
                done(k, skip)
            else:
                todo.append(k)
        if not todo:
            continue
        st.store.record_originals(
            [original_of(st.jobs[actions[k].job]) for k in todo if actions[k].job in st.jobs], st.cycle_id, st.now)
        field = _BATCHED[actions[todo[0]].kind]
        try:
            failed: dict[str, BaseException] = dict(port.update_jobs([actions[k].job for k in todo], {field: value}))
        except (SlurmError, ValueError) as exc:  # the whole group: unreachable, or a refused value
            failed = {actions[k].job: exc for k in todo}
        for k in todo:
            done(k, st.outcome(actions[k], failed.get(actions[k].job)))


def counts(results: list[ActionResult]) -> dict[str, int]:
    return {
        "actions": len(results),
        "applied": sum(r.applied for r in results),
        "skipped": sum(r.skipped for r in results),
        "failed": sum(1 for r in results if not r.applied and not r.skipped),
    }

