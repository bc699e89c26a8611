"""``slurm-fair testbed bench``: an emulated trace on the real testbed, scored from Slurm accounting.

What one run does (issue 6, "Real-cluster benchmark"):

1. read the trace CSV (docs/fairness.md format) with the simulator's reader; map its tenants onto the
   testbed's accounts (identity when every trace tenant is an account, else sorted trace tenants
   round-robin onto the accounts in file order: deterministic, and printed);
2. with a policy: write a controller configuration into the run directory (state, audit log,
   policy, round length and interval = the trace round divided by the time scale) and start
   ``slurm-fair run --loop`` as a subprocess; with ``none`` Slurm schedules alone;
3. submit every job at ``arrival_s / S`` real seconds after the start, *untyped*
   (``--gres=gpu:N``, one node), ``--requeue``, ``--comment "fair:class=<class> fair:preemptible"``;
   its payload is :mod:`slurm_fair.testbed.emulator`, which works ``total_steps / T(type it landed
   on)`` trace seconds and checkpoints into the run directory;
4. wait until no job of the run is pending or running, then clean up (:meth:`Bench._cleanup`, the
   one way out of every run: finished, timed out, failed or interrupted by SIGINT/SIGTERM/SIGHUP):
   stop the controller, cancel the run's own unfinished jobs (that is the harness, the controller
   never cancels anything) and ``slurm-fair revert`` so the next run starts from a clean Slurm;
5. read ``sacct`` through the Slurm adapter, turn each job into a simulator
   :class:`~slurm_fair.sim.metrics.JobRecord` in *trace* seconds (``(t - t0) * S``), and compute
   the metrics with the simulator's own :func:`~slurm_fair.sim.metrics.summarize`.

Requeues: Slurm holds a requeued job for its credential lifetime + 1 s before it may start again
(reason ``BeginTime``; a relaunch on the same node sooner fails with "credential revoked", so
nobody shortens the hold). The testbed sets a short lifetime (``cluster.cred_expire_s``, default
10 s, so the hold is 11 real s = ``11 * S`` trace s); the result records it as
``requeue_hold_real_s``.

Time: ``t0`` is a whole wall-clock second (sacct stores whole seconds, so arrival 0 is recorded
as exactly 0). One real second is ``S`` trace seconds: Slurm's scheduling latency (about a
second: ``sched_interval=2``, job launch) is therefore ``~S`` trace seconds per start.

Slurm commands: submission, cancellation and the completion poll run here through
:meth:`Testbed.run` (this is test infrastructure, like the testbed itself); accounting is read
through the real adapter :class:`~slurm_fair.slurm.cli.SlurmCli`. A requeued job keeps its job id;
its per-type GPU time and first start come from the emulator's checkpoint segments, since
``sacct -X`` shows the last run only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..estimates import gavel as tt
from ..estimates.classes import gavel_class_name
from ..errors import TestbedError, UserError
from ..gangs import Shape, can_hold
from ..model import AccountingRecord
from ..sim.metrics import JobRecord, samples_from_records, summarize
from ..sim.workload import Workload, load_traces
from . import emulator
from .emulator import Checkpoint, load_checkpoint

#: squeue states in which a job of the run is not finished yet
ACTIVE_STATES = (
    "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
    "RESIZING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED",
)
JOB_NAME_PREFIX = "sfb"

Say = Callable[[str], None]

#: the signals that end a run through its cleanup (Ctrl-C, ``kill``, a closed terminal)
INTERRUPT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: real seconds for ``slurm-fair revert`` at the end of a run (the testbed's takes a few seconds)
REVERT_TIMEOUT_S = 120.0
#: real seconds to wait for cancelled jobs to leave squeue's active states before reverting
#: (revert counts a job it rewrote that still runs as not restored)
CANCEL_WAIT_S = 30.0


class Interrupted(KeyboardInterrupt):
    """A run was stopped by a signal (raised by the handlers :meth:`Bench.run` installs).

    A KeyboardInterrupt, so whatever lets Ctrl-C through (``except Exception`` does not catch it,
    pytest stops) treats SIGTERM and SIGHUP the same way. ``cleanup`` is what the run undid before
    the exception left :meth:`Bench.run`.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.cleanup: Cleanup | None = None

    @property
    def signame(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + signal number (130 for Ctrl-C, 143 for SIGTERM)."""
        return 128 + self.signum

    def summary(self) -> str:
        done = self.cleanup.summary() if self.cleanup else "nothing cleaned up"
        return f"interrupted by {self.signame}; {done}"


@dataclass
class Cleanup:
    """What the end of a run undid; recorded in the result JSON as ``bench.cleanup``."""

    reason: str  # finished, timeout, SIGINT/SIGTERM/SIGHUP, or error: <exception type>
    jobs_cancelled: list[str] = field(default_factory=list)
    controller_started: bool = False
    controller_exit_code: int | None = None
    controller_killed: bool = False  # did not stop on SIGTERM in time: SIGKILL to its process group
    revert: str | None = None  # ok, exit N, timed out, failed: ...; None without a controller
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for people: jobs cancelled, controller stopped, revert result."""
        n = len(self.jobs_cancelled)
        parts = [f"cancelled {n} job(s)" + (f" ({', '.join(self.jobs_cancelled)})" if n else "")]
        if self.controller_started:
            how = "killed" if self.controller_killed else "stopped"
            parts.append(f"controller {how} (exit {self.controller_exit_code})")
            parts.append(f"revert {self.revert}")
        else:
            parts.append("no controller")
        parts += [f"error: {e}" for e in self.errors]
        return ", ".join(parts)


class SignalGuard:
    """Turns SIGINT/SIGTERM/SIGHUP into :class:`Interrupted` while a run is in progress.

    Without it SIGTERM kills the bench and leaves its controller (own session) looping with its
    QOS limits in place and the jobs running. Handlers are installed only in the main thread
    (Python refuses them elsewhere and delivers signals there only; the bench is also a library)
    and the previous ones come back on exit. Inside :meth:`deferred` a signal is only recorded
    and raised when the block ends, so an ``sbatch`` whose job id we would never learn, or a
    controller whose process we would never hold, cannot slip through the cleanup. Only the first
    signal raises: later ones (a second Ctrl-C during the cleanup) are recorded, never raised.
    """

    def __init__(self, signals: Sequence[int] = INTERRUPT_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.received: list[int] = []
        self._saved: dict[int, Any] = {}
        self._depth = 0
        self._raised = False

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def __enter__(self) -> "SignalGuard":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                prev = signal.signal(s, self._handle)
                self._saved[s] = signal.SIG_DFL if prev is None else prev  # None: not set from Python
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth += 1  # from here on a signal is only recorded...
        while self._saved:
            s, prev = self._saved.popitem()
            signal.signal(s, prev)
        if self.received and not self._raised:  # ...and handed to the previous handler, never lost
            self._raised = True
            signal.raise_signal(self.received[0])

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._depth == 0:
            self._raise_pending()

    def _raise_pending(self) -> None:
        if self.received and not self._raised:
            self._raised = True
            raise Interrupted(self.received[0])

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals in this block wait for its end (its own exception, if any, becomes the cause)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._raise_pending()


@dataclass(frozen=True)
class BenchSpec:
    """What to run; times in trace seconds unless the name says real."""

    trace: Path
    time_scale: float
    policy: str | None  # None: Slurm alone
    run_dir: Path
    round_s: float = 360.0
    timeout_real_s: float | None = None
    tick_real_s: float = 0.25
    solver: str | None = None
    throughputs: str | None = None
    python: str = sys.executable  # runs the controller (on this host)
    #: runs the emulator inside each job (None: the testbed's, :attr:`Testbed.job_python`)
    job_python: str | None = None
    #: trace seconds between controller cycles (None: a sixth of a round, as a site running
    #: cycles every minute with Gavel's 6-minute rounds does)
    interval_s: float | None = None

    @property
    def interval_real_s(self) -> float:
        """Real seconds between controller cycles (at least 1: a cycle takes most of a second
        on the testbed, and two cores also run Slurm and the jobs)."""
        return max(1.0, (self.interval_s or self.round_s / 6.0) / self.time_scale)

    @property
    def round_real_s(self) -> float:
        return self.round_s / self.time_scale


@dataclass
class BenchJob:
    """One trace job on its way through the testbed."""

    trace_id: str
    trace_tenant: str
    account: str
    job_type: str
    gpus: int
    total_steps: float
    arrival_s: float
    #: steps per trace second per GPU type of the testbed (the emulator's table)
    tput: dict[str, float]
    weight: float = 1.0
    slurm_id: str = ""
    submitted_wall: float | None = None
    #: the gang's nodes (the trace's ``nodes`` column; 1 when absent): ``-N nodes``,
    #: ``--gres=gpu:<gpus/nodes>`` each
    nodes: int = 1

    @property
    def per_node(self) -> int:
        return self.gpus // self.nodes

    @property
    def klass(self) -> str:
        return gavel_class_name(self.job_type)

    def expected_s(self, gpu_type: str) -> float:
        """Trace seconds of work on ``gpu_type`` alone."""
        t = self.tput.get(gpu_type, 0.0)
        return self.total_steps / t if t > 0 else math.inf

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.trace_id)


# --------------------------------------------------------------------------------------------
# pure parts (unit-tested without Slurm)
# --------------------------------------------------------------------------------------------


def tenant_map(trace_tenants: Sequence[str], accounts: Sequence[str]) -> dict[str, str]:
    """Trace tenant -> testbed account: identity when all exist, else sorted round-robin."""
    if not accounts:
        raise TestbedError("the testbed has no tenant accounts")
    tenants = sorted(set(trace_tenants))
    if all(t in accounts for t in tenants):
        return {t: t for t in tenants}
    return {t: accounts[i % len(accounts)] for i, t in enumerate(tenants)}


def plan_jobs(
    workload: Workload,
    mapping: Mapping[str, str],
    table: tt.ThroughputTable,
    gpu_types: Sequence[str],
    weights: Mapping[str, float],
) -> list[BenchJob]:
    """The jobs to submit, arrival-ordered, with their throughput on every testbed GPU type."""
    jobs = []
    for j in workload.jobs:
        tput = {k: float(table.lookup(j.job_type, j.gpus, k)) for k in gpu_types}
        if max(tput.values(), default=0.0) <= 0:
            raise UserError(f"trace job {j.id}: {j.job_type} on {j.gpus} GPU(s) runs on no GPU type of the testbed")
        acct = mapping[j.tenant]
        jobs.append(BenchJob(j.id, j.tenant, acct, j.job_type, j.gpus, j.total_steps, j.arrival_s, tput,
                             float(weights.get(acct, 1.0)), nodes=j.nodes or 1))
    return jobs


def check_fits(jobs: Sequence[BenchJob], node_gpus: Mapping[str, tuple[str, int]]) -> None:
    """Every job must fit, as the gang it is submitted as (``-N nodes``, ``gpus/nodes`` each), on
    the nodes of some type it can run on."""
    bad = []
    for j in jobs:
        shape = Shape(j.gpus, j.per_node, j.nodes)
        if not any(j.tput.get(k, 0) > 0 and can_hold(shape, [g for t, g in node_gpus.values() if t == k])
                   for k in {t for t, _ in node_gpus.values()}):
            bad.append(f"{j.trace_id} ({j.gpus} GPUs on {j.nodes} node(s))")
    if bad:
        raise UserError(f"{len(bad)} job(s) fit on no testbed node: {', '.join(bad[:5])}")


def emulator_argv(job: BenchJob, spec: BenchSpec, node_types: Mapping[str, str], checkpoint: Path) -> list[str]:
    """The emulator as a script (standard library only): a testbed of another Slurm version runs
    its jobs inside a root filesystem whose Python has none of this host's packages."""
    return [
        spec.job_python or spec.python, "-I", str(Path(emulator.__file__).resolve()),
        "--steps", repr(float(job.total_steps)),
        "--tput", ",".join(f"{k}={v!r}" for k, v in sorted(job.tput.items())),
        "--node-types", ",".join(f"{n}={k}" for n, k in sorted(node_types.items())),
        "--time-scale", repr(float(spec.time_scale)),
        "--checkpoint", str(checkpoint),
        "--tick", repr(float(spec.tick_real_s)),
    ]


def batch_script(argv: Sequence[str]) -> str:
    """A POSIX sh batch script that execs the emulator (every argument quoted)."""
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in argv) + "\n"


