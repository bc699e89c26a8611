"""Every figure of the report on the tiny case (tiny.py), expectations worked out by hand.

Window 10 h; capacity 2 v100 + 2 k80 -> 20 GPU-hours of each type.
alice: a1 2xv100 5 h -> 10 v100 GPU-h, NTH 10*1.0 = 10; active 5 h -> demand 10 unit-hours.
bob:   b1 2xk80 10 h -> 20 k80 GPU-h, NTH 20*0.5 = 10; b2 1xv100 2 h -> 2 GPU-h, NTH 2;
       active: b1 10 h (20 unit-h), b2 3 h (04:00-07:00, 3 unit-h) -> demand 23.
"""

from __future__ import annotations

import math

import pytest

from slurm_fair.report import tables

from . import tiny


@pytest.fixture(scope="module")
def report() -> tables.Report:
    return tables.build(tiny.inputs())


def tt(report: tables.Report, tenant: str, gpu_type: str, col: str) -> float:
    df = report.tenant_type
    return float(df[(df["tenant"] == tenant) & (df["gpu_type"] == gpu_type)][col].iloc[0])


def tenant(report: tables.Report, name: str, col: str) -> float:
    return float(report.tenants.set_index("tenant").loc[name, col])


def test_gpu_hours_and_nth_per_tenant_and_type(report):
    assert tt(report, "alice", "v100", "gpu_hours") == pytest.approx(10.0)
    assert tt(report, "alice", "k80", "gpu_hours") == 0.0
    assert tt(report, "bob", "k80", "gpu_hours") == pytest.approx(20.0)
    assert tt(report, "bob", "v100", "gpu_hours") == pytest.approx(2.0)
    # bob's 20 k80 GPU-hours are worth only 10 at its k80 speed 0.5: the slow GPUs show
    assert tt(report, "bob", "k80", "nt_hours") == pytest.approx(10.0)
    assert tenant(report, "bob", "nt_hours") == pytest.approx(12.0)
    assert tenant(report, "alice", "nt_hours") == pytest.approx(10.0)


def test_entitled_and_received_shares(report):
    assert tt(report, "alice", "v100", "entitled_share") == pytest.approx(0.5)
    assert tt(report, "alice", "v100", "entitled_gpu_hours") == pytest.approx(10.0)
    assert tt(report, "alice", "v100", "received_share") == pytest.approx(10 / 12)
    assert tt(report, "bob", "v100", "received_share") == pytest.approx(2 / 12)
    assert tt(report, "bob", "k80", "received_share") == pytest.approx(1.0)
    assert tenant(report, "alice", "received_share") == pytest.approx(10 / 32)


# The equal share is a rate: slices 0-4 h (a1, b1 active), 4-5 (a1, b1, b2), 5-7 (b1, b2:
# bob alone, so all of it is his share), 7-10 (b1 alone).


def test_sharing_incentive_ratio(report):
    # alice: 0-4 half of each type = 4 v100-h + 4 k80-h, demand 8 -> 4 + 4*0.25 = 5;
    # 4-5: 1 + 1, demand 2 -> 1.25. V = 6.25; she had 10 -> 1.6
    assert tenant(report, "alice", "equal_share_value") == pytest.approx(6.25)
    assert tenant(report, "alice", "si_ratio") == pytest.approx(1.6)
    # bob: 0-4 -> 4 + 4*0.5 = 6; 4-5 -> 1 + 1*0.5 = 1.5 (demand 3); 5-7 alone: 4 v100-h + 4
    # k80-h, demand 6 -> 4 + 2*0.5 = 5; 7-10 alone: demand 6 -> 6 v100-h = 6. V = 18.5; 12/18.5
    assert tenant(report, "bob", "equal_share_value") == pytest.approx(18.5)
    assert tenant(report, "bob", "si_ratio") == pytest.approx(12 / 18.5)


def test_envy_matrix(report):
    # alice with bob's GPU-hours while she was active: 0-4 8 k80-h -> 8*0.25 = 2; 4-5 2 k80-h
    # -> 0.5; 2.5/10
    assert report.envy.loc["alice", "bob"] == pytest.approx(0.25)
    # bob with alice's: 0-4 8 v100-h (demand 8) -> 8; 4-5 2 v100-h (demand 3) -> 2; 10/12
    assert report.envy.loc["bob", "alice"] == pytest.approx(10 / 12)
    assert math.isnan(report.envy.loc["alice", "alice"])


