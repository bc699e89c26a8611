"""One job's throughput estimate by the order of precedence (package docstring), pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..slurm.model import Snapshot, SlurmJob
from .classes import ClassTable, known_class
from .learn import pool_key
from .priors import prior, prior_speeds, unknown_prior
from .rules import Rules
from .tags import tag_class


@dataclass(frozen=True)
class Estimate:
    """``T_jk`` for one job, with where each number came from (``explain`` shows it)."""

    job_id: str
    throughput: Mapping[str, float]
    #: per GPU type: observed | class-table | learned | pooled | fails | prior | assumed | flat
    sources: Mapping[str, str]
    klass: str | None = None
    #: how the class was chosen: tag | rule:... | default_class | None
    class_source: str | None = None
    #: the key of the online estimate (class, or ``job:<id>`` without a class)
    online_key: str = ""
    #: per GPU type, the runs a ``learned`` number rests on (completed runs) or that marked a
    #: ``fails`` type (failed runs)
    runs: Mapping[str, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """The strongest source used for any type (the order of precedence above)."""
        for s in ("observed", "class-table", "learned", "pooled", "fails", "prior", "assumed", "flat"):
            if s in self.sources.values():
                return s
        return "flat"

    def labels(self) -> dict[str, str]:
        """Per type the source as people read it: ``learned (3 runs)``, ``fails (1 run)``, ``prior``..."""
        return {k: label(s, self.runs.get(k)) for k, s in self.sources.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": dict(self.throughput), "sources": dict(self.sources), "runs": dict(self.runs),
            "class": self.klass, "class_source": self.class_source, "source": self.source,
        }


def label(source: str, runs: int | None) -> str:
    """``learned (3 runs)`` when a number rests on runs, else the source itself (``pooled``:
    the runs of every user's jobs of that name)."""
    if runs is None or source not in ("learned", "pooled", "fails"):
        return source
    who = ", all users" if source == "pooled" else ""
    return f"{source} ({runs} run{'' if runs == 1 else 's'}{who})"


def job_gpus(job: SlurmJob) -> int:
    """GPUs of the whole job (1 when unknown): the gang size its class row is chosen by."""
    return max(1, job.gpu_request.total) if job.gpu_request is not None else 1


def online_key(job: SlurmJob, klass: str | None) -> str:
    """What observations are pooled under: the class (``class@G`` for a gang of G > 1 GPUs,
    whose speed-ups differ from one GPU's), else the job itself."""
    if not klass:
        return f"job:{job.job_id}"
    g = job_gpus(job)
    return klass if g == 1 else f"{klass}@{g}"


def estimate_job(
    job: SlurmJob,
    gpu_types: list[str],
    table: ClassTable,
    rules: Rules,
    online: Mapping[str, Mapping[str, float]],
    warnings: set[str],
    learned: Mapping[tuple[str, str, int], Mapping[str, float]] | None = None,
) -> Estimate:
    """One job's estimate by the order of precedence (pure; ``warnings`` collects messages)."""
    tags = job.tags
    candidates: list[tuple[str, str]] = []
    raw_class = str(tags.get("class", ""))
    if raw_class:
        if tag_class(tags):
            candidates.append((raw_class, "tag"))
        else:
            warnings.add(f"job {job.job_id}: ignored malformed fair:class tag")
    candidates += rules.candidates(job)
    klass = class_source = None
    g = job_gpus(job)
    for name, how in candidates:
        if known_class(name, g, table, online):
            klass, class_source = name, how
            break
        warnings.add(f"unknown class {name!r} ({how}); falling through")
    key = online_key(job, klass)
    observed = {k: v for k, v in online.get(key, {}).items() if k in gpu_types and v > 0}
    row = table.row(klass, job_gpus(job)) if klass else {}
    tput: dict[str, float] = {}
    sources: dict[str, str] = {}
    for k in gpu_types:
        if k in observed:
            tput[k], sources[k] = observed[k], "observed"
        elif k in row:
            tput[k], sources[k] = float(row[k]), "class-table"
    known = learned or {}
    group = known.get(group_key(job)) or known.get(pool_key(group_key(job))) or {}
    if not tput or max(tput.values()) <= 0:
        tput, sources = untagged(job, gpu_types, group, warnings)
    else:
        fill_unknown(tput, sources, gpu_types)
    runs = mark_fails(tput, sources, group)
    return Estimate(job.job_id, tput, sources, klass, class_source, key, runs)


def group_key(job: SlurmJob) -> tuple[str, str, int]:
    """What a job recurs as (``speeds learn``'s group): user + job name + GPUs."""
    return (job.user, job.name, job_gpus(job))


def untagged(job: SlurmJob, gpu_types: list[str], group: Mapping[str, float],
             warnings: set[str]) -> tuple[dict[str, float], dict[str, str]]:
    """A job with no class and no observation: its group's learned speeds (``group``, from
    the accounting history and the runs the controller watched; a group that never completed:
    the pool of every user's runs of its job name), else the type priors, else
    flat (1.0 everywhere: no type of the cluster is a known model)."""
    if group and all(k in group for k in gpu_types) and any(group[k] > 0 for k in gpu_types):
        runs: Mapping[str, int] = getattr(group, "runs", {})
        how = "pooled" if getattr(group, "pooled", False) else "learned"
        return {k: float(group[k]) for k in gpu_types}, {
            k: how if runs.get(k) or not runs else "prior" for k in gpu_types}
    p = prior_speeds(gpu_types)
    if len(p.unknown) == len(gpu_types):
        return {k: 1.0 for k in gpu_types}, {k: "flat" for k in gpu_types}
    warnings.update(p.warnings())
    return dict(p.speed), {k: ("assumed" if k in p.unknown else "prior") for k in gpu_types}


def mark_fails(tput: dict[str, float], sources: dict[str, str], group: Mapping[str, float]) -> dict[str, int]:
    """The group's failing types (learned: FAILED / OUT_OF_MEMORY there, no completion) get 0,
    whatever the class table or the priors said; only an observation (the job reports progress
    there now) beats it. Returns per type the runs behind a learned or failing number."""
    runs: Mapping[str, int] = getattr(group, "runs", {})
    fails: Mapping[str, int] = getattr(group, "fails", {})
    for k in tput:
        if (k in fails or group.get(k) == 0) and sources.get(k) != "observed":
            tput[k], sources[k] = 0.0, "fails"
    out = {k: runs[k] for k, s in sources.items() if s in ("learned", "pooled") and k in runs}
    out.update({k: fails[k] for k, s in sources.items() if s == "fails" and k in fails})
    return out


def fill_unknown(tput: dict[str, float], sources: dict[str, str], gpu_types: list[str]) -> None:
    """Types neither observed nor in the class row: the known values scaled by the type priors
    (anchored on the known types that have one), else the priors' conservative value below the
    job's slowest known value (:func:`~.priors.unknown_prior`): never "as fast as the best", not
    even beside a single known type (a type nobody measured is not sent jobs first on a guess)."""
    missing = [k for k in gpu_types if k not in tput]
    if not missing:
        return
    anchors = [(k, v, pk) for k, v in tput.items() if v > 0 and (pk := prior(k))]
    slowest = unknown_prior(v for v in tput.values() if v > 0)
    for k in missing:
        pk = prior(k)
        if anchors and pk:
            scale = math.exp(sum(math.log(v / pa) for _, v, pa in anchors) / len(anchors))
            tput[k], sources[k] = scale * pk, "prior"
        else:
            tput[k], sources[k] = slowest, "assumed"


def estimate_all(
    snapshot: Snapshot, table: ClassTable, rules: Rules, online: Mapping[str, Mapping[str, float]],
    learned: Mapping[tuple[str, str, int], Mapping[str, float]] | None = None,
) -> tuple[dict[str, Estimate], list[str]]:
    """:func:`estimate_job` over every GPU job of the snapshot, on the types it has GPUs of."""
    types = sorted(k for k, c in snapshot.capacity().items() if c > 0)
    warnings: set[str] = set()
    est = {j.job_id: estimate_job(j, types, table, rules, online, warnings, learned) for j in snapshot.gpu_jobs()}
    return est, sorted(warnings)