def time_limit_minutes(job: BenchJob, time_scale: float, slack: float = 4.0) -> int:
    """A generous Slurm time limit: ``slack`` times the run on the slowest usable type, +2 min."""
    slowest = max(job.expected_s(k) for k, t in job.tput.items() if t > 0)
    return int(math.ceil(slowest / time_scale * slack / 60.0)) + 2


def sbatch_argv(job: BenchJob, script: Path, run_dir: Path, time_scale: float) -> list[str]:
    return [
        "sbatch", "--parsable", "-A", job.account, "-J", f"{JOB_NAME_PREFIX}-{job.slug}",
        "-N", str(job.nodes), "-n", str(job.nodes), f"--gres=gpu:{job.per_node}", "--requeue",
        "--comment", f"fair:class={job.klass} fair:preemptible",
        "-t", str(time_limit_minutes(job, time_scale)),
        "--chdir", str(run_dir), "-o", str(run_dir / "out" / f"{job.slug}.out"), "--open-mode=append",
        str(script),
    ]


#: real seconds from a requeue to a restart besides Slurm's hold (scheduling, launch, resume)
RESTART_REAL_S = 2.0


def controller_config(spec: BenchSpec, cluster: str, weights: Mapping[str, float], solver: str,
                      plan_file: Path | None = None, hold_real_s: float = 11.0) -> str:
    """TOML of the controller for this run: its state stays in the run directory; the plan file
    goes where the testbed's job_submit.lua reads it. Times are real seconds (the trace's round
    and interval divided by the time scale); a requeue costs the testbed's hold plus a restart."""
    lines = [
        "[cluster]", f"name = {json.dumps(cluster)}", "",
        "[controller]",
        f"policy = {json.dumps(spec.policy)}",
        f"solver = {json.dumps(solver)}",
        f"interval_s = {spec.interval_real_s!r}",
        f"round_s = {spec.round_real_s!r}",
        f"time_limit_s = {max(1.0, spec.interval_real_s)!r}",
        f"requeue_cost_s = {hold_real_s + RESTART_REAL_S!r}",
        f"state_dir = {json.dumps(str(spec.run_dir / 'controller'))}",
        f"audit_log = {json.dumps(str(spec.run_dir / 'controller' / 'audit.jsonl'))}",
        *([f"plan_file = {json.dumps(str(plan_file))}"] if plan_file else []),
        "",
    ]
    for tenant, w in sorted(weights.items()):
        lines += [f"[tenants.{tenant}]", f"weight = {float(w)!r}", ""]
    return "\n".join(lines)


