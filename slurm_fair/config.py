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

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from . import config_checks as C, names
from .errors import ConfigError, Finding
from .inputs import fullmatch
# the validator is shared with the inventory and the testbed description; these names stay
# importable from here (tests and older callers use config.Key, config.read_toml, ...)
from .toml_schema import (Key, check_named_tables, check_sections, check_table, expand_hostlist,  # noqa: F401
                          key_name, read_toml, tomllib)

#: environment variable naming the config file (beats the search path)
CONFIG_ENV = "SLURM_FAIR_CONFIG"




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
        "slack": Key(NUM, 0.0, "ignored since 0.2 (slurm-fair sets no QOS limits)", C.number(0, 1)),
        "order": Key((str,), "site_factor", "how the plan's order reaches Slurm: site_factor (pilot jobs the "
                     "round does not place are pushed just behind those it does; nobody is pushed ahead) or none",
                     C.one_of("site_factor", "none")),
        "accounts": Key((list,), [], "old name of manage_accounts (used when manage_accounts is empty)",
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
        "keep_days": Key(NUM, 7.0, "the state store keeps per-cycle records (decisions, plans, service log) this "
                         "long", C.number(0, 3650, lo_open=True)),
        "site_job_submit": Key((str,), "", "the site's own job_submit.lua, called first by the rendered one "
                               "(an absolute path; empty: none)", C.path("file", empty_ok=True)),
        "policy_options": Key((list,), [], "policy parameters, POLICY.KEY=VALUE (e.g. \"hops.lambda=2\"; "
                              "`slurm-fair policies --json` lists them)", C.policy_options),
        "total_limit": Key((bool,), True, "ignored since 0.2 (slurm-fair sets no QOS limits)"),
        "pin_gres_type": Key(
            (bool, str), "auto", "send a pending job to its GPU type by typing its GPU request rather than moving it to a "
            "partition: auto (where Slurm can undo it, >= 23.11; partitions steer on 22.05), true, or false",
            C.pin_gres_type),
        "min_run_s": Key(NUM, 0.0, "time-sharing hysteresis: a job is requeued only after running this long (0: a "
                         "round, or 3x requeue_cost_s when longer, so a restart costs at most a quarter of a turn)",
                         C.number(0, 30 * DAY)),
        "requeue_cost_s": Key(NUM, 150.0, "what a requeue costs a job (Slurm's hold, cred_expire + 1 s, plus a restart); "
                              "a job moves to a faster idle type only when the expected gain beats it", C.number(0, DAY)),
        "move_up_gain": Key(NUM, 0.25, "a job moves up only to a type at least this much faster (0.25: 25 %)",
                            C.number(0, 1000)),
        "reserve_after_lr": Key(NUM, 2.0, "a pending gang that waited this many times its time limit (and a round) "
                                "is put first among the jobs competing for its GPU type, so Slurm's backfill keeps "
                                "its nodes (0: off)", C.number(0, 1000)),
        "reserve_after_h": Key(NUM, 4.0, "a pending gang that waited this many hours (and a round) is put first too, "
                               "whatever its time limit: its turn within hours when limits are days (0: the "
                               "time limit alone)", C.number(0, 8760)),
        "displace": Key((bool,), True, "a waiting job of a tenant below its equal share may have opted-in jobs of "
                        "tenants above theirs requeued before min_run, at any cycle, and a round's rotation takes a job "
                        "for another tenant's only from a tenant above its share (docs/controller.md)"),
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
        "failures_check_s": Key(NUM, 60.0, "seconds between reads of the jobs that failed since the last one (one that "
                                "ran out of memory or failed at its start on a type not yet marked for its group "
                                "relearns the table at once; 0: only at the refresh)", C.number(0, 100000)),
    },
    "slurm": {
        "backend": Key((str,), "cli", "how Slurm is read and written: cli (Slurm's own commands), pyslurm (Slurm's C "
                       "library through pyslurm built for this Slurm; docs/slurm-adapter.md) or auto (pyslurm when it "
                       "imports and matches the running Slurm's major.minor, else cli)", C.backend),
        "bin_dir": Key((str,), "", "directory of the Slurm commands (empty: PATH)", C.path("dir", empty_ok=True)),
        "command_timeout_s": Key(NUM, 30.0, "timeout of one Slurm command", _SECONDS),
        "retries": Key((int,), 2, "bounded retries of a failed transient command", C.number(0, 100, integer=True)),
        "accounts_ttl_s": Key(NUM, 300.0, "seconds a port keeps the accounts and QOS (sacctmgr) across its snapshots: "
                              "the bound on a site's change no job reveals; a job naming an account or QOS not "
                              "kept, or the controller's own QOS writes, read them again at once; 0: every "
                              "snapshot (docs/slurm-adapter.md)", C.number(0, DAY)),
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


#: keys whose check loads the policy stack (every policy module, PuLP): skipped by ``revert`` and
#: ``failsafe``, which run no policy and must work when that stack does not (``policies=False``)
POLICY_KEYS = {"controller": ("policy", "policy_options", "solver")}


def _without_policy_checks() -> dict[str, dict[str, Key]]:
    return {section: {name: (Key(k.types, k.default, k.help) if name in POLICY_KEYS.get(section, ()) else k)
                      for name, k in keys.items()} for section, keys in SCHEMA.items()}


def validate(data: Mapping[str, Any], source: str = "<config>", *, policies: bool = True) -> Config:
    """Validate a parsed TOML document; raise one ConfigError listing every problem.
    ``policies`` False: the keys of :data:`POLICY_KEYS` are checked for their type only."""
    problems: list[Finding] = []
    values = check_sections(data, SCHEMA if policies else _without_policy_checks(), problems, ("tenants",))
    tenants = check_named_tables(
        data, "tenants", _TENANT_KEYS, problems,
        lambda name: None if fullmatch(names.SLURM_NAME, name)
        else "a tenant is a Slurm account: letters, digits, _ . + - (at most 64)")
    problems += [Finding(key, why) for key, why in C.output_clashes(values, source)]
    if policies:
        problems += [Finding(key, why) for key, why in C.unused_policy_options(values)]
    problems += [Finding(key, why) for key, why in C.failsafe_after_interval(values)]
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


def load(path: str | os.PathLike[str] | None = None, *, policies: bool = True) -> Config:
    """Load and validate a configuration file (defaults only when there is none); ``policies``:
    as :func:`validate`."""
    if path is not None and str(path) == "":
        raise ConfigError("--config ''", ["an empty path names no file"])
    p = Path(path) if path is not None else default_path()
    if p is None:
        return validate({}, "<defaults>", policies=policies)
    return validate(read_toml(p), str(p), policies=policies)
