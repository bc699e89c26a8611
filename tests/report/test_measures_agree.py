"""The report and the simulator score the same jobs with the same measures (issue 14).

Each case is one set of jobs (tenants and weights, arrivals, gangs, throughputs, runs) built two
ways: as Slurm accounting records for ``slurm-fair report`` and as job records for the
simulator's metrics (which ``simulate`` and ``testbed replay`` print). Finish-time fairness,
wait, Hops' latency ratio, SI and EF must come out the same either way, and the same as
:mod:`slurm_fair.fairness`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import fairness, policies
from slurm_fair.jobgroups import groups_of
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies.hops import priority
from slurm_fair.report import tables
from slurm_fair.report.data import JobSpeed, ReportInputs, normalise
from slurm_fair.report.jobs import ftf_frame, jobs_frame
from slurm_fair.report.window import Window
from slurm_fair.sim import metrics
from slurm_fair.sim.fairness_check import FairnessChecker
from slurm_fair.slurm.model import AccountingRecord

from . import tiny

SETTINGS = settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Ran:
    """One job of a case: it arrived at ``arrival`` s, waited ``wait`` s, ran ``run`` s on ``on``."""

    job_id: str
    tenant: str
    gpus: int
    throughput: dict[str, float]
    arrival: int
    wait: int
    run: int
    on: str

    @property
    def work(self) -> float:
        return self.run * self.throughput[self.on]


def sim_records(jobs: list[Ran], weights: dict[str, float]) -> list[metrics.JobRecord]:
    return [
        metrics.JobRecord(j.job_id, j.tenant, j.arrival, j.arrival + j.wait, j.arrival + j.wait + j.run,
                          j.on, j.gpus, weights[j.tenant], j.work, j.throughput)
        for j in jobs
    ]


def sim_rhos(jobs: list[Ran], capacity: dict[str, int], weights: dict[str, float]) -> dict[str, float]:
    return metrics.ftf_rhos(sim_records(jobs, weights), capacity)


def report_inputs(jobs: list[Ran], capacity: dict[str, int], weights: dict[str, float]) -> ReportInputs:
    at = lambda s: tiny.T0 + timedelta(seconds=s)  # noqa: E731
    records = tuple(
        AccountingRecord(job_id=j.job_id, account=j.tenant, user="u", state="COMPLETED", gpu_type=j.on,
                         gpus=j.gpus, submit_time=at(j.arrival), start_time=at(j.arrival + j.wait),
                         end_time=at(j.arrival + j.wait + j.run), elapsed_s=float(j.run))
        for j in jobs
    )
    last = max(j.arrival + j.wait + j.run for j in jobs)
    types = sorted(capacity)
    return ReportInputs(
        window=Window(tiny.T0, at(last + 1)), records=records, capacity=capacity, weights=weights,
        speeds={j.job_id: JobSpeed(normalise(j.throughput, types), "class-table") for j in jobs},
        now=at(last + 2),
    )


def report_rhos(jobs: list[Ran], capacity: dict[str, int], weights: dict[str, float]) -> dict[str, float]:
    inputs = report_inputs(jobs, capacity, weights)
    df = ftf_frame(jobs_frame(inputs), inputs, []).set_index("job_id")
    return {str(k): float(v) for k, v in df["ftf_rho"].dropna().items()}


# alice (w=1) has a 4-GPU gang and a 1-GPU job, bob (w=2) one job that cannot use k80, carol a
# single job on a cluster of 4 v100 + 8 k80: the cases where a split by GPU or a share scaled
# down across types instead of filling the fastest type first gives another baseline
CAPACITY = {"v100": 4, "k80": 8}
WEIGHTS = {"alice": 1.0, "bob": 2.0, "carol": 1.0}
JOBS = [
    Ran("a-gang", "alice", 4, {"v100": 10.0, "k80": 4.0}, 0, 600, 3600, "v100"),
    Ran("a-one", "alice", 1, {"v100": 3.0, "k80": 2.0}, 0, 0, 7200, "k80"),
    Ran("b-one", "bob", 2, {"v100": 5.0}, 1800, 300, 1800, "v100"),
    Ran("c-one", "carol", 1, {"v100": 8.0, "k80": 2.0}, 20000, 0, 1000, "v100"),
]


def test_report_and_simulate_give_the_same_ftf_per_job():
    sim, report = sim_rhos(JOBS, CAPACITY, WEIGHTS), report_rhos(JOBS, CAPACITY, WEIGHTS)
    assert set(sim) == set(report) == {j.job_id for j in JOBS}
    for job_id, rho in sim.items():
        assert report[job_id] == pytest.approx(rho, rel=1e-9), job_id
    # carol alone in the system owns every GPU: all the time on v100, her JCT is her run time
    assert sim["c-one"] == pytest.approx(1.0)
    # a-one at 0: alice owns 1/2 of each type, split over her 2 jobs -> 1 v100 + 2 k80;
    # 1 GPU: all the time on v100 (3 steps/s); work 7200 * 2 -> JCT_iso 4800 s; JCT 7200
    assert sim["a-one"] == pytest.approx(7200 / 4800)


@st.composite
def cases(draw) -> tuple[list[Ran], dict[str, int], dict[str, float]]:
    capacity = {"v100": draw(st.integers(1, 8)), "k80": draw(st.integers(1, 8)), "p100": draw(st.integers(0, 4))}
    tenants = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    weights = {u: draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])) for u in tenants}
    jobs = []
    for i in range(draw(st.integers(1, 7))):
        thr = {"v100": float(draw(st.integers(1, 10)))}
        for k in ("k80", "p100"):
            if draw(st.booleans()):
                thr[k] = float(draw(st.integers(1, 10)))
        on = draw(st.sampled_from(sorted(k for k in thr if capacity[k] > 0)))
        jobs.append(Ran(f"j{i}", draw(st.sampled_from(tenants)), draw(st.sampled_from([1, 1, 2, 4])), thr,
                        draw(st.integers(0, 5000)), draw(st.integers(0, 3000)), draw(st.integers(1, 5000)), on))
    return jobs, capacity, {u: weights[u] for u in {j.tenant for j in jobs}}


@SETTINGS
@given(cases())
def test_report_and_simulate_agree_on_random_jobs(case):
    jobs, capacity, weights = case
    sim, report = sim_rhos(jobs, capacity, weights), report_rhos(jobs, capacity, weights)
    assert set(sim) == set(report)
    for job_id, rho in sim.items():
        assert report[job_id] == pytest.approx(rho, rel=1e-9), job_id


def test_latency_ratio_and_slowdown_have_one_definition_each():
    rec = metrics.JobRecord("j", "t", 0.0, 300.0, 1300.0, "k80", 1, work=2000.0, throughput={"v100": 4.0, "k80": 2.0})
    # slowdown: alone on v100 2000 / 4 = 500 s; JCT 1300 s
    assert metrics.job_slowdown(rec) == fairness.slowdown(1300.0, 500.0) == pytest.approx(2.6)
    # latency ratio W / A: waited 300 s; age on 1 v100 + 3 k80 = 500 / 4 + 3 * 1000 / 4 = 875 s
    cap = {"v100": 1, "k80": 3}
    assert metrics.job_latency_ratio(rec, cap) == fairness.latency_ratio(300.0, fairness.age_s(2000.0, rec.throughput, cap))
    assert metrics.job_latency_ratio(rec, cap) == pytest.approx(300.0 / 875.0)

    hops = priority(Job("j", "t", 1, {"v100": 4.0}, remaining_work=400.0, age_s=300.0, attained_s=100.0),
                    {"v100": 1}, 360.0)
    # Hops' priority is fairness.latency_ratio: W = 300 - 100, A = 100 run + 400 / 4 to go
    assert hops == fairness.latency_ratio(200.0, fairness.age_s(400.0, {"v100": 4.0}, {"v100": 1}) + 100.0)
    assert hops == pytest.approx(1.0)

def sim_wait_lr(jobs: list[Ran], capacity: dict[str, int], weights: dict[str, float]):
    recs = sim_records(jobs, weights)
    per_job = {r.job_id: (r.wait_s, metrics.job_latency_ratio(r, capacity)) for r in recs}
    return per_job, metrics.wait_lr_stats(recs, capacity), metrics.tenant_breakdown(recs, capacity)


def assert_wait_lr_agree(jobs: list[Ran], capacity: dict[str, int], weights: dict[str, float]) -> None:
    per_job, overall, tenants = sim_wait_lr(jobs, capacity, weights)
    report = tables.build(report_inputs(jobs, capacity, weights))
    rows = report.jobs.set_index("job_id")
    assert set(rows.index) == set(per_job)
    for job_id, (wait, lr) in per_job.items():
        assert rows.loc[job_id, "wait_s"] == pytest.approx(wait, rel=1e-9, abs=1e-9), job_id
        assert rows.loc[job_id, "latency_ratio"] == pytest.approx(lr, rel=1e-9, abs=1e-12), job_id
    assert report.summary["wait_mean_s"] == pytest.approx(overall["avg_wait_s"], rel=1e-9)
    assert report.summary["latency_ratio_mean"] == pytest.approx(overall["latency_ratio_mean"], rel=1e-9, abs=1e-12)
    assert report.summary["latency_ratio_max"] == pytest.approx(overall["latency_ratio_max"], rel=1e-9, abs=1e-12)
    by_tenant = report.tenants.set_index("tenant")
    for u, t in tenants.items():
        assert by_tenant.loc[u, "wait_mean_s"] == pytest.approx(t["avg_wait_s"], rel=1e-9)
        assert by_tenant.loc[u, "latency_ratio_mean"] == pytest.approx(t["latency_ratio_mean"], rel=1e-9, abs=1e-12)
        assert by_tenant.loc[u, "latency_ratio_max"] == pytest.approx(t["latency_ratio_max"], rel=1e-9, abs=1e-12)


def test_report_and_simulate_give_the_same_wait_and_latency_ratio():
    assert_wait_lr_agree(JOBS, CAPACITY, WEIGHTS)
    per_job, overall, _ = sim_wait_lr(JOBS, CAPACITY, WEIGHTS)
    # a-gang: 4 v100 (share 1/3) at 10 steps/s, 8 k80 (2/3) at 4: work 36000 -> age
    # 3600 / 3 + 9000 * 2 / 3 = 7200 s; it waited 600 s
    assert per_job["a-gang"] == pytest.approx((600.0, 600.0 / 7200.0))
    # b-one runs on v100 only: age = its run time there, 9000 / 5 = 1800 s; waited 300 s
    assert per_job["b-one"] == pytest.approx((300.0, 300.0 / 1800.0))
    assert overall["avg_wait_s"] == pytest.approx(900.0 / 4)


@SETTINGS
@given(cases())
def test_report_and_simulate_agree_on_wait_and_latency_ratio_of_random_jobs(case):
    assert_wait_lr_agree(*case)


# --- SI and EF: the simulator's and the report's figures are fairness.is_* ---------------------


@st.composite
def problems_and_allocations(draw) -> tuple[Problem, dict[str, dict[str, float]]]:
    """Small problems and allocations, many of them on the SI/EF boundary (the equal split with
    best use is SI and EF with ties; scaled-down copies of it are not)."""
    types = ["g0", "g1", "g2"][: draw(st.integers(1, 3))]
    caps = {k: draw(st.integers(1, 6)) for k in types}
    tenants = [f"u{i}" for i in range(draw(st.integers(1, 3)))]
    weights = {u: draw(st.sampled_from([1.0, 2.0, 0.5])) for u in tenants}
    jobs = []
    for u in tenants:
        for i in range(draw(st.integers(1, 3))):
            thr = {k: float(draw(st.sampled_from([0, 1, 2, 5]))) for k in types}
            thr[types[0]] = thr[types[0]] or 1.0
            jobs.append(Job(f"{u}-{i}", u, draw(st.sampled_from([1, 1, 2])), thr))
    problem = Problem(caps, weights, jobs)
    kind = draw(st.sampled_from(["equal", "scaled", "random"]))
    if kind == "random":
        x = {}
        for j in jobs:
            ks = [k for k in types if j.throughput[k] > 0]
            raw = {k: draw(st.integers(0, 4)) / 4 for k in ks}
            total = sum(raw.values())
            x[j.id] = {k: v / max(1.0, total) for k, v in raw.items()}
        return problem, x
    x = {}
    for u in tenants:  # the equal split, each tenant's share used as well as it can
        mine = problem.jobs_of(u)
        classes = groups_of(problem, mine)
        use = fairness.best_use(classes, fairness.equal_share(problem, u))
        for c in classes:
            for k, z in use.z[c.key].items():
                for jid in c.job_ids:
                    x.setdefault(jid, {})[k] = z / c.count
    if kind == "scaled":
        f = draw(st.sampled_from([0.5, 0.99]))
        x = {j: {k: f * v for k, v in row.items()} for j, row in x.items()}
    return problem, x


#: one checker for every example, so values memoised for one problem meet the next ones
CHECKER = FairnessChecker()


@SETTINGS
@given(problems_and_allocations())
def test_simulator_checks_are_fairness_checks(case):
    problem, x = case
    assert CHECKER.check(problem, x) == (fairness.is_sharing_incentive(problem, x),
                                         fairness.is_envy_free(problem, x))


@SETTINGS
@given(problems_and_allocations())
def test_report_si_and_envy_figures_are_fairness_values(case):
    """1-GPU units over a window where every job is active and runs the whole time are exactly
    the problem's jobs (the report values GPU-hours, the problem job time: equal for 1-GPU jobs),
    so the report's SI ratio is ``U_u / V_u(equal share)`` and its envy ``V_u((w_u/w_v) y_v) /
    U_u`` of :mod:`slurm_fair.fairness`, for the integral allocation it ran."""
    problem, x = case
    jobs = [Job(j.id, j.tenant, 1, j.throughput) for j in problem.jobs]
    problem = Problem(problem.gpu_types, problem.tenants, jobs)
    # every job runs the whole hour on the type x gives it most of (the fastest on a tie)
    on = {j.id: max((k for k in problem.types if j.throughput[k] > 0),
                    key=lambda k: (x.get(j.id, {}).get(k, 0.0), j.throughput[k])) for j in jobs}
    x1 = {j: {k: 1.0} for j, k in on.items()}
    ran = [Ran(j.id, j.tenant, 1, dict(j.throughput), 0, 0, 3600, on[j.id]) for j in jobs]
    weights = {u: problem.weight(u) for u in problem.active_tenants}
    inputs = report_inputs(ran, dict(problem.gpu_types), weights)
    inputs = ReportInputs(**{**inputs.__dict__, "window": Window(tiny.T0, tiny.T0 + timedelta(hours=1))})
    report = tables.build(inputs)
    utilities = fairness.tenant_utilities(problem, x1)
    si = report.tenants.set_index("tenant")["si_ratio"]
    for u, gap in fairness.sharing_incentive_gaps(problem, x1).items():
        if utilities[u] + gap > 0:
            assert si[u] == pytest.approx(utilities[u] / (utilities[u] + gap), rel=1e-6), u
    for (u, v), e in fairness.envy(problem, x1).items():
        if utilities[u] > 0:
            assert report.envy.loc[u, v] == pytest.approx((utilities[u] + e) / utilities[u], rel=1e-6), (u, v)


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems_and_allocations())
def test_oef_passes_the_checks_report_and_simulator_use(case):
    problem, _ = case
    a = policies.allocate("oef", problem, PolicyOptions())
    x = a.tenant_x or a.x  # the tenant level: SI and EF are about its bundles (docs/oef.md)
    assert fairness.is_sharing_incentive(problem, x) and fairness.is_envy_free(problem, x)
    assert CHECKER.check(problem, x) == (True, True)
    assert CHECKER.check(problem, a.x, a.tenant_x) == (True, True)


@SETTINGS
@given(problems_and_allocations())
def test_oefs_own_check_is_the_fairness_check(case):
    """oef decides SI and EF with pooled dual bounds and exact LPs only where they cannot
    decide (:class:`slurm_fair.policies._tenants.Tenants`); on any allocation it must say what
    :mod:`slurm_fair.fairness` says. Utilities and bundles are sums over jobs, so a group's
    allocation is the sum of its jobs'."""
    from slurm_fair.policies._tenants import Tenants

    problem, x = case
    groups = groups_of(problem)
    X = {g.key: {k: sum(x.get(j, {}).get(k, 0.0) for j in g.job_ids) for k in problem.types} for g in groups}
    si, ef = fairness.is_sharing_incentive(problem, x), fairness.is_envy_free(problem, x)
    tenants = Tenants(problem, groups)
    assert tenants.fair(X) == (si and ef)
    # and its envy part alone (SI floors at 0), which an SI failure would otherwise hide
    tenants.si_vec = tenants.si_vec * 0.0
    assert tenants.fair(X) == ef
