"""Phase 6b: carry out the actions through the port, recording each one's outcome.

Rules, so a plan is never half-applied *silently* and never left where ``revert`` cannot undo it:

* before a job field is written, the state store holds the field's value then and the value
  being written (the *intent*, :mod:`.state.fields`); after the write, the intent is confirmed,
  dropped when Slurm refused the write, and kept *in doubt* for a while when Slurm did not
  answer in time (the write may still happen: slurmctld carries out a request it got before it
  stalled, :data:`.state.fields.IN_DOUBT_S`). A process killed
  between the two leaves an intent the next cycle or ``revert`` settles by reading Slurm
  (:func:`.ownership.reconcile`). If the store cannot
  be written (a full disk, a read-only file system), nothing more is written to Slurm;
* a give-back that worked returns the field to the site (its row goes);
* a job that ended or vanished (:class:`JobGone`) is *skipped*: not a failure, and the job's
  remaining actions are skipped too;
* a failing command marks that action failed (exit 1);
* a requeue made for waiting jobs (make room, the displacement right: ``params["for"]``) is not
  carried out when none of them waits any more: Slurm started them elsewhere (or they ended)
  between the snapshot and this write, and the GPUs freed would go to whoever comes next, not
  to them (each taker is read once, ``squeue -j``, right before its first requeue);
* when Slurm becomes unreachable mid-way, or a stop is requested (SIGTERM, SIGINT), nothing
  further is attempted and every remaining action is reported as not attempted.

Job changes of one kind and value go to Slurm in one ``scontrol update JobId=a,b,c`` per few
hundred jobs (:mod:`..slurm.batch`), two such calls in flight, GPU requests too where Slurm replaces one in one update
(>= 23.11); their intents are stored first, in one transaction, and each job's outcome is read
from Slurm's answer for that job. Node lists, which Slurm takes for one job per call, go one job
at a time, their intents stored together first. Changes to accounting (older versions' QOS,
given back: :mod:`.legacy`) run a few at a time.
"""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import JobGone, SlurmError, SlurmUnavailable, StateWriteError
from ..slurm.batch import BATCH_JOBS
from ..slurm.model import Snapshot
from ..slurm.port import SlurmPort
from .diff import Action
from .ownership import current
from .state import StateStore
from .state.fields import IN_DOUBT_S


@dataclass(frozen=True)
class ActionResult:
    action: Action
    applied: bool
    skipped: bool = False
    error: str = ""
    #: the write may have happened (Slurm did not answer in time): its intent stays in the
    #: store for the next cycle or revert to settle from what Slurm then shows
    uncertain: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**self.action.to_dict(), "applied": self.applied, "skipped": self.skipped, "error": self.error}


#: job actions carried out for many jobs at once: kind -> the ``scontrol update`` field it sets
_BATCHED = {"set_job_qos": "QOS", "set_partition": "Partition", "set_nice": "Nice", "set_site_factor": "SiteFactor"}
#: job actions grouped like those of ``_BATCHED`` but sent through the port's GPU request methods
_GPU = "set_gpu_type"
#: job actions Slurm takes one job per call: their intents are stored together, then one call each
_ONE_BY_ONE = ("set_nodes",)
#: changes to accounting: independent between tenants, so run side by side
_ACCOUNTING = ("restore_default_qos", "detach_qos", "clear_qos_limits", "delete_qos")
#: ``scontrol update JobId=<list>`` calls in flight at once: slurmctld carries out each under its
#: job write lock, but reads and unpacks the next meanwhile (2 calls: ~25 % less wall time than
#: one at a time on the testbed, 4 no better than 2; docs/slurm-adapter.md)
JOB_CALLS = 2
#: sacctmgr calls in flight at once (each waits on slurmdbd round trips, not on CPU)
DEFAULT_WORKERS = 8


def _call(port: SlurmPort, action: Action) -> None:
    """One action that is not sent in a group (``_batched``)."""
    k, p = action.kind, action.params
    if k == "set_nodes":  # one job per call: scontrol refuses a node list for several jobs
        port.update_job(action.job, {"ReqNodeList": p["nodes"]})
    elif k == "set_priority":
        port.set_priority(action.job, None)
    elif k == "requeue":
        port.requeue(action.job)
    elif k == "restore_default_qos":
        port.attach_qos(p["account"], p["qos"], default=True)
    elif k == "detach_qos":
        port.detach_qos(p["account"], p["qos"])
    elif k == "clear_qos_limits":
        port.ensure_qos(p["qos"], dict(p["limits"]), exists=True)
    elif k == "delete_qos":
        port.delete_qos(p["qos"])
    else:  # pragma: no cover - diff and legacy only produce the kinds above and those of _batched
        raise ValueError(f"unknown action kind {k!r}")


