"""Builders shared by the simulator tests (imported as ``simhelpers``): small throughput tables and stand-in policies.

The stand-ins are local to the tests on purpose: the simulator must work with any policy of
the registry's signature, and its tests must not depend on a particular engine policy.
"""

from __future__ import annotations

from hypothesis import strategies as st

import json
from pathlib import Path
from typing import Callable

from slurm_fair.estimates import gavel as tt
from slurm_fair.model import Allocation, Problem
from slurm_fair.policies import PolicyInfo, PolicyOptions


def table_from(data: dict[str, dict[tuple[str, int], float]]) -> tt.ThroughputTable:
    """A throughput table straight from ``{gpu_type: {(job_type, gpus): steps_per_s}}``."""
    return tt.ThroughputTable(data={k: dict(v) for k, v in data.items()}, source="test")


def write_table(path: Path, data: dict[str, dict[tuple[str, int], float]]) -> Path:
    doc = {k: {tt.format_key(*key): {"null": v} for key, v in rows.items()} for k, rows in data.items()}
    path.write_text(json.dumps(doc))
    return path


def standin(name: str, fn: Callable[[Problem, PolicyOptions], dict[str, dict[str, float]]], dynamic: bool = False) -> PolicyInfo:
    """A PolicyInfo around a function returning ``x``."""

    def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
        return Allocation(policy=name, x=fn(problem, options), status="heuristic")

    return PolicyInfo(name, allocate, "test stand-in", dynamic)


def oldest_first(problem: Problem, options: PolicyOptions) -> dict[str, dict[str, float]]:
    """Each job on its fastest type, oldest (then smallest id) first, while it fits."""
    free = dict(problem.gpu_types)
    x: dict[str, dict[str, float]] = {}
    for job in sorted(problem.jobs, key=lambda j: (-(j.age_s or 0.0), j.id)):
        for k in sorted(problem.types, key=lambda k: -job.throughput.get(k, 0.0)):
            if job.throughput.get(k, 0.0) > 0 and free[k] >= job.gpus:
                free[k] -= job.gpus
                x[job.id] = {k: 1.0}
                break
    return x


def even_split(problem: Problem, options: PolicyOptions) -> dict[str, dict[str, float]]:
    """Every job asks for an equal slice of every type it can run on (often over capacity:
    the rounding step must still respect capacity)."""
    return {
        j.id: {k: 1.0 / len(problem.types) for k in problem.types if j.throughput.get(k, 0.0) > 0}
        for j in problem.jobs
    }



def scripted(name: str, rounds: list[dict[str, str]]) -> PolicyInfo:
    """A dynamic stand-in that runs round ``i``'s jobs on the types of ``rounds[i]`` (x = 1; the
    last entry from then on). Solved every round, it counts its calls in ``options.state``, so
    a test decides by hand who runs where in each round."""

    def fn(problem: Problem, options: PolicyOptions) -> dict[str, dict[str, float]]:
        i = options.state.get("calls", 0)
        options.state["calls"] = i + 1
        present = {j.id for j in problem.jobs}
        return {j: {k: 1.0} for j, k in rounds[min(i, len(rounds) - 1)].items() if j in present}

    return standin(name, fn, dynamic=True)


def taking_turns(problem: Problem, options: PolicyOptions) -> dict[str, dict[str, float]]:
    """Every job on its fastest type, but only the jobs of one parity of the round number (in
    ``options.state``): a dynamic policy that stops every running job each round."""
    i = options.state.get("calls", 0)
    options.state["calls"] = i + 1
    return {
        j.id: {max(j.throughput, key=lambda k: j.throughput[k]): 1.0}
        for n, j in enumerate(sorted(problem.jobs, key=lambda j: j.id))
        if (n + i) % 2 == 0 and j.best_throughput > 0
    }


def job_rows(shapes: list) -> st.SearchStrategy:
    """1-10 trace rows ``(tenant, shape, total_steps, arrival_s)`` of three tenants, for the
    engine's property tests; ``shapes`` are what the test's cluster model takes (GPUs, or
    ``(gpus, nodes)``)."""
    return st.lists(
        st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.sampled_from(shapes),
                  st.integers(1, 20000), st.integers(0, 3000)),
        min_size=1, max_size=10,
    )
