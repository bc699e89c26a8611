"""Phase 3: a throughput estimate ``T_jk`` for every job and GPU type of the cluster.

Order of precedence (the first that applies wins; documented in ``docs/controller.md``):

1. **observed**: the online estimate of the job's class (or of the job itself when it has no
   class) on that GPU type: an exponentially weighted mean of the ``fair:tput=<steps/s>`` values
   jobs report in their comment while running there (``[throughput].ewma_alpha``);
2. **tag**: the job's ``fair:class=NAME`` comment tag, looked up in the class table
   (``conf/classes.csv``, or the embedded measured Gavel table when none is configured);
3. **rule**: per-site rules: ``[throughput].account_classes`` (account -> class), then
   ``[throughput].name_classes`` (job-name glob -> class, first match in file order), then the
   first entry of ``[tenants.NAME].classes``;
4. ``[throughput].default_class``;
5. **flat**: 1.0 on every GPU type the cluster has (Slurm's own view: a GPU is a GPU).

Steps 1 and 2 work per GPU type: observations exist only where a job ran, so the other types
come from the class table when the class has a row. Both are per gang size: a job of G > 1 GPUs
reads the class's row measured at the largest size <= G (:meth:`ClassTable.row`) and its
observations are pooled as ``class@G``; 0 in a row means the class cannot run there. A type neither observed nor in the table
gets the job's best known value (optimistic: "as good as anywhere else"), marked ``assumed``.
A class name that is neither in the table nor observed is warned about (once per cycle) and the
next rule is tried. Comments are user text: tags are parsed defensively and anything that is not
a sane name or a finite positive number is ignored.
"""

from __future__ import annotations

import csv
import fnmatch
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import ConfigError, Finding, InputError
from ..model import SlurmJob, frozen_map

#: what a class name may look like (tags are user text)
CLASS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
TAG_RE = re.compile(r"fair:([a-z_]{1,32})(?:=([^\s,;]{0,128}))?")
#: a reported throughput above this is not believed
MAX_TPUT = 1e9


