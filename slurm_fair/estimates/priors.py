"""Type priors: what a GPU type's speed is believed to be before any job of a group ran on it.

Sites spell one model many ways (``a100``, ``A100-80G``, ``nvidia_a100-sxm4-80gb``, MIG slices
``nvidia_a100_3g.20gb`` or a bare ``3g.40gb``): :func:`normalise` maps a gres type string to a
canonical model of :mod:`.priors_table` (and the fraction of it a MIG slice is). A type with no
prior is never "as fast as the best": it gets :func:`prior_speeds`' conservative value, half the
slowest prior among the cluster's known types, and a warning naming it. Each prior carries its
spread (:func:`spread`): how far jobs of its family scatter around it, which the learner reads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

from .priors_table import DEFAULT_SPREAD, DERIVED_SPREAD, GENERIC_SPREAD, MIG_SLICES, PRIORS, SPREADS

#: the families of the table, and ``generic`` (a job whose family is not known)
FAMILIES = ("transformer", "cnn", "inference", "fp64")
GENERIC = "generic"
#: the training families whose geometric mean is a model's ``generic`` speed
_GENERIC_OF = ("transformer", "cnn")

#: (pattern, model) in the order tried: the most specific first. Text is lower-cased with ``-``
#: and spaces read as ``_``; a pattern matches whole words (not inside a longer name), a form
#: factor glued on allowed (``a100sxm4``, ``h100pcie``, ``h100nvl``; ``v100l``/``p100l``: the
#: Alliance's large-memory V100/P100)
_MODELS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), m) for p, m in (
    (r"(?<![a-z0-9])gb200(?![0-9a-z])", "b200"),  # Grace + B200: per GPU, a B200 (conservative)
    (r"(?<![a-z0-9])b200(?![0-9a-z])", "b200"),
    (r"(?<![a-z0-9])gh200(?![0-9a-z])", "gh200"),
    (r"(?<![a-z0-9])h200(?![0-9a-z])", "h200"),
    (r"(?<![a-z0-9])h800(?:sxm\d?|pcie)?(?![0-9a-z])", "h800"),
    (r"(?<![a-z0-9])h100(?:sxm\d?|pcie|nvl)?(?![0-9a-z])", "h100"),
    (r"(?<![a-z0-9])h20(?![0-9a-z])", "h20"),
    (r"(?<![a-z0-9])a800(?:sxm\d?|pcie)?(?![0-9a-z])", "a100"),  # A800: an A100 with NVLink cut; computes as one
    (r"(?<![a-z0-9])a100(?:sxm\d?|pcie|l)?(?![0-9a-z])", "a100"),
    (r"(?<![a-z0-9])l40s(?![0-9a-z])", "l40s"),
    (r"(?<![a-z0-9])l40(?![0-9a-z])", "l40"),
    (r"(?<![a-z0-9])a40(?![0-9a-z])", "a40"),
    (r"(?<![a-z0-9])a30(?![0-9a-z])", "a30"),
    (r"(?<![a-z0-9])a10(?![0-9a-z])", "a10"),
    (r"(?<![a-z0-9])l4(?![0-9a-z])", "l4"),
    (r"(?<![a-z0-9])t4(?![0-9a-z])", "t4"),
    (r"(?<![a-z0-9])v100(?:s|l|sxm\d?|pcie)?(?![0-9a-z])", "v100"),
    (r"(?<![a-z0-9])p100(?:l|pcie|sxm\d?)?(?![0-9a-z])", "p100"),
    (r"(?<![a-z0-9])k80(?![0-9a-z])", "k80"),
    (r"(?<![a-z0-9])mi300x(?![0-9a-z])", "mi300x"),
    (r"(?<![a-z0-9])mi250x?(?![0-9a-z])", "mi250x"),  # MI250 (non-X) GCD: 181 vs 191 TFLOPS, ~5 % less
    (r"(?<![a-z0-9])mi210(?![0-9a-z])", "mi210"),
    (r"(?<![a-z0-9])rtx_?6000_?ada(?![0-9a-z])", "rtx_6000_ada"),
    (r"(?<![a-z0-9])(?:rtx_?)?a6000(?![0-9a-z])|rtx_a_?6000(?![0-9a-z])", "rtx_a6000"),
    (r"(?<![a-z0-9])(?:rtx_?)?a5000(?![0-9a-z])|rtx_a_?5000(?![0-9a-z])", "rtx_a5000"),
    (r"(?<![a-z0-9])(?:quadro_)?rtx_?8000(?![0-9a-z])", "quadro_rtx_8000"),
    (r"(?<![a-z0-9])(?:geforce_)?(?:rtx_?)?4090(?![0-9a-z])", "rtx_4090"),
    (r"(?<![a-z0-9])(?:geforce_)?(?:rtx_?)?3090(?![0-9a-z])", "rtx_3090"),
))
#: a MIG profile: ``[<c>c.]<g>g.<m>gb[+me]`` (compute instance c of a g-slice GPU instance)
_MIG = re.compile(r"(?<![0-9])(?:([1-7])c\.)?([1-7])g\.([0-9]+)gb(?:\+me)?(?![a-z0-9])")
#: compute slices of a parent GPU other than :data:`~.priors_table.MIG_SLICES` (A100, H100, H200,
#: B200: 7): the A30 has 4
_SLICES = {"a30": 4}
#: a bare profile's parent (NVIDIA's MIG profiles per GPU): the slowest GPU that offers it
#: (1g.10gb exists on 80 GB A100s and H100s: the A100 80GB; H100 94/96 GB: the PCIe H100)
_MIG_PARENT = {
    **dict.fromkeys(("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"), "a100"),
    **dict.fromkeys(("1g.6gb", "2g.12gb", "4g.24gb"), "a30"),
    **dict.fromkeys(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"), "a100_80g"),
    **dict.fromkeys(("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb", "3g.48gb", "4g.48gb",
                     "7g.96gb"), "h100_pcie"),
    **dict.fromkeys(("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"), "h200"),
    **dict.fromkeys(("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"), "b200"),
}


def _variant(base: str, rest: str, big: bool) -> str:
    """The table's model for a family name: memory and form factor choose A100/H100 variants."""
    pcie = "pcie" in rest
    if base == "a100":
        return ("a100_pcie_80g" if big else "a100_pcie") if pcie else ("a100_80g" if big else "a100")
    # NVL (the dual-board PCIe H100, 94 GB) is not NVLink (``NVlink_H100_80GB``: an SXM board)
    if base == "h100" and (pcie or re.search(r"(?<![a-z])nvl(?![a-z])", rest)):
        return "h100_pcie"
    return base


