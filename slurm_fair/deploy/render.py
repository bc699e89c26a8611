"""Render the deployment files of ``slurm-fair render-config`` from ``templates/``.

Two targets:

* ``cluster`` (a real cluster): the slurm.conf fragment, gres.conf (the testbed's own
  ``templates/slurm/gres.conf.j2``), job_submit.lua, the bootstrap script, the hardened
  systemd service and its timer, the cron entry, the logrotate rule, the Prometheus alert
  rules and the Grafana dashboard (built in :mod:`.monitoring`, not templated);
* ``docker`` (the docker-compose test cluster): built from the testbed's context, so it lives
  in :mod:`slurm_fair.testbed.docker` (``testbed`` imports ``deploy``, never the reverse) and
  uses :func:`render_template`, :func:`common_context`, :func:`check_options` and
  :func:`raise_unsafe` from here.

Templates use StrictUndefined (a missing variable is an error, never an empty string) and no
autoescaping (none of these formats is HTML). What protects the files instead: every value is
checked by :func:`check_context` against a strict pattern before rendering, so no configuration
value can bring a newline, ``#``, ``=``, a quote or a shell metacharacter into a rendered file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import jinja2

from ..inputs import fullmatch
from .. import atomic, templating
from ..config import Config
from ..controller.planfile import PLAN_FILE
from ..errors import ConfigError, Finding, UserError
from ..estimates.gavel import ThroughputTable
from .. import names
from .inventory import Inventory
from .monitoring import dashboard_json
from .weights import billing_weights, speed_order

#: absolute paths without '..', spaces, quotes or shell metacharacters
PATH_RE = re.compile(r"^/(?!.*(^|/)\.\.(/|$))[A-Za-z0-9_./@+-]*$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
LEVELS = ("operator", "administrator")
#: a path job_submit.lua may name in a string literal
_LUA_PATH = re.compile(r"/[A-Za-z0-9_./-]{1,4095}")

#: output file -> (template, file mode) for a real cluster; template "" = built by a BUILDERS function
CLUSTER_FILES: dict[str, tuple[str, int]] = {
    "slurm-fair.conf": ("deploy/slurm-fair.conf.j2", 0o644),
    "gres.conf": ("slurm/gres.conf.j2", 0o644),
    "job_submit.lua": ("deploy/job_submit.lua.j2", 0o644),
    "bootstrap.sh": ("deploy/bootstrap.sh.j2", 0o755),
    "slurm-fair.service": ("deploy/slurm-fair.service.j2", 0o644),
    "slurm-fair.timer": ("deploy/slurm-fair.timer.j2", 0o644),
    "slurm-fair-failsafe.service": ("deploy/slurm-fair.service.j2", 0o644),
    "slurm-fair-failsafe.timer": ("deploy/slurm-fair.timer.j2", 0o644),
    "slurm-fair.cron": ("deploy/slurm-fair.cron.j2", 0o644),
    "slurm-fair.logrotate": ("deploy/logrotate.j2", 0o644),
    "slurm-fair-alerts.yml": ("deploy/slurm-fair-alerts.yml.j2", 0o644),
    "slurm-fair-dashboard.json": ("", 0o644),
}

#: per output file: what its template renders differently (one unit template, two commands)
FILE_CONTEXT: dict[str, dict[str, str]] = {
    "slurm-fair.service": {"unit": "slurm-fair", "command": "run --once",
                           "what": "controller cycle (heterogeneity-aware fair GPU sharing)"},
    "slurm-fair.timer": {"unit": "slurm-fair", "what": "controller"},
    "slurm-fair-failsafe.service": {"unit": "slurm-fair-failsafe", "command": "failsafe",
                                    "what": "failsafe (gives back what the controller set once it has "
                                            "completed no cycle for fail_open_after_s)"},
    "slurm-fair-failsafe.timer": {"unit": "slurm-fair-failsafe", "what": "failsafe"},
}

#: files made in Python from the same context (JSON is safer dumped than templated)
BUILDERS: dict[str, Callable[[Mapping[str, Any]], str]] = {"slurm-fair-dashboard.json": dashboard_json}

#: output file -> (template, mode) for the docker-compose cluster


@dataclass(frozen=True)
class DeployOptions:
    """Where things live on the target machine (rendered into the unit files, cron, Lua)."""

    executable: str = "/usr/local/bin/slurm-fair"
    config_path: str = "/etc/slurm-fair/slurm-fair.toml"
    #: a dedicated system user; slurmdbd needs AdminLevel=Administrator for its QOS writes
    run_as: str = "slurm-fair"
    admin_level: str = "administrator"
    priority_weight_tres: int = 1000


def environment() -> jinja2.Environment:
    """StrictUndefined, no autoescape (conf/shell/Lua, not HTML), over the one templates/."""
    found = templating.templates_dir("deploy/job_submit.lua.j2")
    if found is None:
        raise UserError(templating.not_found("deploy/job_submit.lua.j2"))
    return templating.environment(found, autoescape=False)


def render_template(template: str, context: Mapping[str, Any]) -> str:
    try:
        return environment().get_template(template).render(**context)
    except jinja2.UndefinedError as exc:
        raise UserError(f"template {template}: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"template {template}, line {exc.lineno}: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"template {exc.name} not found") from None


# --- validation of every value that reaches a template --------------------------------------

_SAFE_SCALAR = re.compile(r"^[A-Za-z0-9_./:@%+,\[\]()-]*$")


def check_context(context: Mapping[str, Any], where: str = "") -> list[Finding]:
    """Every string anywhere in ``context`` must be free of whitespace, newlines, quotes,
    ``#``, ``=``, ``;``, ``$``, backquotes, backslashes and the like (a second line of defence
    behind the per-field patterns: a new variable cannot slip through unchecked)."""
    problems: list[Finding] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, str):
            if not fullmatch(_SAFE_SCALAR, value):
                problems.append(Finding(path, f"unsafe characters in {value!r}"))
        elif value is None or isinstance(value, (bool, int, float)):
            return
        else:
            problems.append(Finding(path, f"unexpected value type {type(value).__name__}"))

    walk(context, where)
    return problems


def path_problem(value: str) -> str | None:
    """Why ``value`` cannot be rendered as a path on the target machine, or None."""
    if fullmatch(PATH_RE, value):
        return None
    return f"must be an absolute path of [A-Za-z0-9_./@+-] without '..', got {value!r}"


def run_as_problem(value: str) -> str | None:
    """Why ``value`` cannot be the controller's system user, or None."""
    return None if fullmatch(USER_RE, value) else f"must match {USER_RE.pattern}, got {value!r}"