@dataclass(frozen=True)
class ClassTable:
    """Throughput (steps/s) of each workload class on each GPU type, per gang size.

    ``rows`` are the 1-GPU values; ``sizes[class][G]`` the whole gang's on ``G`` GPUs (G > 1)
    where measured. Speed-ups are not the same on every type (Gavel: ResNet-50 at batch 128
    runs on one K80 but not on four), so a gang's row is the one measured at the largest size
    not above its own (:meth:`row`): the plugin reads the same (``speeds/<class>@<G>``).
    """

    rows: Mapping[str, Mapping[str, float]]
    source: str
    sizes: Mapping[str, Mapping[int, Mapping[str, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", frozen_map({c: frozen_map(v) for c, v in self.rows.items()}))
        object.__setattr__(self, "sizes", frozen_map(
            {c: frozen_map({int(g): frozen_map(v) for g, v in by.items() if int(g) > 1}) for c, by in self.sizes.items()}))

    def __contains__(self, name: object) -> bool:
        return name in self.rows or name in self.sizes

    def row(self, name: str, gpus: int = 1) -> Mapping[str, float]:
        """The row of ``name`` for a gang of ``gpus``: measured at the largest size <= ``gpus``
        (the 1-GPU row counts as size 1), else at the smallest size there is; {} if unknown."""
        by: dict[int, Mapping[str, float]] = dict(self.sizes.get(name, {}))
        if name in self.rows:
            by[1] = self.rows[name]
        if not by:
            return {}
        below = [g for g in by if g <= max(1, gpus)]
        return by[max(below)] if below else by[min(by)]


def gavel_class_name(job_type: str) -> str:
    """``"ResNet-50 (batch size 32)"`` -> ``"resnet-50-bs32"``: a name fit for a comment tag."""
    m = re.match(r"^(.*?)\s*\(batch size (\d+)\)\s*$", job_type)
    base, bs = (m.group(1), m.group(2)) if m else (job_type, None)
    slug = re.sub(r"[^a-z0-9.]+", "-", base.lower()).strip("-")
    return f"{slug}-bs{bs}" if bs else slug


def embedded_rows() -> list[dict[str, Any]]:
    """Rows of the default class table: every Gavel job type measured on every GPU type, at
    every gang size measured (``gpus``; 0 throughput where Gavel measured that it cannot run).

    Gavel's ``*_unconsolidated`` variants are left out (they are placements, not GPU types).
    """
    from .. import throughput_table

    table = throughput_table.load(None)
    types = [t for t in table.gpu_types if "_" not in t]
    sizes = sorted({g for k in types for (_, g) in table.data.get(k, {})})
    rows = []
    for job_type in table.job_types:
        if not all(table.is_measured(job_type, 1, k) for k in types):
            continue
        for g in sizes:
            if not all(table.is_measured(job_type, g, k) for k in types):
                continue
            row: dict[str, Any] = {"class": gavel_class_name(job_type), "gavel_job_type": job_type, "gpus": g}
            row.update({k: table.lookup(job_type, g, k) for k in types})
            rows.append(row)
    return rows


def _split_rows(rows: Iterable[Mapping[str, Any]]) -> ClassTable:
    """Rows with ``class``, ``gpus`` and a value per type -> a table (embedded source)."""
    base: dict[str, dict[str, float]] = {}
    sizes: dict[str, dict[int, dict[str, float]]] = {}
    for r in rows:
        vals = {k: float(v) for k, v in r.items() if k not in ("class", "gavel_job_type", "gpus")}
        g = int(r.get("gpus") or 1)
        if g == 1:
            base[r["class"]] = vals
        else:
            sizes.setdefault(r["class"], {})[g] = vals
    return ClassTable(base, "embedded Gavel table", sizes)


def load_class_table(path: str | Path | None) -> ClassTable:
    """The class table from a CSV (``class,[gavel_job_type,][gpus,]TYPE...``) or the embedded
    default. ``gpus`` (optional, default 1): the gang size a row was measured at.

    All bad cells are reported at once (file, line, column).
    """
    if not path:
        return _split_rows(embedded_rows())
    source = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            data = list(reader)
    except OSError as exc:
        raise InputError(source, [Finding("", f"cannot read: {exc.strerror or exc}")]) from None
    if "class" not in fields:
        raise InputError(source, [Finding("header", "needs a 'class' column")])
    types = [f for f in fields if f not in ("class", "gavel_job_type", "description", "gpus")]
    problems: list[Finding] = []
    out: dict[str, dict[str, float]] = {}
    sizes: dict[str, dict[int, dict[str, float]]] = {}
    seen: set[tuple[str, int]] = set()
    for i, raw in enumerate(data, start=2):
        name = (raw.get("class") or "").strip()
        if not CLASS_RE.match(name):
            problems.append(Finding(f"line {i}.class", f"bad class name {name!r}"))
            continue
        gcell = (raw.get("gpus") or "").strip()
        if gcell == "":
            gpus = 1
        elif gcell.isdigit() and 1 <= int(gcell) <= 100_000:
            gpus = int(gcell)
        else:
            problems.append(Finding(f"line {i}.gpus", f"must be a whole number of GPUs >= 1, got {gcell!r}"))
            continue
        if (name, gpus) in seen:
            what = f"class {name!r}" + (f" at {gpus} GPUs" if gpus > 1 else "")
            problems.append(Finding(f"line {i}.class", f"duplicate {what}"))
            continue
        seen.add((name, gpus))
        vals: dict[str, float] = {}
        for k in types:
            cell = (raw.get(k) or "").strip()
            if cell == "":
                continue
            try:
                v = float(cell)
            except ValueError:
                problems.append(Finding(f"line {i}.{k}", f"not a number: {cell!r}"))
                continue
            if not math.isfinite(v) or v < 0:
                problems.append(Finding(f"line {i}.{k}", f"must be a finite number >= 0, got {cell}"))
                continue
            vals[k] = v
        if gpus == 1:
            out[name] = vals
        else:
            sizes.setdefault(name, {})[gpus] = vals
    if problems:
        raise InputError(source, problems)
    return ClassTable(out, source, sizes)


def write_class_table(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    rows = list(rows)
    types = sorted({k for r in rows for k in r if k not in ("class", "gavel_job_type", "gpus")})
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["class", "gavel_job_type", "gpus", *types])
        for r in rows:
            w.writerow([r["class"], r.get("gavel_job_type", ""), int(r.get("gpus") or 1), *(f"{r[k]:.6g}" for k in types)])


# --- tags ----------------------------------------------------------------------------------


def parse_tags(comment: str) -> dict[str, str]:
    """``fair:key=value`` tags of a comment; the first occurrence of a key wins."""
    tags: dict[str, str] = {}
    for m in TAG_RE.finditer(comment or ""):
        tags.setdefault(m.group(1), m.group(2) or "")
    return tags


def job_tags(job: SlurmJob) -> dict[str, str]:
    """The adapter's parsed tags, else our own parse of the comment (both are user text)."""
    return dict(job.tags) if job.tags else parse_tags(job.comment)


def tag_class(tags: Mapping[str, str]) -> str | None:
    name = str(tags.get("class", "")).strip()
    return name if CLASS_RE.match(name) else None


def tag_tput(tags: Mapping[str, str]) -> float | None:
    """A believable reported throughput, or None (NaN, inf, negatives, huge, text: ignored)."""
    try:
        v = float(str(tags.get("tput", "")).strip())
    except ValueError:
        return None
    return v if math.isfinite(v) and 0 < v < MAX_TPUT else None


def preemptible(job: SlurmJob) -> bool:
    """Opted in to round-based time-sharing: ``--requeue`` *and* a ``fair:preemptible`` tag."""
    tags = job_tags(job)
    return bool(job.requeue) and "preemptible" in tags and tags["preemptible"] in ("", "1", "true", "yes")


# --- site rules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """Per-site class rules from the configuration."""

    account_classes: Mapping[str, str] = field(default_factory=dict)
    name_classes: tuple[tuple[str, str], ...] = ()
    tenant_classes: Mapping[str, str] = field(default_factory=dict)
    default_class: str = ""

    @classmethod
    def from_config(cls, config: Any) -> "Rules":
        """Validate the rule tables (values must be class names); ConfigError names the key."""
        th = config["throughput"]
        problems: list[Finding] = []

        def table(key: str) -> list[tuple[str, str]]:
            out = []
            for k, v in dict(th.get(key, {}) or {}).items():
                if not isinstance(v, str) or not CLASS_RE.match(v):
                    problems.append(Finding(f"throughput.{key}.{k}", f"must be a class name, got {v!r}"))
                else:
                    out.append((str(k), v))
            return out

        accounts = dict(table("account_classes"))
        names = tuple(table("name_classes"))
        tenants = {}
        for tenant, spec in config.tenants.items():
            classes = spec.get("classes") or []
            if classes:
                if not isinstance(classes[0], str) or not CLASS_RE.match(classes[0]):
                    problems.append(Finding(f"tenants.{tenant}.classes", f"bad class name {classes[0]!r}"))
                else:
                    tenants[tenant] = classes[0]
        if problems:
            raise ConfigError(config.source, problems)
        return cls(accounts, names, tenants, th.get("default_class", "") or "")

    def candidates(self, job: SlurmJob) -> list[tuple[str, str]]:
        """(class, source) candidates from rules, most specific first."""
        out = []
        if job.account in self.account_classes:
            out.append((self.account_classes[job.account], "rule:account"))
        for pattern, name in self.name_classes:
            if fnmatch.fnmatchcase(job.name, pattern):
                out.append((name, f"rule:name={pattern}"))
                break
        if job.account in self.tenant_classes:
            out.append((self.tenant_classes[job.account], "rule:tenant"))
        if self.default_class:
            out.append((self.default_class, "default_class"))
        return out


# --- the estimate --------------------------------------------------------------------------


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
    tags = job_tags(job)
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
        if name in table or name in online or f"{name}@{g}" in online:
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


def observations(jobs: Iterable[SlurmJob], estimates: Mapping[str, Estimate]) -> list[tuple[str, str, str, float]]:
    """(job, online key, gpu type, steps/s) reported by running jobs on the type they run on."""
    out = []
    for job in jobs:
        if not job.running or not job.gpu_type_running:
            continue
        v = tag_tput(job_tags(job))
        est = estimates.get(job.job_id)
        if v is None or est is None:
            continue
        out.append((job.job_id, est.online_key, job.gpu_type_running, v))
    return out