def to_trace(t: datetime | float | None, t0: float, time_scale: float) -> float | None:
    """A wall-clock time -> trace seconds since the run's start."""
    if t is None:
        return None
    wall = t.timestamp() if isinstance(t, datetime) else float(t)
    return (wall - t0) * time_scale


def job_record(
    job: BenchJob,
    acct: AccountingRecord | None,
    ck: Checkpoint | None,
    t0: float,
    time_scale: float,
) -> JobRecord:
    """One job as the simulator scores it, from sacct (+ the checkpoint's segments for requeues).

    Arrival is sacct's Submit (a requeue may move Submit: the earliest of it and the time the
    bench submitted wins); start is the first start; end is sacct's End of a COMPLETED job.
    """
    arrival = to_trace(acct.submit_time if acct else None, t0, time_scale)
    if job.submitted_wall is not None:
        own = math.floor(job.submitted_wall)  # sacct stores whole seconds
        submitted = to_trace(own, t0, time_scale)
        arrival = submitted if arrival is None else min(arrival, submitted)
    start = to_trace(acct.start_time if acct else None, t0, time_scale)
    segs = ck.segments if ck else []
    if segs:
        first = to_trace(math.floor(min(s.started for s in segs)), t0, time_scale)
        start = first if start is None else min(start, first)
    done = acct is not None and acct.state.upper().startswith("COMPLETED") and acct.end_time is not None
    end = to_trace(acct.end_time, t0, time_scale) if done else None
    gpu_seconds: dict[str, float] = {}
    runs: list[tuple[float, float, str]] = []
    if len(segs) > 1:
        for k, s in ck.seconds_by_type().items():
            gpu_seconds[k] = s * time_scale * job.gpus
        for seg in segs:
            if seg.ended is not None:
                runs.append((to_trace(seg.started, t0, time_scale), to_trace(seg.ended, t0, time_scale), seg.gpu_type))
    return JobRecord(
        job_id=job.trace_id, tenant=job.account, arrival_s=float(arrival or 0.0), start_s=start, end_s=end,
        gpu_type=(acct.gpu_type if acct and acct.gpu_type else (segs[-1].gpu_type if segs else None)),
        gpus=job.gpus, weight=job.weight, work=job.total_steps, throughput=job.tput, gpu_seconds=gpu_seconds,
        runs=tuple(runs),
    )


