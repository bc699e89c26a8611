"""Validation of conf/testbed.toml: every problem at once, with its key; no Slurm needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.errors import ConfigError
from slurm_fair.testbed import config as tbconfig

REPO = Path(__file__).resolve().parents[2]


def _problems(data: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        tbconfig.validate(data, "tb.toml")
    assert exc.value.exit_code == 2
    return {p.where: p.what for p in exc.value.problems}


def test_repo_file_is_valid_and_matches_the_gavel_types() -> None:
    cfg = tbconfig.load(REPO / "conf" / "testbed.toml")
    assert set(cfg.gpu_types) == {"k80", "p100", "v100"}
    per_type = {t: sum(n.gpus for n in cfg.nodes_of(t)) for t in cfg.gpu_types}
    assert per_type == {"v100": 8, "p100": 8, "k80": 8}
    assert len(cfg.tenants) >= 3
    assert len(set(cfg.tenants.values())) > 1  # shares differ


def test_defaults_expand_hostlists_and_assign_consecutive_ports() -> None:
    cfg = tbconfig.validate({}, "<defaults>")
    names = [n.name for n in cfg.nodes]
    assert names == ["v100-1", "v100-2", "p100-1", "p100-2", "k80-1"]
    base = cfg.ports["slurmd_base"]
    assert [n.port for n in cfg.nodes] == list(range(base, base + len(names)))


def test_all_problems_reported_at_once_with_keys() -> None:
    problems = _problems(
        {
            "cluster": {"nmae": "x", "cpus_per_node": 0},
            "ports": {"slurmctld": 80, "slurmdbd": "x"},
            "gpu_types": {"V100": {"nodes": "v-[1-"}, "k80": {"gpus_per_node": 2}},
            "tenants": {"root": {"fairshare": 0}},
            "extra": {},
        }
    )
    assert "did you mean 'name'" in problems["cluster.nmae"]
    assert "must be > 0" in problems["cluster.cpus_per_node"]
    assert "port" in problems["ports.slurmctld"]
    assert "integer" in problems["ports.slurmdbd"]
    assert "gpu_types.V100" in problems
    assert "hostlist" in problems["gpu_types.V100.nodes"]
    assert "missing" in problems["gpu_types.k80.nodes"]
    assert "tenants.root" in problems
    assert "tenants.root.fairshare" in problems
    assert "unknown section" in problems["extra"]


def test_duplicate_nodes_and_port_collisions() -> None:
    problems = _problems(
        {
            "gpu_types": {"a": {"nodes": "n-[1-3]"}, "b": {"nodes": "n-3"}},
            "ports": {"slurmctld": 20000, "slurmdbd": 20000, "mariadb": 30001, "slurmd_base": 30000},
        }
    )
    assert "n-3 also in gpu_types.a" in problems["gpu_types.b.nodes"]
    assert "already used" in problems["ports.slurmdbd"]
    assert "collides" in problems["ports.mariadb"]


def test_lua_is_on_by_default_with_slurm_fairs_own_script() -> None:
    cfg = tbconfig.validate({}, "t")
    assert cfg.job_submit_lua and cfg.job_submit_script == ""


def test_load_reports_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        tbconfig.load(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        tbconfig.load(bad)


@settings(max_examples=scaled(40), deadline=None)
@given(
    types=st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True),
        st.tuples(st.integers(1, 4), st.integers(1, 8)),
        min_size=1,
        max_size=4,
    )
)
def test_nodes_are_unique_and_ports_distinct(types: dict[str, tuple[int, int]]) -> None:
    data = {
        "gpu_types": {
            t: {"nodes": f"{t}n-[1-{count}]", "gpus_per_node": gpus} for t, (count, gpus) in types.items()
        }
    }
    try:
        cfg = tbconfig.validate(data, "gen")
    except ConfigError as exc:
        # only legitimate failure: two types whose generated names collide (e.g. "a" and "an")
        assert all("also in" in p.what for p in exc.value.problems)
        return
    names = [n.name for n in cfg.nodes]
    assert len(names) == len(set(names)) == sum(c for c, _ in types.values())
    assert len({n.port for n in cfg.nodes}) == len(names)
    assert {n.port for n in cfg.nodes}.isdisjoint(
        {cfg.ports["slurmctld"], cfg.ports["slurmdbd"], cfg.ports["mariadb"]}
    )
    for n in cfg.nodes:
        assert n.gpus == types[n.gpu_type][1]
