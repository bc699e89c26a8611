"""A ``simulate`` sweep as a Slurm job array on the site's own cluster, and the merge of its parts.

``simulate ... --array-script F`` writes an sbatch script (``F``) and a manifest beside the parts
directory: array task ``i`` runs one policy (and one ``--seed`` of ``--array-seed``) with the
same options, and writes its part (``--array-part``: the run's figures, each job's JCT and,
with a history, the history's) as JSON. ``slurm-fair simulate-merge DIR`` checks every part the
manifest names is there and whole, and prints one report (the table, ``--json``, ``--what-if``)
as ``simulate`` would have with every policy in one process.

The script is bash run by Slurm: every word in it is quoted (:func:`shlex.quote`), the task picks
its argv by ``$SLURM_ARRAY_TASK_ID`` in a ``case``; no user text is ever evaluated.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import click

from ..errors import UserError
from .options import json_option, output_option, quiet_option, what_if_option

#: the manifest's and the parts' format tags
MANIFEST_FORMAT = "slurm-fair-sweep/1"
PART_FORMAT = "slurm-fair-sweep-part/1"
MANIFEST = "sweep.json"
#: options of ``simulate`` a task does not inherit (the sweep sets or forbids them)
NOT_INHERITED = ("policy_names", "parallel", "as_json", "output", "plot_out", "what_if_out", "save_workload",
                 "array_script", "array_dir", "array_seeds", "sbatch_options", "array_part")


def program() -> list[str]:
    """The ``slurm-fair`` a task runs: the one running now (the venv's, on a shared filesystem)."""
    here = Path(sys.executable).parent / "slurm-fair"
    return [str(here)] if here.exists() else [sys.executable, "-c", "import sys; from slurm_fair.cli import main; "
                                                                    "sys.exit(main())"]


def inherited_argv(ctx: click.Context) -> list[str]:
    """The options given to this ``simulate`` (on its command line or environment) as argv
    words, but those a task sets itself (:data:`NOT_INHERITED`)."""
    out: list[str] = []
    for p in ctx.command.params:
        if not isinstance(p, click.Option) or p.name in NOT_INHERITED or p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        if source not in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT):
            continue
        value = ctx.params[p.name]
        opt = max(p.opts, key=len)
        if p.is_flag and not p.multiple:
            if p.secondary_opts and not value:
                out.append(max(p.secondary_opts, key=len))
            elif value:
                out.append(opt)
            continue
        for v in (value if p.multiple else (value,)):
            out += [opt, str(v)]
    return out


