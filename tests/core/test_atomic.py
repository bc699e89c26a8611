"""The one atomic-write helper: whole files or nothing, never over a device or a directory."""

from __future__ import annotations

import json
import os
import stat

import pytest

from slurm_fair import atomic
from slurm_fair.cli import main
from slurm_fair.errors import UserError


def test_writes_whole_file_with_mode_and_no_temp_left(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old")
    atomic.write_text(p, "new\n", mode=0o640)
    assert p.read_text() == "new\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("target", ["/dev/null", "/dev/zero"])
def test_refuses_a_device_and_leaves_it_alone(target):
    before = os.stat(target)
    with pytest.raises(atomic.AtomicWriteError, match="not a regular file"):
        atomic.write_text(target, "x")
    after = os.stat(target)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_refuses_a_fifo_a_directory_and_a_symlink_to_a_device(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(atomic.AtomicWriteError, match="not a regular file"):
        atomic.write_text(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(atomic.AtomicWriteError, match="a directory"):
        atomic.write_text(tmp_path, "x")
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    with pytest.raises(atomic.AtomicWriteError):
        atomic.write_text(link, "x")
    assert link.is_symlink()
    assert issubclass(atomic.AtomicWriteError, UserError)  # exit 2 from the command line


def test_a_symlink_to_a_file_stays_a_link(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic.write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_failure_leaves_the_old_file_intact(tmp_path, monkeypatch):
    p = tmp_path / "plan.json"
    p.write_text("old")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(atomic.AtomicWriteError, match="No space left"):
        atomic.write_text(p, "new")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["plan.json"]


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(atomic.AtomicWriteError, match="does not exist"):
        atomic.write_text(tmp_path / "nope" / "f", "x")


def test_cli_output_to_dev_null_exits_2_without_traceback(tmp_path, capsys):
    problem = tmp_path / "p.json"
    problem.write_text(json.dumps({"gpu_types": {"v100": 1}, "jobs": [
        {"id": "a/1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1.0}}]}))
    good = tmp_path / "alloc.json"
    assert main(["solve", "--input", str(problem), "--policy", "max-throughput", "-o", str(good)]) == 0
    assert json.loads(good.read_text())
    code = main(["solve", "--input", str(problem), "--policy", "max-throughput", "-o", "/dev/null"])
    err = capsys.readouterr().err
    assert code == 2 and "'--output': /dev/null: not a regular file" in err and "Traceback" not in err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_every_writer_uses_the_helper():
    """No module renames a temp file over a target by itself (one home: slurm_fair/atomic.py)."""
    import slurm_fair

    root = os.path.dirname(slurm_fair.__file__)
    offenders = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            # the emulator runs as a standalone script on the nodes (it imports nothing of the package)
            if not f.endswith(".py") or path.endswith("atomic.py") or path.endswith(os.path.join("testbed", "emulator.py")):
                continue
            text = open(path, encoding="utf-8").read()
            if "os.replace(" in text or ".rename(" in text and "tmp" in text:
                offenders.append(os.path.relpath(path, root))
    assert offenders == [], offenders
