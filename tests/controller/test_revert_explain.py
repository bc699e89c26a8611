"""revert and explain on the fake, and the three commands through click."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner

from slurm_fair import cli
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.explain import explain, render
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.errors import SlurmUnavailable, UserError
from slurm_fair.slurm.model import PriorityFactors

from .conftest import make_config


def view(fake):
    """What 'as if slurm-fair never ran' compares: pending jobs' requests and order, accounts, QOS."""
    jobs = {j.job_id: (j.gpu_request.raw, j.gpu_request.gpu_type, j.partition, j.qos, j.nice, j.priority,
                       j.req_nodes, j.site_factor) for j in fake.jobs()}
    accounts = {a.name: (tuple(sorted(a.qos)), a.default_qos) for a in fake.accounts()}
    qos = {q.name: dict(q.grp_tres) for q in fake.qos()}
    return jobs, accounts, qos


def submit(fake):
    return [
        fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=resnet-50-bs32"),
        fake.submit("alice", "--gres=gpu:v100:1", hold=False),
        fake.submit("bob", "--gpus=2", hold=False),
        fake.submit("bob", "--gres=gpu:2", hold=False),
    ]


@pytest.mark.parametrize("order,pin", [("site_factor", False), ("none", False), ("site_factor", True)])
def test_revert_restores_everything(fake, tmp_path, order, pin):
    config = make_config(tmp_path, order=order, pin_gres_type=pin)
    submit(fake)
    before = view(fake)
    assert run_cycle(fake, config).exit_code == 0
    assert view(fake) != before
    res = revert(fake, config)
    assert res.exit_code == 0, res.failed
    assert view(fake) == before
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.owned() == {} and store.managed_qos() == {}
    assert not (tmp_path / "state" / "plan.json").exists()
    # a second revert has nothing to do
    assert revert(fake, config).steps == []


def test_revert_skips_jobs_that_ended(fake, config):
    ids = submit(fake)
    run_cycle(fake, config)
    fake.finish(ids[0])
    res = revert(fake, config)
    assert res.exit_code == 0 and not res.problems
    assert not [s for s in res.steps if s["job"] == ids[0]]  # nothing to give back
    assert [s for s in res.steps if s["job"] == ids[3] and s["applied"]]


def test_revert_keeps_an_existing_qos_and_restores_its_limits(fake, config):
    fake.ensure_qos("fair_alice", {"gres/gpu:v100": 3})
    fake.attach_qos("alice", "fair_alice", default=False)
    submit(fake)
    before = view(fake)
    run_cycle(fake, config)
    revert(fake, config)
    assert view(fake) == before


def test_explain_tells_type_source_share_and_actions(fake, config):
    ids = submit(fake)
    run_cycle(fake, config)
    e = explain(config, ids[0])
    assert e["class"] == "resnet-50-bs32" and e["class_source"] == "tag"
    assert e["sources"]["v100"] == "class-table"
    assert e["tenant"] == "alice" and set(e["fair_share"]) == {"v100", "p100", "k80"}
    assert abs(sum(e["allocation"].values())) <= 1 + 1e-6
    applied = {a["kind"] for a in e["actions"] if a["applied"]}
    assert "set_partition" in applied and "set_gpu_type" not in applied
    assert e["planned_type"] == e["partition"] == fake.job(ids[0]).partition
    assert e["fields"]["partition"]["original"] == "gpu" and not e["fields"]["partition"]["released"]
    text = render(e)
    assert "resnet-50-bs32" in text and "place in line" in text
    assert f"moving it to partition {e['partition']}" in text
    # the user-typed job is explained as such
    typed = explain(config, ids[1])
    assert typed["planned_type"] == typed["fixed_type"] == "v100" and "fixed" in render(typed)


def test_explain_unknown_job_is_a_user_error(config):
    with pytest.raises(UserError):
        explain(config, "999")
    with pytest.raises(UserError):
        explain(config, "rm -rf")


def test_explain_shows_slurms_view_beside_the_decision(fake, config):
    ids = submit(fake)
    run_cycle(fake, config)
    fake.priority_factors[ids[0]] = [PriorityFactors(
        job_id=ids[0], partition="v100", priority=12345, nice=-20, tres="gres/gpu:v100=45",
        factors={"age": 100, "fairshare": 5000, "jobsize": 0, "partition": 7000, "qos": 0, "site": 0})]
    fake.expected_starts[ids[0]] = datetime(2031, 5, 6, 7, 8, 9)
    e = explain(config, ids[0], fake)
    s = e["slurm"]
    assert (s["state"], s["reason"], s["start"], s["start_is_estimate"]) == (
        "PENDING", fake.job(ids[0]).reason, "2031-05-06T07:08:09", True)
    assert s["priority_factors"][0]["factors"]["fairshare"] == 5000
    text = render(e)
    assert "expected start 2031-05-06T07:08:09" in text
    assert "priority in partition v100: 12345 (age 100, fairshare 5000, partition 7000, nice -20, TRES gres/gpu:v100=45)" in text
    json.dumps(e)  # the --json form serialises
    # no estimate: N/A; a held job has no factors and says why
    fake.hold(ids[2])
    held = render(explain(config, ids[2], fake))
    assert "expected start N/A" in held and "sprio lists only pending jobs that are eligible" in held
    # running: the actual start; ended: Slurm no longer lists it, the record is still shown
    fake.start(ids[3], next(n.name for n in fake.nodes()), "v100")
    assert "Slurm now: running; started " in render(explain(config, ids[3], fake))
    fake.finish(ids[3])
    gone = explain(config, ids[3], fake)
    assert gone["slurm"]["known"] is False and "no longer lists" in render(gone) and gone["cycle"]


