"""What a replay runs: its spec, and the trace's jobs as they will be submitted to the testbed.

Pure (no Slurm): the trace's tenants mapped onto the testbed's accounts, every job's throughput
on every testbed GPU type, the check that each gang fits on some node type, the default timeout.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ...estimates import gavel as tt
from ...estimates.classes import gavel_class_name
from ...errors import TestbedError, UserError
from ...gangs import Shape, can_hold
from ...sim.workload import Workload


@dataclass(frozen=True)
class ReplaySpec:
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
    #: submit without ``fair:class`` (``--untagged``): the controller knows only the type priors
    #: and what it learns from the testbed's accounting (job names recur per tenant and class)
    untagged: bool = False

    @property
    def interval_real_s(self) -> float:
        """Real seconds between controller cycles (at least 1: a cycle takes most of a second
        on the testbed, and two cores also run Slurm and the jobs)."""
        return max(1.0, (self.interval_s or self.round_s / 6.0) / self.time_scale)

    @property
    def round_real_s(self) -> float:
        return self.round_s / self.time_scale


@dataclass
class ReplayJob:
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
) -> list[ReplayJob]:
    """The jobs to submit, arrival-ordered, with their throughput on every testbed GPU type."""
    jobs = []
    for j in workload.jobs:
        tput = {k: float(table.lookup(j.job_type, j.gpus, k)) for k in gpu_types}
        if max(tput.values(), default=0.0) <= 0:
            raise UserError(f"trace job {j.id}: {j.job_type} on {j.gpus} GPU(s) runs on no GPU type of the testbed")
        acct = mapping[j.tenant]
        jobs.append(ReplayJob(j.id, j.tenant, acct, j.job_type, j.gpus, j.total_steps, j.arrival_s, tput,
                              float(weights.get(acct, 1.0)), nodes=j.nodes or 1))
    return jobs


def check_fits(jobs: Sequence[ReplayJob], node_gpus: Mapping[str, tuple[str, int]]) -> None:
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


def default_timeout(jobs: Sequence[ReplayJob], time_scale: float) -> float:
    """Real seconds: the last arrival plus all work run back to back on the slowest usable types,
    divided by the number of GPUs' worth of parallelism we can count on (at least 8), x2, +60."""
    last = max(j.arrival_s for j in jobs)
    work = sum(max(j.expected_s(k) for k, t in j.tput.items() if t > 0) * j.gpus for j in jobs)
    return (last + 2.0 * work / 8.0) / time_scale + 60.0


def node_layout(nodes: Sequence[tuple[str, int]]) -> dict[str, str]:
    """``{type: "2x4+1x8"}``: nodes x GPUs per node of each type (the simulator's --cluster form)."""
    count: dict[str, dict[int, int]] = {}
    for k, g in nodes:
        count.setdefault(k, {})
        count[k][g] = count[k].get(g, 0) + 1
    return {k: "+".join(f"{n}x{g}" for g, n in sorted(sizes.items())) for k, sizes in count.items()}
