"""Where the configuration is found without ``--config`` (issue 16): ``$SLURM_FAIR_CONFIG``, then
``/etc/slurm-fair/slurm-fair.toml``; a checkout's ``./conf`` never by accident."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_fair import config
from slurm_fair.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A working directory with a ./conf/slurm-fair.toml that must not be picked up, and a fake /etc."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "slurm-fair.toml").write_text('[controller]\npolicy = "fifo"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(config.CONFIG_ENV, raising=False)
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "etc" / "slurm-fair.toml")
    return tmp_path


def test_dot_conf_is_never_found(checkout):
    assert config.default_path() is None
    cfg = config.load()
    assert cfg.source == "<defaults>" and cfg["controller"]["policy"] == "oef"


def test_etc_then_env(checkout, monkeypatch):
    etc = checkout / "etc" / "slurm-fair.toml"
    etc.parent.mkdir()
    etc.write_text('[controller]\npolicy = "gavel-mmf"\n')
    assert config.default_path() == etc and config.load()["controller"]["policy"] == "gavel-mmf"
    monkeypatch.setenv(config.CONFIG_ENV, "conf/slurm-fair.toml")  # ./conf when asked for
    assert config.load()["controller"]["policy"] == "fifo"
    assert config.load("conf/slurm-fair.toml")["controller"]["policy"] == "fifo"  # or --config


def test_default_path_is_the_installed_one():
    assert config.SYSTEM_PATH == Path("/etc/slurm-fair/slurm-fair.toml")


def test_cli_ignores_dot_conf(checkout, capsys):
    """A broken ./conf/slurm-fair.toml does not matter unless named; named, it is an error (exit 2)."""
    (checkout / "conf" / "slurm-fair.toml").write_text("[controller]\npolicyy = 1\n")
    args = ["render-config", "--inventory", str(REPO / "conf" / "testbed.toml"), "--output-dir", "out"]
    assert main(args) == 0
    assert main([*args, "--config", "conf/slurm-fair.toml"]) == 2
    assert "policyy" in capsys.readouterr().err
