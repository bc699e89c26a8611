"""The fuzz harness itself fails where it must (a harness that cannot fail proves nothing)."""

from __future__ import annotations

import pytest

from .harness import assert_refused, assert_untouched, run, snapshot_dir


def test_refused_accepts_one_line_and_a_problem_list() -> None:
    assert_refused(2, "slurm-fair: p.json: invalid input: jobs: missing key\n", "jobs")
    assert_refused(2, "slurm-fair: p.json: invalid input (2 problems)\n  - a: x\n  - b: y\n")


@pytest.mark.parametrize("rc, err", [
    (1, "slurm-fair: solver returned Empty\n"),
    (2, "Traceback (most recent call last):\n  File x\nValueError: max()\n"),
    (2, "Usage: slurm-fair solve\nTry --help\n\nError: bad\n"),
    (2, "slurm-fair: a\nsecond line\n"),
])
def test_refused_fails_on_what_the_promise_forbids(rc: int, err: str) -> None:
    with pytest.raises(AssertionError):
        assert_refused(rc, err)


def test_untouched_sees_a_changed_or_new_file(tmp_path) -> None:
    (tmp_path / "a").write_text("x")
    before = snapshot_dir(tmp_path)
    assert_untouched(tmp_path, before)
    (tmp_path / ".a.tmp").write_text("")
    with pytest.raises(AssertionError):
        assert_untouched(tmp_path, before)
    (tmp_path / ".a.tmp").unlink()
    (tmp_path / "a").write_text("y")
    with pytest.raises(AssertionError):
        assert_untouched(tmp_path, before)


def test_run_reports_a_click_usage_error_in_one_line() -> None:
    rc, _, err = run(["simulate", "--round-s", "abc"])
    assert_refused(rc, err, "--round-s")
