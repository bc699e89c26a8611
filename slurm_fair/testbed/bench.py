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
4. wait until no job of the run is pending or running (a timeout cancels the run's own leftover
   jobs: that is the harness, the controller never cancels anything), stop the controller and
   ``slurm-fair revert`` so the next run starts from a clean Slurm;
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

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import throughput_table as tt
from ..controller.estimates import gavel_class_name
from ..errors import TestbedError, UserError
from ..model import AccountingRecord
from ..sim.metrics import JobRecord, samples_from_records, summarize
from ..sim.workload import Workload, load_traces
from .emulator import Checkpoint, load_checkpoint

#: squeue states in which a job of the run is not finished yet
ACTIVE_STATES = (
    "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
    "RESIZING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED",
)
JOB_NAME_PREFIX = "sfb"

Say = Callable[[str], None]


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
    python: str = sys.executable

    @property
    def interval_real_s(self) -> float:
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
                             float(weights.get(acct, 1.0))))
    return jobs


def check_fits(jobs: Sequence[BenchJob], node_gpus: Mapping[str, tuple[str, int]]) -> None:
    """Every job must fit on one node of a type it can run on (jobs are single-node gangs)."""
    bad = []
    for j in jobs:
        if not any(g >= j.gpus and j.tput.get(k, 0) > 0 for k, g in node_gpus.values()):
            bad.append(f"{j.trace_id} ({j.gpus} GPUs)")
    if bad:
        raise UserError(f"{len(bad)} job(s) fit on no testbed node: {', '.join(bad[:5])}")


def emulator_argv(job: BenchJob, spec: BenchSpec, node_types: Mapping[str, str], checkpoint: Path) -> list[str]:
    return [
        spec.python, "-m", "slurm_fair.testbed.emulator",
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
        "-N", "1", "-n", "1", f"--gres=gpu:{job.gpus}", "--requeue",
        "--comment", f"fair:class={job.klass} fair:preemptible",
        "-t", str(time_limit_minutes(job, time_scale)),
        "--chdir", str(run_dir), "-o", str(run_dir / "out" / f"{job.slug}.out"), "--open-mode=append",
        str(script),
    ]


