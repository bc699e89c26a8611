"""Bounded staleness (``--stale-s``): the last solution stands while jobs come and go, within
bounds, and nothing else about a run changes."""

from __future__ import annotations

import pytest

from slurm_fair import policies
from slurm_fair.estimates import gavel
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.synthetic import generate

TABLE = gavel.load(None)
WORKLOAD = generate(60, 3, 5, rate_per_hour=30, table=TABLE, max_duration_s=3 * 3600)
CLUSTER = parse_cluster("v100=8,p100=8,k80=8", 4)


def run(policy: str, **kw):
    # oef's improvement stages stop after ``oef.improve_s`` of wall time, so on a loaded machine two
    # runs of the same workload could differ; without that bound a run depends on its input only
    params = {"oef.improve_s": 86400.0} if policy == "oef" else {}
    return simulate(WORKLOAD, CLUSTER, TABLE, policies.get(policy),
                    SimConfig(check_fairness=False, policy_params=params, **kw))


@pytest.mark.parametrize("policy", ["gavel-mmf", "oef"])
def test_zero_staleness_is_the_run_of_before(policy):
    a, b = run(policy), run(policy, stale_s=0.0, stale_changes=0.9)
    assert [(r.job_id, r.end_s) for r in a.records] == [(r.job_id, r.end_s) for r in b.records]
    assert a.solves == b.solves and b.reused_solutions == 0


@pytest.mark.parametrize("policy", ["gavel-mmf", "oef"])
def test_stale_solutions_are_reused_within_bounds_and_every_job_finishes(policy):
    exact, stale = run(policy), run(policy, stale_s=3600.0, stale_changes=1.0)
    assert stale.reused_solutions > 0 and stale.solves < exact.solves
    assert all(r.end_s is not None for r in stale.records) and len(stale.records) == len(WORKLOAD.jobs)
    for s in stale.samples:  # never more GPUs than the cluster has
        assert all(s.busy.get(k, 0) <= c for k, c in CLUSTER.capacity.items())


def test_no_round_reuses_a_solution_older_than_the_bound():
    """Reused rounds are the unchecked ones (SI/EF are checked on solved rounds): never more than
    the bound's 10 rounds of 360 s in a row."""
    res = simulate(WORKLOAD, CLUSTER, TABLE, policies.get("gavel-mmf"), SimConfig(stale_s=3600.0, stale_changes=1.0))
    run_length, longest = 0, 0
    for s in res.samples:
        run_length = run_length + 1 if s.si_ok is None else 0
        longest = max(longest, run_length)
    assert res.reused_solutions > 0 and 0 < longest < 10


def test_the_change_bound_forces_a_solve():
    loose, tight = run("gavel-mmf", stale_s=36000.0, stale_changes=1.0), run("gavel-mmf", stale_s=36000.0,
                                                                              stale_changes=0.01)
    assert tight.solves > loose.solves


def test_a_policy_that_forks_copies_still_finishes_every_job():
    """HadarE's copies name their parents: an answer with forks is never reused."""
    res = run("hadare", stale_s=3600.0, stale_changes=1.0)
    assert all(r.end_s is not None for r in res.records) and len(res.records) == len(WORKLOAD.jobs)


def test_a_runs_progress_lines_follow_it_to_its_end(capsys):
    """The engine's ``where`` callback: every round, the simulated time since the first arrival
    (one round further each time), the solves and reused rounds so far, ending at the run's own
    counts; ``simulate --jobs N``'s worker turns them into a line on stderr."""
    from slurm_fair.commands.simulate import _Where

    seen: list[tuple[float, int, int]] = []
    res = simulate(WORKLOAD, CLUSTER, TABLE, policies.get("gavel-mmf"), SimConfig(stale_s=3600.0, stale_changes=1.0),
                   where=lambda t, s, r: seen.append((t, s, r)))
    assert len(seen) == len(res.samples) and seen[-1][1:] == (res.solves, res.reused_solutions)
    assert [b[0] - a[0] for a, b in zip(seen, seen[1:])] == [SimConfig().round_s] * (len(seen) - 1)
    assert all(b[1] >= a[1] and b[2] >= a[2] for a, b in zip(seen, seen[1:]))
    _Where("oef", every_s=0.0)(2.5 * 86400, 12, 103)
    assert capsys.readouterr().err.startswith("oef: day 2.5, 12 solves, 103 reused rounds, ")
