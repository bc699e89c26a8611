"""``slurm-fair render-config``: what the rendered files contain, and what is refused."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli, main
from slurm_fair.config import validate as validate_config
from slurm_fair.deploy import inventory
from slurm_fair.deploy.render import (
    FILE_CONTEXT,
    CLUSTER_FILES,
    DeployOptions,
    check_context,
    cluster_context,
    environment,
    render_cluster,
)
from slurm_fair.deploy.weights import billing_weights
from slurm_fair.errors import ConfigError
from slurm_fair.estimates.gavel import load as load_table
from slurm_fair.slurm.model import Account, Node, Snapshot

REPO = Path(__file__).resolve().parents[2]
TESTBED_TOML = REPO / "conf" / "testbed.toml"


def write_config(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "slurm-fair.toml"
    p.write_text('[controller]\ninterval_s = 120\nstate_dir = "/var/lib/sf"\n'
                 'audit_log = "/var/log/sf/audit.jsonl"\n' + extra)
    return p


@pytest.fixture
def rendered(tmp_path) -> dict[str, str]:
    out = tmp_path / "out"
    rc = main(["render-config", "--config", str(write_config(tmp_path)), "--inventory", str(TESTBED_TOML),
               "--output-dir", str(out)])
    assert rc == 0
    return {p.name: p.read_text() for p in out.iterdir()}


def conf_lines(text: str) -> dict[str, str]:
    """``Key=value`` lines of a slurm.conf-style file (comments skipped; first '=' splits)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "=" in line and not line.startswith("PartitionName"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


def test_every_file_written_and_listed(tmp_path):
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["render-config", "--config", str(write_config(tmp_path)),
                                      "--inventory", str(TESTBED_TOML), "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(CLUSTER_FILES)
    for name in CLUSTER_FILES:
        assert f"wrote {out / name}" in result.output
    assert (out / "bootstrap.sh").stat().st_mode & 0o111


def test_slurm_conf_fragment_keys(rendered):
    frag = rendered["slurm-fair.conf"]
    keys = conf_lines(frag)
    assert keys["GresTypes"] == "gpu"
    assert keys["AccountingStorageTRES"] == "gres/gpu,gres/gpu:v100,gres/gpu:p100,gres/gpu:k80"
    assert keys["JobSubmitPlugins"] == "lua"
    assert keys["PriorityWeightTRES"].startswith("GRES/gpu:v100=1000,")
    parts = [dict(i.split("=", 1) for i in ln.split()) for ln in frag.splitlines() if ln.startswith("PartitionName=")]
    assert [p["PartitionName"] for p in parts] == ["v100", "p100", "k80"]
    assert parts[0]["Nodes"] == "v100-[1-2]" and parts[2]["Nodes"] == "k80-1"
    weights = {p["PartitionName"]: float(p["TRESBillingWeights"].split("=")[1]) for p in parts}
    assert weights["v100"] == 1.0
    assert weights["v100"] > weights["p100"] > weights["k80"] > 0
    assert "#   NodeName=v100-[1-2] ... Gres=gpu:v100:4" in frag


def test_billing_weights_follow_measured_table():
    table = load_table(None)
    w = billing_weights(["k80", "p100", "v100"], table)
    assert w["v100"] == 1.0 and w["v100"] > w["p100"] > w["k80"]
    # independent recomputation over 1-GPU keys measured everywhere
    keys = set(table.data["v100"]) & set(table.data["p100"]) & set(table.data["k80"])
    ratios = [table.data["k80"][k] / max(table.data[t][k] for t in ("v100", "p100", "k80"))
              for k in keys if min(table.data[t][k] for t in ("v100", "p100", "k80")) > 0]
    top = [table.data["v100"][k] / max(table.data[t][k] for t in ("v100", "p100", "k80"))
           for k in keys if min(table.data[t][k] for t in ("v100", "p100", "k80")) > 0]
    assert w["k80"] == pytest.approx((sum(ratios) / len(ratios)) / (sum(top) / len(top)), abs=1e-4)


def test_unknown_gpu_type_needs_billing_weight(tmp_path):
    table = load_table(None)
    with pytest.raises(ConfigError, match="a100.*billing_weight"):
        billing_weights(["a100", "v100"], table)
    w = billing_weights(["a100", "v100"], table, {"a100": 1.6})
    assert w == {"a100": 1.6, "v100": 1.0}


def test_gres_conf_from_testbed_template(rendered):
    lines = [ln for ln in rendered["gres.conf"].splitlines() if ln.startswith("NodeName=")]
    assert "NodeName=k80-1 Name=gpu Type=k80 File=/dev/nvidia[0-7]" in lines
    assert len(lines) == 5


def test_systemd_units_and_cron(rendered):
    timer, service, cron = rendered["slurm-fair.timer"], rendered["slurm-fair.service"], rendered["slurm-fair.cron"]
    assert "OnUnitActiveSec=120s" in timer and "WantedBy=timers.target" in timer
    assert "ExecStart=/usr/local/bin/slurm-fair run --once" in service
    assert "Type=oneshot" in service and "Environment=SLURM_FAIR_CONFIG=/etc/slurm-fair/slurm-fair.toml" in service
    entries = [ln for ln in cron.splitlines() if ln and not ln.startswith("#") and not re.match(r"^[A-Z_]+=", ln)]
    assert len(entries) == 2
    fields = entries[0].split()
    assert fields[:5] == ["*/2", "*", "*", "*", "*"]  # 120 s -> every 2 minutes
    assert fields[5] == "slurm-fair" and fields[6:9] == ["/usr/local/bin/slurm-fair", "run", "--once"]
    fields = entries[1].split()  # the failsafe, every minute
    assert fields[:5] == ["*"] * 5 and fields[6:8] == ["/usr/local/bin/slurm-fair", "failsafe"]
    fs, fst = rendered["slurm-fair-failsafe.service"], rendered["slurm-fair-failsafe.timer"]
    assert "ExecStart=/usr/local/bin/slurm-fair failsafe" in fs and "Type=oneshot" in fs
    assert "OnUnitActiveSec=60s" in fst and "Unit=slurm-fair-failsafe.service" in fst
    assert "/var/log/sf/audit.jsonl" in rendered["slurm-fair.logrotate"]


def test_job_submit_lua_has_plan_path_and_age(rendered):
    lua = rendered["job_submit.lua"]
    assert 'local PLAN_FILE = "/var/lib/sf/plan.json"' in lua
    assert "local MAX_AGE_S = 360" in lua  # max(3 * interval_s, 180)
    assert "return slurm.SUCCESS" in lua


def test_bootstrap_is_valid_bash(rendered, tmp_path):
    bash = shutil.which("bash")
    script = tmp_path / "qos.sh"
    script.write_text(rendered["bootstrap.sh"])
    proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    text = rendered["bootstrap.sh"]
    assert "set -euo pipefail" in text
    assert "ACCOUNTS=('biology' 'chemistry' 'physics' )" in text


def test_bootstrap_broken_script_detected(tmp_path):
    """bash -n is a real check: a rendering that broke quoting would fail it."""
    script = tmp_path / "bad.sh"
    script.write_text("ACCOUNTS=('a' 'b\nfor x in; do\n")
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode != 0


def unit_keys(text: str) -> dict[str, str]:
    """``Key=value`` of a unit file (the last one wins, as systemd reads most keys)."""
    return dict(ln.split("=", 1) for ln in text.splitlines() if ln and ln[0].isalpha() and "=" in ln)


def test_service_is_hardened(rendered):
    keys = unit_keys(rendered["slurm-fair.service"])
    expected = {"User": "slurm-fair", "Group": "slurm-fair", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
                "ReadWritePaths": "/var/lib/sf /var/log/sf", "PrivateTmp": "yes", "ProtectHome": "yes",
                "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6", "ProtectKernelTunables": "yes",
                "ProtectControlGroups": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
                "StateDirectory": "sf", "LogsDirectory": "sf", "UMask": "0022"}
    assert {k: keys.get(k) for k in expected} == expected
    assert "adminlevel=administrator" in rendered["slurm-fair.service"]


def test_service_directories_outside_var_are_not_systemd_managed(tmp_path):
    ctx = cluster_context(validate_config({"controller": {"state_dir": "/srv/sf", "audit_log": "/var/log/a.jsonl"}}),
                          inventory.load(TESTBED_TOML), load_table(None), DeployOptions())
    assert ctx["state_directory"] == "" and ctx["logs_directory"] == ""
    keys = unit_keys(environment().get_template("deploy/slurm-fair.service.j2").render(
        **ctx, **FILE_CONTEXT["slurm-fair.service"]))
    assert "StateDirectory" not in keys and "LogsDirectory" not in keys
    assert keys["ReadWritePaths"] == "/srv/sf /var/log"


def verify_units(rendered: dict[str, str], d: Path) -> subprocess.CompletedProcess:
    d.mkdir()
    service = rendered["slurm-fair.service"].replace("/usr/local/bin/slurm-fair", shutil.which("true"))
    (d / "slurm-fair.service").write_text(service)
    (d / "slurm-fair.timer").write_text(rendered["slurm-fair.timer"])
    return subprocess.run(["systemd-analyze", "verify", "--man=no", str(d / "slurm-fair.timer"),
                           str(d / "slurm-fair.service")], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(rendered, tmp_path):
    proc = verify_units(rendered, tmp_path / "units")
    problems = [ln for ln in proc.stderr.splitlines() if "slurm-fair" in ln]
    assert proc.returncode == 0 and not problems, proc.stderr
    # verify is a real check: a misspelt sandbox directive is reported
    broken = {**rendered, "slurm-fair.service": rendered["slurm-fair.service"].replace("ProtectHome=", "ProtectHom=")}
    proc = verify_units(broken, tmp_path / "broken")
    assert any("ProtectHom" in ln for ln in proc.stderr.splitlines()), proc.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_security_exposure_is_low(rendered, tmp_path):
    """systemd's own score of the sandbox (0 = locked down, 10 = unprotected): 9.6 before issue 16."""
    d = tmp_path / "units"
    d.mkdir()
    (d / "slurm-fair.service").write_text(rendered["slurm-fair.service"].replace("/usr/local/bin/slurm-fair",
                                                                                  shutil.which("true")))
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(d / "slurm-fair.service")],
                          capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for slurm-fair.service: ([0-9.]+)", proc.stdout + proc.stderr)
    if m is None:
        pytest.skip(f"this systemd-analyze has no offline security scoring: {proc.stderr.strip()[:200]}")
    assert float(m.group(1)) <= 2.5, proc.stdout


def test_strict_undefined_catches_missing_variable(tmp_path):
    ctx = cluster_context(validate_config({}), inventory.load(TESTBED_TOML), load_table(None), DeployOptions())
    del ctx["weights"]
    with pytest.raises(jinja2.UndefinedError):
        environment().get_template("deploy/slurm-fair.conf.j2").render(**ctx)


HOSTILE = [
    ('[controller]\nstate_dir = "/var/lib/x\\nExecStart=/bin/evil"\n', "controller.state_dir"),
    ('[controller]\naudit_log = "/var/log/a b.jsonl"\n', "controller.audit_log"),
    ('[controller]\nstate_dir = "/var/lib/$(reboot)"\n', "controller.state_dir"),
    ('[controller]\nstate_dir = "/var/lib/../../etc"\n', "controller.state_dir"),
    ('[cluster]\nname = "c#x"\n', "cluster.name"),
    ('[tenants."bio;rm -rf"]\nweight = 1\n', "tenants."),
]


@pytest.mark.parametrize("toml,where", HOSTILE)
def test_hostile_config_values_rejected(tmp_path, capsys, toml, where):
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    rc = main(["render-config", "--config", str(cfg), "--inventory", str(TESTBED_TOML), "--output-dir", str(tmp_path / "o")])
    assert rc == 2
    assert where in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


HOSTILE_INV = [
    '[gpu_types."v100 #x"]\nnodes = "a"\n',
    '[gpu_types.v100]\nnodes = "a=b"\n',
    '[gpu_types.v100]\nnodes = "a"\nfiles = "/dev/nvidia0\\nAutoDetect=nvml"\n',
    '[gpu_types.v100]\nnodes = "a"\nfiles = "/dev/$(x)"\n',
    '[gpu_types.v100]\nnodes = "a[1-"\n',
    '[gpu_types.v100]\nnodes = "a"\n[tenants."x\'y"]\n',
    '[gpu_types.v100]\nnodes = "a"\ngpus_per_node = 0\n',
    '[gpu_tpyes.v100]\nnodes = "a"\n',
    '[gpu_types]\n',
]


@pytest.mark.parametrize("toml", HOSTILE_INV)
def test_hostile_inventory_rejected(tmp_path, capsys, toml):
    inv = tmp_path / "inv.toml"
    inv.write_text(toml)
    rc = main(["render-config", "--config", str(write_config(tmp_path)), "--inventory", str(inv),
               "--output-dir", str(tmp_path / "o")])
    assert rc == 2
    assert "invalid configuration" in capsys.readouterr().err


def test_inventory_errors_all_at_once(tmp_path):
    inv = tmp_path / "inv.toml"
    inv.write_text('[gpu_types.v100]\nnodes = "a"\ngpus_per_node = -1\n[gpu_types."bad type"]\nnodes = "b"\n'
                   '[clusterr]\n')
    with pytest.raises(ConfigError) as exc:
        inventory.load(inv)
    text = exc.value.message()
    assert "gpu_types.v100.gpus_per_node" in text and "bad type" in text and "did you mean 'cluster'" in text


def test_check_context_rejects_every_metacharacter():
    for bad in ["a\nb", "a b", "a#b", "a=b", "a;b", "a$b", "a`b", "a'b", 'a"b', "a\\b", "a|b", "a&b", "a>b"]:
        assert check_context({"k": [{"v": bad}]}), bad
    assert not check_context({"k": ["gres/gpu:v100", "/dev/nvidia[0-3]", "v100-[1-2]", 1.5, None]})


def test_json_inventory_and_multi_type_node(tmp_path):
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps({"cluster": {"name": "prod"}, "gpu_types": {
        "v100": {"nodes": "n[1-2]", "gpus_per_node": 2},
        "k80": {"nodes": "n2", "gpus_per_node": 4, "files": "/dev/nvidia[2-5]"},
        "p100": {"nodes": "n3", "gpus_per_node": 1}}}))
    loaded = inventory.load(inv)
    files = render_cluster(validate_config({}), loaded, load_table(None), DeployOptions())
    frag = files["slurm-fair.conf"]
    assert "#   NodeName=n1 ... Gres=gpu:v100:2" in frag
    assert "#   NodeName=n2 ... Gres=gpu:v100:2,gpu:k80:4" in frag
    assert "NodeName=n3 Name=gpu Type=p100 File=/dev/nvidia0" in files["gres.conf"]
    assert "NodeName=n2 Name=gpu Type=k80 File=/dev/nvidia[2-5]" in files["gres.conf"]
    assert "PartitionName=v100 Nodes=n[1-2]" in frag


def test_from_slurm_snapshot_inventory():
    from datetime import datetime

    snap = Snapshot(datetime(2026, 1, 1), nodes=(
        Node("g1", "idle", {"v100": 4}), Node("g2", "mixed", {"v100": 2, "k80": 2}), Node("c1", "idle", {})),
        jobs=(), accounts=(Account("root"), Account("physics")), cluster="prod")
    inv = inventory.from_snapshot(snap)
    assert inv.gpu_types == ("v100", "k80")
    assert [(n.name, n.gpu_type, n.files) for n in inv.nodes] == [
        ("g1", "v100", "/dev/nvidia[0-3]"), ("g2", "v100", "/dev/nvidia[0-1]"), ("g2", "k80", "/dev/nvidia[2-3]")]
    assert dict(inv.tenants) == {"physics": 1}
    with pytest.raises(ConfigError, match="no typed GPU"):
        inventory.from_snapshot(Snapshot(datetime(2026, 1, 1), nodes=(Node("c1", "idle", {}),), jobs=()))


def test_inventory_and_from_slurm_are_exclusive(tmp_path, capsys):
    assert main(["render-config", "--config", str(write_config(tmp_path)), "--output-dir", str(tmp_path / "o")]) == 2
    assert "exactly one of --inventory" in capsys.readouterr().err


def test_committed_cron_entry_is_up_to_date(tmp_path):
    """cron/slurm-fair is the cron entry rendered with the defaults (`make deploy-examples`)."""
    out = tmp_path / "o"
    assert main(["render-config", "--config", str(REPO / "conf" / "slurm-fair.toml"), "--inventory",
                 str(TESTBED_TOML), "--output-dir", str(out)]) == 0
    assert (REPO / "cron" / "slurm-fair").read_text() == (out / "slurm-fair.cron").read_text()
