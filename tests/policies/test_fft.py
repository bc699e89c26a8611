"""FFT's defining parts (docs/policies/fft.md): the compensation ledger carried in
``options.state``, its growth with waiting, the remaining-work term and the switching cost."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair import fairness, policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies._fft_ledger import update_ledger
from slurm_fair.policies.fft import DEFAULT_RESTART_S, restart_seconds

R = 360.0
fft = policies.get("fft").allocate


def _on(alloc, jid: str) -> str | None:
    x = alloc.x.get(jid, {})
    return max(x, key=x.get) if x else None


def test_fft_compensates_the_job_left_behind() -> None:
    """A is sensitive (K80 10x slower), B is not (2x). Efficiency puts A on the V100 and B on the
    K80, where B progresses at 0.5 against its isolated 0.75 (half of each type, fastest first).
    Played round by round as the simulator does, B's compensation grows every round while A has
    none, until B takes the V100 (B is short, A long: the remaining-work term agrees)."""
    opts = PolicyOptions(solver="cbc", state={})
    thr = {"a": {"v100": 10.0, "k80": 1.0}, "b": {"v100": 10.0, "k80": 5.0}}
    rem = {"a": 10 * R * 200, "b": 10 * R * 20}
    att = {"a": 0.0, "b": 0.0}
    prev: dict[str, str | None] = {"a": None, "b": None}
    history = []
    for r in range(30):
        jobs = tuple(Job(j, j.upper(), 1, thr[j], remaining_work=rem[j], age_s=r * R, attained_s=att[j],
                         prev_type=prev[j]) for j in "ab")
        alloc = fft(Problem({"v100": 1, "k80": 1}, {}, jobs), opts)
        history.append((_on(alloc, "b"), dict(alloc.info["compensation"])))
        if _on(alloc, "b") == "v100":
            break
        for j in "ab":
            prev[j] = _on(alloc, j)
            att[j] += R
            rem[j] -= thr[j][prev[j]] * R
    assert history[0][0] == "k80", "efficiency first: the sensitive job gets the fast GPU"
    assert history[-1][0] == "v100", "B is compensated in the end"
    comps = [c.get("b", 0.0) for _, c in history]
    assert all(x < y for x, y in zip(comps[1:], comps[2:])) and comps[-1] > 0
    assert all(c.get("a", 0.0) == 0.0 for _, c in history)


def _pair(age: float, att_a: float, att_b: float, rem: float) -> Problem:
    thr = {"v100": 10.0, "k80": 4.0}
    return Problem({"v100": 2, "k80": 2}, {}, (
        Job("a", "A", 1, thr, remaining_work=rem, age_s=age, attained_s=att_a),
        Job("b", "B", 1, thr, remaining_work=rem, age_s=age, attained_s=att_b)))


@settings(max_examples=scaled(60), deadline=None)
@given(age=st.floats(10, 50 * R), frac=st.floats(0, 1), gap=st.floats(0.05, 1), rem=st.floats(100, 1e6),
       later=st.floats(0, 10 * R))
def test_a_job_that_waited_longer_gets_more_compensation(age, frac, gap, rem, later) -> None:
    """Two identical jobs of two equal tenants, in the system equally long; ``a`` has run less
    (waited longer). Its compensation is at least ``b``'s, strictly when it is behind its
    isolated progress at all; still so a while later with neither running."""
    att_a = frac * (1 - gap) * age
    att_b = att_a + gap * age
    state: dict = {}
    comp = update_ledger(_pair(age, att_a, att_b, rem), state, R)
    rate = sum(n * z for n, z in zip((1.0, 0.4), (fairness.isolated_time_shares(_pair(age, 0, 0, rem))["a"].get(k, 0.0)
                                                 for k in ("v100", "k80"))))
    assert comp["a"] >= comp["b"]
    if rate * age > att_a + 1e-9:
        assert comp["a"] > comp["b"]
    comp2 = update_ledger(_pair(age + later, att_a, att_b, rem), state, R)
    assert comp2["a"] >= comp2["b"] and comp2["a"] >= comp["a"]


def test_the_ledger_formula_by_hand() -> None:
    """One job alone owns the cluster (isolated rate 1). First sight at age 2R having run R on
    the V100: fair 2R, got R, waited R -> deficit (1 + 1) * R; ``c = 2R / (t + R)``."""
    job = Job("a", "A", 1, {"v100": 10.0}, remaining_work=10 * 3 * R, age_s=2 * R, attained_s=R, prev_type="v100")
    state: dict = {}
    comp = update_ledger(Problem({"v100": 1}, {}, (job,)), state, R)
    assert comp["a"] == pytest.approx(2 * R / (3 * R + R))
    # a round later, not run: fair +R, got 0, waited 2R -> deficit + 3R
    job2 = Job("a", "A", 1, {"v100": 10.0}, remaining_work=10 * 3 * R, age_s=3 * R, attained_s=R)
    comp = update_ledger(Problem({"v100": 1}, {}, (job2,)), state, R)
    assert comp["a"] == pytest.approx(5 * R / (3 * R + R))


def test_state_is_json_and_carried_to_the_next_round() -> None:
    """The state survives a JSON round trip (the controller persists it) and the second round
    reads the first's deficits: with the state it differs from a fresh start, and the copy
    read back from JSON gives exactly the same answer as the original."""
    first = _pair(4 * R, 0.0, 3 * R, 1e5)
    second = _pair(5 * R, 0.0, 4 * R, 1e5)
    state: dict = {}
    fft(first, PolicyOptions(state=state))
    copy = json.loads(json.dumps(state))
    assert copy == state and set(state["fft"]) == {"a", "b"}
    carried = fft(second, PolicyOptions(state=state)).info["compensation"]
    from_json = fft(second, PolicyOptions(state=copy)).info["compensation"]
    fresh = fft(second, PolicyOptions(state={})).info["compensation"]
    assert carried == from_json
    assert carried["a"] != pytest.approx(fresh["a"])
    # finished jobs are forgotten
    fft(Problem({"v100": 2, "k80": 2}, {}, (second.jobs[0],)), PolicyOptions(state=state))
    assert set(state["fft"]) == {"a"}


@pytest.mark.parametrize("slow, restart, moves", [(9.5, None, False), (9.5, 0.0, True), (5.0, None, True)])
def test_the_switching_cost_stops_a_switch_that_gains_less(slow: float, restart: float | None, moves: bool) -> None:
    """A job on the K80 last round; the V100 is free. Moving gains ``1 - slow/10`` of a round
    and costs ``restart / R`` of one (30 s: 0.083): 0.05 < 0.083 stays, 0.5 > 0.083 moves, and
    with no restart cost any gain moves it."""
    extra = {} if restart is None else {"restart_s": restart}
    job = Job("a", "A", 1, {"v100": 10.0, "k80": slow}, remaining_work=1e6, age_s=10 * R, attained_s=10 * R,
              prev_type="k80", extra=extra)
    alloc = fft(Problem({"v100": 1, "k80": 1}, {}, (job,)), PolicyOptions(state={}))
    assert _on(alloc, "a") == ("v100" if moves else "k80")


def test_restart_seconds_from_the_checkpoint_size() -> None:
    def job(**extra) -> Job:
        return Job("a", "A", 1, {"v100": 1.0}, extra=extra)

    assert restart_seconds(job()) == DEFAULT_RESTART_S
    assert restart_seconds(job(checkpoint_bytes=5e9)) == pytest.approx(DEFAULT_RESTART_S + 10.0)
    assert restart_seconds(job(restart_s=12)) == 12.0


@pytest.mark.parametrize("short", ["a", "b"])
def test_remaining_work_prefers_the_shorter_job(short: str) -> None:
    """Equal in everything but remaining work, one GPU: the shorter job gets it (either id)."""
    jobs = tuple(Job(j, j.upper(), 1, {"v100": 10.0}, remaining_work=(1e3 if j == short else 1e5), age_s=0.0)
                 for j in "ab")
    alloc = fft(Problem({"v100": 1}, {}, jobs), PolicyOptions(state={}))
    assert alloc.fraction(short, "v100") == pytest.approx(1.0)
    assert alloc.fraction("b" if short == "a" else "a", "v100") == pytest.approx(0.0)


@settings(max_examples=scaled(40), deadline=None)
@given(jobs=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from([1, 2, 4]),
                               st.floats(0.5, 8), st.floats(0.5, 8)), min_size=2, max_size=8),
       caps=st.tuples(st.integers(0, 6), st.integers(1, 6)))
def test_fft_round_is_the_optimum_of_its_own_lp(jobs, caps) -> None:
    """fft's round solved on the shared group LP reaches the optimum of fft's LP written
    directly (``max sum value_jk a_jk``, ``sum_k a_jk <= 1``, ``sum_j g_j a_jk <= C_k``)."""
    import pulp

    from slurm_fair.policies import fft

    problem = Problem(
        gpu_types={"v100": caps[0], "k80": caps[1]},
        jobs=[Job(f"j{i}", u, g, {"v100": tv, "k80": tk}, age_s=60.0 * i) for i, (u, g, tv, tk) in enumerate(jobs)],
        tenants={"a": 1.0, "b": 1.0})
    options = PolicyOptions(solver="auto")
    comp = update_ledger(problem, {}, options.round_s)
    value = fft.values(problem, comp, fft.remaining_terms(problem), options.round_s)
    x, _ = fft._solve_round(problem, value, options)
    got = sum(value[(jid, k)] * v for jid, row in x.items() for k, v in row.items())
    model = pulp.LpProblem("direct", pulp.LpMaximize)
    a = {key: pulp.LpVariable(f"a{i}", 0, 1) for i, key in enumerate(value)}
    model += pulp.lpSum(value[key] * v for key, v in a.items())
    for j in problem.jobs:
        model += pulp.lpSum(v for (jid, _), v in a.items() if jid == j.id) <= 1
    for k, c in problem.gpu_types.items():
        model += pulp.lpSum(j.gpus * a[(j.id, k)] for j in problem.jobs if (j.id, k) in a) <= c
    model.solve(pulp.PULP_CBC_CMD(msg=False))
    assert got == pytest.approx(pulp.value(model.objective) or 0.0, rel=1e-6, abs=1e-6)
    # and x is feasible for it
    for k, c in problem.gpu_types.items():
        assert sum(j.gpus * x[j.id].get(k, 0.0) for j in problem.jobs) <= c + 1e-6
    assert all(sum(row.values()) <= 1 + 1e-9 for row in x.values())
