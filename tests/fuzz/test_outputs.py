"""Fuzz every output path: a file is written whole, or not at all, and never over a device.

``-o FILE`` (solve, simulate, report, metrics, testbed replay), ``--json FILE``, ``--plot FILE``,
``--save-workload FILE`` and ``render-config --output-dir`` are given hostile paths (devices,
/proc, directories, missing directories, empty names, symlinks to devices, odd characters) and
run under a full disk (``ulimit -f``: Python ignores SIGXFSZ, so a write fails with EFBIG). The
promise: exit 2 with one message *before* any work, or the file written whole; an old file is
intact after a failure and no temporary file remains. Run: ``pytest tests/fuzz``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import atomic
from slurm_fair.commands.output import json_line, json_text
from .harness import assert_refused, assert_untouched, run, snapshot_dir

REPO = Path(__file__).resolve().parents[2]
PROBLEM = {"gpu_types": {"v100": 1}, "jobs": [{"id": "a/1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1.0}}]}
SIM = ["simulate", "--policy", "fifo", "--synthetic", "3", "--cluster", "v100=2", "-q"]

#: paths no command may write: (path or a name made in the test directory, what it is)
SPECIAL = ["/dev/null", "/dev/full", "/dev/zero", "/proc/x", "/proc/self/status", "/sys/x", "/", "{tmp}",
           "{tmp}/nodir/x.json", "", "{tmp}/link-null", "{tmp}/fifo", "{tmp}/dangling", "{tmp}/sub",
           "{tmp}/file/x.json"]


def _prepare(tmp: Path) -> None:
    (tmp / "link-null").symlink_to("/dev/null")
    os.mkfifo(tmp / "fifo")
    (tmp / "dangling").symlink_to(tmp / "nodir" / "x")
    (tmp / "sub").mkdir()
    (tmp / "file").write_text("a file, not a directory\n")
    (tmp / "old.json").write_text('{"old": true}\n')


def _devices_intact() -> None:
    for dev in ("/dev/null", "/dev/full", "/dev/zero"):
        assert stat.S_ISCHR(os.stat(dev).st_mode), f"{dev} is no longer a device"


@pytest.fixture
def problem(tmp_path) -> Path:
    p = tmp_path / "problem.json"
    p.write_text(json.dumps(PROBLEM))
    return p


@pytest.mark.parametrize("special", SPECIAL)
@pytest.mark.parametrize("argv", [
    ["solve", "--input", "{problem}", "--policy", "max-throughput", "-o"],
    [*SIM, "--json"], [*SIM, "-o"], [*SIM, "--plot"], [*SIM, "--save-workload"],
    ["report", "-o"], ["metrics", "-o"],
], ids=["solve -o", "simulate --json", "simulate -o", "simulate --plot", "simulate --save-workload",
        "report -o", "metrics -o"])
def test_a_path_that_cannot_be_written_is_refused_before_any_work(argv, special, tmp_path, problem, monkeypatch):
    work = tmp_path / "w"
    work.mkdir()
    _prepare(work)
    monkeypatch.setenv("SLURM_FAIR_CONFIG", str(tmp_path / "none.toml"))  # report/metrics: no config read
    before = snapshot_dir(work)
    path = special.format(tmp=work)
    rc, _out, err = run([a.format(problem=problem) for a in argv] + [path])
    assert_refused(rc, err)
    assert "Invalid value for" in err  # a usage error: the options were checked, nothing ran
    assert_untouched(work, before)
    _devices_intact()


NAME = st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
               min_size=1, max_size=20).filter(lambda s: s not in (".", ".."))


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAME)
def test_any_file_name_is_written_whole_or_refused(name, problem, tmp_path):
    """``solve -o DIR/NAME``, NAME anything a file system allows: the allocation written whole
    (valid strict JSON), or exit 2 with nothing in DIR; no temporary file either way."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    target = work / name
    rc, _out, err = run(["solve", "--input", problem, "--policy", "max-throughput", "-o", target])
    if rc == 0:
        assert [p.name for p in work.iterdir()] == [name]
        assert json.loads(target.read_text())["policy"] == "max-throughput"
    else:
        assert_refused(rc, err)
        assert list(work.iterdir()) == []


def _limited(argv: list[str], cwd: Path, blocks: int = 2) -> subprocess.CompletedProcess[str]:
    """``slurm-fair ARGV`` in a subprocess whose files may not grow past ``blocks`` KiB."""
    code = "import sys; from slurm_fair.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(["bash", "-c", f'ulimit -f {blocks}; exec "$@"', "sh", sys.executable, "-c", code, *argv],
                          cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120)


