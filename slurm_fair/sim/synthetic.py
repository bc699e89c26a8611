"""A synthetic workload in the shape of Gavel's experiments.

* job types: uniform over the job types of the throughput table (Gavel draws its job type
  uniformly from its table too);
* GPU count and duration: drawn from the Philly distribution (a summary embedded as
  ``slurm_fair/data/philly_distribution_summary.json``: the probability of 1/2/4/8 GPUs and 21
  duration quantiles per GPU count, from Gavel's ``philly_job_distribution.csv``, MIT). The
  duration is interpolated log-linearly between quantiles;
* ``total_steps = duration * T`` on the fastest type (V100 in Gavel's table), so the duration is
  the job's run time alone on its best GPU; a type measured only at 1 GPU uses the table's
  documented fallback for larger gangs;
* arrivals: a Poisson process of ``rate`` jobs per hour (exponential gaps), the first at 0;
* tenants: ``tenant-1`` ... ``tenant-T``, each job to a uniformly drawn tenant.

Everything comes from one ``random.Random(seed)``, so a (N, T, seed, rate) tuple is a workload.
"""

from __future__ import annotations

import bisect
import json
import math
import random
from importlib import resources

from ..errors import UserError
from ..estimates.gavel import ThroughputTable
from .workload import TraceJob, Workload, make_workload


def _summary() -> dict:
    text = resources.files("slurm_fair").joinpath("data", "philly_distribution_summary.json").read_text()
    return json.loads(text)


def _duration(rng: random.Random, quantiles: list[float]) -> float:
    """Inverse-CDF sample, log-linear between the 21 quantiles."""
    u = rng.random() * (len(quantiles) - 1)
    i = min(int(u), len(quantiles) - 2)
    lo, hi = math.log(quantiles[i]), math.log(quantiles[i + 1])
    return math.exp(lo + (hi - lo) * (u - i))


def generate(
    n_jobs: int,
    tenants: int,
    seed: int,
    rate_per_hour: float,
    table: ThroughputTable,
    max_duration_s: float | None = None,
) -> Workload:
    """``n_jobs`` jobs of Gavel's mix for ``tenants`` tenants (see the module docstring).

    ``max_duration_s`` caps the drawn durations (Philly's tail reaches two months).
    """
    if n_jobs < 1 or tenants < 1:
        raise UserError("--synthetic needs at least one job and one tenant")
    if not rate_per_hour > 0:
        raise UserError("--rate must be > 0 jobs per hour")
    rng = random.Random(seed)
    summary = _summary()["gpus"]
    counts = sorted(int(g) for g in summary)
    cumulative = []
    acc = 0.0
    for g in counts:
        acc += summary[str(g)]["probability"]
        cumulative.append(acc)
    job_types = table.job_types
    ref = [k for k in table.gpu_types if not k.endswith("_unconsolidated")]
    t = 0.0
    jobs: list[TraceJob] = []
    for i in range(n_jobs):
        if i:
            t += rng.expovariate(rate_per_hour / 3600.0)
        g = counts[min(bisect.bisect_left(cumulative, rng.random() * acc), len(counts) - 1)]
        duration = _duration(rng, summary[str(g)]["duration_quantiles_s"])
        if max_duration_s is not None:
            duration = min(duration, max_duration_s)
        job_type = rng.choice(job_types)
        tenant = f"tenant-{rng.randrange(tenants) + 1}"
        best = max(table.lookup(job_type, g, k) for k in ref)
        jobs.append(TraceJob(f"{tenant}/{i + 1}", tenant, job_type, g, round(duration * best, 3), round(t, 3)))
    return make_workload(jobs, {}, [f"synthetic(n={n_jobs},tenants={tenants},seed={seed},rate={rate_per_hour}/h)"])
