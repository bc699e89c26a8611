"""The second testbed inventory: modern type names, priced and ordered by the type priors."""

from __future__ import annotations

from pathlib import Path

from slurm_fair.estimates import gavel
from slurm_fair.testbed.config import load
from slurm_fair.testbed.layout import Layout
from slurm_fair.testbed import render as tbrender

REPO = Path(__file__).resolve().parents[2]


def test_modern_inventory_renders_with_prior_node_weights(tmp_path):
    cfg = load(REPO / "conf" / "testbed-modern.toml")
    assert cfg.gpu_types == ("h100", "a100", "l40s")
    ctx = tbrender.testbed_context(cfg, Layout(tmp_path))
    weight = {n["gpu_type"]: n["weight"] for n in ctx["nodes"]}
    assert weight["h100"] < weight["a100"] < weight["l40s"]  # Slurm fills the fastest first


def test_modern_throughputs_cover_every_gavel_job_and_follow_the_priors():
    table = gavel.load(REPO / "conf" / "throughputs-modern.json")
    assert table.gpu_types == ["a100", "h100", "l40s"]
    assert set(table.job_types) == set(gavel.load(None).job_types)
    resnet = table.throughputs("ResNet-50 (batch size 32)", 1)
    assert resnet["h100"] > resnet["a100"] > 0 and resnet["h100"] > resnet["l40s"] > 0
    # jobs keep a spread: not every job has the same a100/h100 ratio
    ratios = {round(table.lookup(j, 1, "a100") / table.lookup(j, 1, "h100"), 3) for j in table.job_types}
    assert len(ratios) > 5