def tasks(policies: Sequence[str], seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One task per policy and seed (``seed`` None: the command's own)."""
    out: list[dict[str, Any]] = []
    each: list[int | None] = list(seeds) or [None]
    for s in each:
        for p in policies:
            name = p if not seeds or len(seeds) < 2 else f"{p} seed {s}"
            part = f"{p}.json" if s is None else f"{p}.seed{s}.json"
            out.append({"index": len(out), "policy": p, "seed": s, "name": name, "part": part})
    return out


def write_array(script: str, parts_dir: str | None, base: list[str], policies: Sequence[str], seeds: Sequence[int],
                sbatch: Sequence[str]) -> dict[str, Any]:
    """The sbatch script and its manifest (``DIR/sweep.json``); the parts go to ``DIR/parts``."""
    from ..atomic import write_all

    path = Path(script).resolve()
    directory = Path(parts_dir).resolve() if parts_dir else path.with_suffix(".sweep")
    todo = tasks(policies, seeds)
    logs = directory / "logs"
    lines = ["#!/bin/bash", f"#SBATCH --job-name={shlex.quote('slurm-fair-sweep')}",
             f"#SBATCH --array=0-{len(todo) - 1}", f"#SBATCH --output={shlex.quote(str(logs / '%A_%a.out'))}"]
    for o in sbatch:
        if "\n" in o or "\r" in o or not o.strip():
            raise UserError(f"--sbatch-option {o!r}: one line of sbatch options, not empty")
        try:
            words = shlex.split(o)
        except ValueError as exc:
            raise UserError(f"--sbatch-option {o!r}: {exc}") from None
        lines.append("#SBATCH " + " ".join(shlex.quote(w) for w in words))
    lines += ["# written by slurm-fair simulate --array-script: one simulate run per array task",
              "set -euo pipefail", f"cd {shlex.quote(str(Path.cwd()))}", 'case "${SLURM_ARRAY_TASK_ID:?not an array task}" in']
    for t in todo:
        argv = [*program(), "simulate", *base, "--policy", t["policy"], "--quiet",
                *(["--seed", str(t["seed"])] if t["seed"] is not None else []),
                "--array-part", str(directory / "parts" / t["part"])]
        lines.append(f"  {t['index']}) exec {' '.join(shlex.quote(a) for a in argv)} ;;")
    lines += ['  *) echo "no task $SLURM_ARRAY_TASK_ID in this sweep" >&2; exit 2 ;;', "esac", ""]
    manifest = {"format": MANIFEST_FORMAT, "script": str(path), "tasks": todo, "argv": base}
    (directory / "parts").mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    write_all({path: ("\n".join(lines), 0o755), directory / MANIFEST: (json.dumps(manifest, indent=1) + "\n", 0o644)})
    return manifest


def part_document(name: str, seed: int | None, doc: Mapping[str, Any], jcts: Mapping[str, float],
                  history_jcts: Mapping[str, float] | None, jobs: Mapping[str, Any] | None) -> dict[str, Any]:
    """What an array task writes: its run's results document and JCTs (and the history's)."""
    return {"format": PART_FORMAT, "policy": name, "seed": seed, "doc": doc, "jcts": dict(jcts),
            "history_jcts": dict(history_jcts or {}),
            "jobs": {j: {"user": m.user, "job_name": m.job_name} for j, m in (jobs or {}).items()}}


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not a whole {what} (JSON error at line {exc.lineno}: {exc.msg}); "
                        "was its task still running or killed?") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a {what}")
    return data


def merge(directory: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The merged results document and the what-if's inputs (``jcts``, ``history_jcts``,
    ``jobs``) of a sweep's directory; a UserError naming every missing or broken part."""
    root = Path(directory)
    manifest = _read(root / MANIFEST, "sweep manifest (written by simulate --array-script)")
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("tasks"), list):
        raise UserError(f"{root / MANIFEST}: not a sweep manifest of this version (format {MANIFEST_FORMAT})")
    missing = [t for t in manifest["tasks"] if not (root / "parts" / t["part"]).exists()]
    if missing:
        raise UserError(f"{root}: {len(missing)} of {len(manifest['tasks'])} part(s) missing: " + ", ".join(
            f"{root / 'parts' / t['part']} (array task {t['index']})" for t in missing)
            + "; rerun those tasks (sbatch --array=" + ",".join(str(t["index"]) for t in missing) + f" {manifest['script']})")
    merged: dict[str, Any] = {}
    extra: dict[str, Any] = {"jcts": {}, "history_jcts": {}, "jobs": {}}
    for t in manifest["tasks"]:
        path = root / "parts" / t["part"]
        part = _read(path, "sweep part")
        doc = part.get("doc")
        if part.get("format") != PART_FORMAT or not isinstance(doc, dict) or t["policy"] not in doc.get("policies", {}):
            raise UserError(f"{path}: not the part of array task {t['index']} ({t['name']})")
        if not merged:
            merged = {k: v for k, v in doc.items() if k != "policies"}
            merged["policies"] = {}
        elif doc.get("cluster") != merged.get("cluster") or ("history" in doc) != ("history" in merged):
            raise UserError(f"{path}: its cluster or history differs from the first part's: not the same sweep")
        merged["policies"][t["name"]] = doc["policies"][t["policy"]]
        extra["jcts"][t["name"]] = part.get("jcts", {})
        extra["history_jcts"].update(part.get("history_jcts", {}))
        extra["jobs"].update(part.get("jobs", {}))
    return merged, extra


@click.command("simulate-merge")
@click.argument("directory", type=click.Path(file_okay=False))
@json_option
@output_option
@what_if_option
@quiet_option
def command(directory: str, as_json: bool, output: str | None, what_if_out: str | None, quiet: bool) -> None:
    """Merge the parts of a `simulate --array-script` sweep into one report.

    DIRECTORY holds the sweep's manifest (sweep.json) and its parts/; every part must be there and
    whole (exit 2 naming the missing or broken ones, and the array tasks to rerun).
    """
    from types import SimpleNamespace

    from ..sim import results as sim_results, whatif
    from .output import json_text, table_or_json

    doc, extra = merge(directory)
    also: dict[str, tuple[str, str | bytes]] = {}
    if what_if_out:
        if "history" not in doc:
            raise UserError("--what-if compares a history with the policies: the sweep replayed none")
        jobs = {j: SimpleNamespace(**m) for j, m in extra["jobs"].items()}
        w = whatif.what_if(doc, extra["jcts"], extra["history_jcts"], jobs)
        also["--what-if"] = (what_if_out, whatif.render_html(w) if what_if_out.lower().endswith((".html", ".htm"))
                             else json_text(w))
    shown = sim_results.comparison_table(doc)
    table_or_json(sim_results.with_tenants(shown, doc) if "history" in doc else shown, doc, as_json, output, also)