def _batch_value(action: Action) -> str:
    p = action.params
    if action.kind == "set_job_qos":
        return str(p["qos"])
    if action.kind == "set_partition":
        return str(p["partition"])
    return str(int(action.after))


class _Run:
    """The bookkeeping one :func:`apply` keeps between actions."""

    def __init__(self, snapshot: Snapshot, store: StateStore | None, cycle_id: str, now: float,
                 stop: Callable[[], bool], on_requeue: Callable[[Action], None] | None,
                 on_store_error: Callable[[str], None] | None = None) -> None:
        self.jobs = {j.job_id: j for j in snapshot.jobs}
        self.store, self.cycle_id, self.now = store, cycle_id, now
        self.on_store_error = on_store_error
        self.stop, self.on_requeue = stop, on_requeue
        self.gone: set[str] = set()
        self.not_requeued: set[str] = set()
        #: takers of requeues read from Slurm this run: job -> still pending
        self.waiting: dict[str, bool] = {}
        self.failed_jobs_qos: set[str] = set()
        self.halted = ""

    def precheck(self, action: Action) -> ActionResult | None:
        """The result of an action that is not attempted at all (None: attempt it)."""
        if not self.halted and self.stop():
            self.halted = "interrupted (SIGTERM/SIGINT): the next cycle or revert completes it"
        if self.halted:
            return ActionResult(action, False, False, f"not attempted: {self.halted}")
        if action.job and action.job in self.gone:
            return ActionResult(action, False, True, "job ended")
        if action.job in self.not_requeued and action.params.get("after_requeue"):
            return ActionResult(action, False, True, "not requeued: still running")
        if action.kind == "delete_qos":
            if action.params.get("running"):
                return ActionResult(action, False, True, "kept without limits: running jobs "
                                    f"{', '.join(action.params['running'])} still carry it")
            if action.params["qos"] in self.failed_jobs_qos:
                return ActionResult(action, False, False, "not attempted: pending jobs still carry it")
        return None

    def intend(self, actions: list[Action]) -> bool:
        """Record the intents of ``actions`` (job fields) before they are written; False (and
        the run halted) when the store cannot be written."""
        rows = []
        for a in actions:
            job = self.jobs.get(a.job)
            # an adopted give-back (a job we never wrote: the submit plugin's, or a job that
            # got an older version's QOS as its default) has no row: nothing to settle later
            if a.field and job is not None and a.kind != "set_priority" and not a.params.get("adopted"):
                rows.append((a.job, a.field, job.account, current(job, a.field) or "", a.params["value"]))
        return self._store(lambda s: s.record_intents(rows, self.cycle_id, self.now))

    def _store(self, fn: Callable[[StateStore], None]) -> bool:
        if self.store is None:
            return True
        try:
            fn(self.store)
        except (sqlite3.Error, OSError) as exc:
            if self.on_store_error is not None:  # a give-back: it goes on, unrecorded
                self.store = None
                self.on_store_error(f"the state store cannot be written ({exc}): the give-back goes on "
                                    "without recording it (the next cycle or revert settles the rows from Slurm)")
                return True
            self.halted = f"the state store cannot be written ({exc}): nothing more is changed in Slurm"
            raise StateWriteError(str(self.store.path), str(exc)) from None
        return True

    def outcome(self, action: Action, exc: BaseException | None) -> ActionResult:
        """The result of an attempted action from the error it raised (None: applied)."""
        if exc is None:
            result = ActionResult(action, True)
        elif isinstance(exc, JobGone):
            self.gone.add(action.job)
            result = ActionResult(action, False, True, f"job ended: {exc}")
        elif isinstance(exc, SlurmUnavailable):
            self.halted = str(exc)
            result = ActionResult(action, False, False, str(exc), uncertain=True)
        elif isinstance(exc, (SlurmError, ValueError)):
            # ValueError: the adapter refused a name or value before running anything
            result = ActionResult(action, False, False, str(exc))
        else:  # pragma: no cover - anything else is a bug and propagates
            raise exc
        if action.kind == "requeue" and not result.applied:
            self.not_requeued.add(action.job)
        if action.kind == "set_job_qos" and not result.applied and not result.skipped:
            self.failed_jobs_qos.add(str(action.before))
        return result

    def settle(self, results: list[ActionResult]) -> None:
        """After the writes: confirm applied intents, forget given-back fields, drop failed
        intents; record applied requeues."""
        fields = [(r, (r.action.job, str(r.action.field))) for r in results if r.action.field and r.action.job]
        back = [key for r, key in fields if r.applied and r.action.params.get("give_back")]
        done = [key for r, key in fields if r.applied and not r.action.params.get("give_back")]
        # a write Slurm refused did not happen: its intent goes; one that timed out may still
        # happen (slurmctld carries it out when it resumes, not in order): in doubt for a while
        failed = [key for r, key in fields if not r.applied and not r.uncertain]
        doubted = [key for r, key in fields if r.uncertain]
        at = max(self.now, time.time())

        def record(s: StateStore) -> None:
            s.confirm(done, self.now)
            s.given_back(back, at)
            s.drop_intents(failed)
            s.in_doubt(doubted, at + IN_DOUBT_S)

        self._store(record)
        for r in results:
            if r.applied and r.action.kind == "requeue" and self.on_requeue:
                self._store(lambda s, a=r.action: self.on_requeue(a))  # type: ignore[misc]


