"""The class table: throughput (steps/s) of each workload class on each GPU type, per gang size,
and the one matcher of ``fair:class`` names.

A class is named exactly as in the table (``conf/classes.csv``, or the embedded Gavel rows under
:func:`gavel_class_name`): the submit plugin looks up ``speeds/<class>`` the same way, so a
name the controller matches is a name the plugin matches. Fuzzy matching (``resnet50`` for
``ResNet-50 (batch size 16)``) would make the two disagree, so there is none.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..inputs import fullmatch, read_text
from ..names import CLASS
from ..errors import Finding, InputError
from ..model import frozen_map
from . import gavel

#: what a class name may look like (tags are user text)


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
    m = re.fullmatch(r"(.*?)\s*\(batch size (\d+)\)\s*", job_type)
    base, bs = (m.group(1), m.group(2)) if m else (job_type, None)
    slug = re.sub(r"[^a-z0-9.]+", "-", base.lower()).strip("-")
    return f"{slug}-bs{bs}" if bs else slug


def embedded_rows() -> list[dict[str, Any]]:
    """Rows of the default class table: every Gavel job type measured on every GPU type, at
    every gang size measured (``gpus``; 0 throughput where Gavel measured that it cannot run).

    Gavel's ``*_unconsolidated`` variants are left out (they are placements, not GPU types).
    """
    table = gavel.load(None)
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
    fields, data = _read_csv(path)
    if "class" not in fields:
        raise InputError(source, [Finding("header", "needs a 'class' column")])
    types = [f for f in fields if f not in ("class", "gavel_job_type", "description", "gpus")]
    problems: list[Finding] = []
    out: dict[str, dict[str, float]] = {}
    sizes: dict[str, dict[int, dict[str, float]]] = {}
    seen: set[tuple[str, int]] = set()
    for i, raw in data:
        name = (raw.get("class") or "").strip()
        if not fullmatch(CLASS, name):
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


def _read_csv(path: str | Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and the (line, row) pairs of the CSV at ``path``, read as every input is
    (:func:`~slurm_fair.inputs.read_text`: a regular UTF-8 file); a malformed CSV (a cell over
    csv's field limit, a stray quote) is an InputError naming the file and the line, not a
    ``_csv.Error`` traceback."""
    source = str(path)
    text = read_text(path, "class table")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = list(reader.fieldnames or [])
        rows = []
        for row in reader:
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        line = max(reader.line_num, 1)
        why = str(exc)
        if "field larger than field limit" in why:
            why = f"a cell longer than {csv.field_size_limit()} characters"
        raise InputError(source, [Finding(f"line {line}", f"not a valid CSV table: {why}")]) from None
    return fields, rows


def known_class(name: str, gpus: int, table: ClassTable, online: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether ``name`` names a class: a row of the table, or observations (its own or, for a
    gang of ``gpus``, those pooled as ``name@gpus``). The one matcher of class names."""
    return name in table or name in online or f"{name}@{gpus}" in online
