"""Rendering templates/slurm/*.j2 for the testbed (no Slurm needed): what Slurm relies on."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from slurm_fair.errors import ConfigError, TestbedError
from slurm_fair.testbed import Testbed, validate
from slurm_fair.testbed import render as tbrender
from slurm_fair.testbed.layout import Layout
from slurm_fair.testbed.prepare import prepare_dir
from slurm_fair.testbed.render import render, render_all, templates_dir


def _kv_lines(text: str) -> list[dict[str, str]]:
    """slurm.conf-style lines as dicts (space-separated Key=Value pairs), comments dropped."""
    rows = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            rows.append(dict(tok.split("=", 1) for tok in line.split()))
    return rows


@pytest.fixture
def rendered(tmp_path: Path) -> tuple[dict[str, str], Layout]:
    cfg = validate(
        {
            "gpu_types": {"a100": {"nodes": "a-[1-2]", "gpus_per_node": 2}, "k80": {"nodes": "k-1"}},
            "tenants": {"t1": {"fairshare": 5}, "t2": {}},
        },
        "t",
    )
    layout = Layout(tmp_path)
    return render_all(cfg, layout), layout


def test_slurm_conf_declares_typed_gpus_per_node(rendered) -> None:
    files, layout = rendered
    conf = {k: v for row in _kv_lines(files["slurm.conf"]) for k, v in row.items()
            if "NodeName" not in row and "PartitionName" not in row}
    nodes = {r["NodeName"]: r for r in _kv_lines(files["slurm.conf"]) if "NodeName" in r}
    assert conf["GresTypes"] == "gpu"
    assert set(conf["AccountingStorageTRES"].split(",")) == {"gres/gpu", "gres/gpu:a100", "gres/gpu:k80"}
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["SelectType"] == "select/cons_tres"
    assert conf["SlurmdParameters"] == "config_overrides"
    assert conf["AuthInfo"] == f"socket={layout.munge_socket},cred_expire=5"  # short requeue hold
    assert conf["AccountingStoragePass"] == str(layout.munge_socket)
    assert "%n" in conf["SlurmdSpoolDir"] and "%n" in conf["SlurmdPidFile"]
    assert set(conf["AccountingStorageEnforce"].split(",")) >= {"associations", "limits", "qos"}
    assert int(conf["MaxJobCount"]) >= 10000 and int(conf["MaxArraySize"]) > 10000
    assert nodes["a-1"]["Gres"] == "gpu:a100:2" and nodes["k-1"]["Gres"] == "gpu:k80:4"
    assert len({r["Port"] for r in nodes.values()}) == 3
    assert all(r["NodeAddr"] == "127.0.0.1" for r in nodes.values())
    assert conf["JobSubmitPlugins"] == "lua"  # slurm-fair's own plugin, on by default


def test_partitions_per_type_and_a_default(rendered) -> None:
    files, _ = rendered
    parts = {r["PartitionName"]: r for r in _kv_lines(files["slurm.conf"]) if "PartitionName" in r}
    assert set(parts) == {"gpu", "a100", "k80"}
    assert parts["gpu"]["Default"] == "YES"
    assert set(NodeSet(parts["gpu"]["Nodes"])) == {"a-1", "a-2", "k-1"}
    assert set(NodeSet(parts["a100"]["Nodes"])) == {"a-1", "a-2"}


def test_every_gres_line_has_files_matching_the_count(rendered) -> None:
    files, layout = rendered
    lines = [r for r in _kv_lines(files["gres.conf"]) if "NodeName" in r]
    assert {r["NodeName"] for r in lines} == {"a-1", "a-2", "k-1"}
    for r in lines:
        assert r["Name"] == "gpu" and "File" in r
        count = len(NodeSet(Path(r["File"]).name))  # nvidia[0-3] -> 4
        assert count == (2 if r["Type"] == "a100" else 4)
        assert Path(r["File"]).parent == layout.node_dev(r["NodeName"])


def test_slurmdbd_conf_points_at_the_testbed_database(rendered) -> None:
    files, layout = rendered
    conf = {k: v for row in _kv_lines(files["slurmdbd.conf"]) for k, v in row.items()}
    assert conf["StorageType"] == "accounting_storage/mysql"
    assert conf["StorageHost"] == "127.0.0.1"
    assert conf["StoragePass"] == layout.db_password()
    assert conf["AuthInfo"] == f"socket={layout.munge_socket}"


def test_missing_variable_is_an_error_not_an_empty_string(rendered) -> None:
    _, layout = rendered
    cfg = validate({}, "d")
    ctx = tbrender.testbed_context(cfg, layout)
    del ctx["cluster_name"]
    with pytest.raises(TestbedError, match="cluster_name"):
        render("slurm.conf.j2", ctx)


def test_prepare_writes_private_files_and_fake_devices(tmp_path: Path) -> None:
    cfg = validate({"gpu_types": {"v100": {"nodes": "v-1", "gpus_per_node": 3}}}, "t")
    tb = Testbed(dir=tmp_path / "tb", config=cfg)
    prepare_dir(cfg, tb.layout, render_all(cfg, tb.layout))
    def mode(p):
        return stat.S_IMODE(p.stat().st_mode)
    assert mode(tb.layout.etc / "slurmdbd.conf") == 0o600
    assert mode(tb.layout.munge_key) == 0o400
    assert tb.layout.munge_key.stat().st_size >= 32
    assert sorted(p.name for p in tb.layout.node_dev("v-1").iterdir()) == ["nvidia0", "nvidia1", "nvidia2"]
    assert (tb.layout.etc / "slurm.conf").parent == (tb.layout.etc / "slurmdbd.conf").parent
    assert "/etc/slurm" not in (tb.layout.etc / "slurm.conf").read_text().replace(str(tb.dir), "")


def test_templates_found_from_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = templates_dir()
    monkeypatch.setenv("SLURM_FAIR_TEMPLATES", str(real))
    assert templates_dir() == real
    monkeypatch.setenv("SLURM_FAIR_TEMPLATES", str(tmp_path))
    assert templates_dir() != tmp_path  # falls back to the checkout's templates/


def test_too_long_directory_is_refused_before_starting(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120)
    with pytest.raises(TestbedError, match="too deep"):
        Layout(deep).check()


def test_default_job_submit_lua_is_slurm_fairs_reading_the_testbed_plan_file(tmp_path: Path) -> None:
    cfg = validate({}, "t")
    tb = Testbed(dir=tmp_path / "tb", config=cfg)
    files = render_all(cfg, tb.layout)
    prepare_dir(cfg, tb.layout, files)
    text = (tb.layout.etc / "job_submit.lua").read_text()
    assert f'local PLAN_FILE = "{tb.layout.plan_file}"' in text and "function slurm_job_submit" in text


def test_nodes_weighted_by_speed_partitions_on_one_tier_and_billed_by_speed(tmp_path: Path) -> None:
    cfg = validate({}, "t")
    conf = render_all(cfg, Testbed(dir=tmp_path / "tb", config=cfg).layout)["slurm.conf"]
    weight = {r["NodeName"]: int(r["Weight"]) for r in _kv_lines(conf) if "NodeName" in r}
    assert weight["v100-1"] < weight["p100-1"] < weight["k80-1"]  # Slurm fills the lowest first
    parts = {r["PartitionName"]: r for r in _kv_lines(conf) if "PartitionName" in r}
    tier = {p: int(r["PriorityTier"]) for p, r in parts.items()}
    assert set(tier.values()) == {1}  # steering never puts a job ahead of its partition's queue
    billing = dict(kv.split("=") for kv in parts["gpu"]["TRESBillingWeights"].split(","))
    assert float(billing["GRES/gpu:v100"]) == 1.0 > float(billing["GRES/gpu:p100"]) > float(billing["GRES/gpu:k80"]) > 0


def test_job_submit_lua_script_given_is_installed_beside_slurm_conf(tmp_path: Path) -> None:
    script = tmp_path / "submit.lua"
    script.write_text("function slurm_job_submit(j, p, u) return slurm.SUCCESS end\n")
    cfg = validate({"cluster": {"job_submit_lua": True, "job_submit_script": str(script)}}, "t")
    tb = Testbed(dir=tmp_path / "tb", config=cfg)
    files = render_all(cfg, tb.layout)
    conf = {k: v for row in _kv_lines(files["slurm.conf"]) for k, v in row.items()}
    assert conf["JobSubmitPlugins"] == "lua"
    prepare_dir(cfg, tb.layout, files)
    assert (tb.layout.etc / "job_submit.lua").read_text() == script.read_text()


def test_job_submit_lua_script_must_exist(tmp_path: Path) -> None:
    cfg = validate({"cluster": {"job_submit_lua": True, "job_submit_script": str(tmp_path / "no.lua")}}, "t")
    tb = Testbed(dir=tmp_path / "tb", config=cfg)
    with pytest.raises(ConfigError, match="no.lua"):
        prepare_dir(cfg, tb.layout, render_all(cfg, tb.layout))