def test_the_equal_share_is_a_rate_not_a_budget():
    """A tenant whose jobs come late cannot be owed the share of hours it was not there:
    with the window pooled, bob's equal share would be worth 15 (0.8); per moment it is 18.5
    only because he was alone for half of it; alone all the time he is owed what he asked."""
    inputs = tiny.inputs()
    only_bob = tuple(r for r in inputs.records if r.account == "bob")
    r = tables.build(type(inputs)(**{**inputs.__dict__, "records": only_bob}))
    # alone: all 4 GPUs are his share at every moment, so V = his demand at full speed where it fits:
    # 0-4 b1 8 unit-h -> 8 v100-h (2 v100 x 4 h); 4-5 b1 2 + b2 1 -> 2 v100 + 1 k80*0.5 = 2.5;
    # 5-7 4 v100-h + 2 k80-h*0.5 = 5; 7-10 6. V = 21.5
    assert float(r.tenants.set_index("tenant").loc["bob", "equal_share_value"]) == pytest.approx(21.5)


def test_weights_scale_entitlement_and_envy():
    inputs = tiny.inputs()
    heavy = tables.build(type(inputs)(**{**inputs.__dict__, "weights": {"alice": 1.0, "bob": 3.0}}))
    df = heavy.tenants.set_index("tenant")
    assert df.loc["bob", "entitled_share"] == pytest.approx(0.75)
    # bob's equal share: 0-4 3/4 of each type = 6 v100-h + 6 k80-h, demand 8 -> 6 + 2*0.5 = 7;
    # 4-5: 1.5 + 1.5, demand 3 -> 1.5 + 0.75 = 2.25; then alone as before: 5 + 6. V = 20.25
    assert df.loc["bob", "equal_share_value"] == pytest.approx(20.25)
    # bob with 3x alice's GPU-hours: 0-4 24 v100-h, demand 8 -> 8; 4-5 6, demand 3 -> 3; 11/12
    assert heavy.envy.loc["bob", "alice"] == pytest.approx(11 / 12)


def test_utilisation_and_efficiency(report):
    c = report.cluster.set_index("gpu_type")
    assert c.loc["v100", "utilisation"] == pytest.approx(12 / 20)
    assert c.loc["k80", "utilisation"] == pytest.approx(1.0)
    # E* : 20 v100-h: alice's 10 (1.0) + bob 10 (1.0); bob's other 13 on k80 (0.5) -> 26.5
    assert report.summary["nt_hours"] == pytest.approx(22.0)
    assert report.summary["nt_hours_bound"] == pytest.approx(26.5)
    assert report.summary["efficiency"] == pytest.approx(22 / 26.5)


def test_wait_jct_and_finish_time_fairness(report):
    j = report.jobs.set_index("job_id")
    assert j.loc["b2", "wait_s"] == 3600.0
    assert j.loc["a1", "jct_s"] == 5 * 3600.0
    # a1 at 00:00: active a1, b1 -> alice owns 1/2 of each type (1 v100 + 1 k80), her only job
    # a gang of 2: at most 0.5 of the time on each, v100 first: rate 0.5*1 + 0.5*0.25 = 0.625;
    # work 5 h on v100 -> JCT_iso 8 h; rho 5/8
    assert j.loc["a1", "ftf_rho"] == pytest.approx(5 / 8)
    # b1: the same for bob: rate 0.5 + 0.5*0.5 = 0.75; work 10 h * 0.5 = 5 h -> 6.67 h; rho 1.5
    assert j.loc["b1", "ftf_rho"] == pytest.approx(1.5)
    # b2 at 04:00: active a1, b1, b2: bob's half split over his 2 jobs (by job count, not by
    # GPU) -> b2 owns 0.5 v100 + 0.5 k80: 0.5 of the time on each -> rate 0.5 + 0.25 = 0.75;
    # work 2 h -> JCT_iso 8/3 h; JCT 3 h -> 1.125
    assert j.loc["b2", "ftf_rho"] == pytest.approx(1.125)
    assert tenant(report, "bob", "ftf_rho_max") == pytest.approx(1.5)
    assert tenant(report, "bob", "wait_mean_s") == pytest.approx(1800.0)


def test_timeline_integrates_to_the_gpu_hours(report):
    # mean over equal bins of the stacked share = GPU-hours / (GPUs x hours) = 32 / 40
    assert report.timeline.sum(axis=1).mean() == pytest.approx(32 / 40)
    assert report.timeline["alice"].mean() == pytest.approx(10 / 40)


def test_jobs_are_clipped_to_the_window():
    inputs = tiny.inputs()
    # a window 02:00-06:00: a1 contributes 3 h x 2, b1 4 h x 2, b2 1 h x 1
    from slurm_fair.report.window import Window

    w = Window(tiny.h(2), tiny.h(6))
    r = tables.build(type(inputs)(**{**inputs.__dict__, "window": w}))
    j = r.jobs.set_index("job_id")
    assert j.loc["a1", "gpu_hours"] == pytest.approx(6.0)
    assert j.loc["b1", "gpu_hours"] == pytest.approx(8.0)
    assert j.loc["b2", "gpu_hours"] == pytest.approx(1.0)
    assert r.cluster.set_index("gpu_type").loc["v100", "utilisation"] == pytest.approx(7 / 8)


