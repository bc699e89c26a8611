"""Allocation policies, registered by name in one place.

Every policy is a pure function ``allocate(problem, options) -> Allocation``: no Slurm, no clock,
no files. A module in this package registers its policies with :func:`register`; this package
imports every module in it on first use, so adding a policy is adding a file (ReFrame's
scheduler registry). Nothing outside this module looks a policy up by anything but its name.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, MutableMapping

from ..errors import UserError
from ..inputs import parse_number
from ..model import Allocation, Problem
from ..statuses import AllocationStatus


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
    #: where to keep the model file when a solve fails (None: not kept)
    keep_lp_dir: str | None = None
    round_s: float = 360.0
    #: the share of speed a forked job loses to synchronising its copies (HadarE: combined rate
    #: ``(1 - fork_sync) * sum of members' rates``); the simulator passes its ``fork_sync``
    fork_sync: float = FORK_SYNC
    state: MutableMapping[str, Any] = field(default_factory=dict)
    #: values of the parameters policies declare (:class:`Param`), keyed ``"policy.key"``
    #: (``hops.lambda``); ``--policy-option hops.lambda=2`` on the command line
    #: (:func:`parse_params`). A missing key is the declared default.
    params: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..solver import SOLVER_CHOICES

        if self.solver not in SOLVER_CHOICES:
            raise UserError(f"unknown solver {self.solver!r}; choose one of: {', '.join(SOLVER_CHOICES)}")
        for name, value in self.params.items():
            check_param(name, value)

    def param(self, policy: str, key: str) -> float:
        """The value of ``policy``'s parameter ``key``: set in ``params`` or its default."""
        value = self.params.get(f"{policy}.{key}")
        return float(get(policy).params[key].default if value is None else value)

    @property
    def resolved_solver(self) -> str:
        """The solver ``solver`` stands for here (``auto`` resolved)."""
        from ..solver import resolve

        return resolve(self.solver)


AllocateFn = Callable[[Problem, PolicyOptions], Allocation]


@dataclass(frozen=True)
class Param:
    """A number a policy lets the user set (one home for its default, bounds and meaning), so
    the command line can check ``--policy-option`` before any simulation runs."""

    default: float
    low: float | None = None
    high: float | None = None
    help: str = ""
    #: the default in a simulation, when it differs (None: ``default``): a bound in wall time
    #: that a controller needs would make a simulated run depend on the machine's load, so the
    #: simulator raises it to a safety net (:func:`simulation_params`)
    simulated: float | None = None


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    allocate: AllocateFn
    description: str
    #: True when the policy uses history (options.state, job attained/prev_type)
    dynamic: bool = False
    #: the parameters it declares (``{key: Param}``), read with :meth:`PolicyOptions.param`
    params: Mapping[str, Param] = field(default_factory=dict)
    #: True when it re-plans inside a round when GPUs free up (Hops): the simulator calls it
    #: again at completions and arrivals on the waiting jobs and the GPUs free then
    replans: bool = False

    def uses_history(self, options: "PolicyOptions") -> bool:
        """Whether its answer changes with time for the same jobs: :attr:`dynamic`, or its two
        levels (``inside``) switched on, which share bundles by the jobs' waits."""
        return self.dynamic or ("inside" in self.params and options.param(self.name, "inside") >= 0.5)


_REGISTRY: dict[str, PolicyInfo] = {}
_loaded = False


def register(name: str, description: str, dynamic: bool = False,
             params: Mapping[str, Param] | None = None, replans: bool = False) -> Callable[[AllocateFn], AllocateFn]:
    """Decorator: register ``fn`` under ``name`` (names are unique), with the parameters it
    declares."""

    def deco(fn: AllocateFn) -> AllocateFn:
        if name in _REGISTRY and getattr(_REGISTRY[name].allocate, "__wrapped__", None) is not fn:
            raise RuntimeError(f"policy {name!r} registered twice")
        _REGISTRY[name] = PolicyInfo(name, _empty_is_empty(name, fn), description, dynamic, dict(params or {}), replans)
        return fn

    return deco


def _empty_is_empty(name: str, fn: AllocateFn) -> AllocateFn:
    """``fn``, except that a problem without jobs gets the empty allocation without running it.

    One rule for every policy (a cycle or a PROBLEM.json with nothing to place is valid, its
    allocation empty), instead of each policy's models meeting an empty set of jobs their own
    way (``max()`` of nothing, an unbounded max-min LP, a model file left behind)."""

    @functools.wraps(fn)
    def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
        if not problem.jobs:
            return Allocation(policy=name, x={}, status=AllocationStatus.OPTIMAL, solver="none")
        return fn(problem, options)

    return allocate


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


def simulation_params(info: PolicyInfo) -> dict[str, float]:
    """The parameters of policy ``info`` whose default differs in a simulation
    (:attr:`Param.simulated`), keyed ``"policy.key"``; a run's own values override them."""
    return {f"{info.name}.{k}": p.simulated for k, p in info.params.items() if p.simulated is not None}


def check_param(name: str, value: float) -> Param:
    """The declared :class:`Param` called ``name`` (``policy.key``); a UserError when there is
    none or ``value`` is outside its bounds."""
    policy, _, key = name.partition(".")
    info = get(policy)
    if key not in info.params:
        known = ", ".join(f"{policy}.{k}" for k in sorted(info.params)) or "none"
        raise UserError(f"policy {policy!r} has no parameter {key!r}; its parameters: {known}")
    spec = info.params[key]
    if not math.isfinite(value) or (spec.low is not None and value < spec.low) or (
            spec.high is not None and value > spec.high):
        lo = "-inf" if spec.low is None else f"{spec.low:g}"
        hi = "inf" if spec.high is None else f"{spec.high:g}"
        raise UserError(f"{name}={value:g} is outside [{lo}, {hi}] ({spec.help})")
    return spec


def parse_params(items: Iterable[str]) -> dict[str, float]:
    """``["hops.lambda=2", ...]`` -> ``{"hops.lambda": 2.0}``, every item checked
    (:func:`check_param`); a UserError naming the item otherwise."""
    out: dict[str, float] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or "." not in name:
            raise UserError(f"--policy-option {item!r}: expected POLICY.KEY=VALUE (e.g. hops.lambda=2)")
        value = parse_number(text)
        if value is None:
            raise UserError(f"--policy-option {item!r}: {text.strip()!r} is not a finite number") from None
        check_param(name, value)
        out[name] = value
    return out


def params_not_run(params: Iterable[str], running: Iterable[str]) -> list[str]:
    """The parameters (``hops.lambda``) of policies not among ``running`` (aliases resolved):
    such a parameter would be ignored, a misspelt or changed policy the likely cause. The one
    rule of ``--policy-option`` and ``[controller] policy_options``."""
    run = {get(name).name for name in running}
    return [name for name in params if get(name.partition(".")[0]).name not in run]


def check_params_run(params: Mapping[str, float], running: Iterable[str], option: str = "--policy-option") -> None:
    """A UserError for the first of :func:`params_not_run`: ``--policy-option hops.lambda=2``
    with only ``--policy fifo`` was ignored with rc 0."""
    run = sorted({get(name).name for name in running})
    for name in params_not_run(params, run):
        policy = name.partition(".")[0]
        raise UserError(f"{option} {name}: policy {policy!r} is not run (--policy {' --policy '.join(run)}); "
                        f"give --policy {policy} or drop the option")
