"""One replay run: prepare, start the controller, submit on time, wait, clean up, score.

:meth:`Replay.run` is the only entry; whatever way a run ends (finished, timed out, failed, or
interrupted by SIGINT/SIGTERM/SIGHUP) its :meth:`Replay._cleanup` has run exactly once before
it returns or raises. The package docstring (:mod:`slurm_fair.testbed.replay`) says what a run
does, step by step.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from ...estimates import gavel as tt
from ...errors import UserError
from ...sim.workload import load_traces
from ...slurm.model import AccountingRecord
from . import submit
from .controller import ControllerProcess
from .interrupt import Cleanup, Interrupted, SignalGuard, end_reason
from .plan import ReplayJob, ReplaySpec, check_fits, default_timeout, node_layout, plan_jobs, tenant_map
from .score import job_row, read_accounting, read_checkpoints, score, tenant_fairness

Say = Callable[[str], None]

#: real seconds to wait for cancelled jobs to leave squeue's active states before reverting
#: (revert counts a job it rewrote that still runs as not restored)
CANCEL_WAIT_S = 30.0


@dataclass
class ReplayResult:
    doc: dict[str, Any]
    jobs: list[ReplayJob] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, Any]:
        return self.doc["metrics"]


@dataclass(frozen=True)
class Progress:
    """Where a run is, for a person watching it (``make demo`` replays for minutes)."""

    #: trace seconds since the run's start (real seconds x the time scale)
    trace_s: float
    jobs: int
    submitted: int
    done: int
    #: controller cycles so far (0 for Slurm alone)
    cycles: int


class Replay:
    """One replay against one testbed (``tb``: a :class:`~slurm_fair.testbed.Testbed`)."""

    def __init__(self, tb: Any, spec: ReplaySpec, say: Say | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 progress: Callable[[Progress], None] | None = None) -> None:
        if spec.job_python is None and getattr(tb, "job_python", None):
            spec = dataclasses.replace(spec, job_python=tb.job_python)
        self.tb, self.spec = tb, spec
        self.say: Say = say or (lambda _m: None)
        self.clock, self.sleep = clock, sleep
        self.progress = progress
        self.controller = ControllerProcess(tb, spec)
        #: Slurm job id -> job, for everything sbatch accepted in this run
        self.submitted: dict[str, ReplayJob] = {}
        #: set by the first (and only) cleanup of the run
        self.cleanup: Cleanup | None = None
        self._guard = SignalGuard(signals=())  # replaced by the installed one during run()
        cfg = tb.config
        self.node_types = {n.name: n.gpu_type for n in cfg.nodes}
        self.node_gpus = {n.name: (n.gpu_type, n.gpus) for n in cfg.nodes}
        self.capacity: dict[str, int] = {}
        for n in cfg.nodes:
            self.capacity[n.gpu_type] = self.capacity.get(n.gpu_type, 0) + n.gpus
        self.accounts = list(cfg.tenants)

    def prepare(self) -> tuple[list[ReplayJob], dict[str, str], dict[str, float]]:
        """(jobs, trace tenant -> account, account -> weight); checks everything it can before
        Slurm is touched."""
        spec = self.spec
        if spec.time_scale <= 0 or spec.round_s <= 0:
            raise UserError("--time-scale and --round-s must be > 0")
        if spec.policy is not None:
            from ... import policies

            policies.get(spec.policy)  # a UserError naming the known policies
        table = tt.load(spec.throughputs)
        unknown = sorted(set(self.capacity) - set(table.gpu_types))
        if unknown:
            raise UserError(f"testbed GPU type {unknown[0]!r} is not in the throughput table")
        workload = load_traces([spec.trace], table)
        mapping = tenant_map(workload.tenants, self.accounts)
        weights: dict[str, float] = {a: float(s) for a, s in self.tb.config.tenants.items()}
        for t, a in mapping.items():
            if t in workload.weights:
                weights[a] = float(workload.weights[t])
        jobs = plan_jobs(workload, mapping, table, sorted(self.capacity), weights)
        check_fits(jobs, self.node_gpus)
        return jobs, mapping, weights

    def node_sizes(self) -> dict[str, list[int]]:
        """The GPUs of each node per type (what a gang can be held by; the report's rule)."""
        out: dict[str, list[int]] = {}
        for k, g in self.node_gpus.values():
            out.setdefault(k, []).append(int(g))
        return out

    def run(self) -> ReplayResult:
        """Run the replay; whatever way it ends, :meth:`_cleanup` has run once before this returns.

        SIGINT/SIGTERM/SIGHUP raise :class:`Interrupted` meanwhile (main thread only), carrying
        the cleanup's record; the previous signal handlers are back when this returns or raises.
        """
        with SignalGuard() as guard:
            self._guard = guard
            try:
                return self._run()
            except BaseException as exc:
                done = self._cleanup(end_reason(exc))
                if isinstance(exc, Interrupted):
                    exc.cleanup = done
                raise

    def _run(self) -> ReplayResult:
        spec = self.spec
        jobs, mapping, weights = self.prepare()
        for sub in ("ckpt", "scripts", "out"):
            (spec.run_dir / sub).mkdir(parents=True, exist_ok=True)
        stale = sorted(p.name for p in (spec.run_dir / "ckpt").glob("*.json"))
        if stale:
            raise UserError(f"{spec.run_dir}/ckpt already holds checkpoints ({stale[0]}...): use a fresh --run-dir")
        if any(t != a for t, a in mapping.items()):
            self.say("tenants mapped onto testbed accounts (sorted, round-robin): "
                     + ", ".join(f"{t}->{a}" for t, a in mapping.items()))
        last = max(j.arrival_s for j in jobs)
        timeout = spec.timeout_real_s or default_timeout(jobs, spec.time_scale)
        self.say(f"{len(jobs)} jobs, {len(mapping)} tenants, last arrival at {last / spec.time_scale:.0f} s real; "
                 f"policy {spec.policy or 'none (Slurm alone)'}; time scale {spec.time_scale:g}; timeout {timeout:.0f} s")
        submit.reset_slurm(self.tb, self.accounts)
        since = datetime.fromtimestamp(math.floor(self.clock()) - 2)
        if spec.policy:
            with self._guard.deferred():  # a started controller is always one we hold
                self.controller.start(weights)
            self.sleep(min(2.0, spec.interval_real_s))  # let the first cycle see the empty queue
        t0 = float(math.ceil(self.clock()))
        self.sleep(max(0.0, t0 - self.clock()))
        timed_out = self._submit_and_wait(jobs, t0, timeout)
        end_wall = self.clock()
        if timed_out:
            self.say(f"timeout after {timeout:.0f} s: cancelling the unfinished jobs of this run")
        cleanup = self._cleanup("timeout" if timed_out else "finished")
        every: list[AccountingRecord] = []
        accts = read_accounting(self.tb, since, set(self.submitted), self.clock, self.sleep, every=every)
        cks = read_checkpoints(jobs, spec.run_dir)
        records, metrics, errors = score(jobs, accts, cks, self.capacity, t0, spec.time_scale, spec.round_s)
        cycles_info = self.controller.cycles() if spec.policy else None
        metrics["wall_seconds"] = end_wall - t0
        fair = tenant_fairness(jobs, every, self.capacity, {j.account: j.weight for j in jobs}, datetime.fromtimestamp(t0),
                               datetime.fromtimestamp(max(end_wall, t0 + 1.0)), self.node_sizes())
        for u, row in fair.items():
            metrics.setdefault("tenants", {}).setdefault(u, {}).update(row)
        known = [r["si_ratio"] for r in fair.values() if r["si_ratio"] is not None]
        metrics["si_ratio_min"] = min(known, default=None)
        metrics["envy_max"] = max((r["envy_max"] for r in fair.values() if r["envy_max"] is not None), default=None)
        doc = {
            "replay": {
                "trace": str(spec.trace), "policy": spec.policy or "none", "time_scale": spec.time_scale,
                "round_s": spec.round_s, "interval_real_s": spec.interval_real_s if spec.policy else None,
                "untagged": spec.untagged,
                "tenant_map": mapping, "weights": weights, "cluster": self.tb.config.cluster_name,
                "capacity": self.capacity, "node_layout": node_layout(list(self.node_gpus.values())),
                "started_at": datetime.fromtimestamp(t0).isoformat(),
                "timed_out": timed_out, "run_dir": str(spec.run_dir),
                "requeue_hold_real_s": self.tb.config.cred_expire_s + 1,
                "controller": ({**cycles_info, "exit_code": cleanup.controller_exit_code, "revert": cleanup.revert}
                               if cycles_info is not None else None),
                "cleanup": cleanup.to_dict(),
                "units": "trace seconds (real seconds x time_scale); sacct resolution 1 s real",
            },
            "metrics": metrics,
            "jobs": [job_row(j, accts.get(j.slurm_id), cks.get(j.trace_id), r) for j, r in zip(jobs, records)],
            "emulation": errors,
        }
        return ReplayResult(doc, jobs)

    def _submit_and_wait(self, jobs: Sequence[ReplayJob], t0: float, timeout: float) -> bool:
        """Submit every job at its scaled arrival; wait until none is left. True on timeout."""
        spec = self.spec
        pending = list(jobs)
        last_poll = 0.0
        while True:
            now = self.clock()
            while pending and t0 + pending[0].arrival_s / spec.time_scale <= now:
                job = pending.pop(0)
                with self._guard.deferred():  # an accepted job always has its id recorded
                    submit.submit(self.tb, job, spec, self.node_types, self.clock)
                    self.submitted[job.slurm_id] = job
            if self.submitted and now - last_poll >= 0.5:
                last_poll = now
                polled = submit.poll(self.tb, set(self.submitted))
                if polled is not None:
                    self._report(jobs, now - t0, len(self.submitted) - len(polled))
                if polled is not None and not pending and not polled:
                    return False
            if now - t0 > timeout:
                return True
            nxt = t0 + pending[0].arrival_s / spec.time_scale if pending else now + 0.5
            self.sleep(max(0.02, min(0.25, nxt - self.clock())))

    def _report(self, jobs: Sequence[ReplayJob], real_s: float, done: int) -> None:
        """Hand the run's position to ``progress`` (a display's failure never stops a run)."""
        if self.progress is None:
            return
        cycles = self.controller.cycles_so_far() if self.controller.started else 0
        try:
            self.progress(Progress(real_s * self.spec.time_scale, len(jobs), len(self.submitted), done, cycles))
        except Exception:  # noqa: BLE001 - a terminal gone away (SIGHUP) must not end the replay
            self.progress = None

    def _cancel_unfinished(self) -> list[str]:
        """Cancel the run's jobs Slurm still has pending/running; wait (bounded) until they are gone."""
        if not self.submitted:
            return []
        left = sorted(submit.active(self.tb, set(self.submitted)), key=submit.job_id_key)
        if not left:
            return []
        submit.cancel(self.tb, left)
        deadline = self.clock() + CANCEL_WAIT_S
        while submit.active(self.tb, set(left)) and self.clock() < deadline:
            self.sleep(0.5)
        return left

    def _cleanup(self, reason: str) -> Cleanup:
        """Stop the controller, cancel this run's unfinished jobs, revert: the one way out of a run.

        Runs once (later calls return the first record). Signals meanwhile are recorded, not
        raised: a second Ctrl-C must not leave half a cleanup, and every step has a timeout, so
        it ends anyway. The controller goes first so it never acts on jobs being cancelled, and
        is gone even if a later step fails; revert runs after the cancelled jobs left (it counts
        a job it rewrote that still runs as not restored), and only when this run started a
        controller (a reused run directory may hold another run's controller.toml).
        """
        if self.cleanup is not None:
            return self.cleanup
        with self._guard.deferred():
            c = self.cleanup = Cleanup(reason, controller_started=self.controller.started)
            anything = c.controller_started or bool(self.submitted)
            signalled = reason.startswith("SIG")  # the command prints the summary with the exit
            if signalled and anything:
                self._tell(f"interrupted by {reason}: stopping the controller, cancelling this run's jobs, reverting")
            try:
                c.controller_exit_code, c.controller_killed = self.controller.stop()
            except Exception as exc:  # noqa: BLE001 - the jobs and the revert must still follow
                c.errors.append(f"stopping the controller: {exc}")
            try:
                c.jobs_cancelled = self._cancel_unfinished()
            except Exception as exc:  # noqa: BLE001 - the revert must still follow
                c.errors.append(f"cancelling jobs: {exc}")
            if c.controller_started:
                c.revert = self.controller.revert()
            if anything and not signalled:
                self._tell(f"cleanup: {c.summary()}")
        return c

    def _tell(self, message: str) -> None:
        """``say`` that cannot fail: after SIGHUP the terminal may be gone (EIO, EPIPE)."""
        try:
            self.say(message)
        except OSError:
            pass


def fresh_run_dir(base: str | None) -> Path:
    """A new directory for one run (checkpoints, scripts, job output, controller state)."""
    if base:
        p = Path(base).resolve()
        p.mkdir(parents=True, exist_ok=True)
        return p
    return Path(tempfile.mkdtemp(prefix="slurm-fair-replay-"))