@pytest.mark.parametrize("argv", [
    [*SIM, "--json", "{out}"],
    ["solve", "--input", "{problem}", "--policy", "max-throughput", "-o", "{out}"],
], ids=["simulate --json", "solve -o"])
def test_a_full_disk_leaves_the_old_file_intact(argv, tmp_path, problem):
    """The issue's probe: under ``ulimit -f`` the old file was destroyed and 1,024 bytes of
    invalid JSON left. Now: exit 2 naming the file, the old file byte for byte, no temp file."""
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"old": "x" * 10}) + "\n")
    before = snapshot_dir(tmp_path)
    padded = [a.format(out=out, problem=problem) for a in argv]
    if argv[0] == "solve":  # the allocation is small: make it larger than the limit
        big = {"gpu_types": {"v100": 64}, "jobs": [{"id": f"tenant{i % 7}/{i}", "tenant": f"tenant{i % 7}",
                                                      "gpus": 1, "throughput": {"v100": 1.0}} for i in range(64)]}
        problem.write_text(json.dumps(big))
        before = snapshot_dir(tmp_path)
    proc = _limited(padded, tmp_path, blocks=1)
    assert_refused(proc.returncode, proc.stderr, str(out))
    assert_untouched(tmp_path, before)


def test_render_config_under_a_full_disk_changes_nothing(tmp_path):
    """render-config was written file by file: a failure left a cut slurm-fair.conf beside stale
    files. Now all or nothing: the old directory exactly as it was, and a new one not created."""
    inv = REPO / "conf" / "testbed.toml"
    old = tmp_path / "deploy"
    rc, _o, err = run(["render-config", "--inventory", inv, "--output-dir", old, "--run-as", "old-user"])
    assert rc == 0, err
    before = snapshot_dir(old)
    proc = _limited(["render-config", "--inventory", str(inv), "--output-dir", str(old)], tmp_path, blocks=8)
    assert_refused(proc.returncode, proc.stderr, "File too large")
    assert_untouched(old, before)
    proc = _limited(["render-config", "--inventory", str(inv), "--output-dir", str(tmp_path / "new" / "d")],
                    tmp_path, blocks=8)
    assert_refused(proc.returncode, proc.stderr)
    assert not (tmp_path / "new").exists()


def test_render_config_refuses_a_target_that_is_not_a_file_and_writes_nothing(tmp_path):
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "job_submit.lua").mkdir()  # the third file of the set: two would be written before it
    (out / "slurm-fair.conf").write_text("old\n")
    before = snapshot_dir(out)
    rc, _o, err = run(["render-config", "--inventory", REPO / "conf" / "testbed.toml", "--output-dir", out])
    assert_refused(rc, err, "job_submit.lua", "directory")
    assert_untouched(out, before)


@pytest.mark.parametrize("where", ["{tmp}/file", "/dev/null", "/proc/x", "{tmp}/file/sub", ""])
def test_render_config_output_dir_that_cannot_be_one(where, tmp_path):
    (tmp_path / "file").write_text("x\n")
    before = snapshot_dir(tmp_path)
    rc, _o, err = run(["render-config", "--inventory", REPO / "conf" / "testbed.toml",
                       "--output-dir", where.format(tmp=tmp_path)])
    assert_refused(rc, err)
    assert_untouched(tmp_path, before)


def test_write_files_is_all_or_nothing(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "a").write_text("old a\n")
    (out / "c").mkdir()
    with pytest.raises(atomic.AtomicWriteError, match="c: a directory"):
        atomic.write_files(out, {"a": ("new a\n", 0o644), "b": ("b\n", 0o600), "c": ("c\n", 0o644)})
    assert sorted(p.name for p in out.iterdir()) == ["a", "c"] and (out / "a").read_text() == "old a\n"
    written = atomic.write_files(out / "x" / "y", {"a": ("1\n", 0o600), "b": (b"2\n", 0o755)})
    assert [p.read_text() for p in written] == ["1\n", "2\n"]
    assert stat.S_IMODE(os.stat(written[1]).st_mode) == 0o755
    with pytest.raises(atomic.AtomicWriteError, match="not a plain file name"):
        atomic.write_files(out, {"../escape": ("x", 0o644)})


def test_check_writable(tmp_path):
    assert atomic.check_writable(tmp_path / "new.json") == tmp_path / "new.json"
    for bad, why in [("/dev/null", "not a regular file"), (tmp_path, "a directory"),
                     (tmp_path / "no" / "x", "does not exist"), ("/proc/x", "cannot write"), ("", "empty")]:
        with pytest.raises(atomic.AtomicWriteError, match=why):
            atomic.check_writable(bad)
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


