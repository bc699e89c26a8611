"""Hops as its paper describes it: priority, window, configurations, the weighted ILP, placement.

The checks are computed independently of ``policies/hops.py``: capacity and gang shape from the
named nodes, the window by its definition, the lambda = 0 optimum by brute force.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import policies
from slurm_fair.cli import main
from slurm_fair.errors import UserError
from slurm_fair.model import Job, NodeCapacity, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies._hops_ilp import bias
from slurm_fair.policies.hops import priority, promote, queue_of, window

hops = policies.get("hops").allocate


def _opts(**params: float) -> PolicyOptions:
    return PolicyOptions(state={}, params={f"hops.{k}": v for k, v in params.items()})


# --- priority and window ------------------------------------------------------------------------

def test_priority_is_wait_over_age() -> None:
    """W = 600 - 100 = 500 s. A = 100 s run + Eq. 9 on the remaining 400 steps: half the GPUs
    are v100 (400 / 4 = 100 s), half k80 (400 / 2 = 200 s), so 150 s; A = 250 s, LR = 2."""
    job = Job("j", "t", 1, {"v100": 4.0, "k80": 2.0}, remaining_work=400.0, age_s=600.0, attained_s=100.0)
    assert priority(job, {"v100": 2, "k80": 2}, 360.0) == pytest.approx(2.0)
    assert priority(Job("n", "t", 1, {"v100": 4.0}, remaining_work=400.0, age_s=0.0), {"v100": 1}, 360.0) == 0.0


@given(st.lists(st.integers(1, 8), max_size=30), st.integers(1, 40))
def test_window_is_the_shortest_head_reaching_the_total(sizes: list[int], total: int) -> None:
    queue = [Job(f"j{i}", "t", g, {"a": 1.0}) for i, g in enumerate(sizes)]
    win = window(queue, total)
    assert win == queue[:len(win)]
    if sum(sizes) >= total:
        assert sum(j.gpus for j in win) >= total > sum(j.gpus for j in win[:-1])
    else:
        assert win == queue


def test_bias_rule() -> None:
    assert bias([0.5, 2.0]) == 0.0
    assert bias([0.0, 2.0]) == pytest.approx(0.01)
    assert bias([-3.0, 2.0]) == pytest.approx(3.01)


def test_promotion_brings_insensitive_jobs_from_beyond_the_window() -> None:
    jobs = [Job(f"j{i}", "t", 2, {"a": 1.0}) for i in range(6)]
    rho = {"j0": 2.0, "j1": 2.0, "j2": 1.5, "j3": 1.0, "j4": 1.0, "j5": 1.0}
    # queue mean 1.42, window (j0, j1) mean 2: j2 is beyond but not below the mean, j3 and j4
    # are; after j3 the window's mean is 1.67, after j4 1.5, still above, and j5 no longer fits
    assert [j.id for j in promote(jobs[:2], jobs, 4, rho)] == ["j3", "j4"]
    assert [j.id for j in promote(jobs[:2], jobs, 2, rho)] == ["j3"]
    # a window already less sensitive than the queue promotes nobody
    assert promote(jobs[3:5], jobs, 8, rho) == []


# --- placement: capacity per node, gang shapes, sensitivity ------------------------------------

@st.composite
def node_problems(draw) -> Problem:
    nodes: list[NodeCapacity] = []
    for k in ("a", "b")[: draw(st.integers(1, 2))]:
        for i in range(draw(st.integers(1, 4))):
            nodes.append(NodeCapacity(f"{k}-{i}", k, draw(st.sampled_from([2, 4, 8])),
                                      draw(st.sampled_from([0.8, 1.0, 1.0, 1.2]))))
    types = sorted({n.gpu_type for n in nodes})
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        g = draw(st.sampled_from([1, 2, 3, 4, 8]))
        thr = {k: draw(st.sampled_from([0.0, 1.0, 3.0, 10.0])) for k in types}
        if not any(thr.values()):
            thr[types[0]] = 1.0
        spread = {k: t / draw(st.sampled_from([1.0, 1.2, 2.0])) for k, t in thr.items()} if draw(st.booleans()) else {}
        per_node = draw(st.sampled_from([None, None, g, 2 if g % 2 == 0 else None]))
        jobs.append(Job(f"j{i}", "t", g, thr, remaining_work=draw(st.sampled_from([10.0, 1000.0])),
                        age_s=draw(st.sampled_from([0.0, 50.0, 500.0])), attained_s=0.0,
                        spread_throughput=spread, gpus_per_node=per_node))
    caps = {k: sum(n.gpus for n in nodes if n.gpu_type == k) for k in types}
    # the simulator's rule: a type whose nodes cannot hold the gang has T_jk = 0
    frame = Problem(caps, {}, (), tuple(nodes))
    jobs = [Job(j.id, j.tenant, j.gpus, {k: (t if frame.holds(j, k) else 0.0) for k, t in j.throughput.items()},
                remaining_work=j.remaining_work, age_s=j.age_s, spread_throughput=j.spread_throughput,
                gpus_per_node=j.gpus_per_node) for j in jobs]
    return Problem(caps, {}, tuple(jobs), tuple(nodes))


@settings(max_examples=scaled(60), deadline=None)
@given(node_problems(), st.sampled_from([0.0, 1.0, 2.0]))
def test_placement_respects_nodes_shapes_and_sensitivity(problem: Problem, lam: float) -> None:
    alloc = hops(problem, _opts(**{"lambda": lam}))
    size = {n.name: n.gpus for n in problem.nodes}
    kind = {n.name: n.gpu_type for n in problem.nodes}
    used = {n: 0 for n in size}
    for job in problem.jobs:
        chosen = [(k, v) for k, v in alloc.x[job.id].items() if v > 0]
        assert len(chosen) <= 1, "at most one configuration per job"
        if not chosen:
            assert job.id not in alloc.nodes
            continue
        (k, v), = chosen
        assert v == 1.0 and job.throughput[k] > 0
        on = alloc.info["node_gpus"][job.id]
        assert tuple(sorted(on)) == alloc.nodes[job.id]
        assert sum(on.values()) == job.gpus and all(kind[n] == k for n in on)
        if job.gpus_per_node:
            assert all(g == job.gpus_per_node for g in on.values())
        for n, g in on.items():
            used[n] += g
        largest = max(size[n] for n in size if kind[n] == k)
        if len(on) > math.ceil(job.gpus / largest):  # spread: only a placement-insensitive job
            spread = job.spread_throughput.get(k, 0.0)
            assert spread > 0 and job.throughput[k] / spread <= 1.4
    assert all(used[n] <= size[n] for n in size), "per-node capacity"


def _sens_problem(z_spread: dict[str, float]) -> Problem:
    nodes = (NodeCapacity("a-1", "a", 4), NodeCapacity("a-2", "a", 4))
    jobs = (
        Job("X", "t", 3, {"a": 1.0}, remaining_work=100.0, age_s=1000.0),
        Job("Y", "t", 3, {"a": 1.0}, remaining_work=100.0, age_s=1000.0),
        Job("Z", "t", 2, {"a": 1.0}, remaining_work=100.0, age_s=0.0, spread_throughput=z_spread),
    )
    return Problem({"a": 8}, {}, jobs, nodes)


def test_only_an_insensitive_job_fills_fragments_across_nodes() -> None:
    """X and Y (long waits) take 3 GPUs of each node; the 1 + 1 left can hold Z only spread."""
    low = hops(_sens_problem({"a": 1.0 / 1.2}), _opts())
    assert low.x["Z"] == {"a": 1.0} and low.nodes["Z"] == ("a-1", "a-2")
    assert low.info["plans"][1]["step"] == "replan"
    for spread in ({"a": 0.5}, {}):  # rho = 2, and unknown: placement-sensitive
        high = hops(_sens_problem(spread), _opts())
        assert high.x["X"] and high.x["Y"] and not high.x["Z"]
    # the threshold is an option: at sigma = 2.5 a job with rho = 2 may spread
    assert hops(_sens_problem({"a": 0.5}), _opts(sigma=2.5)).x["Z"] == {"a": 1.0}


def test_a_job_keeps_its_nodes_between_rounds() -> None:
    nodes = tuple(NodeCapacity(f"a-{i}", "a", 8) for i in range(3))
    opts = _opts()
    first = hops(Problem({"a": 24}, {}, (Job("j", "t", 4, {"a": 1.0}, remaining_work=10.0, age_s=0.0),), nodes), opts)
    again = Problem({"a": 24}, {}, (Job("j", "t", 4, {"a": 1.0}, remaining_work=9.0, age_s=360.0, attained_s=360.0,
                                        prev_type="a"), Job("k", "t", 8, {"a": 1.0}, remaining_work=10.0, age_s=0.0)), nodes)
    assert hops(again, opts).nodes["j"] == first.nodes["j"]


# --- the objective: lambda = 0 is max throughput among the window jobs ------------------------

@st.composite
def flat_problems(draw) -> Problem:
    types = ["a", "b", "c"][: draw(st.integers(1, 3))]
    caps = {k: draw(st.integers(1, 8)) for k in types}
    jobs = []
    for i in range(draw(st.integers(1, 5))):
        thr = {k: draw(st.sampled_from([0.0, 1.0, 2.0, 5.0])) for k in types}
        thr[types[0]] = thr[types[0]] or 1.0
        jobs.append(Job(f"j{i}", "t", draw(st.sampled_from([1, 2, 4])), thr, remaining_work=100.0,
                        age_s=draw(st.sampled_from([0.0, 10.0, 900.0]))))
    return Problem(caps, {}, tuple(jobs))


def _brute_force_gain(problem: Problem) -> float:
    """max sum of G over feasible assignments (each job: nothing, or one type it fits on)."""
    jobs = list(problem.jobs)
    options = []
    for j in jobs:
        fits = [k for k, t in j.throughput.items() if t > 0 and j.gpus <= problem.gpu_types[k]]
        low = min((j.throughput[k] for k in fits), default=1.0)
        options.append([(None, 0.0)] + [(k, j.throughput[k] / low) for k in fits])
    best = 0.0
    for combo in itertools.product(*options):
        used: dict[str, int] = {}
        for j, (k, _) in zip(jobs, combo):
            if k:
                used[k] = used.get(k, 0) + j.gpus
        if all(used[k] <= problem.gpu_types[k] for k in used):
            best = max(best, sum(g for _, g in combo))
    return best


@settings(max_examples=scaled(60), deadline=None)
@given(flat_problems())
def test_lambda_zero_is_max_throughput_among_the_window(problem: Problem) -> None:
    # only problems whose jobs are all in hops' own window (its queue order: by LR); then the
    # first plan maximises sum G over every job and the second has nothing left to add
    caps = {k: int(c) for k, c in problem.gpu_types.items()}
    queue = queue_of(problem, {j.id: priority(j, caps, 360.0) for j in problem.jobs})
    if len(window(queue, sum(caps.values()))) < len(problem.jobs):
        return
    alloc = hops(problem, _opts(**{"lambda": 0.0, "gap": 0.0}))
    got = 0.0
    for j in problem.jobs:
        for k, v in alloc.x[j.id].items():
            fits = [t for t, r in j.throughput.items() if r > 0 and j.gpus <= problem.gpu_types[t]]
            got += v * j.throughput[k] / min(j.throughput[t] for t in fits)
    assert got == pytest.approx(_brute_force_gain(problem))


def test_lambda_weights_priority_over_throughput() -> None:
    """One v100, one k80, both wanted on the v100. A waited long (LR about 8.9) and gains
    little there (G = 5 / 4); B is new (LR 0: weight b = 0.01) and gains 10x. lambda = 0:
    throughput, B on the v100 (G sum 11 against 2.25); lambda = 1: priority, A on the v100
    (10.01 x 1.25 + 0.01 against 10.01 + 0.1)."""
    jobs = (Job("A", "t", 1, {"v100": 5.0, "k80": 4.0}, remaining_work=500.0, age_s=1000.0),
            Job("B", "t", 1, {"v100": 10.0, "k80": 1.0}, remaining_work=500.0, age_s=0.0))
    problem = Problem({"v100": 1, "k80": 1}, {}, jobs)
    by_priority = hops(problem, _opts(**{"lambda": 1.0}))
    assert by_priority.x["A"] == {"v100": 1.0} and by_priority.x["B"] == {"k80": 1.0}
    by_throughput = hops(problem, _opts(**{"lambda": 0.0}))
    assert by_throughput.x["B"] == {"v100": 1.0} and by_throughput.x["A"] == {"k80": 1.0}


# --- the option on the command line -------------------------------------------------------------

def test_policy_options_are_checked() -> None:
    assert policies.parse_params(["hops.lambda=2"]) == {"hops.lambda": 2.0}
    assert PolicyOptions(params={"hops.lambda": 2.0}).param("hops", "lambda") == 2.0
    assert PolicyOptions().param("hops", "sigma") == 1.4
    for bad, words in (("hops.bogus=1", "no parameter 'bogus'"), ("hops.lambda=x", "not a finite number"),
                       ("hops.lambda=nan", "not a finite number"),
                       ("hops.lambda=-1", "outside"), ("lambda=1", "POLICY.KEY=VALUE"), ("nope.x=1", "unknown policy")):
        with pytest.raises(UserError, match=words):
            policies.parse_params([bad])


def test_simulate_takes_a_policy_option(tmp_path, capsys) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("tenant,job_id,job_type,gpus,total_steps,arrival_s\na,1,A3C,1,2000,0\nb,1,A3C,2,2000,0\n")
    args = ["simulate", "--trace", str(trace), "--cluster", "v100=4,k80=4", "--gpus-per-node", "2",
            "--policy", "hops", "--quiet", "--no-fairness-checks"]
    assert main(args + ["--policy-option", "hops.lambda=2"]) == 0
    capsys.readouterr()
    assert main(args + ["--policy-option", "hops.lamda=2"]) == 2
    err = capsys.readouterr().err
    assert "no parameter 'lamda'" in err and "Traceback" not in err


def test_nothing_placed_twice_without_nodes() -> None:
    jobs = tuple(Job(f"j{i}", "t", 2, {"v100": 3.0, "k80": 1.0}, remaining_work=10.0, age_s=float(i)) for i in range(5))
    alloc = hops(Problem({"v100": 4, "k80": 2}, {}, jobs), _opts())
    used: dict[str, int] = {}
    for j in jobs:
        for k, v in alloc.x[j.id].items():
            used[k] = used.get(k, 0) + 2 * int(v)
    assert used == {"v100": 4, "k80": 2}