def controller_config(spec: BenchSpec, cluster: str, weights: Mapping[str, float], solver: str) -> str:
    """TOML of the controller for this run: everything it writes stays in the run directory."""
    lines = [
        "[cluster]", f"name = {json.dumps(cluster)}", "",
        "[controller]",
        f"policy = {json.dumps(spec.policy)}",
        f"solver = {json.dumps(solver)}",
        f"interval_s = {spec.interval_real_s!r}",
        f"round_s = {spec.interval_real_s!r}",
        f"time_limit_s = {max(1.0, spec.interval_real_s)!r}",
        f"state_dir = {json.dumps(str(spec.run_dir / 'controller'))}",
        f"audit_log = {json.dumps(str(spec.run_dir / 'controller' / 'audit.jsonl'))}",
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
    if len(segs) > 1:
        for k, s in ck.seconds_by_type().items():
            gpu_seconds[k] = s * time_scale * job.gpus
    return JobRecord(
        job_id=job.trace_id, tenant=job.account, arrival_s=float(arrival or 0.0), start_s=start, end_s=end,
        gpu_type=(acct.gpu_type if acct and acct.gpu_type else (segs[-1].gpu_type if segs else None)),
        gpus=job.gpus, weight=job.weight, work=job.total_steps, throughput=job.tput, gpu_seconds=gpu_seconds,
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
        self.tb, self.spec = tb, spec
        self.say: Say = say or (lambda _m: None)
        self.clock, self.sleep = clock, sleep
        self.controller: subprocess.Popen | None = None
        self.config_path = spec.run_dir / "controller.toml"
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

    def _cancel(self, ids: Sequence[str]) -> None:
        if ids:
            self.tb.run(["scancel", *ids], timeout=30, check=False)

    def _accounting(self, since: datetime, ids: set[str], wait_s: float = 60.0) -> dict[str, AccountingRecord]:
        """sacct records of ``ids``, waiting until slurmdbd has every end time."""
        from ..slurm.cli import SlurmCli

        port = SlurmCli(env=dict(self.tb.env), cluster=self.tb.config.cluster_name)
        deadline = self.clock() + wait_s
        while True:
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
        self.config_path.write_text(controller_config(self.spec, self.tb.config.cluster_name, weights, solver))
        log = open(self.spec.run_dir / "controller.log", "ab")
        self.controller = subprocess.Popen(
            self._cli_argv("run", "--loop", "--interval", repr(self.spec.interval_real_s), "--json",
                           "--config", str(self.config_path)),
            stdout=log, stderr=subprocess.STDOUT, env=self.tb.client_env(), start_new_session=True,
        )
        log.close()

    def _stop_controller(self) -> int | None:
        p = self.controller
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=max(30.0, 3 * self.spec.interval_real_s))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        return p.returncode

    def _revert(self) -> str:
        proc = subprocess.run(
            self._cli_argv("revert", "--config", str(self.config_path)),
            env=self.tb.client_env(), capture_output=True, text=True, timeout=300,
        )
        (self.spec.run_dir / "revert.log").write_text(proc.stdout + proc.stderr)
        return "ok" if proc.returncode == 0 else f"exit {proc.returncode}"

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
        since = datetime.fromtimestamp(math.floor(self.clock()) - 2)
        if spec.policy:
            self._start_controller(weights)
            self.sleep(min(2.0, spec.interval_real_s))  # let the first cycle see the empty queue
        t0 = float(math.ceil(self.clock()))
        self.sleep(max(0.0, t0 - self.clock()))
        pending = list(jobs)
        submitted: dict[str, BenchJob] = {}
        timed_out = False
        last_poll = 0.0
        try:
            while True:
                now = self.clock()
                while pending and t0 + pending[0].arrival_s / spec.time_scale <= now:
                    job = pending.pop(0)
                    self._submit(job)
                    submitted[job.slurm_id] = job
                if submitted and now - last_poll >= 0.5:
                    last_poll = now
                    polled = self._poll(set(submitted))
                    if polled is not None and not pending and not polled:
                        break
                if now - t0 > timeout:
                    timed_out = True
                    break
                nxt = t0 + pending[0].arrival_s / spec.time_scale if pending else now + 0.5
                self.sleep(max(0.02, min(0.25, nxt - self.clock())))
        except BaseException:
            self._cleanup(submitted)
            raise
        end_wall = self.clock()
        if timed_out:
            left = sorted(self._active(set(submitted)))
            self.say(f"timeout after {timeout:.0f} s: cancelling {len(left)} unfinished job(s) of this run")
            self._cancel(left)
        ctl_rc = self._stop_controller()
        reverted = self._revert() if spec.policy else None
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
                "capacity": self.capacity, "started_at": datetime.fromtimestamp(t0).isoformat(),
                "timed_out": timed_out, "run_dir": str(spec.run_dir),
                "requeue_hold_real_s": self.tb.config.cred_expire_s + 1,
                "controller": ({**cycles_info, "exit_code": ctl_rc, "revert": reverted}
                               if cycles_info is not None else None),
                "units": "trace seconds (real seconds x time_scale); sacct resolution 1 s real",
            },
            "metrics": metrics,
            "jobs": [_job_row(j, accts.get(j.slurm_id), cks.get(j.trace_id), r) for j, r in zip(jobs, records)],
            "emulation": errors,
        }
        return BenchResult(doc, jobs)

    def _cleanup(self, submitted: Mapping[str, BenchJob]) -> None:
        """Interrupted: cancel this run's own jobs, stop the controller, revert (best effort)."""
        try:
            self._cancel(sorted(self._active(set(submitted))))
        finally:
            self._stop_controller()
            if self.spec.policy and self.config_path.is_file():
                try:
                    self._revert()
                except (OSError, subprocess.SubprocessError):
                    pass


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
