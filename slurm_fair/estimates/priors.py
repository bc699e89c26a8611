"""Type priors: what a GPU type's speed is believed to be before any job of a group ran on it.

Sites spell one model many ways (``a100``, ``A100-80G``, ``nvidia_a100-sxm4-80gb``, MIG slices
``nvidia_a100_3g.20gb`` or a bare ``3g.40gb``): :func:`normalise` maps a gres type string to a
canonical model of :mod:`.priors_table` (and the fraction of it a MIG slice is). A type with no
prior is never "as fast as the best": it gets :func:`prior_speeds`' conservative value, the
slowest prior among the cluster's known types, and a warning naming it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

from .priors_table import MIG_SLICES, PRIORS

#: the families of the table, and ``generic`` (a job whose family is not known)
FAMILIES = ("transformer", "cnn", "inference", "fp64")
GENERIC = "generic"
#: the training families whose geometric mean is a model's ``generic`` speed
_GENERIC_OF = ("transformer", "cnn")

_MODEL = re.compile(
    r"(?<![a-z0-9])(h200|h100|a100|l40s|l40|a40|a10|l4|t4|v100s?|p100|k80|mi300x|mi250x?)(?![0-9a-z])"
)
_MIG = re.compile(r"(?<![0-9])([1-7])g\.([0-9]+)gb(?![a-z0-9])")


@dataclass(frozen=True)
class TypeModel:
    """A gres type string read as a model: ``model`` of the table (None: not recognised) and
    ``fraction`` of that model's GPU (1.0, or g/7 for a MIG slice)."""

    raw: str
    model: str | None
    fraction: float = 1.0


@lru_cache(maxsize=4096)
def normalise(gpu_type: str) -> TypeModel:
    """``"nvidia_a100-sxm4-80gb"`` -> a100_80g; ``"a100_3g.20gb"`` -> a100 at 3/7; unknown -> None.

    Lower-cased, ``-`` and spaces read as ``_``; vendor words (``nvidia``, ``tesla``) are ignored
    by the token match. Memory (``80g``/``80gb``) and form factor (``pcie``) choose the variant;
    a bare MIG profile is read as a slice of an 80 GB A100 when its memory says 80 GB-class
    (``3g.40gb``), else of a 40 GB one.
    """
    text = gpu_type.strip().lower().replace("-", "_").replace(" ", "_")
    mig = _MIG.search(text)
    fraction = 1.0
    rest = text
    if mig:
        g, mem = int(mig.group(1)), int(mig.group(2))
        fraction = g / MIG_SLICES
        rest = text[:mig.start()] + text[mig.end():]
        per_slice = mem / g
    m = _MODEL.search(rest)
    if m is None:
        if mig:  # a bare profile: the A100 whose memory it slices
            return TypeModel(gpu_type, "a100_80g" if per_slice >= 10 else "a100", fraction)
        return TypeModel(gpu_type, None)
    base = m.group(1)
    if base.startswith("v100"):
        base = "v100"
    if base == "mi250":
        base = "mi250x"
    big = bool(re.search(r"(?<![0-9])80_?gb?(?![0-9])", rest)) or (mig is not None and per_slice >= 10)
    pcie = "pcie" in rest
    if base == "a100":
        base = ("a100_pcie_80g" if big else "a100_pcie") if pcie else ("a100_80g" if big else "a100")
    elif base == "h100" and (pcie or "nvl" in rest):
        base = "h100_pcie"
    return TypeModel(gpu_type, base, fraction)


@lru_cache(maxsize=1)
def table() -> dict[str, dict[str, float]]:
    """``{model: {family: speed}}`` with each model's ``generic`` added."""
    out: dict[str, dict[str, float]] = {}
    for model, family, speed, _, _ in PRIORS:
        out.setdefault(model, {})[family] = speed
    for by in out.values():
        train = [by[f] for f in _GENERIC_OF if f in by] or list(by.values())
        by[GENERIC] = math.exp(sum(math.log(v) for v in train) / len(train))
    return out


def sources() -> dict[tuple[str, str], tuple[str, str]]:
    """``{(model, family): (source key, note)}``: where each number comes from (``explain``)."""
    return {(m, f): (src, note) for m, f, _, src, note in PRIORS}


def prior(gpu_type: str, family: str = GENERIC) -> float | None:
    """The prior speed of ``gpu_type`` for ``family`` (its ``generic`` when the family has no
    number); None when the type is not a known model."""
    tm = normalise(gpu_type)
    if tm.model is None:
        return None
    by = table()[tm.model]
    return by.get(family, by[GENERIC]) * tm.fraction


@dataclass(frozen=True)
class Priors:
    """Prior speeds of a cluster's types for one family, fastest 1.0, and the types guessed."""

    speed: Mapping[str, float]
    #: types with no prior (given the conservative value)
    unknown: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        return [f"GPU type {k!r} has no speed prior (not a known model): assumed as slow as the "
                f"slowest known type until jobs run there" for k in self.unknown]


def prior_speeds(gpu_types: Iterable[str], family: str = GENERIC) -> Priors:
    """Relative prior speeds of ``gpu_types`` (fastest known = 1.0).

    Unknown types get the slowest known value (conservative: a policy that does not know a type
    will not send jobs there first); with no known type at all every type is 1.0 (Slurm's view).
    """
    types = list(gpu_types)
    known = {k: v for k in types if (v := prior(k, family)) is not None and v > 0}
    if not known:
        return Priors({k: 1.0 for k in types}, tuple(k for k in types))
    best = max(known.values())
    slowest = min(known.values()) / best
    speed = {k: (known[k] / best if k in known else slowest) for k in types}
    return Priors(speed, tuple(k for k in types if k not in known))


def log_prior_table(gpu_types: Iterable[str]) -> dict[str, dict[str, float]]:
    """``{family: {type: log prior speed}}`` over the known ``gpu_types`` (families with at
    least two known types only): what the learner fits a group's family against."""
    types = list(gpu_types)
    out: dict[str, dict[str, float]] = {}
    for family in FAMILIES + (GENERIC,):
        known = {k: v for k in types if (v := prior(k, family)) is not None and v > 0}
        if len(known) >= 2 or family == GENERIC:
            out[family] = {k: math.log(v) for k, v in known.items()}
    return out


def families_of(mapping: Mapping[str, object]) -> list[str]:
    """The families named in ``mapping`` that exist (config validation helper)."""
    return [f for f in mapping if f in FAMILIES or f == GENERIC]