def emulation_errors(jobs: Sequence[BenchJob], accts: Mapping[str, AccountingRecord],
                     cks: Mapping[str, Checkpoint], time_scale: float,
                     min_real_s: float = 10.0) -> list[dict[str, Any]]:
    """For each completed single-run job: Slurm's elapsed time vs ``total_steps / T(type)``.

    Both in trace seconds; sacct's ElapsedRaw is whole seconds (resolution ``S`` trace s), so
    jobs shorter than ``min_real_s`` real seconds are left out (one second would be >10%).
    """
    out = []
    for j in jobs:
        a, ck = accts.get(j.slurm_id), cks.get(j.trace_id)
        if a is None or ck is None or ck.runs != 1 or not a.state.upper().startswith("COMPLETED") or not a.gpu_type:
            continue
        seg = ck.segments[0]
        if a.start_time is None or abs(a.start_time.timestamp() - seg.started) > 2.0:
            continue  # sacct's last run is not the emulator's run (requeued before it started)
        expected = j.expected_s(a.gpu_type)
        if expected / time_scale < min_real_s:
            continue
        measured = a.elapsed_s * time_scale
        out.append({"job": j.trace_id, "gpu_type": a.gpu_type, "expected_s": expected, "elapsed_s": measured,
                    "rel_error": (measured - expected) / expected})
    return out


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


