"""Workloads for the simulator: trace CSV, Gavel ``.trace`` files, and their windows.

A workload is a list of :class:`TraceJob` (arrival-ordered) plus tenant weights. Readers
validate completely and raise :class:`InputError` naming the file, the line and the field of
every problem at once, so a bad trace is fixed in one go (exit 2 at the CLI, never a traceback).

Job ids are ``"<tenant>/<job_id>"`` (the CSV's job_id, or the 1-based line number of a Gavel
trace), unique across tenants by construction.

A CSV may give a job's gang shape in the optional ``nodes`` column: ``nodes`` nodes with
``gpus / nodes`` GPUs each, like ``sbatch -N nodes --gres=gpu:<gpus/nodes>`` (an 8-GPU job on one
node fits only where a node has 8 GPUs). Without it a job takes its GPUs in any split.
"""

from __future__ import annotations

import csv
from collections import Counter
import difflib
import io
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping

from .. import atomic
from ..errors import Finding, InputError, UserError
from ..gangs import Shape
from ..inputs import number_problem, parse_number, read_text, shown
from ..model import MAX_GPUS, MAX_QUANTITY, MAX_WEIGHT, MIN_WEIGHT
from ..estimates.gavel import ThroughputTable

CSV_COLUMNS = ("tenant", "job_id", "job_type", "gpus", "total_steps", "arrival_s")

#: latest arrival accepted (seconds; about 317 years: room for Unix timestamps, and far below
#: where adding a round to the clock stops changing it)
MAX_ARRIVAL_S = 1e10