def apply(
    actions: list[Action],
    port: SlurmPort,
    snapshot: Snapshot,
    store: StateStore | None,
    cycle_id: str,
    now: float,
    on_result: Callable[[ActionResult], None] | None = None,
    workers: int = DEFAULT_WORKERS,
    stop: Callable[[], bool] = lambda: False,
    on_requeue: Callable[[Action], None] | None = None,
    on_store_error: Callable[[str], None] | None = None,
) -> list[ActionResult]:
    """Run ``actions`` in order; one result per action, in the same order.

    Actions come sorted by kind (:func:`..diff.diff`), and a run of one kind is carried out as a
    whole: accounting changes with up to ``workers`` sacctmgr calls in flight, job changes of one
    kind grouped by value into one ``scontrol update`` per group (their intents stored first, in
    one transaction). Order between kinds, and so every rule of the module docstring, is kept.
    ``store`` None: nothing is recorded (a failsafe without a writable store still lifts what
    keeps GPUs idle). Raises :class:`StateWriteError` when the store cannot be written; what ran
    until then is in Slurm and in the store's intents. With ``on_store_error`` (revert and the
    failsafe: only give-backs, which need no record to be undone, since a field back at its
    original settles itself) a store that cannot be written is said to it once and the actions
    go on unrecorded: a full disk never keeps a GPU idle.
    """
    st = _Run(snapshot, store, cycle_id, now, stop, on_requeue, on_store_error)
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
        if kind in _ACCOUNTING:
            _accounting(st, port, actions, run, done, max(1, workers))
        elif kind in _BATCHED or kind == _GPU:
            _batched(st, port, actions, run, done)
        elif kind in _ONE_BY_ONE:
            _one_by_one(st, port, actions, run, done)
        else:
            for k in run:
                _one(st, port, actions[k], k, done)
        st.settle([results[k] for k in run if results[k] is not None])  # type: ignore[misc]
        i = j
    return [r for r in results if r is not None]


def _attempt(st: _Run, port: SlurmPort, action: Action) -> BaseException | None:
    try:
        _call(port, action)
    except (SlurmError, ValueError) as exc:
        return exc
    return None


def _one(st: _Run, port: SlurmPort, action: Action, index: int, done: Callable[[int, ActionResult], None]) -> None:
    skip = st.precheck(action)
    if skip is None and action.kind == "requeue":
        skip = _takers_started(st, port, action)
    if skip is not None:
        done(index, skip)
        return
    st.intend([action])
    done(index, st.outcome(action, _attempt(st, port, action)))


def _takers_started(st: _Run, port: SlurmPort, action: Action) -> ActionResult | None:
    """A requeue made for waiting jobs none of which waits any more (module docstring): its
    skipped result; None when one still waits, when it was made for none (a move up), or when
    Slurm cannot say (then the plan is carried out as made)."""
    takers = [str(t) for t in action.params.get("for") or ()]
    if not takers:
        return None
    for t in takers:
        if t not in st.waiting:
            if t in st.gone:  # its own steer found it no longer pending
                st.waiting[t] = False
                continue
            try:
                st.waiting[t] = port.job_outlook(t).state == "PENDING"
            except JobGone:
                st.waiting[t] = False
            except (SlurmError, ValueError):
                return None
        if st.waiting[t]:
            return None
    st.not_requeued.add(action.job)
    return ActionResult(action, False, True, f"not requeued: the jobs it made room for ({', '.join(takers)}) "
                        "no longer wait (started or ended since the snapshot)")


