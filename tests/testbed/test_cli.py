"""``slurm-fair testbed ...`` at the CLI edge (no Slurm needed): exit codes and messages."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from slurm_fair.cli import main


def test_env_prints_an_eval_able_slurm_conf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "tb dir"  # a space must survive eval
    assert main(["testbed", "env", "--dir", str(d)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("export SLURM_CONF=")
    value = shlex.split(out[0].removeprefix("export "))[0].split("=", 1)[1]
    assert Path(value) == d.resolve() / "etc" / "slurm.conf"


def test_env_follows_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_FAIR_TESTBED_DIR", str(tmp_path / "x"))
    assert main(["testbed", "env"]) == 0
    assert str(tmp_path / "x" / "etc" / "slurm.conf") in capsys.readouterr().out


def test_bad_config_is_exit_2_with_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "tb.toml"
    bad.write_text('[ports]\nslurmctl = 1\n[tenants.Physics]\nfairshare = -1\n')
    assert main(["testbed", "up", "--dir", str(tmp_path / "d"), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "ports.slurmctl" in err and "did you mean 'slurmctld'" in err
    assert "tenants.Physics.fairshare" in err
    assert "Traceback" not in err
    assert not (tmp_path / "d").exists()  # nothing started, nothing written


def test_status_of_a_stopped_testbed_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["testbed", "status", "--dir", str(tmp_path / "none")]) == 1
    captured = capsys.readouterr()
    assert "slurmctld" in captured.out and "stopped" in captured.out
    assert "not running" in captured.err


def test_down_of_a_stopped_testbed_is_harmless(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["testbed", "down", "--dir", str(tmp_path / "none")]) == 0
    assert "0 daemons stopped" in capsys.readouterr().err
