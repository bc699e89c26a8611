"""The per-job measures' one home (fairness.rhos_at_arrival, wait_s, worst_latency_ratio),
checked against values worked out by hand."""

from __future__ import annotations

import pytest

from slurm_fair import fairness
from slurm_fair.fairness import JobSpan


def test_rho_baseline_is_frozen_at_arrival_over_the_jobs_present_then() -> None:
    # one type of 4 GPUs; a arrives alone at 0 (isolated: all 4 GPUs -> 1 GPU job runs at
    # its full rate 1, JCT_iso = 100); b arrives at 50 while a is in the system (two tenants:
    # b owns half of the type, 2 GPUs >= its 1 GPU: JCT_iso = 100); c arrives after a left
    cap = {"v100": 4}
    spans = [
        JobSpan("a", "u", 1.0, 1, {"v100": 1.0}, 0.0, 300.0, 100.0),
        JobSpan("b", "v", 1.0, 4, {"v100": 1.0}, 50.0, 450.0, 100.0),
        JobSpan("c", "v", 1.0, 4, {"v100": 1.0}, 400.0, 600.0, 100.0),
        JobSpan("d", "u", 1.0, 1, {"v100": 1.0}, 10.0, None, 100.0),  # not ended: no rho
    ]
    rho = fairness.rhos_at_arrival(spans, cap)
    assert rho["a"] == pytest.approx(300.0 / 100.0)
    # b: 4-GPU gang owning 2 of 4 GPUs in isolation -> half the time: JCT_iso = 200
    assert rho["b"] == pytest.approx(400.0 / 200.0)
    # c: d (tenant u, never ended) and b (ends 450 > 400) are present: v's two jobs b, c share
    # v's half -> c owns 1 GPU of 4 needed: JCT_iso = 400
    assert rho["c"] == pytest.approx(200.0 / 400.0)
    assert "d" not in rho


def test_a_span_without_work_is_present_but_has_no_rho() -> None:
    spans = [JobSpan("a", "u", 1.0, 1, {"v100": 1.0}, 0.0, 10.0, None),
             JobSpan("b", "v", 1.0, 2, {"v100": 1.0}, 5.0, 20.0, 10.0)]
    rho = fairness.rhos_at_arrival(spans, {"v100": 2})
    assert set(rho) == {"b"}
    assert rho["b"] == pytest.approx(15.0 / 20.0)  # b owns 1 of its 2 GPUs: JCT_iso 20


def test_worst_latency_ratio_counts_jobs_of_at_least_the_minimum_age() -> None:
    pairs = [(360.0, 1.0), (100.0, 400.0), (0.0, 50.0)]
    assert fairness.worst_latency_ratio(pairs) == pytest.approx(360.0)
    assert fairness.worst_latency_ratio(pairs, 360.0) == pytest.approx(0.25)
    assert fairness.worst_latency_ratio(pairs, 1e6) is None
    assert fairness.wait_s(10.0, 12.0) == 0.0 and fairness.wait_s(12.0, 10.0) == 2.0