@dataclass(frozen=True)
class TypeModel:
    """A gres type string read as a model: ``model`` of the table (None: not recognised) and
    ``fraction`` of that model's GPU (1.0, or the compute slices of a MIG profile)."""

    raw: str
    model: str | None
    fraction: float = 1.0


@lru_cache(maxsize=4096)
def normalise(gpu_type: str) -> TypeModel:
    """``"nvidia_a100-sxm4-80gb"`` -> a100_80g; ``"a100_3g.20gb"`` -> a100 at 3/7; unknown -> None.

    Lower-cased, ``-`` and spaces read as ``_``; vendor words (``nvidia``, ``tesla``,
    ``NVlink``) are ignored by the word match. Memory (``80g``/``80gb``) and form factor
    (``pcie``, ``nvl``; ``nvlink`` is not ``nvl``) choose the variant. A MIG slice is
    ``slices / parent slices`` of its parent (``nvidia_a30_1g.6gb``: 1/4 of an A30); a bare
    profile (``3g.40gb``) is a slice of the slowest GPU that offers it.
    """
    text = gpu_type.strip().lower().replace("-", "_").replace(" ", "_")
    mig = _MIG.search(text)
    rest = text if mig is None else text[:mig.start()] + " " + text[mig.end():]
    base = next((m for p, m in _MODELS if p.search(rest)), None)
    # 80 GB: ``80g``, ``80gb``, ``_80`` (UiO Fox ``a100_80``), Mila's ``a100l`` (the large A100)
    big = bool(re.search(r"(?<![0-9])(80|94|96)(?:_?gb?)?(?![0-9])|(?<![a-z0-9])a100l(?![0-9a-z])", rest))
    if mig is None:
        return TypeModel(gpu_type, None if base is None else _variant(base, rest, big))
    c, g, mem = (int(x) if x else 0 for x in mig.groups())
    if base is None:
        parent = _MIG_PARENT.get(f"{g}g.{mem}gb")
        if parent is None:  # a profile of no GPU we know
            return TypeModel(gpu_type, None)
    else:
        # an A100 slice names its memory: 80 GB parents have >= 10 GB per g-slice (1g.10gb, 3g.40gb)
        parent = _variant(base, rest, big or (base == "a100" and mem / g >= 10))
    slices = _SLICES.get(parent, MIG_SLICES)
    return TypeModel(gpu_type, parent, min(1.0, (c or g) / slices))


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


