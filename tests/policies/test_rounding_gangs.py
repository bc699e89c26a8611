"""``rounding.place`` with gangs on real nodes: random mixed node sizes, gang shapes (per-node
gangs, free splits, max_nodes), allocations, histories, previous nodes and fixed jobs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import rounding
from slurm_fair.model import Allocation, Job, NodeCapacity, Problem

TYPES = ("g0", "g1", "g2")


@st.composite
def gang_problems(draw) -> Problem:
    """Up to 3 types of 0..3 nodes of 1..8 GPUs each (sizes mixed within and between types);
    1..10 jobs: per-node gangs (``per_node`` GPUs on each of 1..3 nodes) or free splits (at most
    ``max_nodes`` nodes, or any); each runs on a random non-empty subset of the types."""
    nodes = [
        NodeCapacity(f"{k}-{i}", k, draw(st.sampled_from([1, 2, 3, 4, 8])))
        for k in TYPES
        for i in range(1, draw(st.integers(0, 3)) + 1)
    ]
    if not nodes:
        nodes = [NodeCapacity("g0-1", "g0", 4)]
    capacity = {k: sum(n.gpus for n in nodes if n.gpu_type == k) for k in TYPES}
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        if draw(st.booleans()):
            per_node = draw(st.sampled_from([1, 2, 4]))
            gpus, max_nodes = per_node * draw(st.integers(1, 3)), None
        else:
            per_node, gpus = None, draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
            max_nodes = draw(st.one_of(st.none(), st.integers(1, 3)))
        runs_on = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
        thr = {k: draw(st.sampled_from([0.5, 1.0, 3.0])) for k in runs_on}
        jobs.append(Job(f"j{i}", f"u{i % 3}", gpus, thr, gpus_per_node=per_node, max_nodes=max_nodes))
    return Problem(capacity, {}, jobs, tuple(nodes))


def allocations(problem: Problem) -> st.SearchStrategy[Allocation]:
    fractions = st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0])
    return st.fixed_dictionaries(
        {j.id: st.fixed_dictionaries({k: fractions for k in j.throughput}) for j in problem.jobs}
    ).map(lambda x: Allocation("random", x))


def received_shares(problem: Problem) -> st.SearchStrategy[dict[str, dict[str, float]]]:
    share = st.sampled_from([0.0, 0.3, 1.0])
    return st.fixed_dictionaries({j.id: st.fixed_dictionaries({k: share for k in j.throughput}) for j in problem.jobs})


@st.composite
def histories(draw, problem: Problem) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Where some jobs ran in the previous round: a random type each, random nodes with room,
    random valid cuts (a free split may be 1+1+2 where one node could hold all), never more
    GPUs on a node than it has."""
    free = {n.name: n.gpus for n in problem.nodes}
    prev: dict[str, str] = {}
    prev_nodes: dict[str, dict[str, int]] = {}
    for job in problem.jobs:
        if not draw(st.booleans()):
            continue
        k = draw(st.sampled_from(sorted(job.throughput)))
        order = draw(st.permutations([n.name for n in problem.nodes if n.gpu_type == k and free[n.name] > 0]))
        cut: dict[str, int] = {}
        if job.gpus_per_node:
            picked = [n for n in order if free[n] >= job.gpus_per_node][: job.gpus // job.gpus_per_node]
            cut = {n: job.gpus_per_node for n in picked} if len(picked) * job.gpus_per_node == job.gpus else {}
        else:
            left = job.gpus
            for n in order[: job.max_nodes or len(order)]:
                use = draw(st.integers(1, min(free[n], left))) if left else 0
                if use:
                    cut[n] = use
                    left -= use
            cut = cut if left == 0 else {}
        if cut:
            for n, g in cut.items():
                free[n] -= g
            prev[job.id], prev_nodes[job.id] = k, cut
    return prev, prev_nodes


@st.composite
def rounds(draw):
    """A problem, where its jobs ran in the previous round, and this round's inputs."""
    problem = draw(gang_problems())
    prev, prev_nodes = draw(histories(problem))
    fixed = {j: prev[j] for j in draw(st.lists(st.sampled_from(sorted(prev)), unique=True))} if prev else {}
    return problem, draw(allocations(problem)), draw(received_shares(problem)), prev, prev_nodes, fixed


@settings(max_examples=scaled(300), deadline=None)
@given(rounds())
def test_placement_respects_nodes_shapes_and_history(case) -> None:
    problem, allocation, received, prev, prev_nodes, fixed = case
    pl = rounding.place(problem, allocation, received, prev, prev_nodes, fixed)
    jobs = {j.id: j for j in problem.jobs}
    size = {n.name: n.gpus for n in problem.nodes}
    node_type = {n.name: n.gpu_type for n in problem.nodes}
    used: dict[str, int] = {}
    for j, k in pl.types.items():
        job, on = jobs[j], dict(pl.node_gpus[j])
        # only on a type whose nodes could hold the gang, and that the job can run on
        assert problem.holds(job, k) and job.throughput.get(k, 0) > 0
        assert sum(on.values()) == job.gpus and all(g > 0 for g in on.values())
        assert all(node_type[n] == k for n in on)
        assert pl.nodes[j] == tuple(sorted(on))
        if job.gpus_per_node:
            assert len(on) == job.gpus // job.gpus_per_node
            assert set(on.values()) == {job.gpus_per_node}
        elif job.max_nodes:
            assert len(on) <= job.max_nodes
        for n, g in on.items():
            used[n] = used.get(n, 0) + g
    # never more GPUs on a node than it has
    assert all(used[n] <= size[n] for n in used)
    # fixed jobs run where they are
    for j, k in fixed.items():
        assert pl.types[j] == k and dict(pl.node_gpus[j]) == prev_nodes[j]
    # a job placed on its previous type keeps its GPUs per node when nobody else took them
    for j, k in pl.types.items():
        if prev.get(j) != k or j in fixed:
            continue
        others = {n: used[n] - pl.node_gpus[j].get(n, 0) for n in used}
        if all(size[n] - others.get(n, 0) >= g for n, g in prev_nodes[j].items()):
            assert dict(pl.node_gpus[j]) == prev_nodes[j]


@settings(max_examples=scaled(100), deadline=None)
@given(
    gpus=st.sampled_from([1, 2, 4]),
    x=st.sampled_from([(0.1, 0.1), (0.5, 0.1), (0.1, 0.5), (0.5, 0.5), (1.0, 1.0), (1.0, 0.5)]),
    elsewhere=st.sampled_from([0.1, 0.5, 1.0]),
    names=st.sampled_from([("a", "b"), ("b", "a")]),
)
def test_never_ran_anywhere_goes_before_ran_elsewhere(gpus, x, elsewhere, names) -> None:
    """Two jobs that never ran on ``fast`` (room for one gang), allocated there alike (both
    part time, or both full time, or the new one full time): the one that never ran at all is
    placed there before the one that ran on ``slow``, whatever their shares and names."""
    x_new, x_old = x
    new, old = names
    nodes = (NodeCapacity("fast-1", "fast", gpus), NodeCapacity("slow-1", "slow", gpus))
    jobs = [Job(new, "u", gpus, {"fast": 2.0, "slow": 1.0}), Job(old, "v", gpus, {"fast": 2.0, "slow": 1.0})]
    problem = Problem({"fast": gpus, "slow": gpus}, {}, jobs, nodes)
    allocation = Allocation("t", {new: {"fast": x_new}, old: {"fast": x_old, "slow": 0.5}})
    pl = rounding.place(problem, allocation, received={old: {"slow": elsewhere}}, prev={old: "slow"},
                        prev_nodes={old: {"slow-1": gpus}})
    assert pl.types[new] == "fast"


def test_previous_nodes_are_kept_exactly_not_recut() -> None:
    """A 4-GPU job running 2+2 over two 4-GPU nodes stays 2+2, though one node could hold it now
    (moving it would restart it for nothing); with one of its nodes taken it moves."""
    nodes = (NodeCapacity("v-1", "v", 4), NodeCapacity("v-2", "v", 4))
    split = {"v-1": 2, "v-2": 2}
    problem = Problem({"v": 8}, {}, [Job("a", "a", 4, {"v": 1.0})], nodes)
    pl = rounding.place(problem, Allocation("t", {"a": {"v": 1.0}}), {"a": {"v": 1.0}}, {"a": "v"}, {"a": split})
    assert dict(pl.node_gpus["a"]) == split
    # c never ran: it goes first and takes v-1 whole; a (allocated half the time) moves onto v-2
    busy = Problem({"v": 8}, {}, [Job("a", "a", 4, {"v": 1.0}), Job("c", "c", 4, {"v": 1.0})], nodes)
    pl = rounding.place(busy, Allocation("t", {"a": {"v": 0.5}, "c": {"v": 1.0}}), {"a": {"v": 1.0}},
                        {"a": "v"}, {"a": split})
    assert dict(pl.node_gpus["c"]) == {"v-1": 4} and dict(pl.node_gpus["a"]) == {"v-2": 4}
    # both allocated the whole time: both run (c, which never ran, chooses first)
    pl = rounding.place(busy, Allocation("t", {"a": {"v": 1.0}, "c": {"v": 1.0}}), {"a": {"v": 1.0}},
                        {"a": "v"}, {"a": split})
    assert set(pl.types) == {"a", "c"} and sum(pl.node_gpus["a"].values()) == 4


def test_a_job_allocated_full_time_on_its_type_is_not_displaced_by_a_higher_ratio() -> None:
    """Gavel's ratio would run b (0.3 allocated, 0.2 received: 1.5) instead of a (1.0 / 1.0):
    a's allocation can only be met by running every round, so it keeps its GPUs. Between two
    full-time jobs the ratio decides: one stopped and behind comes back."""
    nodes = (NodeCapacity("v-1", "v", 1),)
    problem = Problem({"v": 1}, {}, [Job("a", "a", 1, {"v": 1.0}), Job("b", "b", 1, {"v": 1.0})], nodes)
    alloc = Allocation("t", {"a": {"v": 1.0}, "b": {"v": 0.3}})
    received = {"a": {"v": 1.0}, "b": {"v": 0.2}}

    def place(alloc, received, sticky=True):
        return dict(rounding.place(problem, alloc, received, {"a": "v"}, {"a": {"v-1": 1}}, sticky=sticky).types)

    assert place(alloc, received) == {"a": "v"}
    assert place(alloc, received, sticky=False) == {"b": "v"}  # stops are cheap: Gavel's order
    # the same ratios without the full-time allocation: Gavel's order, b runs
    alloc = Allocation("t", {"a": {"v": 0.9}, "b": {"v": 0.3}})
    assert place(alloc, {"a": {"v": 0.9}, "b": {"v": 0.2}}) == {"b": "v"}
    # both full time (more than fits), b was stopped and is behind (1 / 0.5 > 1 / 0.9): b runs
    alloc = Allocation("t", {"a": {"v": 1.0}, "b": {"v": 1.0}})
    assert place(alloc, {"a": {"v": 0.9}, "b": {"v": 0.5}}) == {"b": "v"}


def test_leftovers_go_only_to_jobs_not_allocated_a_much_faster_type() -> None:
    """v100 is full (b runs there full time); a is allocated v100, k80 runs it at 20 %: it
    waits for v100 rather than start on k80 and be moved later; c, allocated nothing, fills k80,
    and d, allocated p100 that is as good as v100 for it, fills the free p100."""
    nodes = (NodeCapacity("v-1", "v100", 1), NodeCapacity("k-1", "k80", 1), NodeCapacity("p-1", "p100", 1))
    jobs = [Job("a", "t", 1, {"v100": 1.0, "k80": 0.2}), Job("b", "t", 1, {"v100": 1.0}),
            Job("c", "t", 1, {"v100": 1.0, "k80": 0.2}), Job("d", "t", 1, {"v100": 1.0, "p100": 0.95})]
    problem = Problem({"v100": 1, "k80": 1, "p100": 1}, {}, jobs, nodes)
    alloc = Allocation("t", {"a": {"v100": 0.5}, "b": {"v100": 1.0}, "d": {"v100": 0.2}})
    pl = rounding.place(problem, alloc, {"a": {"v100": 0.5}, "b": {"v100": 1.0}}, {"b": "v100"}, {"b": {"v-1": 1}},
                        sticky=True)
    assert dict(pl.types) == {"b": "v100", "c": "k80", "d": "p100"}
    # stops are cheap (Gavel's setting): d, never ran on v100, displaces b there (Gavel's
    # "never ran" priority), and a fills the free k80 although it is allocated v100
    pl = rounding.place(problem, alloc, {"a": {"v100": 0.5}, "b": {"v100": 1.0}}, {"b": "v100"}, {"b": {"v-1": 1}})
    assert dict(pl.types) == {"d": "v100", "a": "k80"}
