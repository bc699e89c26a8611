"""The one-sweep forms of the history-wide measures give what their definitions give.

``fairness.rhos_at_arrival`` and ``metrics.samples_from_records`` were rewritten as sweeps over
time (issue 42: a 100,000-job history made them quadratic). Each is checked against its
definition computed the direct way: a Problem of the jobs present at each arrival with
``fairness.isolated_jct``, and ``JobRecord.running_at`` at every round's midpoint.
"""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from slurm_fair import fairness
from slurm_fair.model import Job, Problem
from slurm_fair.sim.metrics import JobRecord, samples_from_records

CAP = {"a": 4, "b": 2}
TENANTS = ("t1", "t2", "t3")


@st.composite
def spans(draw):
    n = draw(st.integers(1, 12))
    out = []
    for i in range(n):
        arrival = float(draw(st.integers(0, 20)) * 50)  # ties on purpose
        ends = draw(st.booleans())
        length = float(draw(st.integers(0, 30)) * 25)
        out.append(fairness.JobSpan(
            id=f"j{i}", tenant=draw(st.sampled_from(TENANTS)), weight={"t1": 1.0, "t2": 2.0, "t3": 0.5}[TENANTS[i % 3]],
            gpus=draw(st.sampled_from((1, 2))),
            throughput={"a": draw(st.sampled_from((0.0, 1.0, 3.0))), "b": draw(st.sampled_from((0.5, 2.0)))},
            arrival_s=arrival, end_s=arrival + length if ends else None, work=draw(st.sampled_from((None, 100.0, 900.0)))))
    return out


def direct_rhos(spans, capacity):
    """The definition: a Problem of the jobs in the system at each arrival (itself included)."""
    out = {}
    for s in spans:
        if s.end_s is None or not s.work or not s.throughput:
            continue
        present = [p for p in spans if p.arrival_s <= s.arrival_s and (p.end_s is None or p.end_s > s.arrival_s
                                                                        or p.id == s.id)]
        weights = {}
        for p in sorted(present, key=lambda p: p.arrival_s):
            weights[p.tenant] = p.weight
        problem = Problem(capacity, weights, tuple(Job(p.id, p.tenant, p.gpus, p.throughput) for p in present))
        iso = fairness.isolated_jct(problem, s.id, s.work)
        if iso:
            out[s.id] = (s.end_s - s.arrival_s) / iso
    return out


@settings(max_examples=150, deadline=None)
@given(spans())
def test_rhos_at_arrival_is_its_definition(spans):
    # one weight per tenant, as every caller has it
    weight = {}
    fixed = []
    for s in spans:
        weight.setdefault(s.tenant, s.weight)
        fixed.append(fairness.JobSpan(s.id, s.tenant, weight[s.tenant], s.gpus, s.throughput, s.arrival_s, s.end_s,
                                      s.work))
    got = fairness.rhos_at_arrival(fixed, CAP)
    want = direct_rhos(fixed, CAP)
    assert got.keys() == want.keys()
    for k in want:
        assert math.isclose(got[k], want[k], rel_tol=1e-9)


@st.composite
def records(draw):
    out = []
    for i in range(draw(st.integers(1, 10))):
        arrival = float(draw(st.integers(0, 10)) * 100)
        start = arrival + draw(st.integers(0, 10)) * 70 if draw(st.booleans()) else None
        end = None
        if start is not None and draw(st.booleans()):
            end = start + draw(st.integers(1, 20)) * 90.0
        elif start is None and draw(st.booleans()):
            end = arrival + 500.0  # cancelled while waiting
        runs = ()
        if start is not None and end is not None and draw(st.booleans()):
            mid = (start + end) / 2
            runs = ((start, mid - 10, "a"), (mid, end, "b"))
        out.append(JobRecord(f"j{i}", draw(st.sampled_from(TENANTS)), arrival, start, end,
                             draw(st.sampled_from(("a", "b", None))), draw(st.sampled_from((1, 2))),
                             throughput=draw(st.sampled_from(({}, {"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 2.0}))),
                             runs=runs))
    return out


def direct_samples(records, capacity, round_s):
    """The definition: every record asked whether it runs at each round's midpoint."""
    ends = [r.end_s for r in records if r.end_s is not None]
    if not [r for r in records if r.start_s is not None] or not ends:
        return []
    t0, t1 = min(r.arrival_s for r in records), max(ends)
    out = []
    for i in range(max(1, math.ceil((t1 - t0) / round_s))):
        mid = t0 + (i + 0.5) * round_s
        busy, tenants, wanted = {}, {}, set()
        for r in records:
            k = r.running_at(mid)
            if not k:
                if r.arrival_s <= mid and (r.end_s is None or r.end_s > mid):
                    wanted |= {t for t, v in r.throughput.items() if v > 0} if r.throughput else set(capacity)
                continue
            busy[k] = busy.get(k, 0) + r.gpus
            tenants[r.tenant] = tenants.get(r.tenant, 0) + r.gpus
        frag = sum(max(0, c - busy.get(k, 0)) for k, c in capacity.items() if k in wanted)
        out.append((busy, tenants, frag))
    return out


@settings(max_examples=150, deadline=None)
@given(records(), st.sampled_from((60.0, 360.0)))
def test_samples_from_records_is_its_definition(records, round_s):
    got = samples_from_records(records, CAP, round_s)
    want = direct_samples(records, CAP, round_s)
    assert [(dict(s.busy), dict(s.tenant_gpus), s.fragmented_gpus) for s in got] == want
