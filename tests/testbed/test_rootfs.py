"""Another Slurm version beside the host's: the description moved, the wrappers, the PATH.

The real 24.11 testbed itself is exercised by every ``testbed`` test (tests/conftest.py runs
them once per version); here the pure parts, and what ``down`` must leave behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli as main
from slurm_fair.errors import ConfigError, TestbedError
from slurm_fair.testbed import Testbed, validate
from slurm_fair.testbed import chroot, rootfs
from slurm_fair.testbed.config import with_slurm


def test_another_version_moves_every_port_and_keeps_the_cluster():
    base = validate({}, "<defaults>")
    moved = with_slurm(base, "24.11")
    assert moved.slurm == "24.11" and base.slurm == "22.05"
    assert {k: v - 1000 for k, v in moved.ports.items()} == dict(base.ports)
    assert [n.port - 1000 for n in moved.nodes] == [n.port for n in base.nodes]
    assert [(n.name, n.gpu_type, n.gpus) for n in moved.nodes] == [(n.name, n.gpu_type, n.gpus) for n in base.nodes]
    assert with_slurm(moved, "24.11") is moved
    back = with_slurm(moved, "22.05")  # the saved description of a 24.11 testbed round-trips
    assert dict(back.ports) == dict(base.ports)
    assert validate(dict(moved.raw), "saved").ports == moved.ports


def test_unknown_version_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cluster.slurm"):
        validate({"cluster": {"slurm": "21.08"}}, "t.toml")
    with pytest.raises(TestbedError, match="known: 22.05, 24.11, 26.05"):
        Testbed(dir=tmp_path, slurm="99.1")
    out = CliRunner().invoke(main, ["testbed", "env", "--slurm", "23.02"])
    assert out.exit_code == 2 and "23.02" in out.output


def test_default_dirs_are_siblings(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_FAIR_TESTBED_DIR", str(tmp_path / "tb"))
    assert Testbed().dir == tmp_path / "tb"
    assert Testbed(slurm="24.11").dir == tmp_path / "tb-24.11"
    assert Testbed(slurm="22.05").dir == tmp_path / "tb"


def test_wrappers_enter_the_root_filesystem_and_are_dropped_from_host_paths(tmp_path, monkeypatch):
    root = tmp_path / "rootfs"
    for d in ("usr/bin", "usr/sbin"):
        (root / d).mkdir(parents=True)
    for name in rootfs.PROGRAMS:
        where = "usr/sbin" if name.endswith("d") or name.startswith("mariadb") else "usr/bin"
        (root / where / name).touch()
    v = rootfs.version("24.11")
    rootfs.write_wrappers(tmp_path / "bin", root, v)
    text = (tmp_path / "bin" / "sinfo").read_text()
    assert text.startswith("#!/bin/sh\n") and os.access(tmp_path / "bin" / "sinfo", os.X_OK)
    assert f"[ -e /{chroot.MARKER} ] && exec /usr/bin/sinfo \"$@\"" in text  # no nesting inside
    assert str(Path(chroot.__file__).resolve()) in text and '/usr/bin/sinfo "$@"\n' in text
    # a host-version testbed never runs another testbed's wrappers
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "bin"), "/usr/bin", "/bin"]))
    host = Testbed(dir=tmp_path / "host", config=validate({}, "<defaults>"))
    assert str(tmp_path / "bin") not in host.env["PATH"].split(os.pathsep)
    assert host.program("sinfo") != str(tmp_path / "bin" / "sinfo")
    other = Testbed(dir=tmp_path / "new", config=validate({}, "<defaults>"), slurm="24.11")
    assert other.env["PATH"].split(os.pathsep)[0] == str(tmp_path / "new" / "bin")
    assert other.program("slurmctld") == str(tmp_path / "new" / "bin" / "slurmctld")
    assert [d.argv[0] for d in other.daemons()][:1] == [str(tmp_path / "new" / "bin" / "munged")]


def test_a_missing_program_names_the_root_filesystem(tmp_path):
    (tmp_path / "rootfs" / "usr/bin").mkdir(parents=True)
    with pytest.raises(TestbedError, match="munged is missing"):
        rootfs.write_wrappers(tmp_path / "bin", tmp_path / "rootfs", rootfs.version("24.11"))


def test_chroot_binds_data_directories_not_the_operating_system():
    dirs = chroot.host_dirs(("/var/tmp/x-not-there", "/usr", "/var/lib"))
    assert "/home" in dirs and not {"/usr", "/etc", "/var", "/proc", "/bin"} & set(dirs)
    assert "/var/lib" in dirs  # a directory under the OS's own, bound where it is


def test_env_command_prints_the_path_of_another_version(tmp_path):
    out = CliRunner().invoke(main, ["testbed", "env", "--slurm", "24.11", "--dir", str(tmp_path / "t")])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        f"export SLURM_CONF={tmp_path}/t/etc/slurm.conf", f'export PATH={tmp_path}/t/bin:"$PATH"']


def test_three_versions_each_on_ports_of_their_own():
    base = validate({}, "<defaults>")
    ports = {v: set(with_slurm(base, v).ports.values()) | {n.port for n in with_slurm(base, v).nodes}
             for v in rootfs.VERSIONS}
    assert with_slurm(base, "26.05").ports["slurmctld"] == base.ports["slurmctld"] + 2000
    assert not ports["22.05"] & ports["24.11"] and not ports["24.11"] & ports["26.05"]
    assert not ports["22.05"] & ports["26.05"]
    assert rootfs.version("26.05").suite == "forky" and rootfs.version("24.11").suite == "trixie"


def test_a_port_shift_puts_a_second_testbed_of_a_version_beside_the_first(monkeypatch, tmp_path):
    """CI's two 22.05 lanes: $SLURM_FAIR_TESTBED_PORT_SHIFT moves every port of the default
    description, the versions' own shifts come on top, and no port meets another testbed's."""
    monkeypatch.delenv("SLURM_FAIR_TESTBED_CONFIG", raising=False)
    monkeypatch.setenv("SLURM_FAIR_TESTBED_DIR", str(tmp_path / "tb"))
    monkeypatch.delenv("SLURM_FAIR_TESTBED_PORT_SHIFT", raising=False)
    first = {v: Testbed(slurm=v).config for v in rootfs.VERSIONS}
    monkeypatch.setenv("SLURM_FAIR_TESTBED_DIR", str(tmp_path / "tb-b"))
    monkeypatch.setenv("SLURM_FAIR_TESTBED_PORT_SHIFT", "500")
    second = {v: Testbed(slurm=v).config for v in rootfs.VERSIONS}
    assert Testbed().dir == tmp_path / "tb-b"
    for v in rootfs.VERSIONS:
        assert {k: p - 500 for k, p in second[v].ports.items()} == dict(first[v].ports)
        assert [n.port - 500 for n in second[v].nodes] == [n.port for n in first[v].nodes]
    taken = [{*c.ports.values(), *(n.port for n in c.nodes)} for c in [*first.values(), *second.values()]]
    assert sum(map(len, taken)) == len(set().union(*taken))
    for bad, says in (("lots", "not a whole number"), ("60000", "between 1024 and 65535")):
        monkeypatch.setenv("SLURM_FAIR_TESTBED_PORT_SHIFT", bad)
        with pytest.raises(ConfigError, match=says) as err:
            Testbed()
        assert "SLURM_FAIR_TESTBED_PORT_SHIFT" in str(err.value)


def test_a_suite_the_hosts_debootstrap_lacks_uses_the_sid_script(tmp_path, monkeypatch):
    """bookworm's debootstrap knows trixie but not forky: forky gets the script every Debian
    suite shares, trixie its own (unchanged); apt runs with a /proc of its own."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "trixie").touch()
    (scripts / "sid").touch()
    monkeypatch.setattr(rootfs, "DEBOOTSTRAP_SCRIPTS", str(scripts))
    monkeypatch.setattr(rootfs.os, "geteuid", lambda: 0)
    monkeypatch.setattr(rootfs.shutil, "which", lambda *a, **k: "/usr/sbin/debootstrap")
    calls = []

    def fake_run(argv, timeout_s, what, env=None):
        calls.append(list(argv))
        if what == "debootstrap":
            (Path(argv[3]) / "usr/sbin").mkdir(parents=True)
        if what == "slurmctld -V":
            raise TestbedError("stop here")
        return ""

    monkeypatch.setattr(rootfs, "_run", fake_run)
    for name, script in (("26.05", [str(scripts / "sid")]), ("24.11", [])):
        calls.clear()
        with pytest.raises(TestbedError, match="stop here"):
            rootfs.ensure(tmp_path / name / "rootfs", rootfs.version(name), lambda _m: None)
        v = rootfs.version(name)
        assert calls[0] == ["debootstrap", "--variant=minbase", v.suite, str(tmp_path / name / "rootfs.partial"),
                            rootfs.DEFAULT_MIRROR, *script]
        apt = calls[1]
        assert apt[:4] == ["unshare", "--mount", "--propagation", "private"] and "mount -t proc" in apt[7]
        assert apt[9:] == [str(tmp_path / name / "rootfs.partial"), "apt-get", "install", "-y", "-q",
                           "--no-install-recommends", *v.packages]
