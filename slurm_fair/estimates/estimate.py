"""One job's throughput estimate by the order of precedence (package docstring), pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..slurm.model import Snapshot, SlurmJob
from .classes import ClassTable, known_class
from .rules import Rules
from .tags import tag_class


@dataclass(frozen=True)
class Estimate:
    """``T_jk`` for one job, with where each number came from (``explain`` shows it)."""

    job_id: str
    throughput: Mapping[str, float]
    #: per GPU type: observed | class-table | assumed | flat
    sources: Mapping[str, str]
    klass: str | None = None
    #: how the class was chosen: tag | rule:... | default_class | None
    class_source: str | None = None
    #: the key of the online estimate (class, or ``job:<id>`` without a class)
    online_key: str = ""

    @property
    def source(self) -> str:
        """The strongest source used for any type (the order of precedence above)."""
        for s in ("observed", "class-table", "assumed", "flat"):
            if s in self.sources.values():
                return s
        return "flat"

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": dict(self.throughput), "sources": dict(self.sources),
            "class": self.klass, "class_source": self.class_source, "source": self.source,
        }


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
    if not tput or max(tput.values()) <= 0:
        tput = {k: 1.0 for k in gpu_types}
        sources = {k: "flat" for k in gpu_types}
    else:
        best = max(tput.values())
        for k in gpu_types:
            if k not in tput:
                tput[k], sources[k] = best, "assumed"
    return Estimate(job.job_id, tput, sources, klass, class_source, key)


def estimate_all(
    snapshot: Snapshot, table: ClassTable, rules: Rules, online: Mapping[str, Mapping[str, float]]
) -> tuple[dict[str, Estimate], list[str]]:
    """:func:`estimate_job` over every GPU job of the snapshot, on the types it has GPUs of."""
    types = sorted(k for k, c in snapshot.capacity().items() if c > 0)
    warnings: set[str] = set()
    est = {j.job_id: estimate_job(j, types, table, rules, online, warnings) for j in snapshot.gpu_jobs()}
    return est, sorted(warnings)
