"""Configuration: ``/etc/slurm-fair/slurm-fair.toml`` (``conf/slurm-fair.toml`` is the annotated
default), read with ``tomllib`` and validated completely.

Validation collects *every* problem of the file (unknown keys with a "did you mean" suggestion,
wrong types, out-of-range values) and raises one :class:`ConfigError`, so an admin fixes the file
in one go (Kueue's ``validation.go``, pip-tools' ``_validate_config``).

The schema below is the single place that knows the keys: adding a setting means adding one
:class:`Key` line; defaults, types and documentation come from it.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import ConfigError, Finding

#: environment variable naming the config file (beats the search path)
CONFIG_ENV = "SLURM_FAIR_CONFIG"


@dataclass(frozen=True)
class Key:
    """One setting: its type(s), default, an optional check returning an error text, and help."""

    types: tuple[type, ...]
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(choices)}"

    return check


def _fraction(v: Any) -> str | None:
    return None if 0 <= v <= 1 else "must be between 0 and 1"


def _solver(v: Any) -> str | None:
    from .solver import SOLVER_CHOICES  # the one list (also --solver's); imported late: PuLP is heavy

    return None if v in SOLVER_CHOICES else f"must be one of {', '.join(SOLVER_CHOICES)}"


def _backend(v: Any) -> str | None:
    """Only Slurm's own commands: refused here, at validation, not at the first cycle."""
    if v == "pyslurm":
        return ("pyslurm is not supported: it must match Slurm's major version and pyslurm 25.11 on PyPI "
                "matches no Slurm that Debian ships; use \"cli\" (Slurm's own commands, the only backend)")
    return None if v == "cli" else "must be \"cli\""


def _policy_options(v: Any) -> str | None:
    """``["hops.lambda=2", ...]``: every item a known parameter of a known policy, in range."""
    from .errors import UserError
    from .policies import parse_params  # imported late: the registry loads every policy

    if not all(isinstance(item, str) for item in v):
        return "must be a list of POLICY.KEY=VALUE strings"
    try:
        parse_params(v)
    except UserError as exc:
        return exc.message()
    return None


NUM = (int, float)

