"""Isolated job throughputs per (job type, GPU count) and GPU type, in Gavel's JSON format.

The simulator and the controller's class table both need ``T_jk`` for a job *type* (a training
workload, e.g. ``"ResNet-50 (batch size 32)"``) running on ``g`` GPUs of type ``k``. Gavel's
measured table (MIT, embedded as ``slurm_fair/data/gavel_throughputs.json``) is the default
source; any file of the same shape can replace it::

    {"v100": {"('ResNet-50 (batch size 32)', 1)": {"null": 26.0, ...}, ...}, "p100": {...}}

Only the ``"null"`` entry (the job running alone) is used; co-location pairs are ignored.

Some (job type, GPU count) pairs are not measured (Philly traces ask for 16 or 32 GPUs; some job
types were measured on 1 GPU only). The documented **fallback**, counted per pair in
:attr:`ThroughputTable.fallbacks` so reports can say how much of a result rests on it:

1. the same job type on the same GPU type at the *nearest measured GPU count* ``g0`` (ties go to
   the smaller count), scaled linearly: ``T(g) = T(g0) * g / g0``. Linear scaling is optimistic
   above 8 GPUs; it keeps a job's relative speed across GPU types, which is what heterogeneity-
   aware policies act on;
2. a job type with no measurement at all on that GPU type: the mean per-GPU throughput of all job
   types measured there, times ``g``.

A measured ``0`` (e.g. ResNet-50 batch 128 on 2+ K80s: out of memory) is kept: the job cannot run
there. Unknown job types are not guessed by :meth:`ThroughputTable.throughputs`' callers that
need strictness: use :meth:`ThroughputTable.knows` first.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import Finding, InputError
from ..inputs import load_json, number_problem, parse_json, shown
from ..model import MAX_GPUS, throughput_problem

#: name shown for the embedded table in messages and results
EMBEDDED = "embedded Gavel table (slurm_fair/data/gavel_throughputs.json, MIT)"


#: Gavel's key: a Python tuple literal of a quoted job type and a GPU count. Read by this
#: pattern, not ``ast.literal_eval``: a bad key then gets a message saying what a key looks like
#: (``literal_eval`` answered ``malformed node or string: <ast.Name object at 0x...>``) and no
#: key, however long or nested, can exhaust the parser.
_KEY = re.compile(r"""\(\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*,\s*([0-9]{1,7})\s*\)""")
_KEY_EXAMPLE = "\"('ResNet-50 (batch size 32)', 1)\""


def parse_key(key: str) -> tuple[str, int]:
    """``"('ResNet-50 (batch size 32)', 1)"`` -> ``("ResNet-50 (batch size 32)", 1)``.

    Raises ValueError for anything else (the loader turns it into a Finding).
    """
    m = _KEY.fullmatch(key)
    if m is None:
        raise ValueError(f"expected a key like {_KEY_EXAMPLE} (a quoted job type and a GPU count), got {key[:80]!r}")
    job_type, gpus = m.group(1) if m.group(1) is not None else m.group(2), int(m.group(3))
    if not job_type.strip():
        raise ValueError(f"the job type is empty in {key[:80]!r}")
    if problem := number_problem(gpus, lo=1, hi=MAX_GPUS, integer=True):
        raise ValueError(f"the GPU count {problem}")
    return job_type, gpus


def format_key(job_type: str, gpus: int) -> str:
    """The inverse of :func:`parse_key` (Gavel's spelling of a key)."""
    return str((job_type, int(gpus)))


@dataclass
class ThroughputTable:
    """Measured steps/s: ``data[gpu_type][(job_type, gpus)]``.

    Mutable only in :attr:`fallbacks` (a counter of fallback lookups per ``(job_type, gpus,
    gpu_type)``), so one table can be shared by a whole simulation and asked afterwards how
    often it had to guess.
    """

    data: dict[str, dict[tuple[str, int], float]]
    source: str = EMBEDDED
    fallbacks: Counter = field(default_factory=Counter)

    @property
    def gpu_types(self) -> list[str]:
        """GPU types of the table (including Gavel's ``*_unconsolidated`` variants), sorted."""
        return sorted(self.data)

    @property
    def job_types(self) -> list[str]:
        """Every job type measured on at least one GPU type, sorted."""
        return sorted({jt for table in self.data.values() for jt, _ in table})

    def gpu_counts(self, job_type: str) -> list[int]:
        """GPU counts measured for ``job_type`` on any GPU type, sorted."""
        return sorted({g for table in self.data.values() for jt, g in table if jt == job_type})

    def knows(self, job_type: str) -> bool:
        """True when ``job_type`` is measured somewhere (unknown types are usually typos)."""
        return any(jt == job_type for table in self.data.values() for jt, _ in table)

    def suggest(self, job_type: str) -> str | None:
        """The closest known job type name, for 'did you mean' messages."""
        close = difflib.get_close_matches(job_type, self.job_types, n=1)
        return close[0] if close else None

    def is_measured(self, job_type: str, gpus: int, gpu_type: str) -> bool:
        return (job_type, gpus) in self.data.get(gpu_type, {})

    @property
    def fallback_count(self) -> int:
        """Total number of lookups answered by the fallback."""
        return sum(self.fallbacks.values())

    def lookup(self, job_type: str, gpus: int, gpu_type: str) -> float:
        """``T`` of ``job_type`` on ``gpus`` GPUs of ``gpu_type`` (steps/s), with the fallback.

        Raises KeyError for a GPU type the table does not have at all.
        """
        table = self.data[gpu_type]
        measured = table.get((job_type, gpus))
        if measured is not None:
            return measured
        self.fallbacks[(job_type, gpus, gpu_type)] += 1
        counts = sorted(g for jt, g in table if jt == job_type)
        if counts:
            g0 = min(counts, key=lambda g: (abs(g - gpus), g))
            return table[(job_type, g0)] * gpus / g0
        per_gpu = [t / g for (_, g), t in table.items()]
        return (sum(per_gpu) / len(per_gpu)) * gpus if per_gpu else 0.0

    def throughputs(self, job_type: str, gpus: int, gpu_types: list[str] | None = None) -> dict[str, float]:
        """``{gpu_type: T}`` over ``gpu_types`` (default: every type of the table)."""
        return {k: self.lookup(job_type, gpus, k) for k in (gpu_types or self.gpu_types)}


def _from_document(doc: object, source: str) -> ThroughputTable:
    """Validate a parsed Gavel JSON document completely (all problems at once)."""
    problems: list[Finding] = []
    data: dict[str, dict[tuple[str, int], float]] = {}
    if not isinstance(doc, dict) or not doc:
        raise InputError(source, [Finding("", "expected an object {gpu_type: {key: {\"null\": steps_per_s}}}")])
    for gpu_type, entries in doc.items():
        if not isinstance(entries, dict):
            problems.append(Finding(shown(gpu_type), "expected an object of job keys"))
            continue
        table: dict[tuple[str, int], float] = {}
        for key, value in entries.items():
            where = f"{shown(gpu_type)}.{shown(key)}"
            try:
                job = parse_key(key)
            except ValueError as exc:
                problems.append(Finding(where, f"bad key: {exc}"))
                continue
            if isinstance(value, dict) and "null" not in value:
                problems.append(Finding(where, 'expected {"null": steps_per_s}: no "null" entry'))
                continue
            raw = value.get("null") if isinstance(value, dict) else value
            if problem := throughput_problem(raw):
                problems.append(Finding(where, f'throughput ("null") {problem}'))
                continue
            table[job] = float(raw)  # type: ignore[arg-type]  # checked by throughput_problem
        data[gpu_type] = table
    if problems:
        raise InputError(source, problems)
    return ThroughputTable(data=data, source=source)


def load(path: str | Path | None = None) -> ThroughputTable:
    """Load a Gavel-format throughput JSON; ``None`` loads the embedded measured table.

    Bad files raise :class:`InputError` naming the file and every bad key.
    """
    if path is None:
        text = resources.files("slurm_fair").joinpath("data").joinpath("gavel_throughputs.json").read_text()
        return _from_document(parse_json(text, EMBEDDED), EMBEDDED)
    return _from_document(load_json(path, "throughput"), str(path))
