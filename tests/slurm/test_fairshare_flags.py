"""The fair-share algorithm a Slurm computes, read from ``scontrol show config``'s
``PriorityFlags`` (Fair Tree unless ``NO_FAIR_TREE``): the modelled Slurm of a replay takes it."""

from __future__ import annotations

import re

import pytest

from slurm_fair.slurm.cli import SlurmCli


class _Config:
    """A runner answering ``scontrol show config`` with the given ``PriorityFlags`` line."""

    def __init__(self, flags: str) -> None:
        self.text = ("PriorityDecayHalfLife   = 1-00:00:00\n"
                     f"PriorityFlags           = {flags}\n"
                     "PriorityMaxAge          = 7-00:00:00\n")

    def run(self, argv, **_):
        assert argv == ["scontrol", "show", "config"]
        return self.text


@pytest.mark.parametrize("flags, algorithm", [
    ("", "fair-tree"),
    ("CALCULATE_RUNNING", "fair-tree"),
    ("NO_FAIR_TREE", "classic"),
    ("SMALL_RELATIVE_TO_TIME,NO_FAIR_TREE", "classic"),
    ("NO_NORMAL_ALL", "fair-tree"),
])
def test_priority_flags_name_the_algorithm(flags, algorithm):
    assert SlurmCli(runner=_Config(flags)).fairshare_algorithm() == algorithm  # type: ignore[arg-type]


@pytest.mark.slurm
def test_the_testbed_runs_fair_tree(testbed):
    """The testbeds set no PriorityFlags: Slurm's default, Fair Tree; the line is there to read."""
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    text = port.runner.run(["scontrol", "show", "config"])
    assert re.search(r"^PriorityFlags\s*=", text, re.MULTILINE)
    assert port.fairshare_algorithm() == "fair-tree"