#: an unknown type's prior, as a fraction of the slowest known type's: strictly below every known
#: type (a type nobody can name is not sent jobs before one that is known to be slow), and never
#: 1.0 when the cluster has one known type beside it (``a100`` + ``rtx30``: 0.5, not 1.0)
UNKNOWN_FACTOR = 0.5


def unknown_prior(known: Iterable[float]) -> float:
    """The prior of a type that is not a known model, beside the ``known`` priors (same scale):
    :data:`UNKNOWN_FACTOR` x the slowest known one; 1.0 when none is known (nothing to rank by)."""
    values = [v for v in known if v > 0]
    return UNKNOWN_FACTOR * min(values) if values else 1.0


@dataclass(frozen=True)
class Priors:
    """Prior speeds of a cluster's types for one family, fastest 1.0, and the types guessed."""

    speed: Mapping[str, float]
    #: types with no prior (given the conservative value)
    unknown: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        return [f"GPU type {k!r} has no speed prior (not a known model): assumed half as fast as the "
                f"slowest known type until jobs run there" for k in self.unknown]


def prior_speeds(gpu_types: Iterable[str], family: str = GENERIC) -> Priors:
    """Relative prior speeds of ``gpu_types`` (fastest known = 1.0).

    Unknown types get :func:`unknown_prior`: half the slowest known value, so they rank below
    every known type (conservative: a policy that does not know a type will not send jobs there
    first) and never at 1.0 beside one known type. With no known type at all every type is 1.0:
    nothing ranks them, so the policies see Slurm's view (every GPU alike), and each type is
    named in a warning.
    """
    types = list(gpu_types)
    known = {k: v for k in types if (v := prior(k, family)) is not None and v > 0}
    if not known:
        return Priors({k: 1.0 for k in types}, tuple(k for k in types))
    best = max(known.values())
    guess = unknown_prior(known.values()) / best
    speed = {k: (known[k] / best if k in known else guess) for k in types}
    return Priors(speed, tuple(k for k in types if k not in known))


def spread(gpu_type: str, family: str = GENERIC) -> float | None:
    """How far jobs of ``family`` scatter around ``gpu_type``'s prior (log standard deviation,
    :data:`~.priors_table.SPREADS`); None for a type that is not a known model. A family the
    model has no number for (``generic`` included) takes the widest of its rows' spreads and
    :data:`~.priors_table.GENERIC_SPREAD`; a *derived* number :data:`~.priors_table.DERIVED_SPREAD`,
    a measured one :data:`~.priors_table.DEFAULT_SPREAD`."""
    tm = normalise(gpu_type)
    if tm.model is None:
        return None
    return _spread(tm.model, family)


@lru_cache(maxsize=1024)
def _spread(model: str, family: str) -> float:
    rows = {f: note for m, f, _, _, note in PRIORS if m == model}

    def one(f: str) -> float:
        if (model, f) in SPREADS:
            return SPREADS[(model, f)]
        note = rows.get(f, "")
        return DERIVED_SPREAD if note.startswith("derived") else DEFAULT_SPREAD

    if family in rows:
        return one(family)
    return max([GENERIC_SPREAD, *(one(f) for f in rows)])


def log_spread_table(gpu_types: Iterable[str]) -> dict[str, dict[str, float]]:
    """``{family: {type: spread}}`` over the known ``gpu_types``, the families of
    :func:`log_prior_table`: how much the learner trusts each prior (:mod:`.learn`)."""
    types = list(gpu_types)
    return {f: {k: v for k in types if (v := spread(k, f)) is not None} for f in FAMILIES + (GENERIC,)}


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
