"""Options of several commands, each defined once (pip-tools' ``scripts/options.py``).

An option name means one thing in every command: a command that takes ``--solver`` uses
:data:`solver_option`, never its own ``click.option("--solver", ...)``; the test
``test_an_option_name_means_one_thing`` walks every command and fails otherwise. How many values
a command takes (one ``--policy`` or several) is the command's; name, type, default and help
are not, hence the ``*s_option`` variants.

The output rule (docs/cli.md): ``--json`` is a flag, JSON on stdout instead of the text;
``-o/--output FILE`` writes what stdout would get to FILE instead (``--json FILE`` is short for
``--json -o FILE``, the form the design names for ``simulate``); a command writing a
directory names it ``--output-dir``. Progress, notes and warnings always go to stderr.
"""

from __future__ import annotations

import click

from .. import atomic, names
from ..inputs import FiniteFloat, fullmatch
from ..solver import SOLVER_CHOICES
from ..testbed.rootfs import VERSIONS
from .output import check_file_output, check_output, is_stdout

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Configuration file (default: $SLURM_FAIR_CONFIG, else /etc/slurm-fair/slurm-fair.toml; "
    "a checkout's conf/slurm-fair.toml only when named here).",
)

#: where ``--json FILE`` leaves its file for :data:`output_option` (``ctx.meta`` key)
_JSON_FILE = "slurm_fair.json_file"


def _takes_output(ctx: click.Context) -> bool:
    return any(p.name == "output" for p in ctx.command.params)


def _json_value(ctx: click.Context, param: click.Parameter, value: str | None) -> bool:
    """``--json`` alone: JSON on stdout. ``--json FILE`` (the form the design names for
    ``simulate``): short for ``--json -o FILE``, so it exists only where ``-o`` does."""
    if value is None:
        return False
    if value != "-":
        if not _takes_output(ctx):
            raise click.BadParameter(f"{ctx.command.name} prints JSON on stdout and takes no FILE, got {value!r} "
                                     "(give arguments before --json)", ctx, param)
        if ctx.params.get("output") not in (None, value):
            raise click.BadParameter("give the file once: --json FILE or --json -o FILE", ctx, param)
        ctx.meta[_JSON_FILE] = value
    return True


def _output_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from_json = ctx.meta.get(_JSON_FILE)
    if from_json and value and value != from_json:
        raise click.BadParameter("give the file once: --json FILE or --json -o FILE", ctx, param)
    value = check_output(ctx, param, from_json if value is None else value)  # a bad path fails now
    return None if is_stdout(value) else value  # ``-o -``: standard output, as ``--input -`` is stdin