def _accounting(st: _Run, port: SlurmPort, actions: list[Action], run: list[int],
                done: Callable[[int, ActionResult], None], workers: int) -> None:
    todo = _attempted(st, actions, run, done)
    if workers == 1 or len(todo) <= 1:
        errors = [_attempt(st, port, actions[k]) for k in todo]
    else:
        with ThreadPoolExecutor(min(workers, len(todo)), thread_name_prefix="slurm-fair-acct") as pool:
            errors = list(pool.map(lambda k: _attempt(st, port, actions[k]), todo))
    for k, exc in zip(todo, errors):
        done(k, st.outcome(actions[k], exc))


def _group_key(action: Action) -> tuple[str, str]:
    """Actions with the same key are one change, sent for all their jobs at once."""
    p = action.params
    if action.kind == _GPU:
        if p.get("raw") is not None and p.get("give_back"):
            return ("restore", str(p["raw"]))
        return ("type", str(p.get("gpu_type")))
    return (_BATCHED[action.kind], _batch_value(action))


def _send(st: _Run, port: SlurmPort, group: list[Action]) -> dict[str, BaseException]:
    """One group's change through the port; the jobs it did not change, with their errors."""
    first = group[0]
    if first.kind != _GPU:
        field, value = _group_key(first)
        return dict(port.update_jobs([a.job for a in group], {field: value}))
    failed: dict[str, BaseException] = {a.job: ValueError(f"job {a.job} is not in the snapshot")
                                        for a in group if a.job not in st.jobs}
    known = [a for a in group if a.job in st.jobs]
    if first.params.get("raw") is not None and first.params.get("give_back"):
        failed.update(port.restore_gpu_requests([(st.jobs[a.job], str(a.params["raw"])) for a in known]))
    else:
        failed.update(port.set_gpu_types([(st.jobs[a.job], a.params.get("gpu_type")) for a in known]))
    return failed


def _attempted(st: _Run, actions: list[Action], members: list[int],
               done: Callable[[int, ActionResult], None]) -> list[int]:
    """The members to attempt; the others get their result (skipped, not attempted) now."""
    todo = []
    for k in members:
        skip = st.precheck(actions[k])
        if skip is not None:
            done(k, skip)
        else:
            todo.append(k)
    return todo


def _batched(st: _Run, port: SlurmPort, actions: list[Action], run: list[int],
             done: Callable[[int, ActionResult], None]) -> None:
    """Each group of one change a chunk (the port's chunk size) per Slurm call, with
    :data:`JOB_CALLS` calls in flight: the intents of the calls about to be made are stored
    first, the outcomes after, and a stop (SIGTERM) is honoured between two rounds of calls."""
    groups: dict[tuple[str, str], list[int]] = {}
    for k in run:
        groups.setdefault(_group_key(actions[k]), []).append(k)
    chunks = [members[i:i + BATCH_JOBS] for members in groups.values() for i in range(0, len(members), BATCH_JOBS)]
    for start in range(0, len(chunks), JOB_CALLS):
        todos = [t for t in (_attempted(st, actions, c, done) for c in chunks[start:start + JOB_CALLS]) if t]
        if not todos:
            continue
        st.intend([actions[k] for todo in todos for k in todo])
        calls = [[actions[k] for k in todo] for todo in todos]
        if len(calls) == 1:
            answers = [_sent(st, port, calls[0])]
        else:
            with ThreadPoolExecutor(len(calls), thread_name_prefix="slurm-fair-jobs") as pool:
                answers = list(pool.map(lambda group: _sent(st, port, group), calls))
        for todo, failed in zip(todos, answers):
            for k in todo:
                done(k, st.outcome(actions[k], failed.get(actions[k].job)))


def _sent(st: _Run, port: SlurmPort, group: list[Action]) -> dict[str, BaseException]:
    """:func:`_send`, with a failure of the whole call (Slurm unreachable, a refused value) as
    every job's error."""
    try:
        return _send(st, port, group)
    except (SlurmError, ValueError) as exc:
        return {a.job: exc for a in group}


def _one_by_one(st: _Run, port: SlurmPort, actions: list[Action], run: list[int],
                done: Callable[[int, ActionResult], None]) -> None:
    """Intents of the whole run in one transaction, then one call per action (a stop or an
    unreachable Slurm halts the rest: :meth:`_Run.precheck`)."""
    todo = _attempted(st, actions, run, done)
    st.intend([actions[k] for k in todo])
    for k in todo:
        skip = st.precheck(actions[k])
        done(k, skip if skip is not None else st.outcome(actions[k], _attempt(st, port, actions[k])))


def counts(results: list[ActionResult]) -> dict[str, int]:
    return {
        "actions": len(results),
        "applied": sum(r.applied for r in results),
        "skipped": sum(r.skipped for r in results),
        "failed": sum(1 for r in results if not r.applied and not r.skipped),
    }
