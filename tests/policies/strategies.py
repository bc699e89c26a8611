"""Hypothesis strategies for allocation problems with the awkward cases built in."""

from __future__ import annotations

from hypothesis import strategies as st

from slurm_fair.model import Job, Problem


@st.composite
def problems(draw, min_types: int = 1, max_types: int = 5) -> Problem:
    """Problems with 1..5 GPU types, 1..4 tenants, jobs that cannot run on some types, weights
    far apart (up to 100x), capacity from scarce to abundant, a tenant with one tiny job."""
    ntypes = draw(st.integers(min_types, max_types))
    types = [f"g{i}" for i in range(ntypes)]
    caps = {k: draw(st.integers(0 if i else 1, 12)) for i, k in enumerate(types)}
    ntenants = draw(st.integers(1, 4))
    weights = {f"u{i}": draw(st.sampled_from([1.0, 1.0, 2.0, 0.01 * 100, 100.0, 0.5])) for i in range(ntenants)}
    jobs = []
    for u in weights:
        for j in range(draw(st.integers(1, 4))):
            thr = {}
            for k in types:
                if draw(st.booleans()) or k == types[0]:
                    thr[k] = draw(st.sampled_from([0.01, 0.5, 1.0, 2.5, 7.0, 10.0]))
            jobs.append(Job(f"{u}-{j}", u, draw(st.sampled_from([1, 1, 2, 4, 8])), thr))
    if draw(st.booleans()):  # a tenant with one tiny job
        jobs.append(Job("tiny", "tiny", 1, {types[-1]: 0.001, types[0]: 0.002}))
    return Problem(caps, weights, jobs)