#: section -> key -> Key. ``tenants`` is special: a table of tenant names (see _TENANT_KEYS).
SCHEMA: dict[str, dict[str, Key]] = {
    "cluster": {
        "name": Key((str,), "", "Slurm cluster name (empty: whatever slurm.conf says)"),
    },
    "controller": {
        "policy": Key((str,), "oef", "allocation policy run each cycle"),
        "solver": Key((str,), "auto", "LP solver: auto (highs when highspy is installed, else cbc), cbc or highs",
                      _solver),
        "time_limit_s": Key(NUM, 30.0, "solver time limit per cycle", _positive),
        "interval_s": Key(NUM, 60.0, "seconds between cycles with run --loop", _positive),
        "round_s": Key(NUM, 360.0, "round length for time-sharing (Gavel: 360 s)", _positive),
        "state_dir": Key((str,), "/var/lib/slurm-fair", "state store, plan file, lock"),
        "audit_log": Key((str,), "/var/log/slurm-fair/audit.jsonl", "JSONL audit log"),
        "slack": Key(NUM, 0.0, "work-conserving slack added to QOS limits (fraction)", _fraction),
        "order": Key((str,), "nice", "how job order is enforced", _one_of("nice", "priority")),
        "accounts": Key((list,), [], "only these Slurm accounts take part (empty: every account)"),
        "policy_options": Key((list,), [], "policy parameters, POLICY.KEY=VALUE (e.g. \"hops.lambda=2\"; "
                              "`slurm-fair policies --json` lists them)", _policy_options),
        "total_limit": Key((bool,), True, "also limit each tenant's untyped gres/gpu total (binds untyped jobs)"),
        "pin_gres_type": Key(
            (bool, str), "auto", "type each pending job's GPU request so per-type QOS limits bind: "
            "auto (where Slurm can undo it, >= 23.11; partitions steer on 22.05), true, or false",
            lambda v: None if v in (True, False, "auto") else "must be true, false or \"auto\""),
        "min_run_s": Key(NUM, 0.0, "time-sharing hysteresis: a job is requeued only after running this long (0: one round)", _non_negative),
        "requeue_cost_s": Key(NUM, 150.0, "what a requeue costs a job (Slurm's hold, cred_expire + 1 s, plus a restart); "
                              "a job moves to a faster idle type only when the expected gain beats it", _non_negative),
        "move_up_gain": Key(NUM, 0.25, "a job moves up only to a type at least this much faster (0.25: 25 %)", _non_negative),
        "plan_file": Key((str,), "", "the plan file job_submit.lua reads (empty: state_dir/plan.json)"),
    },
    "throughput": {
        "class_table": Key((str,), "", "CSV of class x GPU type throughputs (empty: embedded)"),
        "default_class": Key((str,), "", "class of jobs without a tag or rule (empty: flat)"),
        "ewma_alpha": Key(NUM, 0.3, "weight of a new fair:tput observation", _fraction),
        "account_classes": Key((dict,), {}, "site rule: account -> workload class"),
        "name_classes": Key((dict,), {}, "site rule: job-name glob -> workload class (first match)"),
    },
    "slurm": {
        "backend": Key((str,), "cli", "cli: Slurm's own commands (the only backend)", _backend),
        "bin_dir": Key((str,), "", "directory of the Slurm commands (empty: PATH)"),
        "command_timeout_s": Key(NUM, 30.0, "timeout of one Slurm command", _positive),
        "retries": Key((int,), 2, "bounded retries of a failed transient command", _non_negative),
        "parallel_calls": Key((int,), 8, "sacctmgr calls in flight at once when many tenants' QOS change", _positive),
    },
    "report": {
        "window_days": Key(NUM, 7.0, "default report window", _positive),
    },
}

_TENANT_KEYS: dict[str, Key] = {
    # no default: a table that sets only ``classes`` leaves the weight to Slurm's shares
    "weight": Key(NUM, None, "tenant weight w_u (overrides Slurm shares; unset: the shares, else 1)", _positive),
    "classes": Key((list,), [], "workload classes assumed for this tenant's jobs"),
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
    names = {int: "integer", float: "number", str: "string", list: "list", bool: "boolean"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _check_table(
    table: Mapping[str, Any], keys: dict[str, Key], prefix: str, problems: list[Finding]
) -> dict[str, Any]:
    out = {name: k.default for name, k in keys.items()}
    for name, value in table.items():
        where = f"{prefix}.{name}"
        if name not in keys:
            problems.append(Finding(where, "unknown key" + _suggest(name, list(keys))))
            continue
        spec = keys[name]
        if not _type_ok(value, spec.types):
            problems.append(Finding(where, f"must be a {_type_name(spec.types)}, got {value!r}"))
            continue
        if spec.check and (msg := spec.check(value)):
            problems.append(Finding(where, f"{msg}, got {value!r}"))
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
            problems.append(Finding(section, "unknown section" + _suggest(section, known)))
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
        if not isinstance(table, dict):
            problems.append(Finding(f"tenants.{name}", "must be a table ([tenants.NAME])"))
            continue
        tenants[name] = _check_table(table, _TENANT_KEYS, f"tenants.{name}", problems)
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
    """Parse a TOML file; a missing, unreadable or malformed file is a ConfigError naming it."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(str(p), ["file not found"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), [f"not valid TOML: {exc}"]) from None
    except OSError as exc:
        raise ConfigError(str(p), [f"cannot read: {exc.strerror}"]) from None


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate a configuration file (defaults only when there is none)."""
    p = Path(path) if path is not None else default_path()
    if p is None:
        return validate({}, "<defaults>")
    return validate(read_toml(p), str(p))
