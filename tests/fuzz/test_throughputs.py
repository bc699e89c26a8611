"""Throughput tables (``--throughputs``, Gavel's JSON) as a hostile user writes them (issue 18).

Each example breaks one key or value of a valid table and runs ``slurm-fair simulate``: exit 2,
one message naming the file and the key, no traceback (a bad key once printed
``<ast.Name object at 0x...>``), the ``--json`` file untouched, nothing left in TMPDIR.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from .bounded import bounded, scratch
from .harness import assert_refused, assert_untouched, run, snapshot_dir

JOB = "('ResNet-50 (batch size 32)', 1)"
VALID = {"v100": {JOB: {"null": 10.0}, "('A3C', 1)": {"null": 2.0}},
         "k80": {JOB: {"null": 2.0}, "('A3C', 1)": {"null": 0.0}}}
TRACE = "tenant,job_id,job_type,gpus,total_steps,arrival_s\na,1,ResNet-50 (batch size 32),1,100,0\n"

BAD_KEYS = ["(foo, 1)", "ResNet", "", "('x', 0)", "('x', -1)", "('x', 1.5)", "('x', '1')", "('', 1)",
            "('x', 10000000)", "('x', 1, 2)", "__import__('os').system('true')", "[('x', 1)]", "(" * 5000,
            "('x', 1" + ")" * 3, "('x', True)", "('x', ١)", "('x',\n1)x"]
BAD_VALUES: list[Any] = [float("nan"), float("inf"), -1, 1e-9, 1e13, "fast", True, None, [], {}, {"nul": 1},
                         {"null": "x"}, {"null": -2}, {"null": float("inf")}, 10**400]


def _simulate_refused(text: str | bytes, *needles: str) -> None:
    with scratch() as work, bounded(60):
        table, trace, out = work / "tp.json", work / "t.csv", work / "r.json"
        table.write_bytes(text if isinstance(text, bytes) else text.encode())
        trace.write_text(TRACE)
        out.write_text("old results\n")
        before = snapshot_dir(work)
        rc, stdout, err = run(["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=2,k80=2",
                               "--throughputs", table, "-q", "--json", out])
        assert_refused(rc, err, "tp.json", *needles)
        assert "ast." not in err and " object at 0x" not in err
        assert_untouched(work, before)


@settings(max_examples=scaled(80), deadline=None)
@given(st.sampled_from(BAD_KEYS), st.sampled_from(["v100", "k80"]))
def test_a_bad_key_says_what_a_key_looks_like(key: str, gpu_type: str) -> None:
    doc = json.loads(json.dumps(VALID))
    doc[gpu_type][key] = {"null": 1.0}
    _simulate_refused(json.dumps(doc), "bad key")


@settings(max_examples=scaled(80), deadline=None)
@given(st.sampled_from(BAD_VALUES), st.sampled_from(["v100", "k80"]))
def test_a_bad_value_names_its_key(value: Any, gpu_type: str) -> None:
    doc = json.loads(json.dumps(VALID))
    doc[gpu_type][JOB] = value
    text = json.dumps(doc, allow_nan=True)
    strict = any(t in text for t in ("NaN", "Infinity")) or "9" * 40 in text or "1" + "0" * 40 in text
    _simulate_refused(text, "malformed JSON" if strict else f"{gpu_type}.{JOB}")


@settings(max_examples=scaled(40), deadline=None)
@given(st.sampled_from([[], "x", 3, None, {}, {"v100": []}, {"v100": "x"}]))
def test_a_bad_document_is_refused(doc: Any) -> None:
    _simulate_refused(json.dumps(doc))


@settings(max_examples=scaled(40), deadline=None)
@given(st.binary(min_size=1, max_size=64))
def test_any_bytes_are_a_table_or_refused(data: bytes) -> None:
    with scratch() as work, bounded(60):
        table, trace = work / "tp.json", work / "t.csv"
        table.write_bytes(data)
        trace.write_text(TRACE)
        rc, _, err = run(["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=2",
                          "--throughputs", table, "-q"])
        assert_refused(rc, err, "tp.json")


def test_strict_json_and_encodings() -> None:
    _simulate_refused('{"v100": {"' + JOB.replace('"', '\\"') + '": {"null": Infinity}}}', "Infinity")
    _simulate_refused("[" * 100_000, "nested deeper")
    _simulate_refused('{"v\u00e9100": {}}'.encode("latin-1"), "not UTF-8", "byte 0xe9")
    _simulate_refused(b'{"v100": {}}\x00', "NUL byte")
