"""Learning a group's relative speed per GPU type from how long its completed runs took.

One home for the learner: ``speeds learn`` (sacct history), the controller (runs it watched
finish) and ``simulate --knowledge untagged`` (jobs that finished in the simulation) all call
:func:`learn` on a list of :class:`Run`.

A *group* is what recurs: user + job name + GPU count (the simulator: tenant + job type +
GPU count). Runs of a group do about the same work, so ``log(elapsed) = log(work) - log(speed
on the type) + noise``. Per group the learner

1. corrects each run for **slow nodes**: a node whose runs take consistently longer than the
   rest of their group-type cells (median residual over >= 3 runs, pooled over all groups) has
   that excess removed from its runs;
2. takes per type the **median** of log elapsed (robust to the 10-20 % work spread and to
   outliers from 3 runs up); with exactly 2 runs that disagree by more than ``3 sigma sqrt 2``
   it keeps the one the group's other types and the priors predict best (one is an outlier);
3. fits the group's **family** (transformer / cnn / inference / fp64 / generic) to the types
   seen, and **shrinks toward the priors** (:mod:`.priors`) by how much the data say: a type
   observed ``n`` times has variance ``sigma^2 / n`` against the prior's ``TAU^2``; types not
   seen take the prior, anchored to the seen ones. ``sigma`` is the pooled spread of runs
   within their cells (robust, floored at 5 %);
4. **pools** every user's runs of one job name and GPU count (a group whose user is
   :data:`ANY_USER`), learned the same way with the pool's own within-cell spread (a junk name
   such as ``bash`` whose runs differ wildly is trusted little), when at least two users ran it:
   the pool is the prior of its groups (instead of the type priors) and the belief for a group
   of that name that never completed;
5. marks the types the group **fails on** (:func:`fails_on`: FAILED / OUT_OF_MEMORY runs there
   and no completion there): speed 0, so no estimate sends the group's jobs there again.

Speeds are relative, fastest 1.0. Everything here is pure and deterministic.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

from . import priors as pr

#: prior uncertainty (log) of a known model's speed for a family: about a factor 1.6
TAU = 0.5
#: prior uncertainty of a type with no prior (its conservative value is a guess)
TAU_UNKNOWN = 1.5
#: floor of the pooled within-cell spread (log): never trust two runs more than 5 %
MIN_SIGMA = 0.05
#: spread assumed before enough cells exist to measure it (runs differ 10-20 % in work)
DEFAULT_SIGMA = 0.15
#: spread assumed for a pool with too few runs to measure it: users' work under one name differs
POOL_SIGMA = 1.0
#: runs a node needs before its slowness is corrected
MIN_NODE_RUNS = 3

GroupKey = tuple[str, str, int]
#: the user of a pooled group (every user's runs of a job name and GPU count); no Slurm user name
ANY_USER = "*"
#: users a pool needs: with one, the pool is that user's group
MIN_POOL_USERS = 2


@dataclass(frozen=True)
class Run:
    """One completed run: its group, the GPU type it ran on, how long, on which nodes."""

    group: GroupKey
    gpu_type: str
    seconds: float
    nodes: tuple[str, ...] = ()
    job_id: str = ""


#: run end states that blame the GPU type (sacct(1)); NODE_FAIL, CANCELLED, TIMEOUT, PREEMPTED do not
FAILING = ("FAILED", "OUT_OF_MEMORY")
#: FAILED runs on a type (no completion there, none elsewhere) that mark it on their own
REPEATED_FAILS = 2
#: a run that failed within this many seconds failed at its start: the job could not even begin
#: on the type (a CUDA architecture or driver it does not support, a model that does not load);
#: one such run marks the type unless the group also failed at its start on another type
FAST_FAIL_S = 300.0


@dataclass(frozen=True)
class Failure:
    """One run of a group that ended FAILED or OUT_OF_MEMORY on a GPU type."""

    group: GroupKey
    gpu_type: str
    state: str
    job_id: str = ""
    #: the types the job ran on before it failed (runs requeued or preempted there, ``sacct -D``)
    ran_on: tuple[str, ...] = ()
    #: how long the failed run lasted (None: unknown); :data:`FAST_FAIL_S` or less is a failure
    #: at its start
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Learned:
    """A group's learned speeds: ``speed[type]`` (fastest 1.0, 0 where it fails) over the types
    asked for, ``runs[type]`` used per type, ``sources[type]`` learned | prior | assumed | fails,
    the family fit, ``fails_on[type]``: the failed runs that marked a type."""

    group: GroupKey
    speed: Mapping[str, float]
    runs: Mapping[str, int]
    sources: Mapping[str, str]
    family: str = pr.GENERIC
    fails_on: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        user, name, gpus = self.group
        return {"user": user, "job_name": name, "gpus": gpus, "speed": dict(self.speed),
                "runs": sum(self.runs.values()), "runs_per_type": dict(self.runs),
                "sources": dict(self.sources), "family": self.family, "fails_on": dict(self.fails_on)}

    def table_value(self) -> "GroupSpeeds":
        """What an estimate reads: the speeds with the runs behind them and the failing types."""
        return GroupSpeeds(self.speed, self.runs, self.fails_on, self.group[0] == ANY_USER)


class GroupSpeeds(dict[str, float]):
    """A group's speed per type (0: it fails there) as the estimates read it, carrying the
    completed runs behind each number (``runs``) and the failed runs that marked a type
    (``fails``) so ``explain`` can say what a number rests on."""

    def __init__(self, speed: Mapping[str, float], runs: Mapping[str, int] | None = None,
                 fails: Mapping[str, int] | None = None, pooled: bool = False) -> None:
        super().__init__(speed)
        self.runs: dict[str, int] = dict(runs or {})
        self.fails: dict[str, int] = dict(fails or {})
        #: the speeds of every user's runs of the job name (a pool), not of this user's group
        self.pooled = pooled


@dataclass(frozen=True)
class Model:
    """What :func:`learn` found: per group, plus the pooled spread and the slow nodes."""

    groups: Mapping[GroupKey, Learned]
    sigma: float
    node_excess: Mapping[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: per (``ANY_USER``, job name, GPUs): every user's runs of that name pooled
    pools: Mapping[GroupKey, Learned] = field(default_factory=dict)
    #: the site's family mix (:func:`family_mix`): the weight of each family's priors
    family_mix: Mapping[str, float] = field(default_factory=dict)
    #: per type, how far the site's GPUs are from their prior (log; :func:`site_offsets`)
    type_offsets: Mapping[str, float] = field(default_factory=dict)
    #: how far one group's speed on a type strays from its family's prior anchored to its other
    #: types (log; :func:`group_spread`): what a type a group never ran on may hold for it
    group_spread: float = 0.0
    #: the belief for a group with no runs and no pool: the priors moved by the site's offsets,
    #: averaged over its family mix (the generic family's before :data:`MIN_SITE_GROUPS` groups
    #: ran on two types; None: the model was made without types)
    site: Learned | None = None

    def belief(self, group: GroupKey) -> Learned | None:
        """What is believed of ``group``: its own learned speeds, else its name's pool."""
        return self.groups.get(group) or self.pools.get(pool_key(group))

    def speeds_for(self, group: GroupKey) -> Learned | None:
        """:meth:`belief`, else the site's (:attr:`site`): a group with no runs is predicted
        with what the site's other groups taught (its offsets and family mix), not the bare priors."""
        return self.belief(group) or self.site


