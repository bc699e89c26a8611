"""What other layers read from an Allocation travels in typed fields, not in ``info`` keys:
node hints (hops -> rounding), forks (hadare -> simulator), the efficiency bound and the
fallback reason (policies -> ``slurm-fair solve``); HadarE's fork sync is a policy option."""

from __future__ import annotations

from slurm_fair import policies, rounding
from slurm_fair.estimates import gavel as tt
from slurm_fair.model import Allocation, Job, NodeCapacity, Problem
from slurm_fair.policies import PolicyInfo, PolicyOptions
from slurm_fair.problem_io import allocation_to_dict
from slurm_fair.sim import engine
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.workload import TraceJob, make_workload


def _job(jid: str, tenant: str, thr: dict[str, float], gpus: int = 1) -> Job:
    return Job(id=jid, tenant=tenant, gpus=gpus, throughput=thr)


def test_rounding_follows_the_node_hint() -> None:
    nodes = (NodeCapacity("v-1", "v100", 4), NodeCapacity("v-2", "v100", 4))
    problem = Problem({"v100": 8}, {}, (_job("a", "A", {"v100": 1.0}),), nodes)
    # without a hint best fit takes the first of two equally full nodes
    assert rounding.place(problem, Allocation("t", {"a": {"v100": 1.0}})).nodes["a"] == ("v-1",)
    hinted = Allocation("t", {"a": {"v100": 1.0}}, nodes={"a": ("v-2",)})
    assert rounding.place(problem, hinted).nodes["a"] == ("v-2",)


def test_hadare_forks_by_the_option_sync() -> None:
    """A copy on the K80 adds 1/10 of the job's rate: worth it at 5 % sync, not at 20 %."""
    problem = Problem({"v100": 1, "k80": 1}, {}, (_job("a", "A", {"v100": 10, "k80": 1}),))
    hadare = policies.get("hadare").allocate
    assert hadare(problem, PolicyOptions(fork_sync=0.05, state={})).forks == {"a#fork1": "a"}
    assert hadare(problem, PolicyOptions(fork_sync=0.2, state={})).forks == {}


def test_the_simulator_passes_fork_sync_as_an_option_not_in_the_state() -> None:
    seen: list[tuple[float, set[str]]] = []

    def spy(problem: Problem, options: PolicyOptions) -> Allocation:
        seen.append((options.fork_sync, set(options.state)))
        return Allocation("spy", {j.id: {"v100": 1.0} for j in problem.jobs}, "heuristic")

    table = tt.ThroughputTable(data={"v100": {("A", 1): 10.0}}, source="test")
    w = make_workload([TraceJob("a/1", "a", "A", 1, 1000, 0)])
    cfg = engine.SimConfig(fork_sync=0.25, check_fairness=False)
    engine.simulate(w, parse_cluster("v100=1"), table, PolicyInfo("spy", spy, "test", True), cfg)
    assert seen and all(sync == 0.25 and "fork_sync" not in state for sync, state in seen)


def test_solve_output_keeps_the_keys_of_the_typed_fields() -> None:
    problem = Problem({"v100": 1}, {}, (_job("a", "A", {"v100": 1.0}),))
    a = Allocation("t", {"a": {"v100": 1.0}}, "fallback", nodes={"a": ("n1",)}, forks={"a#fork1": "a"},
                   efficiency_bound=1.0, fallback_reason="forced", info={"lp_file": "kept.lp"})
    out = allocation_to_dict(problem, a)
    assert out["nodes"] == {"a": ["n1"]} and out["forks"] == {"a#fork1": "a"}
    assert out["efficiency_bound"] == 1.0 and out["fallback_reason"] == "forced" and out["lp_file"] == "kept.lp"
    bare = allocation_to_dict(problem, Allocation("t", {"a": {"v100": 1.0}}))
    assert not {"nodes", "forks", "efficiency_bound", "fallback_reason"} & set(bare)


def test_fallback_and_bound_reach_their_fields() -> None:
    problem = Problem({"v100": 2, "k80": 2}, {}, (_job("a", "A", {"v100": 2, "k80": 1}), _job("b", "B", {"v100": 1, "k80": 1})))
    a = policies.allocate("oef", problem, PolicyOptions())
    assert a.efficiency_bound is not None and "efficiency_bound" not in a.info
    assert a.fallback_reason is None
