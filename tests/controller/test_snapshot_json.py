"""``slurm-fair snapshot --json`` prints the problem the controller solves.

Loaded with the project's reader and solved with the configured policy, it gives the
allocation of the controller's dry-run cycle on the same snapshot and state store.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner

from slurm_fair import cli as sf_cli, policies
from slurm_fair.config import load as load_config
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.problem_io import parse_problem


def submit_work(fake):
    """Tagged and untagged jobs of two tenants; one of them already running on k80."""
    ids = [fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=resnet-50-bs32"),
           fake.submit("alice", "--gres=gpu:2", hold=False, comment="fair:class=a3c"),
           fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=lm-bs20"),
           fake.submit("bob", "--gpus=2", hold=False, comment="fair:class=lm-bs20"),
           fake.submit("bob", "--gres=gpu:1", hold=False, comment="fair:class=resnet-50-bs32"),
           fake.submit("bob", "--gres=gpu:4", hold=False)]
    fake.start(ids[4], "k80-1", "k80")
    return ids


@pytest.mark.parametrize("policy", ["oef", "gavel-mmf"])
def test_snapshot_json_solves_to_the_controllers_allocation(fake, tmp_path, monkeypatch, policy):
    config_file = tmp_path / "slurm-fair.toml"
    config_file.write_text(
        f'[controller]\npolicy = "{policy}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'audit_log = "{tmp_path / "audit.jsonl"}"\n\n[tenants.alice]\nweight = 2.0\n')
    config = load_config(str(config_file))
    submit_work(fake)
    assert run_cycle(fake, config).status == "ok"  # history: originals, sightings
    fake.now += timedelta(minutes=10)  # service received since

    seen = {}

    def allocate(name, problem, options):
        seen["problem"] = problem
        seen["allocation"] = policies.allocate(name, problem, options)
        return seen["allocation"]

    res = run_cycle(fake, config, dry_run=True, allocate=allocate)
    assert res.status == "dry-run", res.message

    monkeypatch.setattr("slurm_fair.commands.snapshot.make_port", lambda cfg: fake)
    out = CliRunner().invoke(sf_cli.cli, ["snapshot", "--json", "--config", str(config_file)])
    assert out.exit_code == 0, out.output
    loaded = parse_problem(out.output, source="snapshot --json")

    want = seen["problem"]
    assert dict(loaded.tenants) == dict(want.tenants) == {"alice": 2.0, "bob": 1.0}
    assert {j.id: dict(j.throughput) for j in loaded.jobs} == {j.id: dict(j.throughput) for j in want.jobs}
    got = policies.allocate(policy, loaded, policies.PolicyOptions(solver=config["controller"]["solver"]))
    x, y = seen["allocation"].x, got.x
    assert set(x) == set(y)
    for j in x:
        for k in set(x[j]) | set(y[j]):
            assert y[j].get(k, 0.0) == pytest.approx(x[j].get(k, 0.0), abs=1e-6), (j, k)
