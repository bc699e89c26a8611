"""``simulate --knowledge``: what policies are shown, and that the engine still runs true speeds."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from slurm_fair import policies
from slurm_fair.cli import cli, main
from slurm_fair.errors import UserError
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, Simulator
from slurm_fair.sim.knowledge import Knowledge, KnowledgeSpec, parse_knowledge
from slurm_fair.sim.workload import TraceJob, make_workload
from slurm_fair.estimates import gavel

TABLE = gavel.load(None)
JOBS = [TraceJob(f"t{i % 2}/{i}", f"t{i % 2}", jt, 1, 2000.0, i * 600.0)
        for i, jt in enumerate(["ResNet-50 (batch size 32)", "Recommendation (batch size 2048)"] * 6)]


def run(knowledge: str):
    sim = Simulator(make_workload(JOBS), parse_cluster("v100=2,k80=2"), TABLE, policies.get("oef"),
                    SimConfig(check_fairness=False, knowledge=parse_knowledge(knowledge)))
    return sim, sim.run()


@pytest.mark.parametrize("text, spec", [("oracle", KnowledgeSpec()), ("untagged", KnowledgeSpec("untagged")),
                                        ("tagged=0.25", KnowledgeSpec("tagged", 0.25))])
def test_parse(text, spec):
    assert parse_knowledge(text) == spec


@pytest.mark.parametrize("bad", ["", "tagged", "tagged=2", "tagged=x", "psychic"])
def test_bad_knowledge_is_a_user_error(bad):
    with pytest.raises(UserError):
        parse_knowledge(bad)


def test_untagged_policies_see_priors_then_learned_speeds_and_jobs_still_run_true():
    sim, res = run("untagged")
    assert sim.knowledge.learned  # finished jobs taught it something
    k = sim.knowledge
    rec = ("t1", "Recommendation (batch size 2048)", 1)
    true = {t: TABLE.lookup(rec[1], 1, t) for t in ("k80", "v100")}
    shown = k.believed("x", rec, true)
    assert shown != true and max(shown.values()) == pytest.approx(max(true.values()))
    # the engine's records carry the true speeds and every job finishes its work
    assert all(r.throughput == {t: TABLE.lookup(r.job_id and JOBS[int(r.job_id.split('/')[1])].job_type, 1, t)
                                for t in ("k80", "v100")} for r in res.records)
    assert len(res.records) == len(JOBS) and all(r.end_s is not None for r in res.records)


def test_tagged_one_is_the_oracle_and_oracle_learns_nothing():
    _, oracle = run("oracle")
    sim, tagged = run("tagged=1")
    assert [r.end_s for r in oracle.records] == [r.end_s for r in tagged.records]
    assert Knowledge(KnowledgeSpec(), ["v100"], ["a"]).knows("a")


def test_simulate_cli_takes_knowledge_and_reports_it(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("tenant,job_id,job_type,gpus,total_steps,arrival_s\n"
                     "a,1,ResNet-50 (batch size 32),1,1000,0\nb,2,LM (batch size 20),1,1000,0\n")
    res = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--cluster", "v100=1,k80=1", "--policy", "oef",
                                   "--knowledge", "untagged", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert '"knowledge": "untagged"' in res.stdout
    assert main(["simulate", "--trace", str(trace), "--cluster", "v100=1", "--policy", "oef",
                 "--knowledge", "tagged=7", "--quiet"]) == 2


def test_a_type_a_job_cannot_run_on_is_no_free_pass_it_costs_a_failed_turn_then_is_learned():
    """ResNet-50 bs128 on 4 K80s: Gavel measured 0 (out of memory), though the gang fits."""
    rn = "ResNet-50 (batch size 128)"
    jobs = [TraceJob(f"a/{i}", "a", rn, 4, 3000.0, i * 60.0) for i in range(4)]
    cluster = parse_cluster("v100=4,k80=4")
    true_k80 = TABLE.lookup(rn, 4, "k80")
    assert true_k80 == 0
    runs = {}
    for mode in ("oracle", "untagged"):
        sim = Simulator(make_workload(jobs), cluster, TABLE, policies.get("oef"),
                        SimConfig(check_fairness=False, knowledge=parse_knowledge(mode)))
        first = sim.knowledge.believed("a/0", ("a", rn, 4), sim._make_state(jobs[0]).throughput, ["k80", "v100"])
        runs[mode] = (sim, sim.run(), first)
    oracle, untagged = runs["oracle"][1], runs["untagged"][1]
    # oracle: known 0, never placed there; untagged: believed positive at first (the prior)
    assert runs["oracle"][2]["k80"] == 0 and runs["untagged"][2]["k80"] > 0
    assert all(r.gpu_seconds.get("k80", 0) == 0 for r in oracle.records)
    sim = runs["untagged"][0]
    assert sim.knowledge.learned[("a", rn, 4)].fails_on == {"k80": 1}
    assert sim.knowledge.believed("a/9", ("a", rn, 4), {"k80": 0.0, "v100": 5.0}, ["k80", "v100"])["k80"] == 0
    # every job still does all its work, at true speed (no progress on k80), none hangs
    assert len(untagged.records) == 4 and all(r.end_s is not None for r in untagged.records)
    wasted = sum(r.gpu_seconds.get("k80", 0) for r in untagged.records)
    assert wasted > 0
    # the failed turn is paid for in GPU time held (the makespans are not compared: the order in
    # which oef's aging takes 4 equal jobs, and its rotations, differ between the two runs)
    held = {m: sum(sum(r.gpu_seconds.values()) for r in res.records) for m, res in (("oracle", oracle), ("untagged", untagged))}
    assert held["untagged"] > held["oracle"]


def test_a_tenant_that_never_finished_a_job_type_believes_the_pool_of_the_others():
    k = Knowledge(KnowledgeSpec("untagged"), ["k80", "v100"], [])
    jt = "LM (batch size 20)"
    for i, tenant in enumerate(["a", "a", "b", "b"]):
        k.finished(f"{tenant}{i}", (tenant, jt, 1), {"v100" if i % 2 else "k80": 100.0 if i % 2 else 250.0})
    assert k.model is not None and ("*", jt, 1) in k.model.pools
    assert k.relative(("c", jt, 1)) == k.model.pools[("*", jt, 1)].speed != k.priors
    assert k.relative(("c", "other", 1)) == k.priors


def test_untagged_jobs_show_a_time_limit_not_their_size():
    """Issue 39: a job the policy does not know shows no remaining work, only a time limit as a
    user writes it: at least its run time alone, seeded (the same every round and run), in
    quarter hours; a known job shows its true remaining work and no limit."""
    k = Knowledge(KnowledgeSpec("untagged"), ["v100", "k80"], ["a", "b"], seed=3)
    work, extra = k.sizes("a", 500.0, 3000.0)
    assert work is None and extra["time_limit_s"] >= 3000.0 * 1.2 and extra["time_limit_s"] % 900 == 0
    assert extra == k.sizes("a", 100.0, 3000.0)[1] == Knowledge(KnowledgeSpec("untagged"), ["v100"], ["a"], 3).sizes(
        "a", 1.0, 3000.0)[1]
    limits = {Knowledge(KnowledgeSpec("untagged"), ["v100"], ["a"], s).time_limit("a", 36000.0) for s in range(20)}
    assert len(limits) > 5 and max(limits) <= 5 * 36000.0 + 900  # seeded spread, 1.2-5x
    oracle = Knowledge(KnowledgeSpec(), ["v100"], ["a"], 3)
    assert oracle.sizes("a", 500.0, 3000.0) == (500.0, {})


def test_the_policy_problem_of_an_untagged_run_has_no_sizes():
    """What the engine hands the policy in an untagged run: time limits, never the work left."""
    seen = []
    real = policies.get("oef")

    def spy(p, options):
        seen.append(p)
        return real.allocate(p, options)
    sim = Simulator(make_workload(JOBS), parse_cluster("v100=2,k80=2"), TABLE, dataclasses.replace(real, allocate=spy),
                    SimConfig(check_fairness=False, knowledge=parse_knowledge("untagged")))
    res = sim.run()
    assert seen and all(r.end_s is not None for r in res.records)
    assert all(j.remaining_work is None and j.extra["time_limit_s"] >= 900 for p in seen for j in p.jobs)