def pool_key(group: GroupKey) -> GroupKey:
    """The pool a group belongs to: every user's runs of its job name and GPU count."""
    return (ANY_USER, group[1], group[2])


def _cells(runs: Iterable[Run], excess: Mapping[str, float]) -> dict[GroupKey, dict[str, list[float]]]:
    """``{group: {type: [log seconds corrected for slow nodes]}}``."""
    out: dict[GroupKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        fix = max((excess.get(n, 0.0) for n in r.nodes), default=0.0)
        out[r.group][r.gpu_type].append(math.log(r.seconds) - fix)
    return out


def _node_excess(runs: Sequence[Run], rounds: int = 8) -> dict[str, float]:
    """How much slower each node makes its runs (log), > 0 only: a node cannot make a job faster
    than its type. Each round takes the median residual of a node's runs (>= 3) against their
    group-type cells, corrected by what earlier rounds found, and adds it: a slow node's runs
    pull their cell's median toward them, so one round finds only part of the excess."""
    excess: dict[str, float] = {}
    spread: dict[tuple[GroupKey, str], set[tuple[str, ...]]] = defaultdict(set)
    for r in runs:
        spread[(r.group, r.gpu_type)].add(r.nodes)
    for _ in range(rounds):
        cells = _cells(runs, excess)
        # only cells that ran on more than one node say anything about a node
        med = {(g, k): statistics.median(v) for g, by in cells.items() for k, v in by.items()
               if len(v) >= 2 and len(spread[(g, k)]) >= 2}
        per_node: dict[str, list[float]] = defaultdict(list)
        for r in runs:
            m = med.get((r.group, r.gpu_type))
            if m is not None:
                fix = max((excess.get(n, 0.0) for n in r.nodes), default=0.0)
                for n in r.nodes:
                    per_node[n].append(math.log(r.seconds) - fix - m)
        moved = False
        for n, res in per_node.items():
            step = statistics.median(res) if len(res) >= MIN_NODE_RUNS else 0.0
            if excess.get(n, 0.0) + step > 0.05 and abs(step) > 0.005:
                excess[n] = max(0.0, excess.get(n, 0.0) + step)
                moved = True
        if not moved:
            break
    return {n: e for n, e in excess.items() if e > 0.05}


def _sigma(cells: Mapping[GroupKey, Mapping[str, list[float]]], default: float = DEFAULT_SIGMA) -> float:
    """Pooled robust spread of runs within their cells (1.4826 MAD; n/(n-1) for small cells)."""
    res: list[float] = []
    for by in cells.values():
        for v in by.values():
            if len(v) >= 2:
                m = statistics.median(v)
                scale = math.sqrt(len(v) / (len(v) - 1))
                res += [abs(x - m) * scale for x in v]
    if len(res) < 6:
        return default
    return max(MIN_SIGMA, 1.4826 * statistics.median(res))


def _tau(log_prior: Mapping[str, float], k: str, spreads: Mapping[str, float] | None = None) -> float:
    """The prior's uncertainty for type ``k``: its spread (:func:`.priors.spread`, a family whose
    jobs scatter widely is trusted less), never below :data:`TAU`; :data:`TAU_UNKNOWN` for a type
    with no prior."""
    if k not in log_prior:
        return TAU_UNKNOWN
    return max(TAU, (spreads or {}).get(k, TAU))


def _fit(d: Mapping[str, float], var: Mapping[str, float], p: Mapping[str, float],
         spreads: Mapping[str, float] | None = None) -> tuple[float, float]:
    """The group's offset ``a`` (``d_k = a + u_k``) and the weighted misfit of prior ``p``."""
    w = {k: 1.0 / (var[k] + _tau(p, k, spreads) ** 2) for k in d}
    a = sum(w[k] * (d[k] - p[k]) for k in d) / sum(w.values())
    return a, sum(w[k] * (d[k] - p[k] - a) ** 2 for k in d)


def _cell_value(values: list[float], guess: float | None, sigma: float) -> float:
    """A cell's log elapsed: the median; two runs further apart than noise explains: the one
    nearer ``guess`` (what the group's other types predict), else their mean."""
    if len(values) == 2 and abs(values[0] - values[1]) > 3 * sigma * math.sqrt(2) and guess is not None:
        return min(values, key=lambda x: abs(x - guess))
    return statistics.median(values)


def fails_on(runs: Iterable[Run], failures: Iterable[Failure], types: Sequence[str]) -> dict[GroupKey, dict[str, int]]:
    """``{group: {type: failed runs}}`` for the (group, type) pairs judged infeasible.

    A type is marked when the group never completed there and: an OUT_OF_MEMORY run ended
    there (the type's memory is too small), or a FAILED run there while the group completed on
    another type, or the failed job itself ran on another type before (requeued or preempted
    there, not failed: its code runs; that type is the difference), or ``REPEATED_FAILS`` FAILED
    runs there, or one run that failed at its start there (within :data:`FAST_FAIL_S`) while
    the group failed at its start on no other type (a job that cannot begin anywhere is broken;
    one that cannot begin on one type only says that type cannot run it: issue 39, a 4-GPU
    ResNet-50 sent to K80 died at its start and the next job of its group was sent there again).
    A completion on the type clears it. A group is never marked on *every* type of
    ``types``: failing everywhere is the job's own fault, not a type's, and a job with no type
    left would never be placed at all."""
    done: dict[GroupKey, set[str]] = defaultdict(set)
    for r in runs:
        done[r.group].add(r.gpu_type)
    failed: dict[GroupKey, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    ran: dict[tuple[GroupKey, str], bool] = defaultdict(bool)
    at_start: dict[GroupKey, set[str]] = defaultdict(set)
    for f in failures:
        if f.state in FAILING and f.gpu_type not in done[f.group]:
            failed[f.group][f.gpu_type].append(f.state)
            ran[(f.group, f.gpu_type)] |= any(t != f.gpu_type for t in f.ran_on)
            if f.elapsed_s is not None and f.elapsed_s <= FAST_FAIL_S:
                at_start[f.group].add(f.gpu_type)
    out: dict[GroupKey, dict[str, int]] = {}
    for g, by in failed.items():
        only_here = next(iter(at_start[g])) if len(at_start[g]) == 1 else None
        marked = {k: len(st) for k, st in by.items()
                  if "OUT_OF_MEMORY" in st or len(st) >= REPEATED_FAILS or done[g] - {k} or ran[(g, k)]
                  or k == only_here}
        if marked and not set(types) <= set(marked):
            out[g] = marked
    return out


def _evidence(d: Mapping[str, float], var: Mapping[str, float], p: Mapping[str, float],
              spreads: Mapping[str, float] | None = None) -> float:
    """How well family prior ``p`` explains the group's seen log speeds ``d``: the log marginal
    likelihood of ``d_k = a + p_k + e_k``, ``e_k ~ N(0, var_k + tau_k^2)``, with the group's offset
    ``a`` integrated out (flat). Unlike the weighted misfit alone it charges a family for its
    width (the ``log w`` terms): a wide prior fits anything and says little, so it does not win
    by being wide."""
    w = {k: 1.0 / (var[k] + _tau(p, k, spreads) ** 2) for k in d}
    _, misfit = _fit(d, var, p, spreads)
    return -0.5 * misfit + 0.5 * sum(math.log(v) for v in w.values()) - 0.5 * math.log(sum(w.values()))


def _candidates(seen: Sequence[str], log_priors: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The families with a prior for every seen type."""
    return [f for f, p in log_priors.items() if all(k in p for k in seen)]


def family_weights(d: Mapping[str, float], var: Mapping[str, float], log_priors: Mapping[str, Mapping[str, float]],
                   spreads: Mapping[str, Mapping[str, float]], mix: Mapping[str, float] | None) -> dict[str, float]:
    """The posterior weight of each family for a group with seen log speeds ``d``: the site's
    ``mix`` (:func:`family_mix`; None: the generic family alone) times :func:`_evidence`. With
    fewer than two seen types the runs say nothing of the family: the weights are the mix."""
    if not mix:
        return {pr.GENERIC: 1.0} if pr.GENERIC in log_priors or not log_priors else {next(iter(log_priors)): 1.0}
    cands = [f for f in _candidates(list(d), log_priors) if mix.get(f, 0.0) > 0]
    if not cands:
        return {pr.GENERIC: 1.0}
    logw = {f: math.log(mix[f]) + (_evidence(d, var, log_priors[f], spreads.get(f)) if len(d) >= 2 else 0.0)
            for f in cands}
    top = max(logw.values())
    w = {f: math.exp(v - top) for f, v in logw.items()}
    total = sum(w.values())
    kept = {f: v for f, v in sorted(w.items()) if v / total > 1e-6}  # the top family is always kept
    total = sum(kept.values())  # the dropped crumbs' mass goes back to the rest: a distribution
    return {f: v / total for f, v in kept.items()}


#: pseudo-groups per family in :func:`family_mix` (a Dirichlet prior): a family no group fits
#: keeps a little weight, and a site with few groups stays near an even mix
MIX_PSEUDO = 1.0


def _multi_type_groups(cells: Mapping[GroupKey, Mapping[str, list[float]]], sigma: float) \
        -> Iterator[tuple[list[str], dict[str, float], dict[str, float]]]:
    """Each group that ran on two types or more: its seen types, their median log speeds and
    those medians' variances; the only groups that say anything about families or type offsets."""
    for by in cells.values():
        seen = [k for k, v in by.items() if v]
        if len(seen) >= 2:
            yield seen, {k: -statistics.median(by[k]) for k in seen}, {k: sigma ** 2 / len(by[k]) for k in seen}


def family_mix(cells: Mapping[GroupKey, Mapping[str, list[float]]], log_priors: Mapping[str, Mapping[str, float]],
               spreads: Mapping[str, Mapping[str, float]], sigma: float, rounds: int = 50) -> dict[str, float]:
    """The site's mix of families, learned from every group that ran on two types or more
    (empirical Bayes, EM over the groups' :func:`_evidence`): how often a group's speeds look
    like each family's. A site of transformer trainers learns that, and a group seen on one type
    is predicted with that mix instead of one family guessed from a single ratio."""
    families = sorted(log_priors)
    evid: list[dict[str, float]] = []
    for seen, d, var in _multi_type_groups(cells, sigma):
        cands = _candidates(seen, log_priors)
        if len(cands) >= 2:
            evid.append({f: _evidence(d, var, log_priors[f], spreads.get(f)) for f in cands})
    mix = {f: 1.0 / len(families) for f in families}
    for _ in range(rounds):
        total = {f: MIX_PSEUDO for f in families}
        for e in evid:
            logw = {f: math.log(mix[f]) + v for f, v in e.items()}
            top = max(logw.values())
            w = {f: math.exp(v - top) for f, v in logw.items()}
            s = sum(w.values())
            for f, v in w.items():
                total[f] += v / s
        n = sum(total.values())
        new = {f: v / n for f, v in total.items()}
        done = max(abs(new[f] - mix[f]) for f in families) < 1e-6
        mix = new
        if done:
            break
    return mix


#: pseudo-groups of no offset in :func:`site_offsets`: a type's offset needs many groups' runs
OFFSET_PSEUDO = 5.0


def site_offsets(cells: Mapping[GroupKey, Mapping[str, list[float]]], log_priors: Mapping[str, Mapping[str, float]],
                 spreads: Mapping[str, Mapping[str, float]], sigma: float,
                 mix: Mapping[str, float]) -> dict[str, float]:
    """How far this site's GPUs of each type are from their prior (log, shared by every family):
    a site's A100s may be power-capped PCIe cards, its L40S in a hot rack. Each group that ran
    on two types or more says, per seen type, how far its runs are from its family's prior
    anchored to its other types (its residual, weighted by its family weights); a type's offset
    is the median residual shrunk toward 0 by :data:`OFFSET_PSEUDO` pseudo-groups, so a type
    needs the runs of many groups to move and one group's quirk moves it little (a weighted
    median over the groups, not a mean)."""
    residuals: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for seen, d, var in _multi_type_groups(cells, sigma):
        for family, w in family_weights(d, var, log_priors, spreads, mix).items():
            p = log_priors[family]
            if not all(k in p for k in seen):
                continue
            a, _ = _fit(d, var, p, spreads.get(family))
            for k in seen:
                residuals[k].append((d[k] - a - p[k], w))
    out = {}
    for k, res in sorted(residuals.items()):
        n = sum(w for _, w in res)
        out[k] = _weighted_median(res) * n / (n + OFFSET_PSEUDO)
    return out


#: floor and ceiling of :func:`group_spread` (log): below, runs' noise hides it; above, a factor 3
MIN_GROUP_SPREAD, MAX_GROUP_SPREAD = 0.0, 1.1
#: groups (two types or more) the site level needs before :func:`group_spread` says more than 0
#: and the belief of a group with no runs (:attr:`Model.site`) leaves the generic priors for the mix
MIN_SITE_GROUPS = 5


def group_spread(cells: Mapping[GroupKey, Mapping[str, list[float]]], log_priors: Mapping[str, Mapping[str, float]],
                 spreads: Mapping[str, Mapping[str, float]], sigma: float, mix: Mapping[str, float]) -> float:
    """How far a group's speed on a type strays from its family's prior once the group's own
    level is taken out (log standard deviation, shared by every type): the site's between-group
    spread, which the learner's posterior mean hides on the types a group never ran on (there
    every group of a family gets the same ratio). Measured on the groups that ran on two types
    or more: a group's residual on a seen type (:func:`site_offsets`' residual) scatters by
    this spread plus its cell's noise, less the share its own fit absorbs (``(m - 1) / m`` of
    the variance for ``m`` seen types). Robust (the median of the squared residuals over their
    chi-square median), the cells' noise ``sigma^2 / n`` taken off; 0 below
    :data:`MIN_SITE_GROUPS` groups."""
    per_type: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    groups = 0
    for seen, d, var in _multi_type_groups(cells, sigma):
        weights = {f: w for f, w in family_weights(d, var, log_priors, spreads, mix).items()
                   if all(k in log_priors.get(f, {}) for k in seen)}
        if not weights:
            continue
        # the group's families averaged by their weights: on a site between two families (the
        # generic priors are their middle) a group's best single family leaves a residual that
        # is the families' gap, not the group's own
        total_w = sum(weights.values())
        p = {k: sum(w * log_priors[f][k] for f, w in weights.items()) / total_w for k in seen}
        a = sum(d[k] - p[k] for k in seen) / len(seen)  # the level: equal weights, as the moments assume
        m = len(seen)
        groups += 1
        for k in seen:
            per_type[k].append((d[k] - a - p[k], var[k], m))
    if groups < MIN_SITE_GROUPS:
        return MIN_GROUP_SPREAD
    # centred on each type's median residual: what every group shares on a type (a site whose
    # jobs all run flatter than the priors, more than the shrunk offsets took out) is the site's
    # level, not a spread between its groups; without the centring, a testbed of sleep jobs
    # (every group alike) measured 0.69
    scaled: list[float] = []
    noise: list[float] = []
    for rows in per_type.values():
        centre = statistics.median(r for r, _, _ in rows)
        for r, v, m in rows:
            scaled.append((r - centre) ** 2 * m / (m - 1))
            noise.append(v)
    # the median of a chi-square with one degree of freedom is 0.455 of its mean
    total = statistics.median(scaled) / 0.4549 - statistics.fmean(noise)
    return min(MAX_GROUP_SPREAD, max(MIN_GROUP_SPREAD, math.sqrt(max(0.0, total))))


def _weighted_median(values: Sequence[tuple[float, float]]) -> float:
    """The median of ``(value, weight)`` pairs: robust to the odd group whose runs did unrelated
    work (a job name such as ``bash``)."""
    ordered = sorted(values)
    half = sum(w for _, w in ordered) / 2
    seen = 0.0
    for v, w in ordered:
        seen += w
        if seen >= half:
            return v
    return ordered[-1][0]


def _offset_priors(log_priors: Mapping[str, Mapping[str, float]],
                   offsets: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Every family's priors moved by the site's offsets."""
    return {f: {k: v + offsets.get(k, 0.0) for k, v in p.items()} for f, p in log_priors.items()}


def learn_group(group: GroupKey, cells: Mapping[str, list[float]], types: Sequence[str],
                log_priors: Mapping[str, Mapping[str, float]], sigma: float,
                fails: Mapping[str, int] | None = None,
                spreads: Mapping[str, Mapping[str, float]] | None = None,
                mix: Mapping[str, float] | None = None) -> Learned:
    """One group's speeds over ``types`` (see the module docstring). ``spreads`` (``{family:
    {type: log spread}}``, :func:`.priors.log_spread_table`) widen the prior of a type whose
    family scatters: the group leaves such a prior after fewer runs. ``mix``: the site's family
    mix (:func:`family_mix`); the group's log speeds are the average of each family's answer
    weighted by :func:`family_weights` (None: the generic family's answer)."""
    spreads = spreads or {}
    seen = [k for k in types if cells.get(k)]
    runs = {k: len(cells[k]) for k in seen}
    var = {k: sigma ** 2 / runs[k] for k in seen}
    d0 = {k: -statistics.median(cells[k]) for k in seen}
    weights = family_weights(d0, var, log_priors, spreads, mix)
    u: dict[str, float] = {k: 0.0 for k in types}
    sources: dict[str, str] = {}
    for family, weight in weights.items():
        u_f, sources = _given_family(cells, types, seen, var, d0, log_priors, family, spreads, sigma)
        for k in types:
            u[k] += weight * u_f[k]
    best_family = max(weights, key=lambda f: (weights[f], f == pr.GENERIC))
    fails = {k: n for k, n in (fails or {}).items() if k in u}
    top = max((v for k, v in u.items() if k not in fails), default=0.0)
    speed = {k: 0.0 if k in fails else math.exp(v - top) for k, v in u.items()}
    sources.update({k: "fails" for k in fails})
    return Learned(group, speed, runs, sources, best_family, fails)


def _given_family(cells: Mapping[str, list[float]], types: Sequence[str], seen: Sequence[str],
                  var: Mapping[str, float], d0: Mapping[str, float], log_priors: Mapping[str, Mapping[str, float]],
                  family: str, spreads: Mapping[str, Mapping[str, float]],
                  sigma: float) -> tuple[dict[str, float], dict[str, str]]:
    """A group's log speeds (and each one's source) if its family is ``family``: the seen types
    shrunk toward the family's prior anchored to them, the unseen ones at that prior."""
    generic = log_priors.get(pr.GENERIC, {})
    # a type with no prior: the conservative value of the priors (below the slowest known)
    floor = math.log(pr.unknown_prior(math.exp(v) for v in generic.values()))
    fam = log_priors.get(family, generic)
    p = {k: fam.get(k, generic.get(k, floor)) for k in types}
    known = {k: p[k] for k in types if k in generic}
    spread = spreads.get(family, spreads.get(pr.GENERIC, {}))
    a0, _ = _fit(d0, var, p, spread) if seen else (0.0, 0.0)
    d = {k: -_cell_value(cells[k], -(a0 + p[k]), sigma) for k in seen}
    a, _ = _fit(d, var, p, spread) if seen else (0.0, 0.0)
    u: dict[str, float] = {}
    sources: dict[str, str] = {}
    for k in types:
        tau2 = _tau(known, k, spread) ** 2
        if k in d:
            u[k] = p[k] + tau2 / (tau2 + var[k]) * (d[k] - a - p[k])
            sources[k] = "learned"
        else:
            u[k] = p[k]
            sources[k] = "prior" if k in known else "assumed"
    return u, sources


def learn(runs: Iterable[Run], types: Sequence[str] | None = None, failures: Iterable[Failure] = ()) -> Model:
    """Every group's speeds over ``types`` (default: every type a run or failure used)."""
    good = [r for r in runs if r.seconds > 0 and math.isfinite(r.seconds)]
    failures = list(failures)
    all_types = sorted(set(types) if types is not None else {r.gpu_type for r in good} | {f.gpu_type for f in failures})
    excess = _node_excess(good)
    cells = _cells(good, excess)
    sigma = _sigma(cells)
    unknown = pr.prior_speeds(all_types).warnings()
    marked = fails_on(good, failures, all_types)
    spreads = pr.log_spread_table(all_types)
    # the site's level, learned across groups: its types' offsets from the priors, then its
    # family mix on the priors so moved; every group and pool is learned against these
    raw = pr.log_prior_table(all_types)
    offsets = site_offsets(cells, raw, spreads, sigma, family_mix(cells, raw, spreads, sigma))
    logp = _offset_priors(raw, offsets)
    mix = family_mix(cells, logp, spreads, sigma)
    pools = _pools(cells, all_types, logp, sigma, mix)
    spread = group_spread(cells, logp, spreads, sigma, mix)
    # a group with no runs: the moved priors over the site's mix once enough groups taught it
    # (before, the mix is its even Dirichlet start, and an even average of the families drags a
    # type one family is poor on far below the generic prior: the generic family alone)
    informed = sum(1 for _ in _multi_type_groups(cells, sigma)) >= MIN_SITE_GROUPS
    site = (learn_group((ANY_USER, "", 0), {}, all_types, logp, sigma, spreads=spreads, mix=mix if informed else None)
            if all_types else None)
    groups = {}
    for g in sorted(set(cells) | set(marked)):
        prior = _pool_prior(pools.get(pool_key(g)), logp)
        # the type priors carry their spreads and the site's family mix; a pool's learned
        # speeds are one prior, trusted at TAU
        own = prior is logp
        groups[g] = learn_group(g, cells.get(g, {}), all_types, prior, sigma, marked.get(g),
                                spreads if own else None, mix if own else None)
    return Model(groups, sigma, excess, tuple(unknown), pools, mix, offsets, spread, site)


def _pools(cells: Mapping[GroupKey, Mapping[str, list[float]]], types: Sequence[str],
           log_priors: Mapping[str, Mapping[str, float]], sigma: float,
           mix: Mapping[str, float] | None = None) -> dict[GroupKey, Learned]:
    """Every user's cells of a job name and GPU count, learned as one group with its own spread
    (never below the pooled ``sigma``): each user's cell counts once (its median), users run
    different amounts of work under one name, and the more they differ the less the pool moves
    off the priors. ``runs`` of a pool counts users per type."""
    pooled: dict[GroupKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    users: dict[GroupKey, set[str]] = defaultdict(set)
    for g, by in cells.items():
        key = pool_key(g)
        users[key].add(g[0])
        for k, v in by.items():  # one value per user: users, not runs, are the pool's samples
            pooled[key][k].append(statistics.median(v))
    out = {}
    for key, by in sorted(pooled.items()):
        if len(users[key]) >= MIN_POOL_USERS:
            spread = max(sigma, _sigma({key: by}, POOL_SIGMA))
            # users' different work under one name is the pool's noise: the priors' spreads are
            # not added (a pool stays cautious; its groups use them)
            out[key] = learn_group(key, by, types, log_priors, spread, mix=mix)
    return out


def _pool_prior(pool: Learned | None, log_priors: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
    """A group's prior: its pool's speeds when the pool learned something, else the type priors."""
    if pool is None or "learned" not in pool.sources.values():
        return log_priors
    return {pr.GENERIC: {k: math.log(v) for k, v in pool.speed.items() if v > 0}}


def equivalent_seconds(seconds: Mapping[str, float], belief: Mapping[str, float] | None = None) -> tuple[str, float]:
    """(type with most time, the whole run's time as if all on it): time on another type ``t``
    counts ``speed(t) / speed(main)`` (``belief``, default the type priors)."""
    main = max(seconds, key=lambda t: seconds[t])
    speed = belief if belief is not None else pr.prior_speeds(list(seconds)).speed
    ref = max(speed.get(main, 1.0), 1e-9)
    return main, sum(s * speed.get(t, 1.0) / ref for t, s in seconds.items())
