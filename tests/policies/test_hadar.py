"""Hadar's dual prices carried across rounds (docs/policies/hadar.md): the backlog state, its
update rule and cap, what it changes in the next round; the declared knobs; capacity and
runnable types for any knobs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from hypo_profiles import scaled
from slurm_fair import policies
from slurm_fair.errors import UserError
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies.hadar import BETA, CAP, KEY, PARAMS, Knobs, carry, densities, price

from .strategies import problems

hadar = policies.get("hadar").allocate


def _crowd(n: int) -> Problem:
    jobs = tuple(Job(f"j{i}", f"t{i}", 1, {"v100": 10.0, "k80": 2.0}) for i in range(n))
    return Problem({"v100": 8, "k80": 8}, {}, jobs)


@pytest.mark.parametrize("name", ["hadar", "hadare"])
def test_backlog_is_json_and_carried_to_the_next_round(name: str) -> None:
    """16 jobs all best on 8 V100s: 8 GPUs of excess demand, so the backlog is
    ``(1 - BETA) * 8`` up to its cap ``CAP * 8``; the next round starts from it (and from its JSON copy, identically),
    and a lone job then meets a dearer V100 than on a fresh state."""
    allocate = policies.get(name).allocate
    state: dict = {}
    allocate(_crowd(16), PolicyOptions(state=state))
    expected = min((1 - BETA) * 8, CAP * 8)
    assert expected > 0
    assert state[KEY]["backlog"] == {"v100": pytest.approx(expected), "k80": 0.0}
    copy = json.loads(json.dumps(state))
    assert copy == state
    lone = _crowd(1)
    carried = allocate(lone, PolicyOptions(state=state)).info
    from_json = allocate(lone, PolicyOptions(state=copy)).info
    fresh = allocate(lone, PolicyOptions(state={})).info
    assert carried == from_json
    assert carried["backlog"]["v100"] == pytest.approx(expected)
    assert carried["prices"]["v100"] > fresh["prices"]["v100"]


def test_backlog_decays_when_demand_is_below_capacity() -> None:
    """Rounds with no excess demand multiply the backlog by BETA each."""
    state: dict = {}
    hadar(_crowd(16), PolicyOptions(state=state))
    start = state[KEY]["backlog"]["v100"]
    for r in range(1, 5):
        hadar(_crowd(2), PolicyOptions(state=state))
        assert state[KEY]["backlog"]["v100"] == pytest.approx(start * BETA ** r)


def test_a_carried_price_moves_a_marginal_job_to_the_cheaper_type() -> None:
    """A job hardly slower on the K80 (9 vs 10) takes the V100 on a fresh state; after rounds
    in which the V100 was asked for far beyond its capacity (backlog 10, the cap raised so all
    of it counts), it settles on the K80. At the default cap the nudge is smaller: a job 9.8 vs
    10 still moves."""
    job = Job("x", "X", 1, {"v100": 10.0, "k80": 9.0})
    problem = Problem({"v100": 1, "k80": 1}, {}, (job,))
    assert hadar(problem, PolicyOptions(state={})).x["x"] == {"v100": 1.0}
    state = {KEY: {"backlog": {"v100": 10.0, "k80": 0.0}}}
    assert hadar(problem, PolicyOptions(state=state, params={"hadar.cap": 10.0})).x["x"] == {"k80": 1.0}
    assert hadar(problem, PolicyOptions(state=state)).x["x"] == {"v100": 1.0}
    close = Problem({"v100": 1, "k80": 1}, {}, (Job("x", "X", 1, {"v100": 10.0, "k80": 9.8}),))
    assert hadar(close, PolicyOptions(state={})).x["x"] == {"v100": 1.0}
    assert hadar(close, PolicyOptions(state=state)).x["x"] == {"k80": 1.0}


def _mixed_crowd() -> Problem:
    """One heavy job (weight 10) and 40 ordinary ones, all 5x faster on the V100."""
    jobs = [Job("heavy", "H", 1, {"v100": 10.0, "k80": 2.0})]
    jobs += [Job(f"j{i:02d}", f"t{i:02d}", 1, {"v100": 10.0, "k80": 2.0}) for i in range(40)]
    return Problem({"v100": 8, "k80": 8}, {"H": 10.0}, tuple(jobs))


def test_a_capped_backlog_keeps_a_contended_type_in_use() -> None:
    """The failure the cap fixes: with the backlog uncapped (the earlier rule), rounds of demand
    far beyond capacity price an *empty* V100 above every ordinary job's density, so Hadar
    grants it to the heavy job alone and leaves the other 7 V100s to chance; capped, ordinary
    jobs still win V100s, about as many as on a fresh state (the exponential price itself
    stops granting once it passes their density)."""
    def grants(cap: float, rounds: int) -> int:
        state: dict = {}
        opts = PolicyOptions(state=state, params={"hadar.cap": cap})
        for _ in range(rounds):
            out = hadar(_mixed_crowd(), opts)
        assert out.x["heavy"] == {"v100": 1.0}
        assert state[KEY]["backlog"]["v100"] <= cap * 8 + 1e-9
        return sum(1 for row in out.x.values() if row.get("v100"))

    fresh = grants(CAP, 1)
    assert fresh >= 3
    assert grants(1e9, 12) == 1
    assert fresh - 1 <= grants(CAP, 12) <= fresh


@settings(max_examples=scaled(200), deadline=None)
@given(st.floats(0.01, 10), st.floats(1.0, 1e4), st.integers(1, 64), st.floats(0, 1e3),
       st.floats(0, 1e3), st.floats(0, 1.0), st.floats(0, 1.0))
def test_price_is_nondecreasing_in_load_and_backlog(low: float, ratio: float, cap: int, b1: float,
                                                   b2: float, f1: float, f2: float) -> None:
    """``p(y)`` never falls as the load or the carried backlog rises, and stays in [L, U]."""
    high = low * ratio
    y1, y2 = sorted((f1 * cap, f2 * cap))
    lo_b, hi_b = sorted((b1, b2))
    p = [price(y, cap, low, high, b) for y in (y1, y2) for b in (lo_b, hi_b)]
    assert p[0] <= p[1] * (1 + 1e-12) and p[2] <= p[3] * (1 + 1e-12)  # in backlog
    assert p[0] <= p[2] * (1 + 1e-12) and p[1] <= p[3] * (1 + 1e-12)  # in load
    assert all(low * (1 - 1e-12) <= q <= high * (1 + 1e-12) for q in p)
    assert price(0.0, cap, low, high) == pytest.approx(low)
    assert price(cap, cap, low, high, lo_b) == pytest.approx(high)


@settings(max_examples=scaled(60), deadline=None)
@given(st.floats(0, 1), st.floats(0, 4), st.integers(9, 200))
def test_carried_backlog_stays_within_its_cap(beta: float, cap: float, crowd: int) -> None:
    """Whatever the excess demand and however many rounds, ``0 <= b_k <= cap * C_k``, and a type
    not asked for beyond its capacity carries nothing new."""
    knobs = Knobs(beta=beta, cap=cap)
    state: dict = {}
    problem = _crowd(crowd)
    for _ in range(5):
        book = carry(state, problem, densities(problem, knobs), knobs)
        assert 0.0 <= book["v100"] <= cap * 8 + 1e-9
        assert book["k80"] == 0.0
    if cap > 0 and beta < 1:
        assert book["v100"] == pytest.approx(min(cap * 8, (1 - beta ** 5) * (crowd - 8)))


def _timed(problem: Problem, data: st.DataObject) -> Problem:
    """``problem`` with remaining work, age and attained time drawn per job."""
    jobs = []
    for j in problem.jobs:
        age = data.draw(st.sampled_from([None, 0.0, 360.0, 7200.0, 86400.0]))
        attained = data.draw(st.floats(0, 1)) * (age or 0.0)
        work = data.draw(st.sampled_from([None, 0.0, 1.0, 1e3, 1e6]))
        jobs.append(replace(j, remaining_work=work, age_s=age, attained_s=attained))
    return replace(problem, jobs=tuple(jobs))


@settings(max_examples=scaled(120), deadline=None)
@given(problems(), st.data())
def test_allocation_fits_and_uses_only_runnable_types(problem: Problem, data: st.DataObject) -> None:
    """For any knobs and any carried backlog, over a few rounds: the GPUs granted on a type (HadarE's
    copies included) never exceed its capacity, and no job or copy is placed on a type where
    it cannot run or that is smaller than its gang."""
    params = {f"{name}.{key}": data.draw(st.floats(spec.low or 0.0, spec.high if spec.high is not None else 8.0))
              for name in ("hadar", "hadare") for key, spec in PARAMS.items()}
    backlog = {k: data.draw(st.floats(0, 50)) for k in problem.types}
    problem = _timed(problem, data)
    gpus = {j.id: j.gpus for j in problem.jobs}
    jobs = {j.id: j for j in problem.jobs}
    for name in ("hadar", "hadare"):
        state: dict = {KEY: {"backlog": dict(backlog)}}
        for _ in range(3):
            out = policies.get(name).allocate(problem, PolicyOptions(state=state, params=params))
            used = {k: 0 for k in problem.types}
            for jid, row in out.x.items():
                parent = jobs[out.forks.get(jid, jid)]
                assert len(row) <= 1 and all(v == 1.0 for v in row.values())
                for k in row:
                    assert parent.normalised(k) > 0 and parent.gpus <= problem.gpu_types[k]
                    used[k] += gpus[parent.id]
            assert all(used[k] <= problem.gpu_types[k] for k in problem.types), (name, used)
            assert all(0.0 <= b <= params[f"{name}.cap"] * problem.gpu_types[k] + 1e-9
                       for k, b in state[KEY]["backlog"].items())


def test_remaining_time_puts_the_longer_job_on_the_fast_type() -> None:
    """Two jobs alike but for their remaining work, one V100: without the remaining-time term the
    tie goes to the larger id (``b``); with it the longer job (``a``) takes the V100."""
    jobs = (Job("a", "A", 1, {"v100": 10.0, "k80": 5.0}, remaining_work=1e6),
            Job("b", "B", 1, {"v100": 10.0, "k80": 5.0}, remaining_work=1e4))
    problem = Problem({"v100": 1, "k80": 1}, {}, jobs)
    flat = hadar(problem, PolicyOptions(params={"hadar.remaining": 0.0})).x
    long_first = hadar(problem, PolicyOptions(params={"hadar.remaining": 1.0})).x
    assert flat == {"a": {"k80": 1.0}, "b": {"v100": 1.0}}
    assert long_first == {"a": {"v100": 1.0}, "b": {"k80": 1.0}}


def test_knobs_are_declared_bounded_and_read_per_policy() -> None:
    """Both policies declare the knobs with the module defaults; out-of-bounds values are refused
    before anything runs; ``hadare.*`` does not leak into ``hadar``."""
    for name in ("hadar", "hadare"):
        info = policies.get(name)
        assert dict(info.params) == PARAMS
        assert Knobs.of(name, PolicyOptions()) == Knobs()
    assert Knobs().cap == CAP and 0 < CAP < 1
    for bad in ("hadar.cap=-1", "hadar.beta=1.5", "hadare.remaining=3", "hadar.starve=-0.1"):
        with pytest.raises(UserError):
            policies.parse_params([bad])
    opts = PolicyOptions(params={"hadare.cap": 2.0})
    assert Knobs.of("hadare", opts).cap == 2.0 and Knobs.of("hadar", opts).cap == CAP


def test_cap_zero_resets_prices_every_round() -> None:
    """``cap = 0``: no backlog is ever carried, so a crowded round leaves no trace."""
    state: dict = {}
    opts = PolicyOptions(state=state, params={"hadar.cap": 0.0})
    hadar(_crowd(16), opts)
    assert state[KEY]["backlog"] == {"v100": 0.0, "k80": 0.0}
    assert hadar(_crowd(1), opts).info == hadar(_crowd(1), PolicyOptions(state={})).info


def test_a_gang_that_waited_long_enough_outbids_fresh_single_gpu_jobs() -> None:
    """Per-GPU density divides by the gang, so a 4-GPU job is worth a quarter of a fresh 1-GPU
    job per GPU; its wait over its run time (at least a round) lifts it: after 20 rounds
    waiting it takes the V100s at the default ``starve``, and never with ``starve = 0``."""
    def problem(wait_s: float) -> Problem:
        gang = Job("gang", "G", 4, {"v100": 10.0, "k80": 2.0}, age_s=wait_s, attained_s=0.0)
        small = tuple(Job(f"s{i}", f"S{i}", 1, {"v100": 10.0, "k80": 2.0}, age_s=0.0) for i in range(4))
        return Problem({"v100": 4, "k80": 4}, {}, (gang,) + small)

    assert hadar(problem(0.0), PolicyOptions()).x["gang"] != {"v100": 1.0}
    assert hadar(problem(20 * 360.0), PolicyOptions()).x["gang"] == {"v100": 1.0}
    assert hadar(problem(20 * 360.0), PolicyOptions(params={"hadar.starve": 0.0})).x["gang"] != {"v100": 1.0}
