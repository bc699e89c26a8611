"""The rules every user input obeys, in one place: files, JSON, numbers, names.

A user mistake must end as one message naming the file, key, line or job (exit code 2), never
a traceback, a hang, or a value that passes here and breaks a solver or a loop later. So the
checks that every reader needs live here and every reader calls them:

* :func:`read_text` reads a *regular* file as UTF-8 (a BOM is dropped; a directory, a device, a
  binary or Latin-1 file is refused with the file's name and the offending byte);
* :func:`parse_json` is strict JSON: ``NaN``/``Infinity`` (which Python's ``json`` accepts),
  integers longer than :data:`MAX_INT_DIGITS` digits and nesting deeper than :data:`MAX_DEPTH`
  are refused before any float conversion overflows or the parser recurses out of stack, and so
  is a key given twice in one object (Python keeps the last silently, so a message about the
  document would name values the user did not mean);
* :func:`number_problem` is the one numeric check (finite, in range, integral when asked), and
  :class:`FiniteFloat` its ``click`` parameter type: ``click.FloatRange`` lets ``nan`` through
  (every comparison with NaN is false), which made ``--round-s nan`` loop forever;
  :class:`Integer` is the integer option type: ``click.INT`` calls ``int()``, which reads
  Arabic-Indic digits and underscores (``--metrics-port ٨٠`` was port 80);
* :func:`fullmatch` is the one way to test a name against a pattern: ``re.match`` with ``^...$``
  accepts a trailing newline (``$`` matches before a final ``\\n``), which let a newline in a
  name start a new line in a rendered Slurm file;
* :func:`jsonable` makes a document safe to print as JSON: a non-finite float becomes ``null``
  (``json.dumps`` would print ``NaN``, which no strict reader accepts).
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import click

from .errors import Finding, InputError

#: longest integer literal accepted in JSON input: far above any GPU count, job size or time in
#: seconds, far below what overflows a float (309 digits) or trips Python's 4300-digit limit
MAX_INT_DIGITS = 30

#: deepest nesting accepted in JSON input (PROBLEM.json needs 4; a throughput table 3)
MAX_DEPTH = 64

#: largest file read as input (a 100,000-job trace is about 10 MB)
MAX_BYTES = 256 * 1024 * 1024


def read_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The text of the regular file ``path``, decoded as UTF-8 (a leading BOM dropped).

    Raises :class:`InputError` naming the file for a missing file, a directory, a device or
    FIFO (reading ``/dev/zero`` would never end), a file over :data:`MAX_BYTES`, a NUL byte
    (a binary file) or bytes that are not UTF-8 (the offset and byte are named)."""
    source = str(path)
    label = f"{what} " if what else ""

    def refuse(reason: str) -> InputError:
        return InputError(source, [Finding("", f"cannot read {label}file: {reason}")])

    try:
        st = os.stat(path)
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise refuse("it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise refuse("not a regular file")
    if st.st_size > MAX_BYTES:
        raise refuse(f"{st.st_size} bytes, more than the {MAX_BYTES} accepted")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    return decode(data, source, what)


def decode(data: bytes, source: str, what: str = "") -> str:
    """``data`` as UTF-8 text (a BOM dropped), or :class:`InputError` naming ``source``."""
    label = f"{what} " if what else ""
    nul = data.find(b"\0")
    if nul >= 0:
        raise InputError(source, [Finding("", f"not a text {label}file (a NUL byte at offset {nul}: binary?)")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1]
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(source, [Finding(f"line {line}", f"not UTF-8 text (byte 0x{bad.hex()} at offset {exc.start}); "
                                          "save the file as UTF-8")]) from None


class _Refused(ValueError):
    """Raised inside the JSON parser's hooks; turned into a finding by :func:`parse_json`."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS} accepted)")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def _parse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number (only finite numbers are accepted)")


#: a JSON string, an unterminated one running to the end of the text (the unrolled-loop form,
#: which the regex engine runs without backtracking)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth(text: str) -> int:
    """The deepest bracket nesting of ``text``, brackets inside strings not counted (strings and
    everything but brackets are cut out by regular expressions first: a character loop over a
    PROBLEM.json of 10,000 jobs took longer than parsing it)."""
    depth = deepest = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        else:
            depth -= 1
    return deepest


class _DuplicateKey(ValueError):
    """A key given twice in one JSON object; ``line`` is the line where that object starts
    (set by the slow second pass of :func:`_duplicate_line`)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key
        self.line: int | None = None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: the object, or :class:`_DuplicateKey` for a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _decoder() -> json.JSONDecoder:
    return json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant,
                            object_pairs_hook=_unique_pairs)


def _duplicate_line(text: str) -> int | None:
    """The line where the object holding a duplicate key starts. The C scanner does not tell
    where an object is, so only a document known to hold a duplicate is parsed again by the
    pure-Python scanner, whose object parser is wrapped to note the position."""
    decoder = _decoder()

    def parse_object(s_and_end: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        try:
            return json.decoder.JSONObject(s_and_end, *args, **kwargs)  # type: ignore[attr-defined]
        except _DuplicateKey as exc:
            if exc.line is None:
                doc, end = s_and_end
                exc.line = doc.count("\n", 0, end) + 1
            raise

    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except _DuplicateKey as exc:
        return exc.line
    except (ValueError, RecursionError):
        return None
    return None


def parse_json(text: str, source: str) -> Any:
    """Strict JSON: the document, or :class:`InputError` naming ``source`` and the line."""
    if _depth(text) > MAX_DEPTH:
        raise InputError(source, [Finding("", f"malformed JSON: nested deeper than {MAX_DEPTH} levels")])
    try:
        return _decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, [Finding(f"line {exc.lineno} column {exc.colno}", f"malformed JSON: {exc.msg}")]) from None
    except _DuplicateKey as exc:
        line = _duplicate_line(text)
        where, which = (f"line {line}", "the object starting on this line") if line else ("", "one object")
        raise InputError(source, [Finding(where, f"key {shown(exc.key)} given twice in {which} "
                                                 "(JSON keeps only one: remove or rename the other)")]) from None
    except _Refused as exc:
        raise InputError(source, [Finding("", f"malformed JSON: {exc}")]) from None
    except RecursionError:
        raise InputError(source, [Finding("", "malformed JSON: nested too deeply")]) from None


def load_json(path: str | os.PathLike[str], what: str = "") -> Any:
    """:func:`parse_json` of :func:`read_text` of ``path``."""
    return parse_json(read_text(path, what), str(path))


def jsonable(doc: Any) -> Any:
    """``doc`` with every non-finite float replaced by ``None``, so it prints as strict JSON."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: jsonable(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [jsonable(v) for v in doc]
    return doc


def is_number(value: Any) -> bool:
    """A real number (``bool`` is not one, though Python says it is an ``int``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number_problem(value: Any, *, lo: float | None = None, hi: float | None = None,
                   lo_open: bool = False, hi_open: bool = False, integer: bool = False) -> str | None:
    """Why ``value`` is not an acceptable number, or None: a finite real number (an integer
    when ``integer``), within ``[lo, hi]`` (bounds open when asked). The one numeric check of
    every input: files, configuration and options."""
    if not is_number(value):
        return f"must be {'an integer' if integer else 'a number'}, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if integer and value != int(value):
        return f"must be an integer, got {value!r}"
    if lo is not None and (value < lo or (lo_open and value == lo)):
        return f"must be {'>' if lo_open else '>='} {lo:g}, got {value!r}"
    if hi is not None and (value > hi or (hi_open and value == hi)):
        return f"must be {'<' if hi_open else '<='} {hi:g}, got {value!r}"
    return None


class FiniteFloat(click.ParamType):
    """A ``click`` float option that is finite and within bounds (``nan``/``inf`` refused).

    Use instead of ``float`` and ``click.FloatRange`` for every float option."""

    name = "float"

    def __init__(self, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False, hi_open: bool = False):
        self.lo, self.hi, self.lo_open, self.hi_open = lo, hi, lo_open, hi_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if is_number(value):
            number: float = float(value)
        else:
            parsed = parse_number(str(value))
            if parsed is None:  # nan, inf, 1e400 and "1_0" or Arabic-Indic digits alike
                try:
                    kind = "a finite number" if not math.isfinite(float(str(value))) else "a number"
                except ValueError:
                    kind = "a number"
                self.fail(f"{str(value)[:40]!r} is not {kind}", param, ctx)
            number = parsed
        problem = number_problem(number, lo=self.lo, hi=self.hi, lo_open=self.lo_open, hi_open=self.hi_open)
        if problem:
            self.fail(problem, param, ctx)
        return number

    def __repr__(self) -> str:
        return f"FiniteFloat({self.lo}, {self.hi})"


#: an integer as people write it in an option: ASCII digits and an optional sign, nothing else
_INTEGER = re.compile(r"[+-]?[0-9]{1,30}")


class Integer(click.ParamType):
    """A ``click`` integer option of ASCII digits (optional sign) within ``[lo, hi]``.

    Use instead of ``int``, ``click.INT`` and ``click.IntRange`` for every integer option:
    they call ``int()``, which also reads ``1_0`` and any Unicode digit (``٣``, ``２``)."""

    name = "integer"

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if not fullmatch(_INTEGER, text):
                self.fail(f"{str(value)[:40]!r} is not an integer (ASCII digits 0-9)", param, ctx)
            number = int(text)
        problem = number_problem(number, lo=self.lo, hi=self.hi, integer=True)
        if problem:
            self.fail(problem, param, ctx)
        return number

    def __repr__(self) -> str:
        return f"Integer({self.lo}, {self.hi})"


def fullmatch(pattern: re.Pattern[str], value: Any) -> bool:
    """``value`` is a string and *all* of it matches ``pattern`` (no trailing newline slips
    through, as it does with ``^...$`` and ``re.match``)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


#: a number as people write it in a file or an option: ASCII digits, optional sign, point and
#: exponent (``float`` also takes ``nan``, ``inf``, ``1_000`` and Arabic-Indic digits)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_number(text: str) -> float | None:
    """The finite number ``text`` spells (surrounding spaces ignored), or None: the one reader of
    numbers written as text (trace cells, ``--window``, ``NAME=VALUE`` option items)."""
    text = text.strip()
    if not fullmatch(_NUMBER, text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def quoted(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a message stays one short line (repr escapes
    newlines; a 1 MB string is not echoed back)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def shown(key: Any, limit: int = 60) -> str:
    """A user's key or name as a message shows it: as written when it is short printable text,
    else :func:`quoted` (a newline in a JSON key must not break a one-line message, a
    5,000-character key must not fill the screen)."""
    text = str(key)
    if isinstance(key, str) and text.isprintable() and len(text) <= limit:
        return text
    return quoted(text, limit)
