"""The one validator of TOML descriptions: the configuration (:mod:`slurm_fair.config`), the
cluster inventory (:mod:`slurm_fair.deploy.inventory`) and the testbed description
(:mod:`slurm_fair.testbed.config`) each declare a schema of :class:`Key` lines and hand it here.

Every problem of a file is collected (unknown keys and sections with a "did you mean"
suggestion, wrong types, a value's own check, a bad ``[section.NAME]``), so an admin fixes the
file in one go; the caller raises one :class:`ConfigError` naming the file.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import ConfigError, Finding, InputError
from .inputs import fullmatch, quoted, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (Ubuntu 22.04): tomli is the parser that became tomllib
    import tomli as tomllib


@dataclass(frozen=True)
class Key:
    """One setting: its type(s), default, an optional check returning an error text, and help."""

    types: tuple[type, ...]
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a TOML file; a missing, unreadable, non-regular, non-UTF-8 or malformed file is a
    ConfigError naming it (and the line, for TOML's own errors)."""
    if not os.path.lexists(path):
        raise ConfigError(str(path), ["file not found"])
    try:
        text = read_text(path, "configuration")
    except InputError as exc:
        raise ConfigError(exc.source, exc.problems) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        at = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
        where = f"line {at.group(1)} column {at.group(2)}" if at else ""
        raise ConfigError(str(path), [Finding(where, f"not valid TOML: {msg[:at.start()] if at else msg}")]) from None
    except RecursionError:
        raise ConfigError(str(path), [Finding("", "not valid TOML: nested too deeply")]) from None
    except ValueError as exc:  # an integer beyond Python's 4300-digit limit
        raise ConfigError(str(path), [Finding("", f"not valid TOML: {str(exc)[:80]}")]) from None


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False  # TOML true is not a number
    return isinstance(value, types)


def type_name(types: tuple[type, ...]) -> str:
    """``a number``, ``an integer``, ``a boolean or string``: what a key takes, in words."""
    names = {int: "integer", float: "number", str: "string", list: "list", bool: "boolean", dict: "table"}
    words = " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types if not (t is int and float in types)))
    return ("an " if words[0] in "aeiou" else "a ") + words


def key_name(name: str) -> str:
    """A key as a message shows it: itself when plain, else quoted with escapes, so a key with a
    newline (``[tenants."physics\\n"]``) cannot split the one-line message."""
    return name if fullmatch(_PLAIN_KEY, name) else json.dumps(name)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def check_table(
    table: Mapping[str, Any], keys: dict[str, Key], prefix: str, problems: list[Finding]
) -> dict[str, Any]:
    out = {name: k.default for name, k in keys.items()}
    for name, value in table.items():
        where = f"{prefix}.{key_name(name)}"
        if name not in keys:
            problems.append(Finding(where, "unknown key" + suggest(name, list(keys))))
            continue
        spec = keys[name]
        if not type_ok(value, spec.types):
            problems.append(Finding(where, f"must be {type_name(spec.types)}, got {quoted(value)}"))
            continue
        if spec.check and (msg := spec.check(value)):
            # the checks of config_checks name the value themselves; older ones do not
            problems.append(Finding(where, msg if ", got " in msg else f"{msg}, got {quoted(value)}"))
            continue
        out[name] = value
    return out


def expand_hostlist(hostlist: str, where: str, problems: list[Finding]) -> list[str] | None:
    """Node names of a Slurm hostlist (``gpu-[1-4]``) via ClusterShell; None and a Finding
    at ``where`` when it is not a hostlist."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    if not isinstance(hostlist, str) or not re.fullmatch(r"[A-Za-z0-9._\[\],-]+", hostlist):
        # ClusterShell would read '@' as a node group, '?'/'*' as globs, '!&^' as set operators:
        # '@x' or '?' would name no node at all, silently
        problems.append(Finding(where, f"not a hostlist (node names, [ranges], commas), got {hostlist!r}"))
        return None
    if hostlist_bound(hostlist) > MAX_HOSTS:
        problems.append(Finding(where, f"names more than {MAX_HOSTS} nodes"))
        return None
    try:
        names = list(NodeSet(hostlist))
    except (NodeSetException, AssertionError, ValueError) as exc:  # AssertionError: "range too large"
        problems.append(Finding(where, f"not a valid hostlist: {exc}"))
        return None
    if not names:
        problems.append(Finding(where, f"names no node, got {hostlist!r}"))
        return None
    return names


#: most nodes one hostlist of a description file may name (ClusterShell expands a hostlist into
#: memory: ``n[1-100000000]`` would take minutes and gigabytes before any check could run)
MAX_HOSTS = 100_000


def hostlist_bound(hostlist: str) -> int:
    """An upper bound of how many names ``hostlist`` expands to, from its text alone (the
    product of its bracket ranges per comma-separated pattern), checked before ClusterShell
    expands it."""
    import re

    total = 0
    for part in re.split(r",(?![^\[]*\])", hostlist):
        n = 1
        for group in re.findall(r"\[([^\]]*)\]", part):
            size = 0
            for rng in group.split(","):
                lo, _, hi = rng.partition("-")
                hi = hi.split("/")[0]
                if len(lo) > 12 or len(hi) > 12:
                    return MAX_HOSTS + 1
                if lo.isdigit() and hi.isdigit():
                    size += max(int(hi) - int(lo) + 1, 1)
                else:
                    size += 1
            n *= max(size, 1)
        total += n
    return total

def check_sections(
    data: Mapping[str, Any],
    schema: Mapping[str, dict[str, Key]],
    problems: list[Finding],
    other_sections: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """Check every ``[section]`` of ``schema`` in ``data`` (defaults filled in) and flag sections
    that are neither in ``schema`` nor in ``other_sections`` (checked by the caller)."""
    values: dict[str, dict[str, Any]] = {}
    for section, keys in schema.items():
        raw = data.get(section, {})
        if not isinstance(raw, dict):
            problems.append(Finding(section, "must be a table ([section])"))
            raw = {}
        values[section] = check_table(raw, keys, section, problems)
    known = list(schema) + list(other_sections)
    for section in data:
        if section not in known:
            problems.append(Finding(key_name(section), "unknown section" + suggest(section, known)))
    return values


def check_named_tables(
    data: Mapping[str, Any], section: str, keys: dict[str, Key], problems: list[Finding],
    name_problem: Callable[[str], str | None], *, required: bool = False, default: Any = None,
    keep_misnamed: bool = False,
) -> dict[str, dict[str, Any]]:
    """``[section.NAME]`` tables (tenants, GPU types): each name checked by ``name_problem``
    (an error text or None), each table by :func:`check_table` (a badly named one too, so every
    problem shows at once; only well-named ones are returned unless ``keep_misnamed``, for a
    caller that goes on checking their contents); ``required``: at least one. ``default``
    stands for a missing section (None: an empty one)."""
    raw = data.get(section, default if default is not None else {})
    if not isinstance(raw, dict) or (required and not raw):
        problems.append(Finding(section, f"must be a {'non-empty ' if required else ''}table ([{section}.NAME])"))
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        where = f"{section}.{key_name(name)}"
        bad_name = name_problem(name)
        if bad_name is not None:
            problems.append(Finding(where, bad_name))
        if not isinstance(table, dict):
            problems.append(Finding(where, f"must be a table ([{section}.NAME])"))
            continue
        checked = check_table(table, keys, where, problems)
        if bad_name is None or keep_misnamed:
            out[name] = checked
    return out
