"""A synthetic workload in the shape of Gavel's experiments.

* job types: uniform over the job types of the throughput table (Gavel draws its job type
  uniformly from its table too);
* GPU count and duration, two mixes (``mix``):

  - ``philly`` (the default): drawn from the Philly distribution (a summary embedded as
    ``slurm_fair/data/philly_distribution_summary.json``: the probability of 1/2/4/8 GPUs and 21
    duration quantiles per GPU count, from Gavel's ``philly_job_distribution.csv``, MIT). The
    duration is interpolated log-linearly between quantiles;
  - ``gavel``: the generator of Gavel's own simulations (``scheduler/utils.py``, MIT), which
    Hops' and Gavel's load sweeps draw from: 1/2/4/8 GPUs with probability 0.70/0.10/0.15/0.05,
    duration ``60 * 10**U(1.5, 3)`` s (32 min to 17 h) with probability 0.8, else
    ``60 * 10**U(3, 4)`` s (17 h to 7 days). The GPU count and the duration are drawn
    independently, as in Gavel;
  - ``gavel-single``: the same durations, every job on 1 GPU (Gavel's "continuous-single"
    traces, where its 3.5x over heterogeneity-agnostic policies was measured);
* ``total_steps = duration * T`` on the fastest type (V100 in Gavel's table), so the duration is
  the job's run time alone on its best GPU; a type measured only at 1 GPU uses the table's
  documented fallback for larger gangs;
* arrivals: a Poisson process of ``rate`` jobs per hour (exponential gaps), the first at 0;
* tenants: ``tenant-1`` ... ``tenant-T``, each job to a uniformly drawn tenant.

Everything comes from one ``random.Random(seed)``, so a (N, T, seed, rate, mix) tuple is a
workload.
"""

from __future__ import annotations

import bisect
import json
import math
import random
from importlib import resources
from typing import Callable

from ..errors import UserError
from ..estimates.gavel import ThroughputTable
from .workload import TraceJob, Workload, make_workload


def _summary() -> dict:
    text = resources.files("slurm_fair").joinpath("data").joinpath("philly_distribution_summary.json").read_text()
    return json.loads(text)


def _duration(rng: random.Random, quantiles: list[float]) -> float:
    """Inverse-CDF sample, log-linear between the 21 quantiles."""
    u = rng.random() * (len(quantiles) - 1)
    i = min(int(u), len(quantiles) - 2)
    lo, hi = math.log(quantiles[i]), math.log(quantiles[i + 1])
    return math.exp(lo + (hi - lo) * (u - i))


#: the mixes ``generate`` knows (``--job-mix``)
MIXES = ("philly", "gavel", "gavel-single")
#: Gavel's scale factors and their probabilities (``_generate_scale_factor``)
GAVEL_GPUS = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))


def _gavel_duration(rng: random.Random) -> float:
    """Gavel's ``_generate_duration``: log-uniform minutes, a long-job component of 20 %."""
    if rng.random() >= 0.8:
        return 60 * 10 ** rng.uniform(3, 4)
    return 60 * 10 ** rng.uniform(1.5, 3)


def _sampler(mix: str) -> Callable[[random.Random], tuple[int, float]]:
    """(GPUs, duration alone on the fastest type in s) for one job of ``mix``."""
    if mix == "gavel":
        gpus = [g for g, _ in GAVEL_GPUS]
        weights = [w for _, w in GAVEL_GPUS]
        return lambda rng: (rng.choices(gpus, weights)[0], _gavel_duration(rng))
    if mix == "gavel-single":
        return lambda rng: (1, _gavel_duration(rng))
    if mix != "philly":
        raise UserError(f"--job-mix {mix!r}: expected one of {', '.join(MIXES)}")
    summary = _summary()["gpus"]
    counts = sorted(int(g) for g in summary)
    cumulative = []
    acc = 0.0
    for g in counts:
        acc += summary[str(g)]["probability"]
        cumulative.append(acc)

    def draw(rng: random.Random) -> tuple[int, float]:
        g = counts[min(bisect.bisect_left(cumulative, rng.random() * acc), len(counts) - 1)]
        return g, _duration(rng, summary[str(g)]["duration_quantiles_s"])

    return draw


#: fewest steps of a synthetic job (the drawn steps are rounded to 3 decimals, as a trace writes them)
MIN_STEPS = 0.001


def _tenant(i: int) -> str:
    """The name of the ``i``-th (0-based) synthetic tenant."""
    return f"tenant-{i + 1}"


def synthetic_tenants(tenants: int) -> list[str]:
    """Every tenant name ``--synthetic`` may draw with ``--tenants N`` (``--weight`` names one
    of them, drawn or not)."""
    return [_tenant(i) for i in range(tenants)]


def generate(
    n_jobs: int,
    tenants: int,
    seed: int,
    rate_per_hour: float,
    table: ThroughputTable,
    max_duration_s: float | None = None,
    mix: str = "philly",
) -> Workload:
    """``n_jobs`` jobs of ``mix`` for ``tenants`` tenants (see the module docstring).

    ``max_duration_s`` caps the drawn durations (Philly's tail reaches two months, Gavel's a
    week).
    """
    if n_jobs < 1 or tenants < 1:
        raise UserError("--synthetic needs at least one job and one tenant")
    if not rate_per_hour > 0:
        raise UserError("--rate must be > 0 jobs per hour")
    rng = random.Random(seed)
    draw = _sampler(mix)
    job_types = table.job_types
    ref = [k for k in table.gpu_types if not k.endswith("_unconsolidated")]
    t = 0.0
    jobs: list[TraceJob] = []
    for i in range(n_jobs):
        if i:
            t += rng.expovariate(rate_per_hour / 3600.0)
        g, duration = draw(rng)
        if max_duration_s is not None:
            duration = min(duration, max_duration_s)
        job_type = rng.choice(job_types)
        tenant = _tenant(rng.randrange(tenants))
        best = max(table.lookup(job_type, g, k) for k in ref)
        # never 0 steps (a tiny --max-duration-h rounded them away): simulate refuses such a job
        steps = max(round(duration * best, 3), MIN_STEPS)
        jobs.append(TraceJob(f"{tenant}/{i + 1}", tenant, job_type, g, steps, round(t, 3)))
    label = f"synthetic(n={n_jobs},tenants={tenants},seed={seed},rate={rate_per_hour}/h"
    label += ")" if mix == "philly" else f",mix={mix})"
    return make_workload(jobs, {}, [label])
