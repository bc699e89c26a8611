"""``simulate --knowledge``: what policies are shown, and that the engine still runs true speeds."""

from __future__ import annotations

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
