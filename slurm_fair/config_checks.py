"""The checks of configuration values: each returns why a value is refused, or None.

:mod:`slurm_fair.config` calls them when the file is read, so a value that would break a cycle
later (``interval_s = inf`` looping back to back, ``command_timeout_s = inf`` overflowing the
subprocess timeout, ``policy = "nope"`` failing mid-cycle, ``state_dir = ""`` writing into the
current directory, a class name list given as a string) is refused before anything runs, each
problem with its key. Numbers go through :func:`slurm_fair.inputs.number_problem` (the one
numeric check: finite and in range), names through :func:`slurm_fair.inputs.fullmatch` (no
trailing newline slips through).
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Callable, Mapping

from .atomic import system_dir_of
from .inputs import fullmatch, number_problem, quoted

Check = Callable[[Any], "str | None"]

#: directories that are never a state_dir themselves (state.sqlite, plan.json and the lock would
#: be written among the system's own files; ``state_dir = "/"`` is a typo, not a choice)
NOT_A_STATE_DIR = frozenset({
    "/", "/bin", "/boot", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/root", "/run",
    "/sbin", "/srv", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share",
    "/var", "/var/lib", "/var/log", "/var/tmp",
})


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           integer: bool = False) -> Check:
    """A finite number (an integer when ``integer``) in ``[lo, hi]`` (``(lo, hi]`` when
    ``lo_open``)."""
    def check(v: Any) -> str | None:
        return number_problem(v, lo=lo, hi=hi, lo_open=lo_open, integer=integer)

    return check


def one_of(*choices: Any) -> Check:
    def check(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(map(str, choices))}, got {quoted(v)}"

    return check


def named(pattern: re.Pattern[str], what: str, empty_ok: bool = False) -> Check:
    """A string matching ``pattern`` whole (``""`` too when ``empty_ok``)."""
    def check(v: Any) -> str | None:
        if empty_ok and v == "":
            return None
        return None if fullmatch(pattern, v) else f"must be {what}, got {quoted(v)}"

    return check


def list_of(pattern: re.Pattern[str], what: str) -> Check:
    """A list of strings, each matching ``pattern`` whole; every bad item named."""
    def check(v: Any) -> str | None:
        bad = [quoted(x, 30) for x in v if not fullmatch(pattern, x)]
        return f"must be a list of {what}s, got {', '.join(bad[:5])}" if bad else None

    return check


def table_of(keys: re.Pattern[str], key_what: str, values: re.Pattern[str], value_what: str) -> Check:
    """A table ``{key: value}`` of strings, keys and values each matching their pattern."""
    def check(v: Any) -> str | None:
        bad = [f"{quoted(k, 30)} = {quoted(x, 30)}" for k, x in v.items()
               if not (fullmatch(keys, k) and fullmatch(values, x))]
        if bad:
            return f"must be a table of {key_what} = {value_what}, got {', '.join(bad[:5])}"
        return None

    return check


def path(kind: str, empty_ok: bool = False) -> Check:
    """An absolute path outside /proc, /sys and /dev, of a ``"dir"`` or a ``"file"``: when it
    exists it must be one (a state_dir that is a file, an audit log that is a directory are
    refused here, not at the first write)."""
    def check(v: Any) -> str | None:
        if v == "" and empty_ok:
            return None
        if any(ord(c) < 32 or c == "\x7f" for c in v):
            return f"must not contain control characters (a newline?), got {quoted(v)}"
        if not os.path.isabs(v):
            return f"must be an absolute path, got {quoted(v)}"
        if (top := system_dir_of(v)):
            return f"must not be under {top}, got {quoted(v)}"
        try:
            mode = os.stat(v).st_mode
        except OSError:  # made when first needed, under a directory (not under a file)
            parent = os.path.dirname(os.path.normpath(v))
            while parent != "/" and not os.path.lexists(parent):
                parent = os.path.dirname(parent)
            if not os.path.isdir(parent):
                return f"must be under a directory, got {quoted(v)} ({parent} is not one)"
            return None
        if kind == "dir" and not stat.S_ISDIR(mode):
            return f"must be a directory, got {quoted(v)} (it exists and is not one)"
        if kind == "file" and not stat.S_ISREG(mode):
            return f"must be a regular file, got {quoted(v)} (it exists and is not one)"
        return None

    return check


def state_dir(v: Any) -> str | None:
    """A directory path (:func:`path`) that is not ``/`` or a system directory such as /etc."""
    if problem := path("dir")(v):
        return problem
    if {os.path.normpath(v), os.path.realpath(v)} & NOT_A_STATE_DIR:
        return f"must be a directory of its own (e.g. /var/lib/slurm-fair), not a system directory, got {quoted(v)}"
    return None


def class_table(v: Any) -> str | None:
    """A class table CSV that exists and reads as one (checked now, with the configuration's
    other problems, not when a cycle has already read Slurm); ``""`` is the embedded table."""
    if v == "" or (problem := path("file")(v)):
        return problem if v != "" else None
    from .errors import InputError
    from .estimates.classes import load_class_table  # imported late: it loads Gavel's table module

    if not os.path.lexists(v):
        return f"must name an existing class table, got {v!r} (no such file)"
    try:
        load_class_table(v)
    except InputError as exc:
        detail = "; ".join(str(p) for p in exc.problems[:3]) + ("; ..." if len(exc.problems) > 3 else "")
        return f"must be a readable class table, got {v!r}: {detail}"
    return None


def output_clashes(values: Mapping[str, Mapping[str, Any]], source: str) -> list[tuple[str, str]]:
    """``(key, why)`` for each file the controller writes (audit_log, plan_file, the store and
    plan under state_dir) that is the configuration file itself or another of those files: the
    first cycle would overwrite the configuration, or two outputs one another."""
    c = values.get("controller", {})
    state = str(c.get("state_dir", ""))
    outputs = {
        "controller.audit_log": c.get("audit_log", ""),
        "controller.plan_file": c.get("plan_file", "") or (os.path.join(state, "plan.json") if state else ""),
        "controller.state_dir": os.path.join(state, "state.sqlite") if state else "",
    }
    seen: dict[str, str] = {}
    if source and os.path.isfile(source):
        seen[os.path.realpath(source)] = "the configuration file"
    out = []
    for key, target in outputs.items():
        if not target or not os.path.isabs(target):
            continue
        real = os.path.realpath(target)
        if real in seen:
            out.append((key, f"would write {target}, which is {seen[real]}"))
        else:
            seen[real] = key
    return out


def policy(v: Any) -> str | None:
    """A registered policy (checked now, not at the first cycle)."""
    import difflib

    from . import policies  # imported late: the registry loads every policy

    known = policies.names()
    if v in known:
        return None
    close = difflib.get_close_matches(v, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"must be a policy `slurm-fair policies` lists{hint}, got {quoted(v)}"


def solver(v: Any) -> str | None:
    from .solver import SOLVER_CHOICES  # the one list (also --solver's); imported late: PuLP is heavy

    return one_of(*SOLVER_CHOICES)(v)


def backend(v: Any) -> str | None:
    """cli, pyslurm or auto. Whether pyslurm imports and matches this Slurm is a question for
    the running host (:func:`slurm_fair.slurm.make_port`), not for validation: a file written on
    one machine is valid on another."""
    return one_of("cli", "pyslurm", "auto")(v)


def policy_options(v: Any) -> str | None:
    """``["hops.lambda=2", ...]``: every item a known parameter of a known policy, in range."""
    from .errors import UserError
    from .policies import parse_params  # imported late: the registry loads every policy

    if not all(isinstance(item, str) for item in v):
        return f"must be a list of POLICY.KEY=VALUE strings, got {quoted(v)}"
    try:
        parse_params(v)
    except UserError as exc:
        return exc.message()
    return None


def pin_gres_type(v: Any) -> str | None:
    return None if v in (True, False, "auto") else f"must be true, false or \"auto\", got {quoted(v)}"


def unused_policy_options(values: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(key, why)`` when ``[controller] policy_options`` sets a parameter of a policy other
    than ``[controller] policy`` (:func:`slurm_fair.policies.params_not_run`: the controller
    would silently ignore it). Checked only once both keys are valid on their own."""
    from .policies import params_not_run, parse_params  # imported late: the registry loads every policy

    c = values.get("controller", {})
    items, policy_name = c.get("policy_options") or [], c.get("policy", "")
    if policy(policy_name) is not None or policy_options(items) is not None:
        return []
    return [("controller.policy_options", f"{quoted(name)} is a parameter of {name.partition('.')[0]!r}, "
             f"but the controller runs {policy_name!r}")
            for name in params_not_run(parse_params(items), [policy_name])]


def failsafe_after_interval(values: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(key, why)`` when ``[controller] fail_open_after_s`` is not above ``interval_s``: the
    failsafe would give back everything between two healthy cycles (and the loop steer it again),
    every cycle. Checked only once both values are valid on their own."""
    c = values.get("controller", {})
    every, after = c.get("interval_s"), c.get("fail_open_after_s")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (every, after)):
        return []
    if number(1, 86400.0)(every) is not None or number(60, 7 * 86400.0)(after) is not None:
        return []
    assert isinstance(every, (int, float)) and isinstance(after, (int, float))
    if float(after) > float(every):
        return []
    return [("controller.fail_open_after_s", f"{after:g} is not above interval_s ({every:g}): the failsafe "
             "would undo every cycle between two healthy ones; make it a few intervals (default 600)")]