def test_running_job_counts_until_now():
    inputs = tiny.inputs()
    running = tiny.record("r1", "alice", "k80", 1, 8, 8, None, state="RUNNING")
    new = type(inputs)(**{**inputs.__dict__, "records": inputs.records + (running,), "now": tiny.h(9)})
    r = tables.build(new)
    assert r.jobs.set_index("job_id").loc["r1", "gpu_hours"] == pytest.approx(1.0)
    assert math.isnan(r.jobs.set_index("job_id").loc["r1", "jct_s"])


def test_not_computed_is_explicit():
    inputs = tiny.inputs()
    one = type(inputs)(**{**inputs.__dict__, "records": inputs.records[:1]})
    r = tables.build(one)
    figures = [n.figure for n in r.not_computed]
    assert "envy matrix" in figures
    assert any("controller" in f for f in figures)
    empty = tables.build(type(inputs)(**{**inputs.__dict__, "records": ()}))
    assert any("per-tenant" in n.figure for n in empty.not_computed)
    assert any("efficiency" in n.figure for n in empty.not_computed)


def test_tenant_filter_keeps_fairness_over_everyone():
    r = tables.build(tiny.inputs(), tenant="bob")
    assert list(r.tenants["tenant"]) == ["bob"]
    assert r.tenants["si_ratio"].iloc[0] == pytest.approx(12 / 18.5)
    assert r.envy.loc["bob", "alice"] == pytest.approx(10 / 12)
    assert set(r.jobs["tenant"]) == {"bob"}


def test_a_requeued_job_counts_every_run_and_its_first_submission():
    """b2 split in two runs, as sacct -D shows a job requeued at 06:00: run 1 05:00-06:00
    (REQUEUED, submitted 04:00), run 2 06:30-07:30 (COMPLETED, Slurm reset Submit to 06:00)."""
    inputs = tiny.inputs()
    runs = (tiny.record("b2", "bob", "v100", 1, 4, 5, 6, state="REQUEUED"),
            tiny.record("b2", "bob", "v100", 1, 6, 6.5, 7.5))
    records = tuple(r for r in inputs.records if r.job_id != "b2") + runs
    r = tables.build(type(inputs)(**{**inputs.__dict__, "records": records}))
    runs_of_b2 = r.jobs[r.jobs["job_id"] == "b2"]
    assert len(runs_of_b2) == 2 and runs_of_b2["gpu_hours"].sum() == pytest.approx(2.0)
    assert tenant(r, "bob", "jobs") == 2  # jobs, not runs
    final = runs_of_b2[runs_of_b2["final"]]
    assert len(final) == 1
    # from the first submission (04:00) to the end (07:30); waited from 04:00 to its first start
    # and from its requeue (06:00) to its second start (06:30): JCT minus the 2 h it ran
    assert final["jct_s"].iloc[0] == pytest.approx(3.5 * 3600)
    assert final["wait_s"].iloc[0] == pytest.approx(5400.0)
    assert runs_of_b2[~runs_of_b2["final"]]["jct_s"].isna().all()
    # active 04:00-06:00 and 06:00-07:30 follow each other: bob's demand is as before plus 0.5 h
    assert tenant(r, "bob", "gpu_hours") == pytest.approx(22.0)


def test_gang_infeasible_types_count_nothing_and_n_is_relative_to_what_it_can_use():
    """An 8-GPU single-node job where only k80 nodes have 8 GPUs: its speeds on v100 are 0 and
    k80 is its best type (n = 1), as in the controller's problem."""
    from slurm_fair.report.data import JobSpeed, gang_feasible
    from slurm_fair.slurm.model import AccountingRecord

    rec = AccountingRecord("g", "bob", "root", "COMPLETED", "k80", 8, tiny.h(0), tiny.h(0), tiny.h(1), 3600.0, nodes=1)
    out = gang_feasible({"g": JobSpeed({"v100": 1.0, "k80": 0.25}, "class-table")}, [rec], {"v100": [4, 4], "k80": [8]})
    assert dict(out["g"].n) == {"v100": 0.0, "k80": 1.0}
    two_nodes = AccountingRecord("h", "bob", "root", "COMPLETED", "v100", 8, tiny.h(0), tiny.h(0), tiny.h(1), 3600.0, nodes=2)
    out = gang_feasible({"h": JobSpeed({"v100": 1.0, "k80": 0.25}, "class-table")}, [two_nodes], {"v100": [4, 4], "k80": [8]})
    assert dict(out["h"].n) == {"v100": 1.0, "k80": 0.0}  # 4 per node: v100 holds it, one k80 node does not
