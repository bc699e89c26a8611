"""A rotation inside a tenant only when it pays (:func:`slurm_fair.hysteresis.swap_pays`).

Stopping a running job for a waiting job of the same tenant leaves the tenant the same GPUs and
costs it a restart; it pays only for a job predicted to finish sooner (shortest remaining first)
or one that has waited a round and its own predicted run (bounded wait). Sizes are what a site
knows: the time limit less the time run. The checks are by direct arithmetic on the time limits
the tests set, not by re-reading the rule's own numbers.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.standing import keeps, standing
from slurm_fair.hysteresis import swap_pays
from slurm_fair.model import Job, Problem

from .builders import T0, cluster, job, snapshot
from .test_standing import LONG, plan, run, running_of

ROUND_S = 360.0


def sized(jid: str, tenant: str, limit_s: float | None, ran_s: float = 0.0, age_s: float = 0.0,
          gpus: int = 1) -> Job:
    extra = {"time_limit_s": limit_s} if limit_s is not None else {}
    return Job(jid, tenant, gpus, {"k80": 1.0}, age_s=age_s, attained_s=ran_s, extra=extra)


def test_a_shorter_waiting_job_pays_a_longer_one_does_not():
    running = sized("R", "a", 3600.0, ran_s=3000.0, age_s=3000.0)  # 600 s left
    assert swap_pays(sized("S", "a", 300.0, age_s=30.0), running, ROUND_S)
    assert not swap_pays(sized("L", "a", 2400.0, age_s=30.0), running, ROUND_S)


def test_a_longer_job_that_waited_a_round_and_its_own_run_pays():
    running = sized("R", "a", 36000.0, ran_s=3600.0, age_s=3600.0)
    long_ = 40000.0
    assert not swap_pays(sized("L", "a", long_, age_s=long_ - 1.0), running, ROUND_S)
    assert swap_pays(sized("L", "a", long_, age_s=long_), running, ROUND_S)
    # a short-ish job must still have waited a round
    r2 = sized("R", "a", 360.0, ran_s=100.0, age_s=100.0)  # 260 s left
    assert not swap_pays(sized("T", "a", 300.0, age_s=300.0), r2, ROUND_S)
    assert swap_pays(sized("T", "a", 300.0, age_s=ROUND_S), r2, ROUND_S)


def test_an_unknown_size_rotates_as_before():
    assert swap_pays(sized("U", "a", None), sized("R", "a", 3600.0, ran_s=10.0), ROUND_S)
    assert swap_pays(sized("S", "a", 60.0), sized("R", "a", None, ran_s=10.0), ROUND_S)


limits = st.floats(min_value=60.0, max_value=1e6)


@settings(max_examples=scaled(100))
@given(lt=limits, lv=limits, ran=st.floats(min_value=0.0, max_value=1e6),
       waited=st.floats(min_value=0.0, max_value=ROUND_S - 1.0))
def test_no_swap_back_right_after_a_swap(lt, lv, ran, waited):
    # a swap that paid, then the stopped job waiting less than a round: it never pays to swap
    # straight back, so two jobs of one tenant cannot ping-pong round after round
    v_ran = min(ran, lv)
    taker = sized("T", "a", lt, age_s=waited)
    victim = sized("V", "a", lv, ran_s=v_ran, age_s=v_ran)
    if not swap_pays(taker, victim, ROUND_S):
        return
    assert lt < lv - v_ran  # it paid by being shorter (it had not waited a round)
    for w in (0.0, waited, lt):  # T has run w since the swap, V has waited less than a round
        back_taker = sized("V", "a", lv, ran_s=v_ran, age_s=v_ran + min(w, ROUND_S - 1.0))
        back_victim = sized("T", "a", lt, ran_s=w, age_s=waited + w)
        assert not swap_pays(back_taker, back_victim, ROUND_S)


@settings(max_examples=scaled(100))
@given(lt=limits, lv=limits, ran=st.floats(min_value=0.0, max_value=1e6))
def test_a_waiting_job_is_never_kept_waiting_past_a_round_and_its_own_run(lt, lv, ran):
    victim = sized("V", "a", lv, ran_s=min(ran, lv), age_s=min(ran, lv))
    taker = sized("T", "a", lt, age_s=max(ROUND_S, lt))
    assert swap_pays(taker, victim, ROUND_S)


# --- the controller: keeps (the rounding step) and the plan's make room ---------------------


def _problem(snap, limits_s: dict[str, float], ran: dict[str, float]) -> Problem:
    cap = snap.capacity()
    jobs = []
    for j in snap.gpu_jobs():
        r = ran.get(j.job_id, 0.0)
        jobs.append(Job(j.job_id, j.account, j.gpu_request.total, {k: 1.0 for k in cap}, age_s=r + 30.0,
                        attained_s=r, extra={"time_limit_s": limits_s[j.job_id]}))
    return Problem(cap, {}, tuple(jobs))


def _case(p_limit: float):
    # a and b hold their shares (2 of 4 k80 each); b's B1 has 600 s left, B2 200 s, P (b) waits
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("B1", "b", started=LONG), run("B2", "b", started=LONG), job("P", "b")])
    prob = _problem(snap, {"A1": 1e5, "A2": 1e5, "B1": 7800.0, "B2": 7400.0, "P": p_limit},
                    {"A1": 7200.0, "A2": 7200.0, "B1": 7200.0, "B2": 7200.0})
    return snap, prob


def test_the_round_rotates_a_tenants_own_job_only_for_a_shorter_one():
    placed = {"P": "k80", "A1": "k80", "A2": "k80", "B2": "k80"}
    snap, prob = _case(p_limit=300.0)  # P is shorter than B1's 600 s left: the swap pays
    assert plan(snap, prob, placed, standing(prob, running_of(snap)), boundary=True).requeue == ("B1",)
    snap, prob = _case(p_limit=3600.0)  # P is longer and has waited 30 s: B1 runs on
    assert plan(snap, prob, placed, standing(prob, running_of(snap)), boundary=True).requeue == ()


def test_the_rounding_step_keeps_a_job_no_waiting_job_of_its_tenant_may_take():
    from slurm_fair.controller.decide import staying
    from slurm_fair.controller.problem import BuiltProblem

    for p_limit, kept_b in ((3600.0, True), (300.0, False)):
        snap, prob = _case(p_limit)
        st_ = standing(prob, running_of(snap))
        pj = {j.id: j for j in prob.jobs}
        waiting = [pj["P"]]
        assert keeps(st_, "b", pj["B1"], waiting, ROUND_S) is kept_b
        assert keeps(st_, "b", pj["B2"], waiting, ROUND_S)  # 200 s left: shorter than P either way
        assert not keeps(st_, "b")  # without the job: b has a waiting job, as before
        got = staying(snap, BuiltProblem(prob, {}, {}, {}, {}), 60.0, {}, st_, round_s=ROUND_S)
        assert ("B1" in got) is kept_b and got["B2"] == "k80" and got["A1"] == "k80"


def test_another_tenants_job_is_not_gated_by_the_swap_rule():
    # a holds 3 of 4 (above its share of 2); b's long waiting job may still take one of a's
    # jobs at a round (the budget decides across tenants, not the swap rule)
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("A3", "a", started=LONG), run("B1", "b", started=LONG),
                                     job("P", "b", submitted=T0 - timedelta(seconds=30))])
    prob = _problem(snap, {"A1": 7800.0, "A2": 7800.0, "A3": 7800.0, "B1": 1e5, "P": 1e5},
                    {"A1": 7200.0, "A2": 7200.0, "A3": 7200.0, "B1": 7200.0})
    got = plan(snap, prob, {"P": "k80", "A2": "k80", "A3": "k80", "B1": "k80"},
               standing(prob, running_of(snap)), boundary=True)
    assert got.requeue == ("A1",)
