"""The paper's metrics by hand: Hops' age (Eq. 9), latency ratio W / A (Eqs. 6, 8), a job's wait,
Avg.frag, and the renamed JCT-based slowdown; invariants with hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import fairness
from slurm_fair.sim import metrics
from slurm_fair.sim.metrics import JobRecord, RoundSample


def test_age_is_eq9_by_hand() -> None:
    # 1 v100 + 3 k80: shares 1/4, 3/4; run time alone 1200/4 = 300 s on v100, 1200/1 on k80
    assert fairness.age_s(1200.0, {"v100": 4.0, "k80": 1.0}, {"v100": 1, "k80": 3}) == pytest.approx(
        0.25 * 300 + 0.75 * 1200)
    # a type it cannot run on (no throughput) has no run time: only the usable GPUs share
    assert fairness.age_s(1200.0, {"v100": 4.0, "k80": 1.0}, {"v100": 1, "k80": 3, "p100": 4}) == pytest.approx(975.0)
    assert fairness.age_s(1200.0, {"v100": 4.0, "k80": 0.0}, {"v100": 1, "k80": 3}) == pytest.approx(300.0)
    assert math.isinf(fairness.age_s(10.0, {"p100": 1.0}, {"v100": 2}))


def test_latency_ratio_is_wait_over_age() -> None:
    assert fairness.latency_ratio(975.0, 975.0) == 1.0
    assert fairness.latency_ratio(300.0, 1200.0) == pytest.approx(0.25)
    assert fairness.latency_ratio(0.0, 0.0) == 0.0  # never waited
    assert math.isinf(fairness.latency_ratio(5.0, 0.0))


def test_wait_is_time_in_the_system_not_running() -> None:
    # arrived 0, ran 100..400 and 1000..1300: JCT 1300, ran 600, waited 100 + 600
    rec = JobRecord("j", "t", 0.0, 100.0, 1300.0, "k80", 1, runs=((100.0, 400.0, "v100"), (1000.0, 1300.0, "k80")))
    assert rec.ran_s() == 600.0 and rec.wait_s == 700.0
    # one run: the wait is the queue time
    assert JobRecord("j", "t", 50.0, 80.0, 200.0, "k80", 1).wait_s == 30.0
    # the simulator's own run time wins over start..end (stopped between rounds, no runs)
    assert JobRecord("j", "t", 0.0, 0.0, 1000.0, "k80", 1, run_s=400.0).wait_s == 600.0
    assert JobRecord("j", "t", 0.0, 10.0, None, "k80", 1).wait_s is None


def test_job_latency_ratio_and_slowdown_by_hand() -> None:
    rec = JobRecord("j", "t", 0.0, 300.0, 1500.0, "k80", 1, work=1200.0, throughput={"v100": 4.0, "k80": 1.0})
    cap = {"v100": 1, "k80": 3}
    assert metrics.job_age(rec, cap) == pytest.approx(975.0)
    assert metrics.job_latency_ratio(rec, cap) == pytest.approx(300.0 / 975.0)
    # slowdown (the old "max LR"): JCT over run time alone on the fastest type
    assert metrics.job_slowdown(rec) == pytest.approx(1500.0 / 300.0)
    # without work and throughputs (a real-cluster record) the age is the time it ran
    flat = JobRecord("j", "t", 0.0, 300.0, 1500.0, "k80", 1)
    assert metrics.job_latency_ratio(flat, cap) == pytest.approx(300.0 / 1200.0)
    s = metrics.summarize([rec, flat], [], cap)
    assert s["avg_wait_s"] == 300.0 and s["latency_ratio_max"] == pytest.approx(300.0 / 975.0)
    assert s["latency_ratio_mean"] == pytest.approx((300.0 / 975.0 + 0.25) / 2)
    assert s["max_slowdown"] == pytest.approx(5.0) and s["fragmentation"] is None


def test_avg_frag_is_the_mean_over_all_rounds() -> None:
    cap = {"v100": 4}
    samples = [RoundSample(i * 60.0, 60.0, cap, {"v100": 2}, fragmented_gpus=f) for i, f in enumerate([2, 0, 1, 0])]
    assert metrics.round_metrics(samples)["fragmentation"] == pytest.approx(3 / 4)


def test_fragmentation_from_records_by_hand() -> None:
    """Rounds of 360 s from 0 (midpoints 180, 540, 900) on 2 v100 + 2 k80. a runs 0..720 on one
    v100; b (v100 only) waits until 720, then runs on both v100s; c (throughputs unknown: any
    type) arrives at 400 and runs on a k80 from 900. Round 0: b waits, 1 v100 idle -> 1; round 1:
    b and c wait, 1 v100 + 2 k80 idle -> 3; round 2: nobody waits -> 0 (1 k80 idle is no
    fragment)."""
    cap = {"v100": 2, "k80": 2}
    recs = [
        JobRecord("a", "t", 0.0, 0.0, 720.0, "v100", 1, work=720.0, throughput={"v100": 1.0, "k80": 0.5}),
        JobRecord("b", "t", 0.0, 720.0, 1080.0, "v100", 2, work=360.0, throughput={"v100": 1.0}),
        JobRecord("c", "u", 400.0, 900.0, 1080.0, "k80", 1),
    ]
    samples = metrics.samples_from_records(recs, cap, 360.0)
    assert [s.fragmented_gpus for s in samples] == [1, 3, 0]
    assert metrics.round_metrics(samples)["fragmentation"] == pytest.approx(4 / 3)


@st.composite
def records(draw) -> tuple[list[JobRecord], dict[str, int]]:
    cap = {"v100": draw(st.integers(1, 6)), "k80": draw(st.integers(0, 6))}
    out = []
    for i in range(draw(st.integers(1, 6))):
        arrival = draw(st.integers(0, 2000))
        wait = draw(st.integers(0, 2000))
        run = draw(st.integers(1, 2000))
        thr = {"v100": float(draw(st.integers(1, 8))), "k80": float(draw(st.integers(0, 8)))}
        on = draw(st.sampled_from(sorted(k for k, c in cap.items() if c > 0)))
        out.append(JobRecord(f"j{i}", "t", arrival, arrival + wait, arrival + wait + run, on,
                             draw(st.integers(1, cap[on])), work=float(run), throughput=thr))
    return out, cap


@settings(max_examples=scaled(60), deadline=None)
@given(records())
def test_invariants(case) -> None:
    recs, cap = case
    for r in recs:
        assert r.wait_s is not None and 0.0 <= r.wait_s <= r.jct_s
        lr = metrics.job_latency_ratio(r, cap)
        assert lr is not None and lr >= 0.0
        assert (lr == 0.0) == (r.wait_s == 0.0)
    samples = metrics.samples_from_records(recs, cap, 100.0)
    for s in samples:
        assert 0 <= s.fragmented_gpus <= sum(cap.values())
    m = metrics.summarize(recs, samples, cap)
    assert m["latency_ratio_mean"] <= m["latency_ratio_max"] * (1 + 1e-12)
    assert 0.0 <= m["fragmentation"] <= sum(cap.values())
