"""PROBLEM.json as a hostile user writes it (issue 18): every field, the encoding, the JSON itself.

Each example mutates one field of a valid problem to a value the field must refuse and runs
``slurm-fair solve``: exit 2, one message naming the job and field (or "malformed JSON" for what
strict JSON refuses first), no traceback, the ``-o`` file untouched, nothing left in TMPDIR, and
within a time bound. Plain regressions for the named probes follow.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair import policies
from .bounded import bounded, scratch
from .harness import assert_refused, assert_untouched, run, snapshot_dir

VALID: dict[str, Any] = {
    "gpu_types": {"v100": 4, "k80": 4},
    "tenants": {"a": {"weight": 1}, "b": {"weight": 2}},
    "jobs": [
        {"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 2.0, "k80": 1.0}, "remaining_work": 100, "age_s": 5},
        {"id": "j2", "tenant": "b", "gpus": 2, "throughput": {"v100": 3.0, "k80": 1.0}},
    ],
}

#: values no number field accepts (strict JSON refuses the non-finite ones and the long integer)
NOT_NUMBERS = [float("nan"), float("inf"), float("-inf"), 10**400, "1", "", True, False, [], {}, [1], {"a": 1},
               "nan", "\n", "٣"]
#: (path, needle, values the field must refuse)
FIELDS: list[tuple[tuple[Any, ...], str, list[Any]]] = [
    (("gpu_types", "v100"), "gpu_types.v100", NOT_NUMBERS + [-1, 1.5, 10**7, None]),
    (("tenants", "b", "weight"), "tenants.b.weight", NOT_NUMBERS + [0, -1, 1e-9, 1e9, None]),
    (("jobs", 0, "gpus"), "job j1.gpus", NOT_NUMBERS + [0, -1, 1.5, 10**7, 5, None]),
    (("jobs", 0, "throughput", "v100"), "job j1.throughput.v100", NOT_NUMBERS + [-1, 1e-9, 1e13, None]),
    (("jobs", 1, "throughput"), "job j2.throughput", [{}, {"v100": 0}, {"a100": 1}, [], "fast", None, 3]),
    (("jobs", 0, "remaining_work"), "job j1.remaining_work", NOT_NUMBERS + [-1, 1e16]),
    (("jobs", 0, "age_s"), "job j1.age_s", NOT_NUMBERS + [-1, 1e16]),
    (("jobs", 1, "id"), "id", ["", True, None, [], {}, 1.5, "j1"]),
    (("jobs", 1, "tenant"), "tenant", ["", 5, None, [], {}, True]),
    (("jobs", 1), "jobs[1]", [None, 1, "job", []]),
    (("gpu_types",), "gpu_types", [{}, [], "v100", None, 4]),
    (("jobs",), "jobs", [{}, "j1", None, 4]),
    (("tenants",), "tenants", [[1], "a", 4, [], None]),
    (("tenants", "a"), "tenants.a.wieght", [{"wieght": 3}]),
    (("jobs", 0, "remaining_wrok"), "did you mean 'remaining_work'", [5]),
    (("gpu_type",), "did you mean 'gpu_types'", [{"v100": 4}]),
]


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _dump(doc: Any) -> str:
    return json.dumps(doc, allow_nan=True)  # NaN/Infinity on purpose: the reader must refuse them


def _solve_refused(text: bytes, *needles: str, policy: str = "fifo") -> None:
    """``solve`` of the file holding ``text``: refused as promised, nothing written or left."""
    with scratch() as work, bounded(60):
        problem, out = work / "p.json", work / "o.json"
        problem.write_bytes(text)
        out.write_text("old output\n")
        before = snapshot_dir(work)
        rc, stdout, err = run(["solve", "--input", problem, "--policy", policy, "-o", out])
        assert_refused(rc, err, *needles)
        assert stdout == ""
        assert_untouched(work, before)


@settings(max_examples=scaled(150), deadline=None)
@given(st.sampled_from(FIELDS).flatmap(lambda f: st.tuples(st.just(f), st.sampled_from(f[2]))),
       st.sampled_from(["fifo", "oef", "gavel-mmf"]))
def test_every_field_refuses_hostile_values(case: tuple[tuple[tuple[Any, ...], str, list[Any]], Any], policy: str) -> None:
    (path, needle, _), value = case
    text = _dump(_set(VALID, path, value))
    strict_refuses = any(t in text for t in ("NaN", "Infinity")) or len(str(value)) > 30 and isinstance(value, int)
    _solve_refused(text.encode(), "malformed JSON" if strict_refuses else needle, policy=policy)


@settings(max_examples=scaled(60), deadline=None)
@given(st.sampled_from([b"\xe9", b"\xff\xfe", b"\x00", b"\x80abc", b"\xc3"]), st.integers(0, 40))
def test_bytes_that_are_not_utf8_are_named(bad: bytes, at: int) -> None:
    text = _dump(VALID).encode()
    at = min(at, len(text))
    needle = "NUL byte" if b"\x00" in bad else "not UTF-8"
    _solve_refused(text[:at] + bad + text[at:], needle)


@settings(max_examples=scaled(40), deadline=None)
@given(st.sampled_from(["[", "{\"a\": "]), st.integers(65, 100_000))
def test_deep_nesting_is_refused_not_recursed(opening: str, depth: int) -> None:
    _solve_refused((opening * depth).encode(), "nested deeper")


@settings(max_examples=scaled(40), deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_any_text_is_a_problem_or_refused(text: str) -> None:
    """Arbitrary text: never a traceback; refused unless it happens to be a valid problem."""
    with scratch() as work, bounded(60):
        problem = work / "p.json"
        problem.write_text(text, encoding="utf-8")
        rc, _, err = run(["solve", "--input", problem, "--policy", "fifo"])
        assert rc in (0, 2) and "Traceback" not in err
        if rc == 2:
            assert_refused(rc, err)


# --- the probes of issue 18, one by one ------------------------------------------------------


@pytest.mark.parametrize("policy", sorted(policies.names()))
def test_no_jobs_is_an_empty_allocation_for_every_policy(policy: str) -> None:
    with scratch() as work:
        problem = work / "p.json"
        problem.write_text(json.dumps({"gpu_types": {"v100": 4}, "jobs": []}))
        rc, out, err = run(["solve", "--input", problem, "--policy", policy])
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["allocation"] == {} and doc["tenants"] == {} and doc["efficiency"] == 0


def test_no_gpu_types_is_refused() -> None:
    _solve_refused(json.dumps({"gpu_types": {}, "jobs": []}).encode(), "gpu_types", "no GPU type")


@pytest.mark.parametrize("policy", ["oef", "gavel-mmf", "max-throughput"])
def test_infinite_throughput_is_a_user_error_not_a_solver_failure(policy: str) -> None:
    _solve_refused(_dump(_set(VALID, ("jobs", 0, "throughput", "v100"), float("inf"))).encode(), "Infinity",
                   policy=policy)


def test_a_job_larger_than_every_usable_type_runs_nowhere() -> None:
    doc = _set(VALID, ("jobs", 0, "gpus"), 5)
    _solve_refused(json.dumps(doc).encode(), "job j1.gpus", "can run nowhere", "5 GPUs")
    _solve_refused(json.dumps(_set(VALID, ("jobs", 0, "gpus"), 10**9)).encode(), "job j1.gpus", "<= 1e+06")


def test_400_digit_integers_are_refused() -> None:
    _solve_refused(('{"gpu_types": {"v100": ' + "9" * 400 + '}, "jobs": []}').encode(), "400 digits")


def test_a_file_named_like_json_is_read_as_a_file(tmp_path: Path) -> None:
    with scratch() as work:
        problem = work / '{"gpu_types": {}}.json'
        problem.write_text(json.dumps(VALID))
        rc, out, err = run(["solve", "--input", problem, "--policy", "fifo"])
        assert rc == 0, err
        assert set(json.loads(out)["allocation"]) == {"j1", "j2"}
        rc, _, err = run(["solve", "--input", work / "{missing.json", "--policy", "fifo"])
        assert_refused(rc, err, "{missing.json", "No such file")


def test_a_bom_is_dropped(tmp_path: Path) -> None:
    problem = tmp_path / "p.json"
    problem.write_bytes(b"\xef\xbb\xbf" + json.dumps(VALID).encode())
    rc, _, err = run(["solve", "--input", problem, "--policy", "fifo"])
    assert rc == 0, err


def test_a_directory_or_device_is_refused() -> None:
    with scratch() as work, bounded(30):
        rc, _, err = run(["solve", "--input", "/dev/zero", "--policy", "fifo"])
        assert_refused(rc, err, "/dev/zero", "not a regular file")
        rc, _, err = run(["solve", "--input", work, "--policy", "fifo"])
        assert rc == 2 and "Traceback" not in err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e400", "abc", "100000"])
def test_time_limit_is_finite_and_bounded(value: str) -> None:
    with scratch() as work:
        problem = work / "p.json"
        problem.write_text(json.dumps(VALID))
        rc, _, err = run(["solve", "--input", problem, "--policy", "fifo", "--time-limit", value])
        assert_refused(rc, err, "--time-limit")


@pytest.mark.parametrize("text, needle", [
    ('{"gpu_types": {"v100": 4},\n "gpu_types": {"k80": 4},\n "jobs": []}', "line 1: key gpu_types given twice"),
    ('{"gpu_types": {"v100": 4},\n "tenants": {"a": {"weight": 1},\n  "a": {"weight": 2}},\n "jobs": []}',
     "line 2: key a given twice"),
    ('{"gpu_types": {"v100": 4}, "jobs": [\n {"id": "j1", "tenant": "a", "gpus": 1,\n'
     '  "throughput": {"v100": 1, "v100": 2}}]}', "line 3: key v100 given twice"),
])
def test_a_key_given_twice_is_named_with_its_line(text: str, needle: str) -> None:
    """Python's json keeps the last of two equal keys: the message then named GPU types the user
    did not mean. Refused naming the key and the line where its object starts."""
    _solve_refused(text.encode(), needle)


def test_extra_job_fields_are_still_carried_through() -> None:
    """``snapshot --json`` adds state, class, ... to each job: solve reads them (unknown keys are
    refused only at the top level, in a tenant, and when a job key is a misspelt optional key)."""
    doc = copy.deepcopy(VALID)
    doc["jobs"][0].update({"state": "pending", "class": "resnet", "sources": {"v100": "table"}, "restart_s": 5})
    with scratch() as work, bounded(60):
        (work / "p.json").write_text(json.dumps(doc))
        rc, out, err = run(["solve", "--input", work / "p.json", "--policy", "fifo"])
        assert rc == 0, err
