"""PROBLEM.json and allocation output (docs/fairness.md): the one reader/writer of both formats.

Loading validates completely (every bad job and field named, exit 2 through InputError);
dumping is the exact inverse so ``load(dump(p)) == p`` for any valid problem.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import Finding, InputError
from .model import Allocation, Job, Problem


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


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def load_problem(path_or_text: "str | os.PathLike[str]", source: str | None = None) -> Problem:
    """Read and validate a PROBLEM.json (a path, or the JSON text itself).

    Every problem of the document is collected first and raised together as one
    :class:`InputError` naming the job and field (exit code 2 at the CLI): unknown GPU type in
    a throughput, negative numbers, non-integer or zero ``gpus``, duplicate ids, a job that can
    run nowhere, malformed JSON, missing keys.
    """
    text = str(path_or_text)
    if isinstance(path_or_text, os.PathLike) or (not text.lstrip().startswith("{") and os.path.exists(text)):
        source = source or text
        try:
            with open(text, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise InputError(source, [Finding("", f"cannot read: {exc.strerror or exc}")]) from None
    elif not text.lstrip().startswith("{") and not text.lstrip().startswith("["):
        raise InputError(source or text, [Finding("", "no such file")])
    source = source or "PROBLEM.json"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, [Finding(f"line {exc.lineno} column {exc.colno}", f"malformed JSON: {exc.msg}")]) from None
    findings: list[Finding] = []
    if not isinstance(doc, dict):
        raise InputError(source, [Finding("", "the document must be a JSON object")])
    for key in ("gpu_types", "jobs"):
        if key not in doc:
            findings.append(Finding(key, "missing key"))
    gpu_types: dict[str, int] = {}
    raw_types = doc.get("gpu_types", {})
    if not isinstance(raw_types, dict):
        findings.append(Finding("gpu_types", "must be an object {type: GPUs}"))
        raw_types = {}
    for name, count in raw_types.items():
        if not _number(count) or count < 0 or int(count) != count:
            findings.append(Finding(f"gpu_types.{name}", f"must be a non-negative integer, got {count!r}"))
        else:
            gpu_types[str(name)] = int(count)
    tenants: dict[str, float] = {}
    raw_tenants = doc.get("tenants", {}) or {}
    if not isinstance(raw_tenants, dict):
        findings.append(Finding("tenants", "must be an object {tenant: {weight: w}}"))
        raw_tenants = {}
    for name, spec in raw_tenants.items():
        weight = spec.get("weight", 1) if isinstance(spec, dict) else spec
        if not _number(weight) or weight <= 0:
            findings.append(Finding(f"tenants.{name}.weight", f"must be a number > 0, got {weight!r}"))
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
                problems.append(Finding(f"job {raw_id}.id", f"duplicate job id (jobs[{i}])"))
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
    where = f"job {job_id}" if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) else f"jobs[{i}]"
    out: list[Finding] = []
    for key in sorted(_JOB_KEYS - set(raw)):
        out.append(Finding(f"{where}.{key}", "missing key"))
    if out:
        return None, out
    if not isinstance(job_id, (str, int)) or isinstance(job_id, bool) or str(job_id) == "":
        out.append(Finding(f"{where}.id", f"must be a non-empty string, got {job_id!r}"))
    if not isinstance(raw["tenant"], str) or not raw["tenant"]:
        out.append(Finding(f"{where}.tenant", f"must be a non-empty string, got {raw['tenant']!r}"))
    gpus = raw["gpus"]
    if not _number(gpus) or int(gpus) != gpus or gpus <= 0:
        out.append(Finding(f"{where}.gpus", f"must be a positive integer, got {gpus!r}"))
    thr = raw["throughput"]
    clean: dict[str, float] = {}
    if not isinstance(thr, dict):
        out.append(Finding(f"{where}.throughput", "must be an object {gpu type: throughput}"))
    else:
        for k, v in thr.items():
            if gpu_types is not None and k not in gpu_types:
                known = ", ".join(sorted(gpu_types)) or "none"
                out.append(Finding(f"{where}.throughput.{k}", f"unknown GPU type (known: {known})"))
            elif not _number(v) or v < 0:
                out.append(Finding(f"{where}.throughput.{k}", f"must be a number >= 0, got {v!r}"))
            else:
                clean[k] = float(v)
        if not out and not any(v > 0 and (gpu_types is None or gpu_types.get(k, 0) > 0) for k, v in clean.items()):
            out.append(Finding(f"{where}.throughput", "the job can run nowhere (no positive throughput on a type with GPUs)"))
    for key in ("remaining_work", "age_s"):
        if raw.get(key) is not None and (not _number(raw[key]) or raw[key] < 0):
            out.append(Finding(f"{where}.{key}", f"must be a number >= 0, got {raw[key]!r}"))
    if out:
        return None, out
    extra = {k: v for k, v in raw.items() if k not in _JOB_KEYS | {"remaining_work", "age_s"}}
    return Job(
        id=str(job_id), tenant=raw["tenant"], gpus=int(gpus), throughput=clean,
        remaining_work=None if raw.get("remaining_work") is None else float(raw["remaining_work"]),
        age_s=None if raw.get("age_s") is None else float(raw["age_s"]), extra=extra,
    ), []


# --- the allocation output --------------------------------------------------------------------


def allocation_to_dict(problem: Problem, allocation: Allocation) -> dict[str, Any]:
    """docs/fairness.md's allocation output: policy, status, solver, solve_seconds, allocation
    (``x_jk``, zero types omitted), tenants (bundle, utility) and efficiency; the allocation's
    ``nodes``, ``forks`` (when not empty), ``efficiency_bound`` and ``fallback_reason`` (when
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
