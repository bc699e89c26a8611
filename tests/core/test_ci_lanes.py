"""CI's split of one Slurm version's real tests over two lanes (tests/slurm_lanes.py,
scripts/ci-lanes.sh, scripts/lane_split_check.py): each test in exactly one half."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from slurm_lanes import LANE_B_LIST, ListError, in_lane_b, lane_b_entries

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "lane_split_check.py"


def test_the_list_names_real_test_files_each_once():
    entries = lane_b_entries()
    assert entries, "half b is empty: the split would run everything in one lane"
    real = _collect(*sorted({e.split("::")[0] for e in entries}))
    for entry in entries:
        assert any(in_lane_b(n, [entry]) for n in real), f"{entry} has no real (slurm) test: it balances nothing"


def test_an_entry_names_its_file_or_one_test_with_all_its_parameters():
    entries = ["tests/a/test_x.py", "tests/b/test_y.py::test_one"]
    assert in_lane_b("tests/a/test_x.py::test_any[slurm22.05]", entries)
    assert in_lane_b("tests/b/test_y.py::test_one[slurm22.05]", entries)
    assert in_lane_b("tests/b/test_y.py::test_one", entries)
    assert not in_lane_b("tests/b/test_y.py::test_one_more", entries)
    assert not in_lane_b("tests/a/test_x2.py::test_any", entries)


def test_a_stale_or_doubled_entry_is_an_error(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_here.py").write_text("")
    listed = tmp_path / "tests" / "lane.txt"
    listed.write_text("tests/test_here.py  # a comment\n\ntests/test_gone.py\n")
    with pytest.raises(ListError, match="line 3: no test file tests/test_gone.py"):
        lane_b_entries(listed)
    listed.write_text("tests/test_here.py\ntests/test_here.py\n")
    with pytest.raises(ListError, match="line 2: tests/test_here.py named twice"):
        lane_b_entries(listed)
    assert LANE_B_LIST.is_file()


def _collect(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "slurm", "--slurm-versions", "22.05", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_the_halves_are_complements_of_the_collection():
    """The wiring the lanes use (conftest's --slurm-lane), over the files the list names and one
    it does not: no test in both halves, none in neither."""
    files = sorted({e.split("::")[0] for e in lane_b_entries()})[:2] + ["tests/testbed/test_cluster.py"]
    whole, a, b = _collect(*files), _collect("--slurm-lane", "a", *files), _collect("--slurm-lane", "b", *files)
    assert a and b and not a & b and a | b == whole


def _junit(path: Path, cases: list[tuple[str, ...]]) -> str:
    body = "".join(f'<testcase classname="{c[0]}" name="{c[1]}" time="1.0">'
                   + "".join(f"<{tag}/>" for tag in c[2:]) + "</testcase>" for c in cases)
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return str(path)


@pytest.mark.parametrize("b_cases, rc, says", [
    ([("tests.x.test_b", "test_two[slurm22.05]")], 0, "2 collected = a 1 (1 passed, 0 failed, 0 skipped) + b 1 (1"),
    ([("tests.x.test_b", "test_two[slurm22.05]"), ("tests.x.test_b", "test_two[slurm22.05]", "failure")], 0,
     "+ b 1 (0 passed, 1 failed, 0 skipped; 1 more record: a test run again)"),
    ([], 1, "1 ran in neither half: tests.x.test_b::test_two[slurm22.05]"),
    ([("tests.x.test_b", "test_two[slurm22.05]"), ("tests.x.test_a", "test_one")], 1, "1 ran in both halves"),
    ([("tests.x.test_b", "test_two[slurm22.05]"), ("tests.x.test_c", "test_new")], 1, "1 ran but were not collected"),
])
def test_the_check_finds_a_dropped_or_doubled_test(tmp_path, b_cases, rc, says):
    collected = tmp_path / "collected.txt"
    collected.write_text("tests/x/test_a.py::test_one\ntests/x/test_b.py::test_two[slurm22.05]\n\n2/9 tests collected\n")
    a = _junit(tmp_path / "a.xml", [("tests.x.test_a", "test_one")])
    b = _junit(tmp_path / "b.xml", b_cases)
    out = subprocess.run([sys.executable, str(CHECK), "--name", "slurm-22.05", str(collected), a, b],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == rc and says in out.stdout, out.stdout + out.stderr
