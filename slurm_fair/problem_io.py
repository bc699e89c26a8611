"""PROBLEM.json and allocation output (docs/fairness.md): the one reader/writer of both formats.

Loading validates completely (every bad job and field named, exit 2 through InputError);
dumping is the exact inverse so ``parse_problem(json.dumps(problem_to_dict(p))) == p`` for any
valid problem. A path and JSON text have a function each (:func:`load_problem`,
:func:`parse_problem`): guessing which one a string is made a file named ``{x.json`` JSON text.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from typing import Any

from .errors import Finding, InputError
from .inputs import decode, number_problem, parse_json, read_text, shown
from .model import MAX_GPUS, MAX_QUANTITY, MAX_WEIGHT, MIN_WEIGHT, Allocation, Job, Problem, throughput_problem


def job_to_dict(job: Job) -> dict[str, Any]:
    """One job as a PROBLEM.json entry (extra fields are added beside the standard ones)."""
    out: dict[str, Any] = {
        "id": job.id,
        "tenant": job.tenant,
        "gpus": job.gpus,
        "throughput": dict(job.throughput),
    }
    if job.remaining_work is not None:
        out["remaining_work"] = job.remaining_work
    if job.age_s is not None:
        out["age_s"] = job.age_s
    for key, value in job.extra.items():
        out.setdefault(key, value)
    return out


def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """A problem as a PROBLEM.json document."""
    return {
        "gpu_types": dict(problem.gpu_types),
        "tenants": {t: {"weight": w} for t, w in sorted(problem.tenants.items())},
        "jobs": [job_to_dict(j) for j in problem.jobs],
    }


# --- reading (validating) ---------------------------------------------------------------------

_JOB_KEYS = {"id", "tenant", "gpus", "throughput"}
#: optional job keys of the format (any other job key is carried through as ``Job.extra``)
_JOB_OPTIONAL = ("remaining_work", "age_s")
#: the keys of the document and of a tenant entry: nothing else is meaningful there, so any
#: other key is a mistake (a misspelt ``"wieght"`` would silently leave the weight at 1)
_TOP_KEYS = ("gpu_types", "tenants", "jobs")
_TENANT_KEYS = ("weight",)


def _unknown_keys(where: str, raw: dict[str, Any], known: tuple[str, ...]) -> list[Finding]:
    """A finding per key of ``raw`` not in ``known``, with a did-you-mean when one is close."""
    return [Finding(f"{where}{shown(k)}", f"unknown key{_did_you_mean(str(k), known)}; known: {', '.join(known)}")
            for k in raw if k not in known]


def _did_you_mean(key: str, known: "tuple[str, ...] | list[str]", cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_problem(path: "str | os.PathLike[str]") -> Problem:
    """Read and validate the PROBLEM.json at ``path`` (``-``: standard input).

    A path is always a path: a file whose name starts with ``{`` is read like any other, never
    taken for JSON text (JSON text goes to :func:`parse_problem`). The file must be a regular
    UTF-8 file (:func:`slurm_fair.inputs.read_text`)."""
    if str(path) == "-":
        return parse_problem(decode(sys.stdin.buffer.read(), "<stdin>", "PROBLEM.json"), "<stdin>")
    return parse_problem(read_text(path, "PROBLEM.json"), str(path))


def parse_problem(text: str, source: str = "PROBLEM.json") -> Problem:
    """Validate the PROBLEM.json document ``text`` (named ``source`` in messages).

    Every problem of the document is collected first and raised together as one
    :class:`InputError` naming the job and field (exit code 2 at the CLI): strict JSON
    (:func:`slurm_fair.inputs.parse_json`), missing keys, no GPU type, unknown GPU type in a
    throughput, numbers that are not finite or out of range (:func:`number_problem`), duplicate
    ids, a job that can run nowhere (no positive throughput on a type with as many GPUs as it
    asks for). A problem without jobs is valid: its allocation is empty.
    """
    doc = parse_json(text, source)
    findings: list[Finding] = []
    if not isinstance(doc, dict):
        raise InputError(source, [Finding("", "the document must be a JSON object")])
    findings.extend(_unknown_keys("", doc, _TOP_KEYS))
    for key in ("gpu_types", "jobs"):
        if key not in doc:
            findings.append(Finding(key, "missing key"))
    gpu_types: dict[str, int] = {}
    raw_types = doc.get("gpu_types", {})
    if not isinstance(raw_types, dict):
        findings.append(Finding("gpu_types", "must be an object {type: GPUs}"))
        raw_types = {}
    elif "gpu_types" in doc and not raw_types:
        findings.append(Finding("gpu_types", "no GPU type: give at least one {type: GPUs}"))
    for name, count in raw_types.items():
        problem = number_problem(count, lo=0, hi=MAX_GPUS, integer=True)
        if problem:
            findings.append(Finding(f"gpu_types.{shown(name)}", f"GPUs {problem}"))
        else:
            gpu_types[str(name)] = int(count)
    tenants: dict[str, float] = {}
    raw_tenants = doc.get("tenants", {})
    if not isinstance(raw_tenants, dict):  # [] too: an empty list is not "no tenants"
        findings.append(Finding("tenants", "must be an object {tenant: {weight: w}}"))
        raw_tenants = {}
    for name, spec in raw_tenants.items():
        if isinstance(spec, dict):
            findings.extend(_unknown_keys(f"tenants.{shown(name)}.", spec, _TENANT_KEYS))
        weight = spec.get("weight", 1) if isinstance(spec, dict) else spec
        problem = number_problem(weight, lo=MIN_WEIGHT, hi=MAX_WEIGHT)
        if problem:
            findings.append(Finding(f"tenants.{shown(name)}.weight", problem))
        else:
            tenants[str(name)] = float(weight)
    jobs: list[Job] = []
    seen: set[str] = set()
    raw_jobs = doc.get("jobs", [])
    if not isinstance(raw_jobs, list):
        findings.append(Finding("jobs", "must be a list"))
        raw_jobs = []
    for i, raw in enumerate(raw_jobs):
        job, problems = _read_job(i, raw, gpu_types if raw_types else None)
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
            if str(raw_id) in seen:
                problems.append(Finding(f"job {shown(raw_id)}.id", f"duplicate job id (jobs[{i}])"))
            seen.add(str(raw_id))
        findings.extend(problems)
        if job is not None and not problems:
            jobs.append(job)
    if findings:
        raise InputError(source, findings)
    return Problem(gpu_types=gpu_types, tenants=tenants, jobs=tuple(jobs))


def _read_job(i: int, raw: Any, gpu_types: dict[str, int] | None) -> tuple[Job | None, list[Finding]]:
    """One job entry and the problems found in it (named ``job <id>.<field>``)."""
    if not isinstance(raw, dict):
        return None, [Finding(f"jobs[{i}]", "must be an object")]
    job_id = raw.get("id")
    where = f"job {shown(job_id)}" if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) else f"jobs[{i}]"
    out: list[Finding] = []
    given = [str(k) for k in raw if k not in _JOB_KEYS]
    for key in sorted(_JOB_KEYS - set(raw)):
        close = difflib.get_close_matches(key, given, n=1, cutoff=0.8)
        hint = f" ({shown(close[0])!r} is given: misspelt?)" if close else ""
        out.append(Finding(f"{where}.{key}", f"missing key{hint}"))
    # other keys are carried through as extra fields (snapshot adds state, class, ...), but one
    # that is a misspelling of an optional key would silently drop that key's value
    for key in given:
        if key not in _JOB_OPTIONAL and _did_you_mean(key, _JOB_OPTIONAL, 0.8):
            out.append(Finding(f"{where}.{shown(key)}", f"unknown key{_did_you_mean(key, _JOB_OPTIONAL, 0.8)}"))
    if out:
        return None, out
    if not isinstance(job_id, (str, int)) or isinstance(job_id, bool) or str(job_id) == "":
        out.append(Finding(f"{where}.id", f"must be a non-empty string, got {job_id!r}"))
    if not isinstance(raw["tenant"], str) or not raw["tenant"]:
        out.append(Finding(f"{where}.tenant", f"must be a non-empty string, got {raw['tenant']!r}"))
    gpus = raw["gpus"]
    problem = number_problem(gpus, lo=1, hi=MAX_GPUS, integer=True)
    if problem:
        out.append(Finding(f"{where}.gpus", problem))
    thr = raw["throughput"]
    clean: dict[str, float] = {}
    if not isinstance(thr, dict):
        out.append(Finding(f"{where}.throughput", "must be an object {gpu type: throughput}"))
    else:
        for k, v in thr.items():
            problem = throughput_problem(v)
            if gpu_types is not None and k not in gpu_types:
                known = ", ".join(sorted(gpu_types)) or "none"
                out.append(Finding(f"{where}.throughput.{shown(k)}", f"unknown GPU type (known: {known})"))
            elif problem:
                out.append(Finding(f"{where}.throughput.{shown(k)}", problem))
            else:
                clean[k] = float(v)
        if not out:
            out.extend(_runs_nowhere(where, int(gpus), clean, gpu_types))
    for key in ("remaining_work", "age_s"):
        problem = None if raw.get(key) is None else number_problem(raw[key], lo=0, hi=MAX_QUANTITY)
        if problem:
            out.append(Finding(f"{where}.{key}", problem))
    if out:
        return None, out
    extra = {k: v for k, v in raw.items() if k not in _JOB_KEYS | set(_JOB_OPTIONAL)}
    return Job(
        id=str(job_id), tenant=raw["tenant"], gpus=int(gpus), throughput=clean,
        remaining_work=None if raw.get("remaining_work") is None else float(raw["remaining_work"]),
        age_s=None if raw.get("age_s") is None else float(raw["age_s"]), extra=extra,
    ), []


def _runs_nowhere(where: str, gpus: int, throughput: dict[str, float],
                  gpu_types: dict[str, int] | None) -> list[Finding]:
    """The finding for a job no type can run: no positive throughput on a type with GPUs, or
    more GPUs than any such type has (docs/fairness.md: "a job that can run nowhere")."""
    usable = {k: (gpu_types or {}).get(k) for k, v in throughput.items() if v > 0}
    if gpu_types is not None:
        usable = {k: c for k, c in usable.items() if c}
    if not usable:
        return [Finding(f"{where}.throughput", "the job can run nowhere (no positive throughput on a type with GPUs)")]
    if gpu_types is not None and all(c is not None and gpus > c for c in usable.values()):
        have = ", ".join(f"{k}: {c}" for k, c in sorted(usable.items()))
        return [Finding(f"{where}.gpus", f"the job can run nowhere: it asks for {gpus} GPUs, more than any type "
                                         f"it can use has ({have})")]
    return []


# --- the allocation output --------------------------------------------------------------------


def allocation_to_dict(problem: Problem, allocation: Allocation) -> dict[str, Any]:
    """docs/fairness.md's allocation output: policy, status, solver, solve_seconds, allocation
    (``x_jk``, zero types omitted), tenants (bundle, utility) and efficiency; the allocation's
    ``tenant_level`` (two levels: each tenant's bundle and its value ``V_u`` at the tenant
    level), ``nodes``, ``forks`` (when not empty), ``efficiency_bound`` and ``fallback_reason`` (when
    set), and its ``info`` entries that are plain JSON values, beside them."""
    from . import fairness  # local: fairness imports the solver, which readers do not need

    x = {j.id: {k: v for k, v in allocation.x.get(j.id, {}).items() if v > 1e-12} for j in problem.jobs}
    utilities = fairness.tenant_utilities(problem, x)
    bundles = fairness.tenant_bundles(problem, x)
    out: dict[str, Any] = {
        "policy": allocation.policy,
        "status": allocation.status,
        "solver": allocation.solver,
        "solve_seconds": round(allocation.solve_seconds, 6),
        "allocation": x,
        "tenants": {
            u: {"bundle": {k: v for k, v in bundles[u].items() if v > 1e-12}, "utility": utilities[u]}
            for u in problem.active_tenants
        },
        "efficiency": sum(utilities.values()),
    }
    if allocation.tenant_x is not None:  # two levels: the bundles SI, EF and PE are about
        top = {j.id: dict(allocation.tenant_x.get(j.id, {})) for j in problem.jobs}
        top_util, top_bundles = fairness.tenant_utilities(problem, top), fairness.tenant_bundles(problem, top)
        out["tenant_level"] = {u: {"bundle": {k: v for k, v in top_bundles[u].items() if v > 1e-12},
                                   "value": top_util[u]} for u in problem.active_tenants}
    typed: dict[str, Any] = {
        "nodes": {j: list(v) for j, v in allocation.nodes.items()}, "forks": dict(allocation.forks),
        "efficiency_bound": allocation.efficiency_bound, "fallback_reason": allocation.fallback_reason,
    }
    out.update({k: v for k, v in typed.items() if v is not None and v != {}})
    for key, value in allocation.info.items():
        if key not in out:
            try:
                json.dumps(value)
            except TypeError:
                continue
            out[key] = value
    return out
