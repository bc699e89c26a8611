"""Allocation policies, registered by name in one place.

Every policy is a pure function ``allocate(problem, options) -> Allocation``: no Slurm, no clock,
no files. A module in this package registers its policies with :func:`register`; this package
imports every module in it on first use, so adding a policy is adding a file (ReFrame's
scheduler registry). Nothing outside this module looks a policy up by anything but its name.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, MutableMapping

from ..errors import UserError
from ..model import Allocation, Problem


#: HadarE's default synchronisation cost of a forked job (a tenth of its combined rate)
FORK_SYNC = 0.10


@dataclass(frozen=True)
class PolicyOptions:
    """What a policy may be told besides the problem.

    ``state`` belongs to the caller (simulator or controller) and survives between rounds:
    dynamic policies (FFT's compensation, Hadar's prices, ...) keep their memory there and must
    not keep any elsewhere, so a policy stays a function of its inputs.

    ``solver``: ``auto`` (HiGHS in-process when ``highspy`` is installed, else CBC: the same
    rule as ``slurm-fair solve``/``simulate`` and the controller's ``[controller].solver``),
    or ``cbc`` / ``highs`` to force one (:func:`slurm_fair.solver.resolve`).
    """

    solver: str = "auto"
    time_limit_s: float = 30.0
    #: where to keep the model file when a solve fails (None: a temporary directory)
    keep_lp_dir: str | None = None
    round_s: float = 360.0
    #: the share of speed a forked job loses to synchronising its copies (HadarE: combined rate
    #: ``(1 - fork_sync) * sum of members' rates``); the simulator passes its ``fork_sync``
    fork_sync: float = FORK_SYNC
    state: MutableMapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..solver import SOLVER_CHOICES

        if self.solver not in SOLVER_CHOICES:
            raise UserError(f"unknown solver {self.solver!r}; choose one of: {', '.join(SOLVER_CHOICES)}")

    @property
    def resolved_solver(self) -> str:
        """The solver ``solver`` stands for here (``auto`` resolved)."""
        from ..solver import resolve

        return resolve(self.solver)


AllocateFn = Callable[[Problem, PolicyOptions], Allocation]


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    allocate: AllocateFn
    description: str
    #: True when the policy uses history (options.state, job attained/prev_type)
    dynamic: bool = False


_REGISTRY: dict[str, PolicyInfo] = {}
_loaded = False


def register(name: str, description: str, dynamic: bool = False) -> Callable[[AllocateFn], AllocateFn]:
    """Decorator: register ``fn`` under ``name`` (names are unique)."""

    def deco(fn: AllocateFn) -> AllocateFn:
        if name in _REGISTRY and _REGISTRY[name].allocate is not fn:
            raise RuntimeError(f"policy {name!r} registered twice")
        _REGISTRY[name] = PolicyInfo(name, fn, description, dynamic)
        return fn

    return deco


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    _loaded = True


def names() -> list[str]:
    """Registered policy names, sorted."""
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> PolicyInfo:
    """The policy called ``name``; a UserError with a suggestion when there is none."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UserError(
            f"unknown policy {name!r}{hint}; known: {', '.join(sorted(_REGISTRY)) or 'none'}"
        ) from None


def allocate(name: str, problem: Problem, options: PolicyOptions | None = None) -> Allocation:
    """Run the policy called ``name`` on ``problem``."""
    return get(name).allocate(problem, options or PolicyOptions())
