"""Only what a site knows (issue 39): under ``--knowledge untagged`` no decision of a run reads a
job's true size. The sentinel: two workloads that differ only in their jobs' true sizes, seen
through the same time limits, must get the same decisions (every policy's allocation and the
engine's gang reservation) until the first job finishes, when the runs may part. A policy or
the engine reading the true remaining work makes them differ earlier."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from slurm_fair import policies, rounding
from slurm_fair.estimates import gavel, runtime
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, Simulator
from slurm_fair.sim.knowledge import Knowledge, parse_knowledge
from slurm_fair.sim.workload import TraceJob, make_workload

TABLE = gavel.load(None)
RESNET = "ResNet-50 (batch size 32)"
REC = "Recommendation (batch size 2048)"


def jobs(scale: float, gang_scale: float) -> list[TraceJob]:
    """Two tenants' single-GPU jobs and gangs of 2 and 4 GPUs, all arriving within the first
    rounds; ``scale`` and ``gang_scale`` multiply the true sizes only."""
    out = [TraceJob(f"a/{i}", "a", RESNET if i % 2 else REC, 1, 4e5 * scale * (1 + i % 3), i * 60.0) for i in range(7)]
    out += [TraceJob(f"b/{i}", "b", REC, 1, 4e5 * scale * (1 + i % 2), i * 90.0) for i in range(3)]
    out += [TraceJob("b/g4", "b", RESNET, 4, 3e4 * gang_scale, 30.0, nodes=1),
            TraceJob("a/g2", "a", REC, 2, 2e4 * gang_scale, 200.0, nodes=1)]
    return out


def decisions(policy: str, workload_jobs: list[TraceJob], monkeypatch: pytest.MonkeyPatch,
              seen_ratios: list[int] | None = None, ignore: frozenset[str] = frozenset()) -> tuple[list[Any], float]:
    """Every round's decision of an untagged run (the allocation's rows and the gangs the engine
    found overdue, rounded) and the time of its first completion (inf: none) among the jobs not
    in ``ignore``; ``seen_ratios`` gets, per round, how many jobs the policy was shown their
    group's history for (finished jobs' use ratios)."""
    # a time limit that does not depend on the true size: a site's only view of it
    monkeypatch.setattr(Knowledge, "time_limit", lambda self, job_id, alone_s: 900.0 * (2 + len(job_id) % 3))
    seen: list[Any] = []
    real_place = rounding.place

    def place(problem, allocation, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - a spy
        rows = {j: {k: round(v, 6) for k, v in sorted(row.items()) if v > 1e-9} for j, row in sorted(allocation.x.items())}
        over = {j: round(r, 6) for j, r in sorted((kwargs.get("overdue") or {}).items())}
        seen.append((rows, over))
        if seen_ratios is not None:
            seen_ratios.append(sum(1 for j in problem.jobs if j.extra.get(runtime.EXTRA_KEY)))
        return real_place(problem, allocation, *args, **kwargs)

    monkeypatch.setattr(rounding, "place", place)
    sim = Simulator(make_workload(workload_jobs), parse_cluster("v100=4,k80=4", 4), TABLE, policies.get(policy),
                    SimConfig(check_fairness=False, knowledge=parse_knowledge("untagged"), horizon_s=5 * 3600.0,
                              # oef's improvement stages stop after oef.improve_s of wall time: unbounded
                              # here, the decisions depend on the input only, however loaded the machine
                              policy_params={"oef.improve_s": 86400.0} if policy == "oef" else {}))
    res = sim.run()
    ends = [r.end_s for r in res.records if r.end_s is not None and r.job_id not in ignore]
    return seen, min(ends, default=float("inf"))


@pytest.mark.parametrize("policy", ["oef", "hops", "fft", "gavel-ftf", "hadar", "gavel-mmf"])
def test_untagged_decisions_do_not_depend_on_true_sizes(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    small, end_small = decisions(policy, jobs(1.0, 1.0), monkeypatch)
    large, end_large = decisions(policy, jobs(3.0, 40.0), monkeypatch)
    first = min(end_small, end_large)
    start = min(j.arrival_s for j in jobs(1.0, 1.0))
    # rounds decided before any job of either run finished (the learner still knows nothing)
    before = [i for i in range(min(len(small), len(large))) if start + i * SimConfig().round_s < first]
    assert len(before) >= 5
    assert [small[i] for i in before] == [large[i] for i in before]


@pytest.mark.parametrize("policy", ["gavel-mmf", "oef"])
def test_the_sentinel_catches_a_decision_that_reads_true_sizes(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: with the engine's view of a job leaking its true remaining work
    (as the gang reservation did before issue 39), the decisions of the two workloads part before
    any job finished, even for a policy that never reads a size (gavel-mmf: through the reservation)."""
    real_seen = Simulator._seen
    monkeypatch.setattr(Simulator, "_seen", lambda self, s, now: dataclasses.replace(real_seen(self, s, now),
                                                                                     remaining_work=s.remaining))
    small, end_small = decisions(policy, jobs(1.0, 1.0), monkeypatch)
    large, end_large = decisions(policy, jobs(3.0, 40.0), monkeypatch)
    first = min(end_small, end_large)
    before = [i for i in range(min(len(small), len(large))) if i * SimConfig().round_s < first]
    assert [small[i] for i in before] != [large[i] for i in before]


