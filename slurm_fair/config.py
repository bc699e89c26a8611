"""Configuration: ``/etc/slurm-fair/slurm-fair.toml`` (``conf/slurm-fair.toml`` is the annotated
default), read with ``tomllib`` and validated completely.

Validation collects *every* problem of the file (unknown keys with a "did you mean" suggestion,
wrong types, out-of-range values) and raises one :class:`ConfigError`, so an admin fixes the file
in one go (Kueue's ``validation.go``, pip-tools' ``_validate_config``).

The schema below is the single place that knows the keys: adding a setting means adding one
:class:`Key` line; defaults, types and documentation come from it. Each value's check (finite
numbers in range, names matched whole, absolute paths, a registered policy) is one of
:mod:`slurm_fair.config_checks`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import config_checks as C, names
from .errors import ConfigError, Finding, InputError
from .inputs import fullmatch, quoted, read_text

#: environment variable naming the config file (beats the search path)
CONFIG_ENV = "SLURM_FAIR_CONFIG"


@dataclass(frozen=True)
class Key:
    """One setting: its type(s), default, an optional check returning an error text, and help."""

    types: tuple[type, ...]
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None


NUM = (int, float)

#: bounds of the numbers (why these: a day is the longest a cycle, a solve or a Slurm command
#: may sensibly take; a cycle more often than every second would hammer slurmctld)
DAY = 86400.0
_SECONDS = C.number(0, DAY, lo_open=True)

#: section -> key -> Key. ``tenants`` is special: a table of tenant names (see _TENANT_KEYS).
SCHEMA: dict[str, dict[str, Key]] = {
    "cluster": {
        "name": Key((str,), "", "Slurm cluster name (empty: whatever slurm.conf says)",
                    C.named(names.CLUSTER, "a Slurm cluster name (lowercase letters, digits, _ -; at most 40)", empty_ok=True)),
    },
    "controller": {
        "policy": Key((str,), "oef", "allocation policy run each cycle", C.policy),
        "solver": Key((str,), "auto", "LP solver: auto (highs when highspy is installed, else cbc), cbc or highs",
                      C.solver),
        "time_limit_s": Key(NUM, 30.0, "solver time limit per cycle", _SECONDS),
        "interval_s": Key(NUM, 60.0, "seconds between cycles with run --loop (at least 1)", C.number(1, DAY)),
        "round_s": Key(NUM, 360.0, "round length for time-sharing (Gavel: 360 s; a replay scales it below 1 s)",
                       C.number(0, 7 * DAY, lo_open=True)),
        "state_dir": Key((str,), "/var/lib/slurm-fair", "state store, plan file, lock (an absolute path)",
                         C.state_dir),
        "audit_log": Key((str,), "/var/log/slurm-fair/audit.jsonl", "JSONL audit log (an absolute path)",
                         C.path("file")),
        "slack": Key(NUM, 0.0, "work-conserving slack added to QOS limits (fraction)", C.number(0, 1)),
        "order": Key((str,), "nice", "how job order is enforced", C.one_of("nice", "priority")),
        "accounts": Key((list,), [], "only these Slurm accounts take part (empty: every account)",
                        C.list_of(names.SLURM_NAME, "Slurm account name")),
        "manage_accounts": Key((list,), [], "the pilot's accounts: only their jobs are planned and touched, "
                               "by cycles and job_submit.lua (empty: every account)",
                               C.list_of(names.SLURM_NAME, "Slurm account name")),
        "manage_partitions": Key((list,), [], "the pilot's partitions: only jobs submitted to these are managed, "
                                 "only these are steering targets, only their nodes' GPUs are planned (empty: all)",
                                 C.list_of(names.SLURM_NAME, "Slurm partition name")),
        "mode": Key((str,), "live", "live: apply the plan; shadow: decide and record every cycle, change nothing "
                    "in Slurm (report --shadow compares)", C.one_of("live", "shadow")),
        "fail_open_after_s": Key(NUM, 600.0, "after this long without a completed cycle, `slurm-fair failsafe` "
                                 "lifts everything the controller set that could keep a GPU idle", C.number(60, 7 * DAY)),
        "keep_days": Key(NUM, 30.0, "the state store keeps per-cycle records (decisions, plans, service log) this "
                         "long", C.number(0, 3650, lo_open=True)),
        "site_job_submit": Key((str,), "", "the site's own job_submit.lua, called first by the rendered one "
                               "(an absolute path; empty: none)", C.path("file", empty_ok=True)),
        "policy_options": Key((list,), [], "policy parameters, POLICY.KEY=VALUE (e.g. \"hops.lambda=2\"; "
                              "`slurm-fair policies --json` lists them)", C.policy_options),
        "total_limit": Key((bool,), True, "also limit each tenant's untyped gres/gpu total (binds untyped jobs)"),
        "pin_gres_type": Key(
            (bool, str), "auto", "type each pending job's GPU request so per-type QOS limits bind: "
            "auto (where Slurm can undo it, >= 23.11; partitions steer on 22.05), true, or false",
            C.pin_gres_type),
        "min_run_s": Key(NUM, 0.0, "time-sharing hysteresis: a job is requeued only after running this long (0: one round)",
                         C.number(0, 30 * DAY)),
        "requeue_cost_s": Key(NUM, 150.0, "what a requeue costs a job (Slurm's hold, cred_expire + 1 s, plus a restart); "
                              "a job moves to a faster idle type only when the expected gain beats it", C.number(0, DAY)),
        "move_up_gain": Key(NUM, 0.25, "a job moves up only to a type at least this much faster (0.25: 25 %)",
                            C.number(0, 1000)),
        "plan_file": Key((str,), "", "the plan file job_submit.lua reads (empty: state_dir/plan.json)",
                         C.path("file", empty_ok=True)),
    },
    "throughput": {
        "class_table": Key((str,), "", "CSV of class x GPU type throughputs (empty: embedded)",
                           C.class_table),
        "default_class": Key((str,), "", "class of jobs without a tag or rule (empty: flat)",
                             C.named(names.CLASS, "a workload class name", empty_ok=True)),
        "ewma_alpha": Key(NUM, 0.3, "weight of a new fair:tput observation", C.number(0, 1)),
        "account_classes": Key((dict,), {}, "site rule: account -> workload class",
                               C.table_of(names.SLURM_NAME, "account", names.CLASS, "class")),
        "name_classes": Key((dict,), {}, "site rule: job-name glob -> workload class (first match)",
                            C.table_of(names.GLOB, "job-name glob", names.CLASS, "class")),
        "learn_refresh_h": Key(NUM, 24.0, "hours between refreshes of the learned speed table (0: never)",
                               C.number(0, 100000)),
        "learn_days": Key(NUM, 90.0, "days of accounting history the learned speed table is learned from",
                          C.number(0, 36500, lo_open=True)),
    },
    "slurm": {
        "backend": Key((str,), "cli", "cli: Slurm's own commands (the only backend)", C.backend),
        "bin_dir": Key((str,), "", "directory of the Slurm commands (empty: PATH)", C.path("dir", empty_ok=True)),
        "command_timeout_s": Key(NUM, 30.0, "timeout of one Slurm command", _SECONDS),
        "retries": Key((int,), 2, "bounded retries of a failed transient command", C.number(0, 100, integer=True)),
        "parallel_calls": Key((int,), 8, "sacctmgr calls in flight at once when many tenants' QOS change",
                              C.number(1, 256, integer=True)),
    },
    "report": {
        "window_days": Key(NUM, 7.0, "default report window", C.number(0, 36500, lo_open=True)),
    },
}

_TENANT_KEYS: dict[str, Key] = {
    # no default: a table that sets only ``classes`` leaves the weight to Slurm's shares
    "weight": Key(NUM, None, "tenant weight w_u (overrides Slurm shares; unset: the shares, else 1)",
                  C.number(0, 1e6, lo_open=True)),
    "classes": Key((list,), [], "workload classes assumed for this tenant's jobs",
                   C.list_of(names.CLASS, "workload class name")),
}


@dataclass(frozen=True)
class Config:
    """Validated configuration: ``values[section][key]`` with defaults filled in."""

    values: Mapping[str, Mapping[str, Any]]
    tenants: Mapping[str, Mapping[str, Any]]
    source: str = "<defaults>"

    def get(self, section: str, key: str) -> Any:
        return self.values[section][key]

    def __getitem__(self, section: str) -> Mapping[str, Any]:
        return self.values[section]


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False  # TOML true is not a number
    return isinstance(value, types)


def _type_name(types: tuple[type, ...]) -> str:
    """``a number``, ``an integer``, ``a boolean or string``: what a key takes, in words."""
    names = {int: "integer", float: "number", str: "string", list: "list", bool: "boolean", dict: "table"}
    words = " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types if not (t is int and float in types)))
    return ("an " if words[0] in "aeiou" else "a ") + words


def key_name(name: str) -> str:
    """A key as a message shows it: itself when plain, else quoted with escapes, so a key with a
    newline (``[tenants."physics\\n"]``) cannot split the one-line message."""
    return name if fullmatch(_PLAIN_KEY, name) else json.dumps(name)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def _check_table(
    table: Mapping[str, Any], keys: dict[str, Key], prefix: str, problems: list[Finding]
) -> dict[str, Any]:
    out = {name: k.default for name, k in keys.items()}
    for name, value in table.items():
        where = f"{prefix}.{key_name(name)}"
        if name not in keys:
            problems.append(Finding(where, "unknown key" + _suggest(name, list(keys))))
            continue
        spec = keys[name]
        if not _type_ok(value, spec.types):
            problems.append(Finding(where, f"must be {_type_name(spec.types)}, got {quoted(value)}"))
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
        values[section] = _check_table(raw, keys, section, problems)
    known = list(schema) + list(other_sections)
    for section in data:
        if section not in known:
            problems.append(Finding(key_name(section), "unknown section" + _suggest(section, known)))
    return values


def validate(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Validate a parsed TOML document; raise one ConfigError listing every problem."""
    problems: list[Finding] = []
    values = check_sections(data, SCHEMA, problems, ("tenants",))
    tenants: dict[str, dict[str, Any]] = {}
    raw_tenants = data.get("tenants", {})
    if not isinstance(raw_tenants, dict):
        problems.append(Finding("tenants", "must be a table of tenants ([tenants.NAME])"))
        raw_tenants = {}
    for name, table in raw_tenants.items():
        where = f"tenants.{key_name(name)}"
        if not fullmatch(names.SLURM_NAME, name):
            problems.append(Finding(where, "a tenant is a Slurm account: letters, digits, _ . + - (at most 64)"))
            continue
        if not isinstance(table, dict):
            problems.append(Finding(where, "must be a table ([tenants.NAME])"))
            continue
        tenants[name] = _check_table(table, _TENANT_KEYS, where, problems)
    problems += [Finding(key, why) for key, why in C.output_clashes(values, source)]
    problems += [Finding(key, why) for key, why in C.unused_policy_options(values)]
    if problems:
        raise ConfigError(source, problems)
    return Config(values=values, tenants=tenants, source=source)


#: the installed configuration, the only place looked at without being told
SYSTEM_PATH = Path("/etc/slurm-fair/slurm-fair.toml")


def default_path() -> Path | None:
    """Where the configuration is found without ``--config``: ``$SLURM_FAIR_CONFIG``, then
    ``/etc/slurm-fair/slurm-fair.toml``. Never ``./conf``: a ``revert`` run from a checkout must
    act on the installed configuration, not pick the development one because of the directory
    it was started in (``--config conf/slurm-fair.toml`` asks for that one)."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    return SYSTEM_PATH if SYSTEM_PATH.is_file() else None


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


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate a configuration file (defaults only when there is none)."""
    if path is not None and str(path) == "":
        raise ConfigError("--config ''", ["an empty path names no file"])
    p = Path(path) if path is not None else default_path()
    if p is None:
        return validate({}, "<defaults>")
    return validate(read_toml(p), str(p))