def _keep_lp_dir_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A directory a failed model can be written into (:func:`slurm_fair.atomic.writable_directory_problem`)."""
    if value is not None and (msg := atomic.writable_directory_problem(value)):
        raise click.BadParameter(msg, ctx, param)
    return value


#: ``--keep-lp-dir DIR`` (``solve``): where a failed model's .lp file is kept, checked when parsed
keep_lp_dir_option = click.option(
    "--keep-lp-dir", type=click.Path(file_okay=False), default=None, metavar="DIR", callback=_keep_lp_dir_value,
    help="Directory where a failed model's .lp file is kept (default: not kept; created when missing).",
)

json_option = click.option(
    "--json", "as_json", is_flag=False, flag_value="-", default=None, metavar="[FILE]", callback=_json_value,
    help="Print JSON on stdout instead of the text (a table for people, where there is one, goes to stderr). "
    "Where the command has -o, --json FILE is short for --json -o FILE.",
)

output_option = click.option(
    "-o", "--output", "output", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    callback=_output_value,
    help="Write what stdout would get to FILE instead (atomically: a temporary file, then a rename); "
    "- is standard output.",
)

solver_option = click.option(
    "--solver", type=click.Choice(SOLVER_CHOICES), default="auto", show_default=True,
    help="LP solver of the policy's models: auto (highs in-process when highspy is installed, else "
    "cbc), or force highs or cbc (through PuLP). Small internal LPs (bundle values, fairness checks, "
    "market prices) always use HiGHS when it is installed.",
)

_POLICY_HELP = "Allocation policy (`slurm-fair policies` lists them)."
#: one policy (``solve``, ``testbed replay``)
policy_option = click.option("--policy", "policy", metavar="NAME", required=True, help=_POLICY_HELP)
#: ``--policy`` repeated: the policies a command compares (``simulate``)
policy_params_option = click.option(
    "--policy-option", "policy_options", multiple=True, metavar="POLICY.KEY=VALUE",
    help="A policy's parameter (hops.lambda=2, oef.improve_s=0; `slurm-fair policies --json` lists them).")

policies_option = click.option("--policy", "policy_names", metavar="NAME", multiple=True, required=True,
                               help=_POLICY_HELP)

_TRACE_HELP = "Trace: a CSV (docs/fairness.md); simulate also reads Gavel .trace files (one tenant per file)."
_TRACE_TYPE = click.Path(dir_okay=False, exists=True)
#: one trace (``testbed replay``)
trace_option = click.option("--trace", "trace", type=_TRACE_TYPE, metavar="FILE", required=True, help=_TRACE_HELP)
#: ``--trace`` repeated (``simulate``)
traces_option = click.option("--trace", "traces", type=_TRACE_TYPE, metavar="FILE", multiple=True,
                             help=_TRACE_HELP)

throughputs_option = click.option(
    "--throughputs", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    help="Gavel-format throughput JSON (default: the embedded measured table).",
)

#: shortest and longest round (trace seconds): below a second a round is no scheduling round
#: (a Slurm cycle takes seconds) and the run's round count explodes; above a month it is no round
ROUND_S_RANGE = (1.0, 30 * 86400.0)

round_option = click.option(
    "--round-s", type=FiniteFloat(*ROUND_S_RANGE), default=360.0, show_default=True,
    help="Round length in trace seconds (Gavel: 360; 1 s to 30 days).",
)

quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress messages.")

dry_run_option = click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")

shadow_option = click.option(
    "--shadow", is_flag=True,
    help="Shadow mode ([controller] mode = \"shadow\"): `run` decides and records every cycle and changes "
    "nothing in Slurm; `report` shows what Slurm gave each tenant and GPU type during those cycles beside "
    "what the plans would have given, and the jobs they would have moved (formats: table, json).")

#: a cluster description file (``render-config``, ``speeds learn``): nodes and their GPU types
inventory_option = click.option(
    "--inventory", "inventory", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    help="Cluster description (TOML or JSON, the shape of conf/testbed.toml): nodes and their GPU types "
    "(render-config --target docker: default $SLURM_FAIR_TESTBED_CONFIG, else conf/testbed.toml).",
)

#: read from the running Slurm instead of a file (``render-config``, ``speeds learn``)
from_slurm_option = click.option(
    "--from-slurm", is_flag=True, help="Read from the running Slurm (through the adapter) instead of a file.",
)

since_option = click.option(
    "--since", default=None, metavar="T",
    help="Window start: ISO date/time, or 7d, 12h, 90m ago (default: the window's end minus "
    "[report].window_days).",
)

# --- the `testbed` group's own: there `--config` is the testbed's cluster description -------

testbed_dir_option = click.option(
    "--dir",
    "state_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="State directory (default: $SLURM_FAIR_TESTBED_DIR, else .testbed/ in the checkout).",
)

testbed_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Cluster description (default: the one saved by the last `up` in --dir, else "
    "$SLURM_FAIR_TESTBED_CONFIG, else conf/testbed.toml).",
)

#: ``--slurm VERSION`` of the testbed commands (``testbed up|down|status|env|replay``)
slurm_option = click.option(
    "--slurm",
    "slurm",
    type=click.Choice(list(VERSIONS)),
    default=None,
    help="Slurm version: 22.05 (the host's packages, the default), 24.11 (Debian trixie's) or 26.05 "
    "(Debian forky's), each newer one in a root filesystem made once under the testbed directory. "
    "Another version than the description's moves every port (by +1000 for 24.11, +2000 for 26.05) "
    "and, without --dir, uses .testbed-<version>.",
)

#: the decorators a test checks every command against, by long name; ``testbed`` replaces some
#: a site's accounting history as a file (``speeds learn``, ``simulate``), and how to read it
sacct_file_option = click.option(
    "--sacct-file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    help="Text of sacct -P -X with its header (JobID|User|Account|JobName|Partition|AllocTRES|NodeList|Elapsed|"
    "State at least; simulate also needs Submit|Start|End, and reads Timelimit|NNodes).",
)
node_type_option = click.option(
    "--node-type", "node_type", multiple=True, metavar="HOSTLIST=TYPE",
    help="Nodes of one GPU type, e.g. gpu[01-04]=a100 (repeatable), for runs without typed gres.",
)
strict_option = click.option("--strict", is_flag=True, help="An unreadable history row is an error (exit 2), not skipped.")
#: the what-if of a replayed history (``simulate``, ``simulate-merge``)
what_if_option = click.option(
    "--what-if", "what_if_out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    callback=check_file_output,
    help="With a history: also write the what-if per tenant (history beside each policy) and the jobs "
         "that would have gained most, as HTML (.html) or JSON (any other name).")

SHARED = (config_option, json_option, output_option, solver_option, policy_option, trace_option,
          throughputs_option, round_option, quiet_option, dry_run_option, shadow_option, since_option,
          inventory_option, from_slurm_option, policy_params_option, sacct_file_option, node_type_option,
          strict_option, what_if_option)
TESTBED = (testbed_dir_option, testbed_config_option, slurm_option)


def _tenant_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A tenant is a Slurm account name (:data:`slurm_fair.names.SLURM_NAME`), checked before
    anything reads Slurm with it."""
    if value is not None and not fullmatch(names.SLURM_NAME, value):
        raise click.BadParameter(f"{value!r} is not a Slurm account name (letters, digits, _ . + -)", ctx, param)
    return value


tenant_option = click.option("--tenant", default=None, metavar="NAME", callback=_tenant_value,
                             help="Show one tenant (fairness is still computed over every tenant).")