def _check_path(value: str, where: str, problems: list[Finding]) -> None:
    if (msg := path_problem(value)):
        problems.append(Finding(where, msg))


def check_options(config: Config, opts: DeployOptions, problems: list[Finding]) -> None:
    c = config["controller"]
    _check_path(c["state_dir"], "controller.state_dir", problems)
    _check_path(c["audit_log"], "controller.audit_log", problems)
    _check_path(opts.executable, "--executable", problems)
    _check_path(opts.config_path, "--installed-config", problems)
    if (msg := run_as_problem(opts.run_as)):
        problems.append(Finding("--run-as", msg))
    if opts.admin_level not in LEVELS:
        problems.append(Finding("--admin-level", f"must be one of {', '.join(LEVELS)}"))
    name = config["cluster"]["name"]
    if name and not fullmatch(names.CLUSTER, name):
        problems.append(Finding("cluster.name", f"must match {names.CLUSTER.pattern}, got {name!r}"))
    for tenant in config.tenants:
        if not fullmatch(names.ACCOUNT, tenant):
            problems.append(Finding(f"tenants.{tenant}", f"account name must match {names.ACCOUNT.pattern}"))


def plan_max_age(config: Config) -> int:
    """Seconds after which job_submit.lua ignores a plan: the controller's own validity."""
    return int(max(3 * float(config["controller"]["interval_s"]), 180.0))


def common_context(config: Config, tenants: Mapping[str, int], state_dir: str) -> dict[str, Any]:
    site = config["controller"]["site_job_submit"]
    if site and not fullmatch(_LUA_PATH, site):
        raise ConfigError(config.source, [Finding(
            "controller.site_job_submit", f"must be an absolute path of letters, digits and ._-/ only (it is "
            f"written into job_submit.lua), got {site!r}")])
    accounts = sorted(set(tenants) | set(config.tenants))
    return {
        "plan_path": f"{state_dir.rstrip('/')}/{PLAN_FILE}",
        "max_age_s": plan_max_age(config),
        "site_job_submit": config["controller"]["site_job_submit"],
        "accounts": [{"name": a, "fairshare": int(tenants.get(a, 1))} for a in accounts],
    }


