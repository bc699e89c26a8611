"""The shared input rules (slurm_fair.inputs): strict JSON, text files, numbers, patterns."""

from __future__ import annotations

import json
import math
import re

import click
import pytest
from hypothesis import given, strategies as st

from slurm_fair.errors import InputError
from slurm_fair.inputs import (MAX_DEPTH, _depth, FiniteFloat, Integer, decode, fullmatch, jsonable, load_json,
                               number_problem, parse_json, read_text)


@pytest.mark.parametrize("text, needle", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('[-Infinity]', "-Infinity"),
    ('{"a": ' + "9" * 400 + "}", "400 digits"), ('{"a": 1e400}', "out of range"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"), ('{"a": 1,}', "line 1"),
])
def test_parse_json_refuses_what_python_accepts(text: str, needle: str) -> None:
    with pytest.raises(InputError) as err:
        parse_json(text, "p.json")
    assert needle in err.value.message() and err.value.message().startswith("p.json: ")


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert parse_json(json.dumps({"k": "[" * (MAX_DEPTH * 2)}), "x") == {"k": "[" * (MAX_DEPTH * 2)}


def _depth_by_characters(text: str) -> int:
    """The nesting depth walked character by character (the rule stated independently)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@given(st.text(alphabet='[]{}"\\ab,:', max_size=60) | st.builds(json.dumps, st.recursive(
    st.text(alphabet='[]{}"\\a'), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='[]{"\\'), c, max_size=3),
    max_leaves=12)))
def test_depth_counts_brackets_outside_strings_only(text: str) -> None:
    """Valid JSON or not (an unterminated string, a stray backslash), the regular-expression
    depth is the character walk's."""
    assert _depth(text) == _depth_by_characters(text)


@given(st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4), max_leaves=30))
def test_parse_json_reads_every_finite_document_as_json_does(doc: object) -> None:
    assert parse_json(json.dumps(doc), "x") == json.loads(json.dumps(doc))


def test_read_text_names_the_file_and_the_byte(tmp_path) -> None:
    latin = tmp_path / "t.csv"
    latin.write_bytes("tenant\nphysique é\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"(?s)t.csv: invalid input: line 2.*0xe9"):
        read_text(latin)
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError, match="NUL byte"):
        load_json(binary)
    with pytest.raises(InputError, match="directory"):
        read_text(tmp_path)
    with pytest.raises(InputError, match="not a regular file"):
        read_text("/dev/zero")
    with pytest.raises(InputError, match="No such file"):
        read_text(tmp_path / "missing")
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbftenant,x\n")
    assert read_text(bom) == "tenant,x\n"
    assert decode(b"ok", "s") == "ok"


def test_jsonable_turns_non_finite_floats_into_null() -> None:
    doc = {"a": [math.nan, 1.5, {"b": math.inf}], "c": (-math.inf, "x")}
    assert json.dumps(jsonable(doc), allow_nan=False) == '{"a": [null, 1.5, {"b": null}], "c": [null, "x"]}'


@pytest.mark.parametrize("value, kwargs, ok", [
    (1, {}, True), (True, {}, False), ("1", {}, False), (math.nan, {}, False), (math.inf, {"lo": 0}, False),
    (0, {"lo": 0, "lo_open": True}, False), (0, {"lo": 0}, True), (2.5, {"integer": True}, False),
    (3.0, {"integer": True}, True), (11, {"hi": 10}, False), (10, {"hi": 10, "hi_open": True}, False),
])
def test_number_problem(value, kwargs, ok) -> None:
    assert (number_problem(value, **kwargs) is None) == ok


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "0", "abc", "1e400"])
def test_finite_float_option_refuses_nan_inf_and_bounds(raw: str) -> None:
    with pytest.raises(click.BadParameter):
        FiniteFloat(lo=0, lo_open=True).convert(raw, None, None)
    assert FiniteFloat(lo=0, lo_open=True).convert("0.5", None, None) == 0.5


def test_fullmatch_refuses_a_trailing_newline_that_re_match_accepts() -> None:
    pattern = re.compile(r"^[a-z]+$")
    assert pattern.match("fair\n") and not fullmatch(pattern, "fair\n")
    assert fullmatch(pattern, "fair") and not fullmatch(pattern, 3)


@pytest.mark.parametrize("text", ["٣", "２", "1_0", "1.0", "1e3", "0x10", "", "+", " ", "1 2", "nan", "9" * 31])
def test_integer_reads_ascii_digits_only(text: str) -> None:
    with pytest.raises(click.BadParameter):
        Integer().convert(text, None, None)


@pytest.mark.parametrize("text, lo, hi, value", [("7", None, None, 7), ("-3", -5, 0, -3), ("+4", 1, 4, 4), (" 12 ", 0, 99, 12)])
def test_integer_accepts_plain_integers(text: str, lo: int | None, hi: int | None, value: int) -> None:
    assert Integer(lo, hi).convert(text, None, None) == value


@pytest.mark.parametrize("text, lo, hi", [("0", 1, None), ("65536", 0, 65535), ("-1", 0, 9)])
def test_integer_refuses_out_of_range(text: str, lo: int | None, hi: int | None) -> None:
    with pytest.raises(click.BadParameter):
        Integer(lo, hi).convert(text, None, None)


@pytest.mark.parametrize("text, line", [('{"a": 1, "a": 2}', 1), ('[1,\n {"x": {"b": 1,\n "b": 1}}]', 2),
                                        ('{"a": {"k": 1},\n "b": {"k": 1, "k": 2}}', 2)])
def test_parse_json_refuses_a_key_given_twice_naming_it_and_the_line(text: str, line: int) -> None:
    with pytest.raises(InputError) as err:
        parse_json(text, "f.json")
    assert f"line {line}: key" in err.value.message() and "given twice" in err.value.message()


@given(st.dictionaries(st.text(max_size=5), st.integers(-10**9, 10**9), max_size=6))
def test_parse_json_reads_objects_of_distinct_keys_as_before(doc: dict) -> None:
    assert parse_json(json.dumps(doc), "f.json") == doc
