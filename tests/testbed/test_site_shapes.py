"""Site shapes in a testbed description (no Slurm needed): what they render, how bad ones fail.

The real clusters they describe are brought up and driven in ``test_sites.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_fair.errors import ConfigError
from slurm_fair.testbed import validate
from slurm_fair.testbed.config import load
from slurm_fair.testbed.layout import Layout
from slurm_fair.testbed.prepare import prepare_dir
from slurm_fair.testbed.render import render_all

from .test_render import _kv_lines

REPO = Path(__file__).resolve().parents[2]


def _conf(text: str, key: str) -> list[dict[str, str]]:
    return [row for row in _kv_lines(text) if key in row]


def test_untyped_gpus_and_the_sites_own_partitions(tmp_path: Path) -> None:
    cfg = load(REPO / "conf" / "sites" / "untyped.toml")
    out = render_all(cfg, Layout(tmp_path))
    nodes = {row["NodeName"]: row for row in _conf(out["slurm.conf"], "Gres")}
    assert {n: row["Gres"] for n, row in nodes.items()} == {"uv100-1": "gpu:4", "uk80-1": "gpu:4", "uk80-2": "gpu:4"}
    gres = _conf(out["gres.conf"], "Name")
    assert all("Type" not in row for row in gres) and len(gres) == 3
    assert gres[0]["File"] == f"{tmp_path}/dev/uv100-1/nvidia[0-3]"
    parts = {row["PartitionName"]: row for row in _conf(out["slurm.conf"], "PartitionName")}
    assert {p: row["Nodes"] for p, row in parts.items()} == {
        "gpu": "uv100-1,uk80-1,uk80-2", "short": "uk80-1,uv100-1", "long": "uk80-1,uk80-2"}
    assert not any("TRESBillingWeights" in row for row in parts.values())  # no type to bill by
    (tres,) = [row["AccountingStorageTRES"] for row in _kv_lines(out["slurm.conf"]) if "AccountingStorageTRES" in row]
    assert tres == "gres/gpu"
    assert [row["GresTypes"] for row in _kv_lines(out["slurm.conf"]) if "GresTypes" in row] == ["gpu"]


def test_two_types_mig_and_shards_on_nodes(tmp_path: Path) -> None:
    cfg = load(REPO / "conf" / "sites" / "mixed.toml")
    layout = Layout(tmp_path)
    out = render_all(cfg, layout)
    nodes = {row["NodeName"]: row["Gres"] for row in _conf(out["slurm.conf"], "Gres")}
    assert nodes == {"duo-1": "gpu:v100:2,gpu:p100:2", "mig-1": "gpu:a100:1,gpu:a100_1g.10gb:4",
                     "k80-1": "gpu:k80:4,shard:8", "p100-1": "gpu:p100:4"}
    assert {n.name: n.gres for n in cfg.nodes} == nodes  # what `testbed status` shows
    lines = [(row["NodeName"], row["Name"], row.get("Type"), row.get("File", row.get("Count")))
             for row in _conf(out["gres.conf"], "Name")]
    dev = f"{tmp_path}/dev"
    assert lines == [
        ("duo-1", "gpu", "v100", f"{dev}/duo-1/nvidia[0-1]"), ("duo-1", "gpu", "p100", f"{dev}/duo-1/nvidia[2-3]"),
        ("mig-1", "gpu", "a100", f"{dev}/mig-1/nvidia0"), ("mig-1", "gpu", "a100_1g.10gb", f"{dev}/mig-1/nvidia[1-4]"),
        ("k80-1", "gpu", "k80", f"{dev}/k80-1/nvidia[0-3]"), ("k80-1", "shard", None, "8"),
        ("p100-1", "gpu", "p100", f"{dev}/p100-1/nvidia[0-3]"),
    ]
    conf = {k: v for row in _kv_lines(out["slurm.conf"]) for k, v in row.items()}
    assert conf["GresTypes"] == "gpu,shard"
    assert set(conf["AccountingStorageTRES"].split(",")) == {
        "gres/gpu", "gres/shard", "gres/gpu:v100", "gres/gpu:p100", "gres/gpu:a100", "gres/gpu:a100_1g.10gb", "gres/gpu:k80"}
    parts = {row["PartitionName"]: row["Nodes"] for row in _conf(out["slurm.conf"], "PartitionName")}
    assert parts == {"gpu": "duo-1,mig-1,k80-1,p100-1", "v100": "duo-1", "a100": "mig-1", "k80": "k80-1",
                     "p100": "p100-1", "mix": "duo-1,k80-1"}
    prepare_dir(cfg, layout, out)  # a device file for every GPU of every item
    assert sorted(p.name for p in layout.node_dev("mig-1").iterdir()) == [f"nvidia{i}" for i in range(5)]


def test_the_default_description_renders_as_before(tmp_path: Path) -> None:
    """No site key: one typed line per node, the per-type partitions billed by speed."""
    out = render_all(validate({}, "<defaults>"), Layout(tmp_path))
    gres = _conf(out["gres.conf"], "Name")
    assert [(r["NodeName"], r["Type"]) for r in gres] == [
        ("v100-1", "v100"), ("v100-2", "v100"), ("p100-1", "p100"), ("p100-2", "p100"), ("k80-1", "k80")]
    parts = {row["PartitionName"]: row for row in _conf(out["slurm.conf"], "PartitionName")}
    assert list(parts) == ["gpu", "v100", "p100", "k80"]
    assert parts["gpu"]["TRESBillingWeights"].startswith("GRES/gpu:v100=1,GRES/gpu:p100=")
    assert parts["k80"]["TRESBillingWeights"].startswith("GRES/gpu:k80=")


@pytest.mark.parametrize("bad, where", [
    ({"gpu_types": {"v100": {"nodes": "a-1", "extra_gres": "gpu:V100:2"}}}, "gpu_types.v100.extra_gres"),
    ({"gpu_types": {"v100": {"nodes": "a-1", "extra_gres": "shard:0"}}}, "gpu_types.v100.extra_gres"),
    ({"gpu_types": {"v100": {"nodes": "a-1", "extra_gres": "mps:8"}}}, "gpu_types.v100.extra_gres"),
    ({"gpu_types": {"v100": {"nodes": "a-1"}}, "partitions": {"gpu": {"nodes": "a-1"}}}, "partitions.gpu"),
    ({"gpu_types": {"v100": {"nodes": "a-1"}}, "partitions": {"v100": {"nodes": "a-1"}}}, "partitions.v100"),
    ({"gpu_types": {"v100": {"nodes": "a-1"}}, "partitions": {"short": {"nodes": "b-1"}}}, "partitions.short.nodes"),
    ({"gpu_types": {"v100": {"nodes": "a-1"}}, "partitions": {"short": {}}}, "partitions.short.nodes"),
    ({"gpu_types": {"v100": {"nodes": "a-1", "typed": "no"}}}, "gpu_types.v100.typed"),
])
def test_a_bad_site_shape_names_its_key(bad, where) -> None:
    with pytest.raises(ConfigError) as err:
        validate(bad, "site.toml")
    assert where in str(err.value)


def test_without_type_partitions_a_partition_may_take_a_types_name() -> None:
    cfg = validate({"cluster": {"type_partitions": False}, "gpu_types": {"v100": {"nodes": "a-1"}},
                    "partitions": {"v100": {"nodes": "a-1"}}}, "site.toml")
    assert dict(cfg.partitions) == {"v100": ("a-1",)}


@pytest.mark.parametrize("text, gpus", [
    # sinfo -O Gres/GresUsed as the three testbeds printed the site shapes (docs/slurm-adapter.md)
    ("gpu:k80:4,shard:k80:8", {"k80": 4}),
    ("gpu:k80:0(IDX:N/A),shard:k80:2(2/2,0/2,0/2,0/2)", {"k80": 0}),  # 26.05: shards per GPU
    ("gpu:v100:2(IDX:0-1),gpu:p100:1(IDX:2),shard:0", {"v100": 2, "p100": 1}),  # 22.05
    ("gpu:a100:0(IDX:N/A),gpu:a100_1g.10gb:2(IDX:1-2)", {"a100": 0, "a100_1g.10gb": 2}),
    ("gpu:4", {"gpu": 4}),
])
def test_node_gres_of_the_site_shapes_as_slurm_printed_them(text, gpus) -> None:
    from slurm_fair.slurm.parse.gres import gpus_by_type

    assert gpus_by_type(text) == gpus