FLOATS = st.floats(allow_nan=True, allow_infinity=True)
DOCS = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), FLOATS, st.text(max_size=5)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=12)


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in the output")
    return json.loads(text, parse_constant=refuse)


@settings(max_examples=scaled(200), deadline=None)
@given(doc=DOCS)
def test_json_output_is_strict(doc):
    """NaN/Infinity were printed into --json output; every JSON writer now prints null."""
    for text in (json_text(doc), json_line(doc)):
        parsed = _strict(text)
        if isinstance(doc, float):
            assert parsed == (doc if math.isfinite(doc) else None)
    assert json_text(doc).endswith("\n") and "\n" not in json_line(doc)


# --- issue 18 review: long names, outputs onto inputs, '-', several files at once ----------------

@pytest.mark.parametrize("argv", [
    ["solve", "--input", "{problem}", "--policy", "fifo", "-o", "{long}"],
    [*SIM, "--plot", "{long}.png"],
    ["render-config", "--inventory", str(REPO / "conf" / "testbed.toml"), "--output-dir", "{long}/sub"],
    ["solve", "--input", "{problem}", "--policy", "fifo", "--keep-lp-dir", "{long}"],
], ids=["solve -o", "simulate --plot", "render-config --output-dir", "solve --keep-lp-dir"])
def test_a_name_too_long_for_the_file_system_is_one_message(argv, tmp_path, problem):
    """``OSError: [Errno 36]`` escaped atomic.target_path as a traceback (rc 1)."""
    before = snapshot_dir(tmp_path)
    rc, _, err = run([a.format(problem=problem, long=tmp_path / ("a" * 300)) for a in argv])
    assert_refused(rc, err, "too long")
    assert_untouched(tmp_path, before)


def test_an_output_through_a_symlink_to_an_input_is_refused(tmp_path, problem):
    (tmp_path / "link.json").symlink_to(problem)
    before = snapshot_dir(tmp_path)
    rc, _, err = run(["solve", "--input", problem, "--policy", "fifo", "-o", tmp_path / "link.json"])
    assert_refused(rc, err, "--input")
    assert_untouched(tmp_path, before)


def test_same_file(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    os.link(a, tmp_path / "hard")
    (tmp_path / "soft").symlink_to(a)
    assert atomic.same_file(a, tmp_path / "hard") and atomic.same_file(a, tmp_path / "soft")
    assert atomic.same_file(tmp_path / "new", tmp_path / "." / "new")
    assert not atomic.same_file(a, tmp_path / "new")
    assert not atomic.same_file(tmp_path / ("a" * 300), a)


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_output_dash_is_stdout(output, tmp_path, problem, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(["solve", "--input", problem, "--policy", "fifo", "-o", output])
    assert rc == 0, err
    assert json.loads(out)["policy"] == "fifo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problem.json"]


@pytest.mark.parametrize("option", [["--save-workload", "-"], ["--plot", "-"]])
def test_a_file_of_its_own_is_not_stdout(option):
    rc, _, err = run([*SIM, *option])
    assert_refused(rc, err, option[0])


def test_simulate_writes_all_its_files_or_none_on_a_full_disk(tmp_path):
    """--json J --save-workload W --plot P under ``ulimit -f``: J and W were replaced, P stayed
    old. Now every file is staged before any is renamed: all three keep their old bytes."""
    for name in ("j.json", "w.csv", "p.png"):
        (tmp_path / name).write_text("old\n")
    before = snapshot_dir(tmp_path)
    proc = _limited([*SIM, "--json", "j.json", "--save-workload", "w.csv", "--plot", "p.png"], tmp_path, blocks=8)
    assert_refused(proc.returncode, proc.stderr)
    assert_untouched(tmp_path, before)


@pytest.mark.parametrize("where", ["", "/proc/self/x", "/dev", "{tmp}/nodir/x", "{tmp}/file"])
def test_keep_lp_dir_is_checked_when_parsed(where, tmp_path, problem):
    (tmp_path / "file").write_text("x")
    rc, _, err = run(["solve", "--input", problem, "--policy", "fifo", "--keep-lp-dir", where.format(tmp=tmp_path)])
    assert_refused(rc, err, "--keep-lp-dir")


def test_a_model_that_cannot_be_kept_is_a_note_not_a_traceback(tmp_path):
    """solver._keep_model called os.makedirs outside its try: the solve's error was lost."""
    import pulp

    from slurm_fair.solver import _keep_model

    (tmp_path / "file").write_text("x")
    note = _keep_model(pulp.LpProblem("m"), str(tmp_path / "file" / "sub"))
    assert note is not None and note.startswith("(could not keep")
