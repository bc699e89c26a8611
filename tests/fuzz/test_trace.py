"""Trace CSVs as a hostile user writes them (issue 18): every cell, the header, the encoding.

Each example breaks one cell (or the header, or the bytes) of a valid trace and runs
``slurm-fair simulate``: exit 2, one message naming the file, the line and the column, no
traceback, the ``--json`` file untouched, nothing left in TMPDIR, within a time bound (a
``total_steps`` of 1e300 once simulated for ever). Plain regressions for the named probes follow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from .bounded import bounded, scratch
from .harness import assert_refused, assert_untouched, run, snapshot_dir

HEADER = ["tenant", "job_id", "job_type", "gpus", "total_steps", "arrival_s", "weight", "nodes"]
ROWS = [["a", "1", "ResNet-50 (batch size 32)", "2", "1000", "0", "1", "1"],
        ["b", "1", "A3C", "1", "500", "60", "2", "1"]]

#: texts no number cell accepts
NOT_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1", "abc", "", " ", "1_0", "٣", "0x10",
               "1,5", "--1", "1e", "\u00a0"]
#: column -> further texts it refuses (beyond NOT_NUMBERS for the numeric ones)
REFUSED = {
    "gpus": NOT_NUMBERS + ["0", "1.5", "2000000", "3"],  # 3 is not a multiple of nodes 2 (set below)
    "total_steps": NOT_NUMBERS + ["0", "1e300", "1e16"],
    "arrival_s": NOT_NUMBERS + ["1e300", "2e10"],
    "weight": [t for t in NOT_NUMBERS if t.strip()] + ["0", "1e-9", "1e9"],
    "nodes": [t for t in NOT_NUMBERS if t.strip()] + ["0", "1.5", "3"],
    "tenant": ["", " ", "c\u2028d", "a\x0bb", "\x7f", "t" * 129],  # U+2028 once split the line
    "job_id": ["", " "],
    "job_type": ["", "ResNet-51 (batch size 32)", "nope", "\x7f"],
}


def _text(header: list[str], rows: list[list[str]]) -> str:
    return "".join(",".join(f'"{c}"' if "," in c else c for c in r) + "\n" for r in [header] + rows)


def _simulate_refused(data: bytes, *needles: str, extra: tuple[str, ...] = ()) -> None:
    with scratch() as work, bounded(60):
        trace, out = work / "t.csv", work / "r.json"
        trace.write_bytes(data)
        out.write_text("old results\n")
        before = snapshot_dir(work)
        rc, stdout, err = run(["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=4,k80=4",
                               "--no-fairness-checks", "-q", "--json", out, *extra])
        assert_refused(rc, err, *needles)
        assert stdout == ""
        assert_untouched(work, before)


@settings(max_examples=scaled(200), deadline=None)
@given(st.sampled_from(sorted(REFUSED)).flatmap(lambda c: st.tuples(st.just(c), st.sampled_from(REFUSED[c]))),
       st.sampled_from([0, 1]))
def test_every_cell_refuses_hostile_text(case: tuple[str, str], row: int) -> None:
    column, value = case
    rows = [list(r) for r in ROWS]
    if column == "gpus" and value == "3":
        rows[row][HEADER.index("nodes")] = "2"
    rows[row][HEADER.index(column)] = value
    _simulate_refused(_text(HEADER, rows).encode(), "t.csv", f"line {row + 2}", column)


@settings(max_examples=scaled(60), deadline=None)
@given(st.sampled_from([b"\xe9", b"\xff", b"\x00", b"\x80", b"\xc3("]), st.integers(0, 150))
def test_bytes_that_are_not_utf8_are_named(bad: bytes, at: int) -> None:
    data = _text(HEADER, ROWS).encode()
    at = min(at, len(data))
    _simulate_refused(data[:at] + bad + data[at:], "t.csv", "NUL byte" if bad == b"\x00" else "not UTF-8")


@settings(max_examples=scaled(60), deadline=None)
@given(st.sampled_from(HEADER[:6]), st.sampled_from(["drop", "rename", "upper"]))
def test_a_broken_header_names_the_missing_column(column: str, how: str) -> None:
    header = list(HEADER)
    i = header.index(column)
    rows = [list(r) for r in ROWS]
    if how == "drop":
        del header[i]
        rows = [r[:i] + r[i + 1:] for r in rows]
    else:
        header[i] = column.upper() if how == "upper" else column + "_x"
    _simulate_refused(_text(header, rows).encode(), "t.csv", "line 1", column)


@settings(max_examples=scaled(60), deadline=None)
@given(st.lists(st.lists(st.text(max_size=12), min_size=0, max_size=9), min_size=0, max_size=4))
def test_any_cells_are_a_trace_or_refused(rows: list[list[str]]) -> None:
    """Arbitrary cells under the right header: never a traceback or a hang."""
    with scratch() as work, bounded(60):
        trace = work / "t.csv"
        trace.write_text(_text(HEADER, rows), encoding="utf-8")
        rc, _, err = run(["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=4,k80=4",
                          "--no-fairness-checks", "-q"])
        assert rc in (0, 2) and "Traceback" not in err
        if rc == 2:
            assert_refused(rc, err)


# --- the probes of issue 18, one by one ------------------------------------------------------


def _run_trace(tmp_path: Path, data: bytes, *extra: str) -> tuple[int, str, str]:
    trace = tmp_path / "t.csv"
    trace.write_bytes(data)
    return run(["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=4,k80=4", "-q", *extra])


def test_a_bom_is_dropped_not_a_missing_tenant(tmp_path: Path) -> None:
    rc, out, err = _run_trace(tmp_path, b"\xef\xbb\xbf" + _text(HEADER, ROWS).encode())
    assert rc == 0, err


def test_a_latin1_trace_names_the_byte(tmp_path: Path) -> None:
    rc, _, err = _run_trace(tmp_path, _text(HEADER, ROWS).replace("a,1", "\xe9,1").encode("latin-1"))
    assert_refused(rc, err, "t.csv", "line 2", "byte 0xe9")


@pytest.mark.parametrize("steps, needle", [("1e300", "<= 1e+15"), ("1e14", "rounds of 360 s")])
def test_endless_jobs_are_refused_before_the_run(tmp_path: Path, steps: str, needle: str) -> None:
    rows = [list(r) for r in ROWS]
    rows[0][HEADER.index("total_steps")] = steps
    with bounded(30):
        rc, _, err = _run_trace(tmp_path, _text(HEADER, rows).encode())
    assert_refused(rc, err, "t.csv", "line 2", "total_steps", needle)


def test_the_window_message_names_the_window(tmp_path: Path) -> None:
    rc, _, err = _run_trace(tmp_path, _text(HEADER, ROWS).encode(), "--window", "5000:6000")
    assert_refused(rc, err, "--window 5000:6000", "arrivals span 0 to 60 s")


def test_a_huge_cell_is_a_finding_not_a_csv_error(tmp_path: Path) -> None:
    rows = [list(r) for r in ROWS]
    rows[0][0] = '"' + "x" * 200_000
    rc, _, err = _run_trace(tmp_path, _text(HEADER, rows).encode())
    assert_refused(rc, err, "t.csv", "line 2")


@pytest.mark.parametrize("column", ["gpus", "tenant", "weight"])
def test_a_column_given_twice_is_refused(column: str) -> None:
    header = HEADER + [column]
    rows = [r + [r[HEADER.index(column)]] for r in ROWS]
    _simulate_refused(_text(header, rows).encode(), "line 1", column, "twice")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x1c", "\x0c"])
def test_a_line_separator_inside_a_cell_is_named_as_the_cells_problem(separator: str) -> None:
    """Lines end at \\n and \\r only: a separator str.splitlines knows stays in its cell, and the
    message names that cell, not "expected 8 fields"."""
    rows = [ROWS[0], ["b" + separator + "c"] + ROWS[1][1:]]
    data = _text(HEADER, rows).encode()
    with scratch() as work, bounded(60):
        (work / "t.csv").write_bytes(data)
        rc, _, err = run(["simulate", "--policy", "fifo", "--trace", work / "t.csv", "--cluster", "v100=4,k80=4", "-q"])
        assert_refused(rc, err, "line 3", "tenant")
        assert "fields" not in err


def test_a_quoted_newline_in_a_job_type_is_one_cell_on_its_line(tmp_path: Path) -> None:
    """A quoted cell may hold a newline (the csv module reads it); the next record's line is
    still counted right."""
    data = (",".join(HEADER) + "\n" + ",".join(ROWS[0]) + "\n" + 'b,1,"A3\nC",1,500,60,2,1\n' + "c,1,nope,1,5,0,1,1\n")
    rc, _, err = _run_trace(tmp_path, data.encode())
    assert rc == 2, err
    assert "line 3: job_type: 'A3\\nC'" in err and "line 5: job_type: 'nope'" in err


@pytest.mark.parametrize("stem", ["a\nb", "a\u2028b", "x\ty", " lead"])
def test_a_gavel_trace_named_what_no_tenant_is_called_is_refused(stem: str) -> None:
    with scratch() as work, bounded(60):
        trace = work / f"{stem}.trace"
        trace.write_text("ResNet-50 (batch size 32)\tcmd\t--n\tFalse\t12000\t0\t1\n")
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2"])
        assert_refused(rc, err, "tenant", "file name")


def test_a_gavel_trace_with_a_separator_in_a_field_names_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "t1.trace"
    trace.write_text("ResNet-50 (batch size 32)\tcmd\t--n\tFalse\t12000\t0\t1\n"
                     "A3C\tc\u2028md\t--n\tFalse\t12x\t0\t1\n")
    rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2"])
    assert_refused(rc, err, "line 2", "total_steps")
