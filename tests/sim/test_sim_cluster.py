"""``--cluster``: per-type counts, NODESxGPUS items with mixed node sizes, Gavel's form; errors."""

from __future__ import annotations

import pytest

from slurm_fair.errors import UserError
from slurm_fair.sim.cluster import ClusterSpec, parse_cluster, with_speeds


def _layout(spec: str, gpn: int | None = None) -> list[tuple[str, str, int]]:
    return [(n.name, n.gpu_type, n.gpus) for n in parse_cluster(spec, gpn).nodes()]


def test_nodes_x_gpus_items_give_mixed_node_sizes() -> None:
    cluster = parse_cluster("v100=2x4,p100=2x4,k80=1x8")
    assert dict(cluster.capacity) == {"v100": 8, "p100": 8, "k80": 8}
    assert _layout("v100=2x4,p100=2x4,k80=1x8") == [
        ("k80-1", "k80", 8), ("p100-1", "p100", 4), ("p100-2", "p100", 4), ("v100-1", "v100", 4), ("v100-2", "v100", 4),
    ]
    assert cluster.describe()["nodes"] == {"k80": "1x8", "p100": "2x4", "v100": "2x4"}
    assert cluster.has_nodes and cluster.node_size("k80") == 8


@pytest.mark.parametrize("spec, gpn, layout", [
    ("v100=2X4, k80 = 3 x 2", None, {"v100": [4, 4], "k80": [2, 2, 2]}),
    ("v100=2x4,k80=6", 4, {"v100": [4, 4], "k80": [4, 2]}),   # a plain count is cut by --gpus-per-node
    ("v100=1x8,k80=4", 2, {"v100": [8], "k80": [2, 2]}),     # NODESxGPUS keeps its own size
    ("v100=10", 4, {"v100": [4, 4, 2]}),
    ("2x4:2x4:1x8", None, {"v100": [4, 4], "p100": [4, 4], "k80": [8]}),
    ("36:36:36", None, {"v100": [], "p100": [], "k80": []}),
    ("v100=0x4,k80=1x2", None, {"k80": [2]}),
])
def test_good_specs(spec: str, gpn: int | None, layout: dict[str, list[int]]) -> None:
    cluster = parse_cluster(spec, gpn)
    assert {k: cluster.layout(k) for k in cluster.capacity} == layout
    assert sum(n.gpus for n in cluster.nodes()) == (cluster.total_gpus if cluster.has_nodes else 0)


def test_describe_reports_the_layout() -> None:
    assert parse_cluster("v100=10", 4).describe()["nodes"] == {"v100": "2x4+1x2"}
    assert parse_cluster("v100=8,k80=8").describe()["nodes"] == {}


@pytest.mark.parametrize("spec, gpn, named", [
    ("v100=2x0", None, "'v100=2x0'"),
    ("v100=2x", None, "'v100=2x'"),
    ("v100=ax4", None, "'v100=ax4'"),
    ("v100=-1x4", None, "'v100=-1x4'"),
    ("v100=2x4,v100=1x8", None, "'v100=1x8'"),
    ("v100=2x4,k80=8", None, "'k80=8'"),
    ("v100", None, "'v100'"),
    ("v100=-1", None, "'v100=-1'"),
    ("v100=0x4", None, "no GPUs"),
    ("1:2", None, "V100:P100:K80"),
    ("2x4:x:1", None, "'x'"),
    ("v100=8", 0, "--gpus-per-node"),
])
def test_bad_specs_name_the_item(spec: str, gpn: int | None, named: str) -> None:
    with pytest.raises(UserError) as err:
        parse_cluster(spec, gpn)
    assert named in err.value.message()
    assert err.value.exit_code == 2


def test_speeds_need_nodes_of_either_form() -> None:
    fast = with_speeds(parse_cluster("v100=2x4,k80=1x8"), {"k80-1": 0.5})
    assert [(n.name, n.speed) for n in fast.nodes()] == [("k80-1", 0.5), ("v100-1", 1.0), ("v100-2", 1.0)]
    assert fast.node_gpus == parse_cluster("v100=2x4,k80=1x8").node_gpus
    with pytest.raises(UserError, match="need nodes"):
        with_speeds(parse_cluster("v100=8"), {"v100-1": 2.0})


def test_a_spec_built_in_code_cannot_leave_a_type_without_nodes() -> None:
    with pytest.raises(ValueError, match="k80"):
        ClusterSpec({"v100": 8, "k80": 8}, node_gpus={"v100": 4})
