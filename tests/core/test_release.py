"""The release (issue 31): one version, the licence kept, the CI's Slurm stand-in, the profiles."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import slurm_fair
from slurm_fair.cli import main
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.fake import FakeSlurm, recordings_dir

REPO = Path(__file__).resolve().parents[2]


def test_version_is_written_once_and_printed(capsys):
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["metadata"]["version"] == "attr: slurm_fair.__version__"
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"slurm-fair, version {slurm_fair.__version__}"
    # the changelog has a section for the version being released
    assert f"## {slurm_fair.__version__} (" in (REPO / "CHANGELOG.md").read_text()


def test_licence_keeps_gavels_beside_its_data():
    gavel = (REPO / "slurm_fair" / "data" / "LICENSE.gavel").read_text()
    assert "Stanford Future Data Systems" in gavel
    assert gavel in (REPO / "LICENSE").read_text()
    assert (REPO / "benchmarks" / "traces" / "LICENSE.gavel").read_text() == gavel
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["metadata"]["license_files"].split() == ["LICENSE", "slurm_fair/data/LICENSE.gavel"]


@pytest.mark.parametrize("recording", ["testbed-22.05", "testbed-24.11", "testbed-26.05"])
def test_recorded_slurm_stand_in_reads_as_the_recording(recording, tmp_path, monkeypatch):
    """scripts/recorded-slurm (the wheel smoke set's Slurm) fed to the real adapter gives what
    the fake built from the same recording gives: jobs, nodes, accounts, accounting."""
    for cmd in ("sacct", "sinfo", "squeue", "sprio", "sacctmgr", "scontrol"):
        (tmp_path / cmd).symlink_to(REPO / "scripts" / "recorded-slurm")
    monkeypatch.setenv("SLURM_FAIR_RECORDING", str(recordings_dir() / recording))
    cli = SlurmCli(bin_dir=tmp_path, timeout_s=10, retries=0)
    fake = FakeSlurm.from_recording(recording)
    got, want = cli.snapshot(), fake.snapshot()
    assert [j.job_id for j in got.jobs] == [j.job_id for j in want.jobs] and got.jobs
    assert got.jobs == want.jobs
    assert got.nodes == want.nodes and got.accounts == want.accounts and got.qos == want.qos
    # the stand-in prints every record (sacct's window is not modelled); the fake keeps those
    # that ran in the window, here every one that started
    records = cli.accounting(datetime(2000, 1, 1), datetime(2100, 1, 1))
    assert [r for r in records if r.start_time is not None] == \
        fake.accounting(datetime(2000, 1, 1), datetime(2100, 1, 1))


@pytest.mark.parametrize("profile, factor, default", [("quick", 1, 100), ("thorough", 3, 300)])
def test_hypothesis_profile_scales_every_count(profile, factor, default):
    code = ("import hypo_profiles as h; from hypothesis import settings; "
            "print(h.scaled(7), settings.default.max_examples, settings.default.deadline)")
    env = {**os.environ, "HYPOTHESIS_PROFILE": profile}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO / "tests", env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert out == [str(7 * factor), str(default), "None"]


def test_unknown_hypothesis_profile_is_refused():
    env = {**os.environ, "HYPOTHESIS_PROFILE": "fast"}
    res = subprocess.run([sys.executable, "-c", "import hypo_profiles"], cwd=REPO / "tests", env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "quick or thorough" in res.stderr