def cluster_context(
    config: Config, inv: Inventory, table: ThroughputTable, opts: DeployOptions
) -> dict[str, Any]:
    """The template variables for a real cluster (validated)."""
    problems: list[Finding] = []
    check_options(config, opts, problems)
    if problems:
        raise ConfigError(config.source, problems)
    weights = billing_weights(inv.gpu_types, table, inv.billing_overrides, inv.source)
    rank = speed_order(weights)
    c = config["controller"]
    interval = float(c["interval_s"])
    cluster_name = config["cluster"]["name"] or inv.cluster_name
    ctx: dict[str, Any] = {
        **common_context(config, inv.tenants, c["state_dir"]),
        "cluster_name": cluster_name or "unnamed",
        "cluster_where": cluster_name,
        "gpu_types": list(inv.gpu_types),
        "nodes": [{"name": n.name, "gpu_type": n.gpu_type, "device_files": n.files} for n in inv.nodes],
        "node_gres": _node_gres(inv, rank),
        # PriorityTier 1 (Slurm's default, the lowest a site's own partition has): a job
        # steered into a type's partition is never evaluated ahead of the partition it asked for
        "tiers": {t: 1 for t in rank},
        "nodes_by_type": {t: inv.hostlist(t) for t in inv.gpu_types},
        "capacity": inv.capacity(),
        "weights": {t: _fmt(w) for t, w in weights.items()},
        "priority_tres": {t: int(round(opts.priority_weight_tres * w)) for t, w in weights.items()},
        "throughput_source": re.sub(r"[^A-Za-z0-9_./-]+", "_", table.source.split(" (")[0]),
        "interval_s": int(round(interval)),
        "cron_minutes": max(1, int(round(interval / 60.0))),
        "timeout_s": int(max(60, float(c["time_limit_s"]) * 4 + 60)),
        "state_dir": c["state_dir"],
        "audit_log": c["audit_log"],
        "audit_dir": c["audit_log"].rsplit("/", 1)[0] or "/",
        "state_directory": _under(c["state_dir"], "/var/lib/"),
        "logs_directory": _under(c["audit_log"].rsplit("/", 1)[0], "/var/log/"),
        "executable": opts.executable,
        "config_path": opts.config_path,
        "run_as": opts.run_as,
        "admin_level": opts.admin_level,
    }
    raise_unsafe(ctx, config.source)
    return ctx


def _under(path: str, base: str) -> str:
    """``path`` relative to ``base`` (for systemd's StateDirectory=/LogsDirectory=, which create
    the directory owned by the unit's user), or "" when it lies elsewhere (the admin creates it)."""
    rel = path.rstrip("/")[len(base):] if path.startswith(base) else ""
    return rel if rel and not rel.startswith("/") else ""


def _fmt(w: float) -> str:
    return f"{w:.4f}".rstrip("0").rstrip(".") if w else "0"


def _node_gres(inv: Inventory, rank: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per node the Gres= value (several types on one node joined by commas) and its Weight
    (the rank of its fastest type: 1 = fastest), nodes folded."""
    from ClusterShell.NodeSet import NodeSet

    per_node: dict[str, list[str]] = {}
    weight: dict[str, int] = {}
    for n in inv.nodes:
        per_node.setdefault(n.name, []).append(f"gpu:{n.gpu_type}:{n.gpus}")
        weight[n.name] = min(weight.get(n.name, rank[n.gpu_type]), rank[n.gpu_type])
    groups: dict[tuple[str, int], list[str]] = {}
    for name, gres in per_node.items():
        groups.setdefault((",".join(gres), weight[name]), []).append(name)
    return [{"nodes": str(NodeSet.fromlist(names)), "gres": g, "weight": w} for (g, w), names in groups.items()]


def raise_unsafe(ctx: Mapping[str, Any], source: str) -> None:
    problems = check_context(ctx)
    for t in ctx.get("gpu_types", []):
        if not fullmatch(names.GPU_TYPE, t):
            problems.append(Finding(f"gpu_types.{t}", f"must match {names.GPU_TYPE.pattern}"))
    if problems:
        raise ConfigError(source, problems)


def render_cluster(config: Config, inv: Inventory, table: ThroughputTable, opts: DeployOptions) -> dict[str, str]:
    """Output file name -> text for a real cluster."""
    ctx = cluster_context(config, inv, table, opts)
    return {name: render_template(tpl, {**ctx, **FILE_CONTEXT.get(name, {}),
                                        "unit_interval_s": 60 if "failsafe" in name else ctx["interval_s"]})
            if tpl else BUILDERS[name](ctx)
            for name, (tpl, _mode) in CLUSTER_FILES.items()}


def write(files: Mapping[str, str], out_dir: Path, modes: Mapping[str, tuple[str, int]]) -> list[Path]:
    """Write every file (mode from ``modes``) into ``out_dir``, all or nothing
    (:func:`slurm_fair.atomic.write_files`: a failure leaves the directory as it was, never a
    cut ``slurm-fair.conf`` beside stale files); returns the paths written."""
    return atomic.write_files(out_dir, {name: (text, modes[name][1]) for name, text in files.items()})
