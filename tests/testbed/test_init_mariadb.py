"""MariaDB's data directory is made whole or not at all (slurm_fair.testbed.prepare.init_mariadb):
an install cut short must not leave a directory the next ``up`` takes for a whole one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from slurm_fair.errors import TestbedError
from slurm_fair.testbed.layout import Layout
from slurm_fair.testbed.prepare import init_mariadb

#: mariadb-install-db's stand-in: writes a first system table into --datadir, then exits $1
FAKE = """#!/bin/sh
for a in "$@"; do case "$a" in --datadir=*) d="${a#--datadir=}";; esac; done
mkdir -p "$d/mysql" && : > "$d/mysql/db.frm"
[ "$FAKE_RC" = 0 ] && : > "$d/mysql/servers.frm"
exit "$FAKE_RC"
"""


def _program(tmp_path: Path) -> Path:
    prog = tmp_path / "mariadb-install-db"
    prog.write_text(FAKE)
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return prog


def test_an_install_cut_short_leaves_no_data_directory_and_the_next_one_completes(tmp_path, monkeypatch):
    layout = Layout(tmp_path / "tb")
    layout.etc.mkdir(parents=True)
    prog = _program(tmp_path)
    monkeypatch.setenv("FAKE_RC", "1")
    with pytest.raises(TestbedError):
        init_mariadb(layout, lambda name: str(prog), timeout=30)
    assert not (layout.mysql_data / "mysql").exists()
    monkeypatch.setenv("FAKE_RC", "0")
    init_mariadb(layout, lambda name: str(prog), timeout=30)
    assert sorted(p.name for p in (layout.mysql_data / "mysql").iterdir()) == ["db.frm", "servers.frm"]
    assert not layout.mysql_data.with_name(layout.mysql_data.name + ".init").exists()
    # a whole directory is kept as it is
    monkeypatch.setenv("FAKE_RC", "1")
    init_mariadb(layout, lambda name: str(prog), timeout=30)
    assert (layout.mysql_data / "mysql" / "servers.frm").exists()