def test_every_policy_reads_a_size_only_through_what_the_problem_shows() -> None:
    """The one home of a size a site knows: a hidden size shows its time limit less the time run."""
    from slurm_fair import fairness
    from slurm_fair.model import Job

    job = Job(id="j", tenant="t", gpus=1, throughput={"v100": 2.0, "k80": 1.0}, attained_s=600.0,
              extra={"time_limit_s": 3600.0})
    assert fairness.known_remaining(job) == pytest.approx(3000.0 * 2.0)
    assert fairness.known_remaining(dataclasses.replace(job, remaining_work=50.0)) == 50.0
    assert fairness.known_remaining(dataclasses.replace(job, extra={})) is None
    assert fairness.known_remaining_s(job) == pytest.approx(3000.0)


#: short jobs, the same in both workloads, that finish early: the group history both runs share
EARLY = [TraceJob(f"a/e{i}", "a", REC, 1, 3e3, 0.0) for i in range(4)]


@pytest.mark.parametrize("policy", ["oef", "fft", "hops"])
def test_finished_jobs_history_is_used_but_never_a_running_jobs_own_size(policy: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Group history (the use ratios of *finished* jobs) may change decisions, a running or
    pending job's own true size never: with the same early jobs finishing in both runs, the
    decisions stay equal, history in use, until the first of the jobs whose sizes differ ends."""
    early = frozenset(j.id for j in EARLY)
    shown: list[int] = []
    small, end_small = decisions(policy, EARLY + jobs(1.0, 1.0), monkeypatch, shown, early)
    large, end_large = decisions(policy, EARLY + jobs(3.0, 40.0), monkeypatch, ignore=early)
    first = min(end_small, end_large)
    before = [i for i in range(min(len(small), len(large))) if i * SimConfig().round_s < first]
    with_history = [i for i in before if shown[i] > 0]
    assert len(with_history) >= 3, (shown, first)
    assert [small[i] for i in before] == [large[i] for i in before]


def test_the_history_check_catches_a_sample_that_holds_the_jobs_own_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a sample that counts the job's own true run time (as if it had
    finished) makes the two runs part before any of their differing jobs ended."""
    real = Knowledge.sizes

    def leaky(self, job_id, remaining, alone_s, group=None):  # noqa: ANN001, ANN202 - a spy
        size, extra = real(self, job_id, remaining, alone_s, group)
        own = min(1.0, alone_s / self.time_limit(job_id, alone_s))
        return size, {**extra, runtime.EXTRA_KEY: tuple(sorted((*extra.get(runtime.EXTRA_KEY, ()), own) * 3))}

    monkeypatch.setattr(Knowledge, "sizes", leaky)
    early = frozenset(j.id for j in EARLY)
    small, end_small = decisions("oef", EARLY + jobs(1.0, 1.0), monkeypatch, ignore=early)
    large, end_large = decisions("oef", EARLY + jobs(3.0, 40.0), monkeypatch, ignore=early)
    first = min(end_small, end_large)
    before = [i for i in range(min(len(small), len(large))) if i * SimConfig().round_s < first]
    assert [small[i] for i in before] != [large[i] for i in before]