@dataclass
class BenchResult:
    doc: dict[str, Any]
    jobs: list[BenchJob] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, Any]:
        return self.doc["metrics"]


class Bench:
    """One benchmark run against one testbed (``tb``: a :class:`~slurm_fair.testbed.Testbed`)."""

    def __init__(self, tb: Any, spec: BenchSpec, say: Say | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        if spec.job_python is None and getattr(tb, "job_python", None):
            spec = dataclasses.replace(spec, job_python=tb.job_python)
        self.tb, self.spec = tb, spec
        self.say: Say = say or (lambda _m: None)
        self.clock, self.sleep = clock, sleep
        self.controller: subprocess.Popen | None = None
        self.config_path = spec.run_dir / "controller.toml"
        #: real seconds the controller gets to finish its cycle after SIGTERM before SIGKILL
        self.controller_grace_s = min(30.0, max(10.0, 2.0 * spec.interval_real_s))
        #: Slurm job id -> job, for everything sbatch accepted in this run
        self.submitted: dict[str, BenchJob] = {}
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

    # --- preparation ----------------------------------------------------------------------
    def prepare(self) -> tuple[list[BenchJob], dict[str, str], dict[str, float]]:
        spec = self.spec
        if spec.time_scale <= 0 or spec.round_s <= 0:
            raise UserError("--time-scale and --round-s must be > 0")
        if spec.policy is not None:
            from .. import policies

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

    # --- Slurm ----------------------------------------------------------------------------
    def _submit(self, job: BenchJob) -> None:
        d = self.spec.run_dir
        ck = d / "ckpt" / f"{job.slug}.json"
        script = d / "scripts" / f"{job.slug}.sh"
        script.write_text(batch_script(emulator_argv(job, self.spec, self.node_types, ck)))
        script.chmod(0o755)
        proc = self.tb.run(sbatch_argv(job, script, d, self.spec.time_scale), timeout=60, check=False)
        if proc.returncode != 0:
            raise TestbedError(f"sbatch of {job.trace_id} failed: {proc.stderr.strip()}")
        job.slurm_id = proc.stdout.strip().split(";")[0]
        job.submitted_wall = self.clock()

    def _poll(self, ids: set[str]) -> dict[str, tuple[str, str]] | None:
        """State and reason of the jobs of ``ids`` Slurm still has; None when squeue failed."""
        proc = self.tb.run(
            ["squeue", "-h", "-r", "-t", ",".join(ACTIVE_STATES), "-o", "%i|%T|%r"], timeout=30, check=False
        )
        if proc.returncode != 0:
            return None
        out = {}
        for line in proc.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3 and parts[0] in ids:
                out[parts[0]] = (parts[1], parts[2])
        return out

    def _active(self, ids: set[str]) -> set[str]:
        """Ids of ``ids`` that Slurm still has pending/running (all of them when unsure)."""
        polled = self._poll(ids)
        return set(ids) if polled is None else set(polled)

    def _fresh_slurm(self) -> None:
        """Every run starts from the same Slurm: no plan left for the submit plugin (Slurm alone
        must not be steered by an earlier run's plan) and the fair-share usage of every account
        reset, as an admin comparing two schedulers would."""
        self.tb.layout.plan_file.unlink(missing_ok=True)
        for account in self.accounts:
            proc = self.tb.run(["sacctmgr", "-i", "modify", "account", "where", f"name={account}",
                                f"cluster={self.tb.config.cluster_name}", "set", "RawUsage=0"],
                               timeout=60, check=False)
            if proc.returncode != 0:
                raise TestbedError(f"cannot reset the fair-share usage of {account}: {proc.stderr.strip()}")

    def _cancel(self, ids: Sequence[str]) -> None:
        """scancel ``ids``; once more if scancel itself was killed by a signal (a second Ctrl-C
        in the terminal reaches it too)."""
        for _ in range(2):
            if not ids or self.tb.run(["scancel", *ids], timeout=30, check=False).returncode >= 0:
                return

    def _cancel_unfinished(self) -> list[str]:
        """Cancel the run's jobs Slurm still has pending/running; wait (bounded) until they are gone."""
        if not self.submitted:
            return []
        left = sorted(self._active(set(self.submitted)), key=_job_id_key)
        if not left:
            return []
        self._cancel(left)
        deadline = self.clock() + CANCEL_WAIT_S
        while self._active(set(left)) and self.clock() < deadline:
            self.sleep(0.5)
        return left

    def _accounting(self, since: datetime, ids: set[str], wait_s: float = 60.0) -> dict[str, AccountingRecord]:
        """The last run's sacct record of each of ``ids``, waiting until slurmdbd has every end
        time (earlier runs of a requeued job come from the emulator's checkpoint segments)."""
        from ..slurm.cli import SlurmCli

        port = SlurmCli(env=dict(self.tb.env), cluster=self.tb.config.cluster_name)
        deadline = self.clock() + wait_s
        while True:
            # one record per run (sacct -D) in the order they ran: keep each job's last run
            recs = {r.job_id: r for r in port.accounting(since) if r.job_id in ids}
            complete = set(recs) >= ids and all(r.end_time is not None for r in recs.values())
            if complete or self.clock() > deadline:
                return recs
            self.sleep(1.0)

    # --- controller -------------------------------------------------------------------------
    def _cli_argv(self, *args: str) -> list[str]:
        return [self.spec.python, "-m", "slurm_fair.cli", *args]

    def _start_controller(self, weights: Mapping[str, float]) -> None:
        from ..solver import fastest_available

        solver = self.spec.solver or fastest_available()
        (self.spec.run_dir / "controller").mkdir(exist_ok=True)
        self.config_path.write_text(controller_config(
            self.spec, self.tb.config.cluster_name, weights, solver, self.tb.layout.plan_file,
            self.tb.config.cred_expire_s + 1.0))
        with open(self.spec.run_dir / "controller.log", "ab") as log:
            self.controller = subprocess.Popen(
                self._cli_argv("run", "--loop", "--interval", repr(self.spec.interval_real_s), "--json",
                               "--config", str(self.config_path)),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.tb.client_env(),
                start_new_session=True,
            )

    def _stop_controller(self) -> tuple[int | None, bool]:
        """Stop the controller; (its exit code, whether it had to be killed).

        SIGTERM first: the loop finishes the cycle in progress and exits between cycles. When it
        is not gone after :attr:`controller_grace_s`, SIGKILL to its whole process group (it runs
        in its own session, so the group is its pid): a solver or Slurm command it started dies
        with it. Stragglers of the group are killed either way, so nothing of it outlives the run.
        """
        p = self.controller
        if p is None:
            return None, False
        killed = False
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # a no-op when it has just exited
            try:
                p.wait(timeout=self.controller_grace_s)
            except subprocess.TimeoutExpired:
                killed = True
                _killpg(p.pid, signal.SIGKILL)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass  # unkillable (uninterruptible sleep): reported as exit None
        _killpg(p.pid, signal.SIGKILL)
        return p.returncode, killed

    def _revert(self) -> str:
        """``slurm-fair revert`` with the run's controller config; its output goes to revert.log.

        Own session, like the controller: a second Ctrl-C in the terminal must not stop it halfway.
        """
        log = self.spec.run_dir / "revert.log"
        try:
            proc = subprocess.run(
                self._cli_argv("revert", "--config", str(self.config_path)),
                env=self.tb.client_env(), capture_output=True, text=True, timeout=REVERT_TIMEOUT_S,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            log.write_text(f"revert timed out after {REVERT_TIMEOUT_S:.0f} s\n")
            return f"timed out after {REVERT_TIMEOUT_S:.0f} s (see {log})"
        except OSError as exc:
            return f"failed: {exc}"
        log.write_text(proc.stdout + proc.stderr)
        return "ok" if proc.returncode == 0 else f"exit {proc.returncode} (see {log})"

    def _controller_cycles(self) -> dict[str, Any]:
        """Counts from the controller's --json output lines (one JSON object per cycle)."""
        path = self.spec.run_dir / "controller.log"
        cycles = ok = requeues = retypes = 0
        seconds: list[float] = []
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    c = json.loads(line)
                except json.JSONDecodeError:
                    continue
                cycles += 1
                ok += c.get("status") == "ok"
                seconds.append(sum(c.get("timings_s", {}).values()))
                for a in c.get("actions", []):
                    if a.get("applied") and a.get("kind") == "requeue":
                        requeues += 1
                    if a.get("applied") and a.get("kind") in ("set_partition", "set_gpu_type"):
                        retypes += 1  # steered to a type's partition, or its gres pinned
        return {"cycles": cycles, "cycles_ok": ok, "requeues": requeues, "gpu_type_steers": retypes,
                "cycle_seconds_mean": (sum(seconds) / len(seconds)) if seconds else None,
                "cycle_seconds_max": max(seconds, default=None)}

    # --- main -------------------------------------------------------------------------------
    def run(self) -> BenchResult:
        """Run the bench; whatever way it ends, :meth:`_cleanup` has run once before this returns.

        SIGINT/SIGTERM/SIGHUP raise :class:`Interrupted` meanwhile (main thread only), carrying
        the cleanup's record; the previous signal handlers are back when this returns or raises.
        """
        with SignalGuard() as guard:
            self._guard = guard
            try:
                return self._run()
            except BaseException as exc:
                done = self._cleanup(_reason(exc))
                if isinstance(exc, Interrupted):
                    exc.cleanup = done
                raise

    def _run(self) -> BenchResult:
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
        timeout = spec.timeout_real_s or _default_timeout(jobs, spec.time_scale)
        self.say(f"{len(jobs)} jobs, {len(mapping)} tenants, last arrival at {last / spec.time_scale:.0f} s real; "
                 f"policy {spec.policy or 'none (Slurm alone)'}; time scale {spec.time_scale:g}; timeout {timeout:.0f} s")
        self._fresh_slurm()
        since = datetime.fromtimestamp(math.floor(self.clock()) - 2)
        if spec.policy:
            with self._guard.deferred():  # a started controller is always one we hold
                self._start_controller(weights)
            self.sleep(min(2.0, spec.interval_real_s))  # let the first cycle see the empty queue
        t0 = float(math.ceil(self.clock()))
        self.sleep(max(0.0, t0 - self.clock()))
        timed_out = self._submit_and_wait(jobs, t0, timeout)
        end_wall = self.clock()
        if timed_out:
            self.say(f"timeout after {timeout:.0f} s: cancelling the unfinished jobs of this run")
        cleanup = self._cleanup("timeout" if timed_out else "finished")
        submitted = self.submitted
        accts = self._accounting(since, set(submitted))
        cks: dict[str, Checkpoint] = {}
        for j in jobs:
            path = spec.run_dir / "ckpt" / f"{j.slug}.json"
            try:
                cks[j.trace_id] = load_checkpoint(path, j.total_steps) if path.is_file() else None  # type: ignore[assignment]
            except (ValueError, json.JSONDecodeError):
                pass
        cks = {k: v for k, v in cks.items() if v is not None}
        records = [job_record(j, accts.get(j.slurm_id), cks.get(j.trace_id), t0, spec.time_scale) for j in jobs]
        samples = samples_from_records(records, self.capacity, spec.round_s)
        metrics = summarize(records, samples, self.capacity)
        errors = emulation_errors(jobs, accts, cks, spec.time_scale)
        abs_err = [abs(e["rel_error"]) for e in errors]
        metrics["emulation_rel_error_mean"] = sum(abs_err) / len(abs_err) if abs_err else None
        metrics["emulation_rel_error_max"] = max(abs_err, default=None)
        metrics["requeued_jobs"] = sum(1 for c in cks.values() if c.runs > 1)
        cycles_info = self._controller_cycles() if spec.policy else None
        metrics["wall_seconds"] = end_wall - t0
        doc = {
            "bench": {
                "trace": str(spec.trace), "policy": spec.policy or "none", "time_scale": spec.time_scale,
                "round_s": spec.round_s, "interval_real_s": spec.interval_real_s if spec.policy else None,
                "tenant_map": mapping, "weights": weights, "cluster": self.tb.config.cluster_name,
                "capacity": self.capacity, "node_layout": node_layout(self.node_gpus.values()),
                "started_at": datetime.fromtimestamp(t0).isoformat(),
                "timed_out": timed_out, "run_dir": str(spec.run_dir),
                "requeue_hold_real_s": self.tb.config.cred_expire_s + 1,
                "controller": ({**cycles_info, "exit_code": cleanup.controller_exit_code, "revert": cleanup.revert}
                               if cycles_info is not None else None),
                "cleanup": cleanup.to_dict(),
                "units": "trace seconds (real seconds x time_scale); sacct resolution 1 s real",
            },
            "metrics": metrics,
            "jobs": [_job_row(j, accts.get(j.slurm_id), cks.get(j.trace_id), r) for j, r in zip(jobs, records)],
            "emulation": errors,
        }
        return BenchResult(doc, jobs)

    def _submit_and_wait(self, jobs: Sequence[BenchJob], t0: float, timeout: float) -> bool:
        """Submit every job at its scaled arrival; wait until none is left. True on timeout."""
        spec = self.spec
        pending = list(jobs)
        last_poll = 0.0
        while True:
            now = self.clock()
            while pending and t0 + pending[0].arrival_s / spec.time_scale <= now:
                job = pending.pop(0)
                with self._guard.deferred():  # an accepted job always has its id recorded
                    self._submit(job)
                    self.submitted[job.slurm_id] = job
            if self.submitted and now - last_poll >= 0.5:
                last_poll = now
                polled = self._poll(set(self.submitted))
                if polled is not None and not pending and not polled:
                    return False
            if now - t0 > timeout:
                return True
            nxt = t0 + pending[0].arrival_s / spec.time_scale if pending else now + 0.5
            self.sleep(max(0.02, min(0.25, nxt - self.clock())))

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
            c = self.cleanup = Cleanup(reason, controller_started=self.controller is not None)
            anything = c.controller_started or bool(self.submitted)
            signalled = reason.startswith("SIG")  # the command prints the summary with the exit
            if signalled and anything:
                self._tell(f"interrupted by {reason}: stopping the controller, cancelling this run's jobs, reverting")
            try:
                c.controller_exit_code, c.controller_killed = self._stop_controller()
            except Exception as exc:  # noqa: BLE001 - the jobs and the revert must still follow
                c.errors.append(f"stopping the controller: {exc}")
            try:
                c.jobs_cancelled = self._cancel_unfinished()
            except Exception as exc:  # noqa: BLE001 - the revert must still follow
                c.errors.append(f"cancelling jobs: {exc}")
            if c.controller_started:
                c.revert = self._revert()
            if anything and not signalled:
                self._tell(f"cleanup: {c.summary()}")
        return c

    def _tell(self, message: str) -> None:
        """``say`` that cannot fail: after SIGHUP the terminal may be gone (EIO, EPIPE)."""
        try:
            self.say(message)
        except OSError:
            pass


def _reason(exc: BaseException) -> str:
    """Why a run ended early, for :attr:`Cleanup.reason`."""
    if isinstance(exc, Interrupted):
        return exc.signame
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return f"error: {type(exc).__name__}"


def _job_id_key(job_id: str) -> tuple[int, str]:
    """Slurm job ids sort as numbers."""
    head = job_id.split("_")[0]
    return (int(head) if head.isdigit() else 0, job_id)


def _killpg(pgid: int, signum: int) -> None:
    """Signal a process group that may be gone already (called right after its leader was
    reaped: the group id cannot have been reused while members remain)."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def node_layout(nodes: Sequence[tuple[str, int]]) -> dict[str, str]:
    """``{type: "2x4+1x8"}``: nodes x GPUs per node of each type (the simulator's --cluster form)."""
    count: dict[str, dict[int, int]] = {}
    for k, g in nodes:
        count.setdefault(k, {})
        count[k][g] = count[k].get(g, 0) + 1
    return {k: "+".join(f"{n}x{g}" for g, n in sorted(sizes.items())) for k, sizes in count.items()}


def _default_timeout(jobs: Sequence[BenchJob], time_scale: float) -> float:
    """Real seconds: the last arrival plus all work run back to back on the slowest usable types,
    divided by the number of GPUs' worth of parallelism we can count on (at least 8), x2, +60."""
    last = max(j.arrival_s for j in jobs)
    work = sum(max(j.expected_s(k) for k, t in j.tput.items() if t > 0) * j.gpus for j in jobs)
    return (last + 2.0 * work / 8.0) / time_scale + 60.0


def _job_row(job: BenchJob, acct: AccountingRecord | None, ck: Checkpoint | None, rec: JobRecord) -> dict[str, Any]:
    return {
        "job": job.trace_id, "slurm_id": job.slurm_id, "tenant": job.account, "trace_tenant": job.trace_tenant,
        "job_type": job.job_type, "gpus": job.gpus, "arrival_s": rec.arrival_s, "start_s": rec.start_s,
        "end_s": rec.end_s, "jct_s": rec.jct_s, "state": acct.state if acct else None,
        "gpu_type": rec.gpu_type, "runs": ck.runs if ck else 0,
        "types_run": [s.gpu_type for s in ck.segments] if ck else [],
        "expected_s": {k: job.expected_s(k) for k in sorted(job.tput)},
    }


def write_json(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    Path(path).write_text(json.dumps(doc, indent=2, default=str) + "\n")


def fresh_run_dir(base: str | None) -> Path:
    """A new directory for one run (checkpoints, scripts, job output, controller state)."""
    if base:
        p = Path(base).resolve()
        p.mkdir(parents=True, exist_ok=True)
        return p
    return Path(tempfile.mkdtemp(prefix="slurm-fair-bench-"))