def test_explain_reports_a_slurm_that_does_not_answer(fake, config, monkeypatch):
    ids = submit(fake)
    run_cycle(fake, config)

    def down(job_id):
        raise SlurmUnavailable("Unable to contact slurm controller")

    monkeypatch.setattr(fake, "job_priority_factors", down)
    e = explain(config, ids[0], fake)
    assert e["slurm"]["state"] == "PENDING" and "sprio did not answer" in render(e)
    monkeypatch.setattr(fake, "job_outlook", down)
    e = explain(config, ids[0], fake)
    assert "Slurm now: Slurm did not answer: Unable to contact" in render(e) and e["tenant"] == "alice"


def test_explain_opens_the_store_read_only_and_never_creates_it(fake, config, tmp_path, monkeypatch):
    state = tmp_path / "state" / "state.sqlite"
    with pytest.raises(UserError, match=str(state)):
        explain(config, "1001")
    assert not state.exists() and not state.parent.exists()
    ids = submit(fake)
    run_cycle(fake, config)
    before = state.read_bytes()
    opened = []
    real_init = StateStore.__init__

    def spy(self, path, read_only=False):
        opened.append(read_only)
        real_init(self, path, read_only)

    monkeypatch.setattr(StateStore, "__init__", spy)
    explain(config, ids[0], fake)
    assert opened == [True] and state.read_bytes() == before
    state.write_bytes(b"not a database")
    with pytest.raises(UserError, match="not a slurm-fair state store"):
        explain(config, ids[0])


def test_commands_through_click(fake, tmp_path, monkeypatch):
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\naudit_log = "{tmp_path / "a.jsonl"}"\n')
    for mod in ("run", "revert", "explain"):
        monkeypatch.setattr(f"slurm_fair.commands.{mod}.make_port", lambda config, env=None: fake)
    ids = submit(fake)
    runner = CliRunner()
    dry = runner.invoke(cli.cli, ["run", "--once", "--dry-run", "--config", str(cfg)], standalone_mode=False)
    assert dry.exit_code == 0 and "plan (dry run" in dry.output and "would apply" in dry.output
    out = runner.invoke(cli.cli, ["run", "--once", "--json", "--config", str(cfg)], standalone_mode=False)
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["status"] == "ok" and d["actions"] and all(a["applied"] for a in d["actions"])
    assert {"snapshot", "policy", "apply"} <= set(d["timings_s"])
    fake.now += timedelta(seconds=60)
    again = json.loads(runner.invoke(cli.cli, ["run", "--json", "--config", str(cfg)], standalone_mode=False).output)
    assert again["counts"]["actions"] == 0
    ex = runner.invoke(cli.cli, ["explain", ids[0], "--config", str(cfg)], standalone_mode=False)
    assert ex.exit_code == 0 and f"job {ids[0]}" in ex.output and "Slurm now: pending" in ex.output
    ej = json.loads(runner.invoke(cli.cli, ["explain", ids[0], "--json", "--config", str(cfg)],
                                  standalone_mode=False).output)
    assert ej["job"] == ids[0] and ej["slurm"]["state"] == "PENDING" and ej["slurm"]["priority_factors"]
    dry = runner.invoke(cli.cli, ["revert", "--dry-run", "--config", str(cfg)], standalone_mode=False)
    assert dry.exit_code == 0 and "would apply" in dry.output and "dry run, nothing changed" in dry.output
    assert "revert_set_partition" in dry.output and "gpu" in dry.output
    rv = runner.invoke(cli.cli, ["revert", "--config", str(cfg)], standalone_mode=False)
    assert rv.exit_code == 0 and "0 failed" in rv.output


def test_main_maps_errors_to_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[controller]\norder = 'random'\n")
    assert cli.main(["run", "--once", "--config", str(bad)]) == 2
    assert "controller.order" in capsys.readouterr().err
    good = tmp_path / "good.toml"
    good.write_text(f'[controller]\nstate_dir = "{tmp_path}"\n')
    assert cli.main(["explain", "12345", "--config", str(good)]) == 2


def test_a_policy_that_names_nodes_pins_them_and_revert_lifts_the_pin(fake, tmp_path):
    """Hops names nodes: each job it places is pinned to them (ReqNodeList), a user's own node
    list is never touched, and revert puts every job back as it was."""
    config = make_config(tmp_path, policy="hops")
    ids = submit(fake)
    mine = fake.submit("alice", "--gres=gpu:1", hold=False, nodelist="k80-2")
    before = view(fake)
    res = run_cycle(fake, config)
    assert res.exit_code == 0, res.to_dict()
    pinned = {r.action.job: r.action.after for r in res.results if r.action.kind == "set_nodes" and r.applied}
    assert pinned and set(pinned) <= set(ids)
    nodes = {n.name: n for n in fake.snapshot().nodes}
    for job_id in pinned:
        job = fake.job(job_id)
        assert job.req_nodes and all(nodes[n].schedulable for n in job.req_nodes)
        # the nodes are of the type the plan sends the job to, in the partition it is sent to
        assert {next(iter(nodes[n].gpus_total)) for n in job.req_nodes} == {res.plan.jobs[job_id].planned_type}
        assert all(job.partition in nodes[n].partitions for n in job.req_nodes)
    assert fake.job(mine).req_nodes == ("k80-2",)
    assert revert(fake, config).exit_code == 0
    assert view(fake) == before