@dataclass(frozen=True)
class TraceJob:
    """One job of a workload: what it is, how much work, when it arrives."""

    id: str
    tenant: str
    job_type: str
    gpus: int
    total_steps: float
    arrival_s: float
    #: nodes of ``gpus / nodes`` GPUs each (the trace's ``nodes`` column); None: any split
    nodes: int | None = None
    #: where the job was read (``FILE line N``), for messages about it; empty for generated jobs
    where: str = field(default="", compare=False)

    @property
    def shape(self) -> Shape:
        """The gang's geometry (:mod:`slurm_fair.gangs`)."""
        if self.nodes:
            return Shape(self.gpus, self.gpus // self.nodes, self.nodes)
        return Shape(self.gpus)


@dataclass(frozen=True)
class Workload:
    """Jobs sorted by (arrival, id) and the weight of every tenant (default 1)."""

    jobs: tuple[TraceJob, ...]
    weights: Mapping[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @property
    def tenants(self) -> list[str]:
        return sorted({j.tenant for j in self.jobs})

    def weight(self, tenant: str) -> float:
        return float(self.weights.get(tenant, 1.0))

    def describe(self) -> dict[str, object]:
        """A JSON-friendly summary (goes under ``"workload"`` in the results)."""
        return {
            "sources": list(self.sources),
            "jobs": len(self.jobs),
            "tenants": {t: {"weight": self.weight(t), "jobs": n}
                        for t, n in sorted(Counter(j.tenant for j in self.jobs).items())},
            "gpus_requested": sorted({j.gpus for j in self.jobs}),
            "last_arrival_s": max((j.arrival_s for j in self.jobs), default=0.0),
        }


def make_workload(jobs: Iterable[TraceJob], weights: Mapping[str, float] | None = None, sources: Iterable[str] = ()) -> Workload:
    ordered = tuple(sorted(jobs, key=lambda j: (j.arrival_s, j.id)))
    return Workload(ordered, dict(weights or {}), tuple(sources))


# --------------------------------------------------------------------------------------------
# field parsing with findings
# --------------------------------------------------------------------------------------------


def _number(raw: str, where: str, name: str, problems: list[Finding], *, integer: bool = False,
            positive: bool = False, hi: float = MAX_QUANTITY) -> float | None:
    """The number of a cell (:func:`parse_number`, then :func:`number_problem`: finite, >= 0 or
    > 0, at most ``hi``), or None with a finding naming the column."""
    text = (raw or "").strip()
    value = parse_number(text)
    if value is None:
        finite = "finite " if text.lower().lstrip("+-") in ("nan", "inf", "infinity") or _overflows(text) else ""
        problems.append(Finding(where, f"{name}: expected a {finite}number, got {text[:40]!r}"))
        return None
    problem = number_problem(value, lo=0, lo_open=positive, hi=hi, integer=integer)
    if problem:
        problems.append(Finding(where, f"{name}: {problem}"))
        return None
    return value


def _overflows(text: str) -> bool:
    """Whether ``text`` is a number too large for a float (``1e400``)."""
    try:
        return math.isinf(float(text))
    except ValueError:
        return False


def _check_job_type(job_type: str, where: str, table: ThroughputTable | None, problems: list[Finding]) -> bool:
    if not job_type:
        problems.append(Finding(where, "job_type: empty"))
        return False
    if table is not None and not table.knows(job_type):
        hint = table.suggest(job_type)
        extra = f" (did you mean {hint!r}?)" if hint else ""
        problems.append(Finding(where, f"job_type: {job_type!r} is not in the throughput table{extra}"))
        return False
    return True


# --------------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------------


def _nodes(raw: str, gpus: float | None, where: str, problems: list[Finding]) -> int | None:
    """The optional ``nodes`` cell: None when empty; ``gpus`` must split evenly over the nodes."""
    if raw == "":
        return None
    nodes = _number(raw, where, "nodes", problems, integer=True, positive=True, hi=MAX_GPUS)
    if nodes is None:
        return None
    if gpus is not None and gpus % nodes:
        problems.append(Finding(where, f"nodes: gpus {int(gpus)} is not a multiple of nodes {int(nodes)}"))
        return None
    return int(nodes)


def _rows(text: str, source: str) -> list[tuple[int, list[str]]]:
    """The CSV records of ``text`` with the line each starts on. Lines end only at ``\n``,
    ``\r\n`` or ``\r`` (the csv module on ``newline=""``): ``str.splitlines`` also splits at
    U+2028 and other separators inside a cell, and the message then named a problem ("expected 6
    fields, got 1") the file does not have. A quoted newline stays inside its cell. A cell over
    the csv module's size limit, or a quote it cannot read, is a finding naming the line."""
    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return rows
        except csv.Error as exc:
            raise InputError(source, [Finding(f"line {reader.line_num}", f"not CSV: {exc}")]) from None
        rows.append((start, row))
        start = reader.line_num + 1


#: longest tenant name of a trace (a Slurm account has at most 64 characters)
MAX_TENANT_CHARS = 128


def tenant_problem(name: str) -> str | None:
    """Why ``name`` cannot be a tenant of a trace, or None: printable text (spaces allowed) of
    at most :data:`MAX_TENANT_CHARS` characters. A newline or a U+2028 in a Gavel file name was
    simulated, then broke the trace ``--save-workload`` wrote and every one-line message."""
    if not name:
        return "empty"
    if not name.isprintable() or len(name) > MAX_TENANT_CHARS or name != name.strip():
        return (f"{shown(name)} is not a tenant name (printable text of at most {MAX_TENANT_CHARS} characters, "
                "no line break or control character)")
    return None


def read_csv(path: str | Path, table: ThroughputTable | None = None) -> tuple[list[TraceJob], dict[str, float]]:
    """Read a trace CSV (docs/fairness.md): ``tenant,job_id,job_type,gpus,total_steps,arrival_s[,weight][,nodes]``."""
    path = Path(path)
    text = read_text(path, "trace")
    source = str(path)
    rows = _rows(text, source)
    if not rows:
        raise InputError(source, [Finding("line 1", "empty file: expected a header " + ",".join(CSV_COLUMNS))])
    header_line, header = rows[0]
    columns = [c.strip() for c in header]
    missing = [c for c in CSV_COLUMNS if c not in columns]
    if missing:
        raise InputError(source, [Finding(f"line {header_line}", f"missing column(s): {', '.join(missing)} "
                                                                f"(header must contain {','.join(CSV_COLUMNS)})")])
    twice = sorted({c for c in columns if c and columns.count(c) > 1})
    if twice:  # one of the two cells would be used silently
        raise InputError(source, [Finding(f"line {header_line}", f"column {shown(twice[0])!r} given twice "
                                                                 f"(columns {', '.join(shown(c) for c in columns)})")])
    index = {c: columns.index(c) for c in columns}
    problems: list[Finding] = []
    jobs: list[TraceJob] = []
    weights: dict[str, float] = {}
    weight_line: dict[str, int] = {}
    seen: dict[str, int] = {}
    for lineno, row in rows[1:]:
        if not row or all(not c.strip() for c in row):
            continue
        where = f"line {lineno}"
        if len(row) != len(columns):
            problems.append(Finding(where, f"expected {len(columns)} fields, got {len(row)}"))
            continue
        get = {c: row[i].strip() for c, i in index.items()}
        tenant, job_id, job_type = get["tenant"], get["job_id"], get["job_type"]
        ok = True
        bad_tenant = tenant_problem(tenant)
        if bad_tenant:
            problems.append(Finding(where, f"tenant: {bad_tenant}"))
            ok = False
            tenant = ""
        if not job_id:
            problems.append(Finding(where, "job_id: empty"))
            ok = False
        ok &= _check_job_type(job_type, where, table, problems)
        gpus = _number(get["gpus"], where, "gpus", problems, integer=True, positive=True, hi=MAX_GPUS)
        steps = _number(get["total_steps"], where, "total_steps", problems, positive=True)
        arrival = _number(get["arrival_s"], where, "arrival_s", problems, hi=MAX_ARRIVAL_S)
        nodes = _nodes(get["nodes"], gpus, where, problems) if "nodes" in index else None
        if "weight" in index and get["weight"] != "":
            weight = _number(get["weight"], where, "weight", problems, positive=True, hi=MAX_WEIGHT)
            if weight is not None and weight < MIN_WEIGHT:
                problems.append(Finding(where, f"weight: must be >= {MIN_WEIGHT:g}, got {weight:g}"))
                weight = None
            if weight is not None and tenant:
                if tenant in weights and weights[tenant] != weight:
                    problems.append(
                        Finding(where, f"weight: tenant {tenant!r} has weight {weights[tenant]:g} "
                                      f"on line {weight_line[tenant]}, {weight:g} here")
                    )
                else:
                    weights[tenant] = weight
                    weight_line.setdefault(tenant, lineno)
        uid = f"{tenant}/{job_id}"
        if tenant and job_id:
            if uid in seen:
                problems.append(Finding(where, f"job_id: {job_id!r} of tenant {tenant!r} already on line {seen[uid]}"))
                ok = False
            else:
                seen[uid] = lineno
        if ok and gpus is not None and steps is not None and arrival is not None:
            jobs.append(TraceJob(uid, tenant, job_type, int(gpus), steps, arrival, nodes, where=f"{source} {where}"))
    if problems:
        raise InputError(source, problems)
    if not jobs:
        raise InputError(source, [Finding("", "no jobs in the trace")])
    return jobs, weights


def read_gavel_trace(path: str | Path, table: ThroughputTable | None = None, tenant: str | None = None) -> list[TraceJob]:
    """Read a Gavel ``.trace`` (one tenant per file: the file stem).

    Two layouts, told apart by the number of tab-separated fields: the 7-column simulation
    traces (``job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_s,
    scale_factor``) and the 10-column physical-cluster traces (``job_type, command,
    working_dir, num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight,
    SLO, arrival_time``). ``scale_factor`` is the GPU count.
    """
    path = Path(path)
    tenant = tenant or path.stem
    bad_tenant = tenant_problem(tenant)
    if bad_tenant:
        raise InputError(str(path), [Finding("", f"tenant (the file name without .trace): {bad_tenant}; "
                                                 "rename the file")])
    text = read_text(path, "trace")
    problems: list[Finding] = []
    jobs: list[TraceJob] = []
    # lines end at \n, \r\n or \r only (str.splitlines also splits at U+2028 inside a field)
    for lineno, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        fields = line.split("\t")
        if len(fields) == 7:
            job_type, steps_raw, arrival_raw, gpus_raw = fields[0], fields[4], fields[5], fields[6]
        elif len(fields) == 10:
            job_type, steps_raw, gpus_raw, arrival_raw = fields[0], fields[5], fields[6], fields[9]
        else:
            problems.append(Finding(where, f"expected 7 (or 10) tab-separated fields, got {len(fields)}"))
            continue
        ok = _check_job_type(job_type.strip(), where, table, problems)
        steps = _number(steps_raw, where, "total_steps", problems, positive=True)
        arrival = _number(arrival_raw, where, "arrival_s", problems, hi=MAX_ARRIVAL_S)
        gpus = _number(gpus_raw, where, "scale_factor", problems, integer=True, positive=True, hi=MAX_GPUS)
        if ok and steps is not None and arrival is not None and gpus is not None:
            jobs.append(TraceJob(f"{tenant}/{lineno}", tenant, job_type.strip(), int(gpus), steps, arrival,
                                 where=f"{path} {where}"))
    if problems:
        raise InputError(str(path), problems)
    if not jobs:
        raise InputError(str(path), [Finding("", "no jobs in the trace")])
    return jobs


def parse_window(spec: str) -> tuple[float, float]:
    """``"START:END"`` seconds (END may be empty for open-ended) -> (start, end)."""
    start_s, sep, end_s = spec.partition(":")
    start = parse_number(start_s) if start_s.strip() else 0.0
    end = parse_number(end_s) if end_s.strip().lower() not in ("", "inf", "infinity") else math.inf
    if start is None or end is None:
        raise UserError(f"--window {spec[:80]!r}: expected START:END in seconds (finite numbers; END empty for "
                        "no end), e.g. 0:86400") from None
    if not sep or start < 0 or end <= start:
        raise UserError(f"--window {spec[:80]!r}: expected START:END in seconds with 0 <= START < END")
    return start, end


def select(
    jobs: Iterable[TraceJob],
    window: tuple[float, float] | None = None,
    max_jobs: int | None = None,
    static: bool = False,
) -> list[TraceJob]:
    """The jobs of a window of arrivals, re-based to its start, at most ``max_jobs`` per tenant.

    ``static`` puts every selected job at time 0 (makespan experiments).
    """
    start, end = window or (0.0, math.inf)
    chosen = sorted((j for j in jobs if start <= j.arrival_s < end), key=lambda j: (j.arrival_s, j.id))
    if max_jobs is not None:
        per_tenant: dict[str, int] = {}
        kept = []
        for job in chosen:
            n = per_tenant.get(job.tenant, 0)
            if n < max_jobs:
                kept.append(job)
                per_tenant[job.tenant] = n + 1
        chosen = kept
    return [replace(j, arrival_s=0.0 if static else j.arrival_s - start) for j in chosen]


def load_traces(
    paths: Iterable[str | Path],
    table: ThroughputTable | None = None,
    window: tuple[float, float] | None = None,
    max_jobs: int | None = None,
    static: bool = False,
    weights: Mapping[str, float] | None = None,
) -> Workload:
    """Read CSV and Gavel traces (by extension: ``.csv`` is CSV, anything else Gavel) into one
    workload. Explicit ``weights`` override the CSV weight column."""
    all_jobs: list[TraceJob] = []
    all_weights: dict[str, float] = {}
    sources: list[str] = []
    for raw in paths:
        path = Path(raw)
        sources.append(path.name)
        if path.suffix.lower() == ".csv":
            jobs, file_weights = read_csv(path, table)
            all_weights.update(file_weights)
        else:
            jobs = read_gavel_trace(path, table)
        clash = {j.id for j in jobs} & {j.id for j in all_jobs}
        if clash:
            raise InputError(str(path), [Finding("", f"job {sorted(clash)[0]!r} (and {len(clash) - 1} more) already "
                                                      "given by an earlier trace: one tenant per file")])
        all_jobs.extend(jobs)
    check_weights(weights or {}, {j.tenant for j in all_jobs}, "the trace(s)")
    all_weights.update(weights or {})
    selected = select(all_jobs, window, max_jobs, static)
    if not selected:  # only a window can leave nothing: every trace has a job
        first, last = min(j.arrival_s for j in all_jobs), max(j.arrival_s for j in all_jobs)
        raise UserError(f"--window {window_text(window)}: no job of the trace(s) arrives inside it "
                        f"(arrivals span {first:g} to {last:g} s)")
    return make_workload(selected, all_weights, sources)


def window_text(window: tuple[float, float] | None) -> str:
    """``(0, inf)`` -> ``"0:"``: a window as the option spells it."""
    start, end = window or (0.0, math.inf)
    return f"{start:g}:" + ("" if math.isinf(end) else f"{end:g}")


def parse_weights(specs: Iterable[str]) -> dict[str, float]:
    """``["alice=2", "bob=1"]`` -> weights; a UserError naming the bad item."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        weight = parse_number(value)
        if not sep or not name.strip() or weight is None or number_problem(weight, lo=MIN_WEIGHT, hi=MAX_WEIGHT):
            raise UserError(f"--weight {spec[:80]!r}: expected TENANT=WEIGHT with a weight in "
                            f"[{MIN_WEIGHT:g}, {MAX_WEIGHT:g}]")
        bad_tenant = tenant_problem(name.strip(" "))  # only spaces: a newline is no part of a name
        if bad_tenant:
            raise UserError(f"--weight {spec[:80]!r}: {bad_tenant}")
        out[name.strip(" ")] = weight
    return out


def check_weights(weights: Mapping[str, float], tenants: Iterable[str], where: str) -> None:
    """A UserError for a ``--weight`` of a tenant the workload does not have: a misspelt tenant
    would otherwise keep weight 1 with rc 0 and nothing said."""
    known = sorted(set(tenants))
    for name in weights:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listed = ", ".join(shown(t) for t in known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
            raise UserError(f"--weight {shown(name)}=...: no tenant {shown(name)!r} in {where}{hint}; "
                            f"its tenants: {listed}")


def write_csv(workload: Workload, path: str | Path) -> None:
    """Write a workload as a trace CSV (:func:`csv_text`), atomically."""
    atomic.write_text(path, csv_text(workload))


def csv_text(workload: Workload) -> str:
    """A workload as a trace CSV (with the weight column when any weight is not 1, the
    nodes column when any job has a gang shape: empty for the jobs without); in memory, so a
    command writing several files can write them together (``simulate --save-workload``)."""
    with_weight = any(w != 1.0 for w in workload.weights.values())
    with_nodes = any(j.nodes for j in workload.jobs)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(list(CSV_COLUMNS) + (["weight"] if with_weight else []) + (["nodes"] if with_nodes else []))
    for j in workload.jobs:
        job_id = j.id[len(j.tenant) + 1 :] if j.id.startswith(j.tenant + "/") else j.id
        row = [j.tenant, job_id, j.job_type, j.gpus, _num(j.total_steps), _num(j.arrival_s)]
        row += [f"{workload.weight(j.tenant):g}"] if with_weight else []
        writer.writerow(row + ([j.nodes or ""] if with_nodes else []))
    return buf.getvalue()


def _num(value: float) -> str:
    """Shortest exact text of a number (integers without a decimal point)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
