"""The foundation: validated configuration, the policy registry, and the CLI's error edge."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import config, policies
from slurm_fair.cli import COMMANDS, cli, main
from slurm_fair.errors import ConfigError, UserError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "slurm-fair.toml"
    p.write_text(text)
    return p


def test_shipped_configuration_is_valid_and_equals_the_defaults():
    shipped = config.load(REPO / "conf" / "slurm-fair.toml")
    defaults = config.validate({})
    assert dict(shipped.values) == dict(defaults.values)


def test_every_problem_of_a_file_is_reported_at_once_with_its_key(tmp_path):
    path = write(tmp_path, """
[controller]
polcy = "oef"
solver = "gurobi"
time_limit_s = -1
slack = "lots"

[tenant.physics]
weight = 2

[tenants.biology]
wieght = 2
""")
    with pytest.raises(ConfigError) as info:
        config.load(path)
    found = {(p.where, p.what) for p in info.value.problems}
    wheres = [p.where for p in info.value.problems]
    assert len(info.value.problems) == 6
    assert ("controller.polcy", "unknown key (did you mean 'policy'?)") in found
    assert "controller.solver" in wheres and "controller.time_limit_s" in wheres
    assert "controller.slack" in wheres
    assert ("tenant", "unknown section (did you mean 'tenants'?)") in found
    assert ("tenants.biology.wieght", "unknown key (did you mean 'weight'?)") in found
    assert str(path) in info.value.message()


def test_a_boolean_is_not_a_number():
    with pytest.raises(ConfigError) as info:
        config.validate({"controller": {"time_limit_s": True}})
    assert info.value.problems[0].where == "controller.time_limit_s"


@pytest.mark.parametrize("text, what", [("[controller\n", "not valid TOML"), (None, "file not found")])
def test_unreadable_files_are_config_errors(tmp_path, text, what):
    path = tmp_path / "missing.toml" if text is None else write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.load(path)
    assert what in info.value.message() and info.value.exit_code == 2


@settings(max_examples=scaled(40), deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(config.SCHEMA["controller"])),
                       st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.text(max_size=5),
                                 st.booleans()), max_size=5))
def test_validation_accepts_exactly_what_the_schema_allows(table):
    """Valid values come back unchanged, invalid ones are each named: never a crash."""
    try:
        cfg = config.validate({"controller": table})
    except ConfigError as exc:
        bad = {p.where.split(".")[1] for p in exc.problems}
        assert bad and bad <= set(table)
        return
    for key, value in table.items():
        assert cfg.get("controller", key) == value


def test_unknown_policy_suggests_the_close_name():
    with pytest.raises(UserError, match="did you mean 'oef'"):
        policies.get("oeff")
    assert {"oef", "oef-noncoop", "gavel-mmf", "gavel-ftf", "max-throughput", "agnostic", "fifo",
            "fft", "hadar", "hadare", "hops"} <= set(policies.names())


def test_every_mission_command_is_registered_and_loads():
    wanted = {"solve", "simulate", "run", "report", "explain", "snapshot", "testbed", "render-config", "revert"}
    ctx = click.Context(cli)
    assert wanted <= set(cli.list_commands(ctx))
    for name in COMMANDS:
        assert isinstance(cli.get_command(ctx, name), click.Command), name


def test_user_mistakes_exit_2_without_traceback(tmp_path, capsys):
    bad = write(tmp_path, "[controller]\npolcy = 1\n")
    code = main(["run", "--once", "--dry-run", "--config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert "controller.polcy" in err and "Traceback" not in err


def test_click_usage_errors_exit_2():
    result = CliRunner().invoke(cli, ["solve", "--no-such-option"])
    assert result.exit_code == 2


def test_the_console_script_maps_errors_to_exit_codes(tmp_path):
    problem = tmp_path / "p.json"
    problem.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "slurm_fair.cli", "solve", "--input", str(problem),
                           "--policy", "oef"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and str(problem) in proc.stderr


def test_hostlists_expand_or_name_the_key():
    problems: list = []
    assert config.expand_hostlist("v100-[1-3]", "gpu_types.v100.nodes", problems) == ["v100-1", "v100-2", "v100-3"]
    assert config.expand_hostlist("v100-[1-", "gpu_types.v100.nodes", problems) is None
    assert [p.where for p in problems] == ["gpu_types.v100.nodes"]
    assert "not a valid hostlist" in problems[0].what


def test_solve_prints_nothing_but_json_on_stdout(tmp_path):
    """highspy 1.16 prints a banner on fd 1 when a process creates its first model: `solve`'s
    standard output must still be the allocation's JSON alone (it is piped into other tools)."""
    import json

    problem = tmp_path / "p.json"
    problem.write_text(json.dumps({
        "gpu_types": {"v100": 2, "k80": 2},
        "tenants": {"a": {"weight": 1}, "b": {"weight": 2}},
        "jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 3.0, "k80": 1.0}},
                 {"id": "j2", "tenant": "b", "gpus": 2, "throughput": {"v100": 2.0, "k80": 1.5}}],
    }))
    proc = subprocess.run([sys.executable, "-m", "slurm_fair.cli", "solve", "--input", str(problem),
                           "--policy", "oef", "--solver", "auto"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["policy"] == "oef"


def test_backend_takes_cli_pyslurm_or_auto_and_refuses_anything_else_at_validation(tmp_path, capsys):
    """pyslurm and auto are valid anywhere (whether pyslurm imports is the running host's
    question); a typo is refused at validation with the file, the key and the choices, exit 2."""
    for value in ("cli", "pyslurm", "auto"):
        assert config.load(write(tmp_path, f'[slurm]\nbackend = "{value}"\n'))["slurm"]["backend"] == value
    path = write(tmp_path, '[slurm]\nbackend = "pyslum"\n')
    with pytest.raises(ConfigError) as info:
        config.load(path)
    (problem,) = info.value.problems
    assert problem.where == "slurm.backend"
    assert "cli, pyslurm, auto" in problem.what and "pyslum" in problem.what
    assert main(["explain", "1", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "slurm.backend: must be one of" in err and "Traceback" not in err


def test_policies_command_lists_what_policy_options_accept():
    result = CliRunner().invoke(cli, ["policies", "--json"])
    assert result.exit_code == 0, result.output
    import json

    assert [p["name"] for p in json.loads(result.output)] == policies.names()


def test_a_tenant_table_without_a_weight_leaves_the_weight_to_slurm_shares(tmp_path):
    from slurm_fair.controller.problem import configured_weights, tenant_weights

    cfg = config.load(write(tmp_path, '[tenants.physics]\nclasses = ["resnet18"]\n\n[tenants.bio]\nweight = 3\n'))
    configured = configured_weights(cfg)
    assert configured == {"bio": 3.0}
    # Slurm gives physics 5 shares and bio 2: the configured weight wins only where one is set
    assert tenant_weights(["physics", "bio", "chem"], configured, {"physics": 5, "bio": 2}) == {
        "physics": 5.0, "bio": 3.0, "chem": 1.0}


def test_policy_options_are_checked_at_validation_and_reach_the_policy(tmp_path):
    from slurm_fair.controller.settings import Settings

    cfg = config.load(write(tmp_path, '[controller]\npolicy = "hops"\npolicy_options = ["hops.lambda=2"]\n'))
    assert Settings.from_config(cfg).policy_params == {"hops.lambda": 2.0}
    for bad in ('["hops.lambda"]', '["hops.nope=1"]', '["nope.lambda=1"]', '[3]'):
        with pytest.raises(ConfigError) as err:
            config.load(write(tmp_path, f"[controller]\npolicy_options = {bad}\n"))
        assert "controller.policy_options" in err.value.message()
    # a parameter of a policy the controller does not run would be ignored: refused, naming both
    with pytest.raises(ConfigError) as err:
        config.load(write(tmp_path, '[controller]\npolicy = "oef"\npolicy_options = ["hops.lambda=2"]\n'))
    assert "controller.policy_options" in err.value.message() and "'oef'" in err.value.message()


def test_first_highs_solve_through_pulp_prints_no_banner():
    """The banner comes with a process's first Highs model, whichever makes it: PuLP's HiGHS
    (the policies' models) as well as SmallLP's. A process whose first solve is PuLP's prints
    nothing on either stream (`simulate -q` stays quiet, `solve` prints JSON alone)."""
    code = ("import pulp; from slurm_fair import solver; m = pulp.LpProblem('m', pulp.LpMaximize); "
            "x = pulp.LpVariable('x', 0, 1); m += x; m += x <= 1; solver.solve(m, 'highs'); print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n" and "HiGHS" not in proc.stderr
