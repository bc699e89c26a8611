"""A job's run time as a site can predict it: its time limit, corrected by its group's history.

Users write time limits they are sure not to reach, often several times the run time, so a
policy that takes a hidden job's size from its limit alone (issue 39: "only what a site knows")
believes short jobs long, and lets them wait. What a site does know is how long the finished
jobs of the same group ran against the limits they asked for: the *use ratio* ``elapsed /
limit`` of each completed run. This module learns those ratios and predicts from them.

* **Learning** (:func:`learn_ratios`): each completed run with a time limit is one ratio of its
  group (user + job name + GPUs, the speed learner's group: :mod:`.learn`), of its job name's
  pool over users (:func:`.learn.pool_key`), of the site's runs that asked for about the same
  time limit (:func:`band_key`: the same power of two of seconds, rounded, so within a factor
  of 2; users who ask for the shortest limits run the shortest jobs, far below them) and of the whole site (:data:`SITE`). Only
  *finished* runs are ever observations; a running or pending job's own run time never is.
* **Choosing a sample** (:func:`sample`): the group's ratios when it has at least
  :data:`MIN_RUNS`, else its pool's, else its limit band's, else the site's, else none (the
  prediction is the limit).
* **Predicting** (:func:`expected_run_s`): for a job with limit ``L`` that has run ``a``
  seconds, the median of ``r * L`` over the sample's ratios with ``r * L > a``: the median run
  time of the past runs that were still going at ``a``. So a fresh job is expected to use the
  share of its limit its group usually uses, and a job that ran past its group's typical run
  time is not taken for nearly done: it is predicted like the longer runs of its group, and
  like its limit once it outlived every one. Never less than ``a``, never more than ``max(L,
  a)``.

The simulator (``--knowledge untagged``) and the controller (the accounting history the speed
learner reads, :mod:`slurm_fair.controller.learned`) call the same functions, and every decision
reads the result through :func:`slurm_fair.fairness.known_remaining`, the one home of a size a
site knows. Everything here is pure and deterministic.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Iterable, Mapping, Sequence

from .learn import ANY_USER, GroupKey, pool_key

#: the key of every finished run of the site, whatever its group
SITE: GroupKey = (ANY_USER, ANY_USER, 0)
#: ratios a group (or a pool) needs before its own sample is used instead of the wider one
MIN_RUNS = 3
#: ratios kept per key: the most recent ones (a group's habits change; a sample stays small)
MAX_RUNS = 200
#: keys kept at most: the limit bands and :data:`SITE` always, then the groups and pools whose
#: last run is the most recent (more runs first among equals). A site's history names ever more
#: groups (user x job name x GPUs); without a bound the controller's learned table
#: (``learned-speeds.json``) would grow with them. At most ``MAX_KEYS * MAX_RUNS`` ratios: a few MB
MAX_KEYS = 2000
#: the quantile of the past runs still going that is predicted (0.5: their median)
QUANTILE = 0.5
#: which centre of the past runs still going is predicted (:func:`centre`): ``"median"`` (their
#: :data:`QUANTILE`) or ``"harmonic"`` (their harmonic mean: the run time ``A`` for which a wait
#: ``W`` costs the latency ratio ``W / A`` that it costs in expectation, ``W E[1 / S]``)
CENTRE = "median"
#: the key under which a job's sample travels in its ``extra`` (a sorted tuple of ratios)
EXTRA_KEY = "run_ratios"

#: key -> sorted use ratios (elapsed / limit) of its finished runs
Ratios = Mapping[GroupKey, tuple[float, ...]]


def use_ratio(elapsed_s: float, limit_s: float | None) -> float | None:
    """``elapsed / limit`` of a finished run, at most 1 (Slurm ends a run at its limit); None
    when the run has no usable limit or no elapsed time."""
    if limit_s is None or not limit_s > 0 or not elapsed_s >= 0:
        return None
    return min(1.0, float(elapsed_s) / float(limit_s))


def band_key(limit_s: float) -> GroupKey:
    """The key of the site's runs whose time limit is about ``limit_s`` (the same power of two
    of seconds, rounded): a name no job has (it starts with ``*``) and 0 GPUs."""
    return (ANY_USER, f"{ANY_USER}limit~{2 ** round(math.log2(max(limit_s, 1.0))):.0f}s", 0)


class RatioBook:
    """The use ratios of :func:`learn_ratios`, kept up to date one finished run at a time: a run
    touches its four keys only (each re-sorted from at most :data:`MAX_RUNS` ratios), so a
    simulation that learns after every finished job stays linear in the jobs, not quadratic.
    :attr:`ratios` is always ``learn_ratios`` of every run added, in the order added, before the
    bound on keys (:meth:`capped`)."""

    def __init__(self) -> None:
        self._recent: dict[GroupKey, deque[float]] = {}
        #: key -> (index of the last run added to it, runs added to it in all)
        self._seen: dict[GroupKey, tuple[int, int]] = {}
        self._added = 0
        #: key -> sorted use ratios of its most recent finished runs (:data:`Ratios`)
        self.ratios: dict[GroupKey, tuple[float, ...]] = {}

    def add(self, group: GroupKey, elapsed_s: float, limit_s: float | None) -> bool:
        """One finished run of ``group``; False (nothing learned) when it has no usable limit."""
        r = use_ratio(elapsed_s, limit_s)
        if r is None or limit_s is None:
            return False
        for key in {group, pool_key(group), band_key(limit_s), SITE}:
            recent = self._recent.setdefault(key, deque(maxlen=MAX_RUNS))
            recent.append(r)
            self.ratios[key] = tuple(sorted(recent))
            self._seen[key] = (self._added, self._seen.get(key, (0, 0))[1] + 1)
        self._added += 1
        return True

    def capped(self, max_keys: int = MAX_KEYS) -> dict[GroupKey, tuple[float, ...]]:
        """:attr:`ratios` with at most ``max_keys`` keys: the bands and the site always, then the
        groups and pools used last (more runs first among equals)."""
        if len(self.ratios) <= max_keys:
            return dict(self.ratios)
        fixed = [k for k in self.ratios if k == SITE or _is_band(k)]
        rest = sorted((k for k in self.ratios if k not in fixed),
                      key=lambda k: (*self._seen[k], k), reverse=True)
        return {k: self.ratios[k] for k in fixed + rest[:max(0, max_keys - len(fixed))]}


def learn_ratios(runs: Iterable[tuple[GroupKey, float, float | None]],
                 max_keys: int = MAX_KEYS) -> dict[GroupKey, tuple[float, ...]]:
    """Per group, pool, limit band and :data:`SITE`: the sorted use ratios of ``runs`` (group,
    elapsed seconds, time limit seconds or None), in the order given (oldest first); the last
    :data:`MAX_RUNS` of each key are kept, and at most ``max_keys`` keys (:data:`MAX_KEYS`: the
    bands and the site, then the groups and pools used last). Runs with no limit are skipped.
    A group left out is predicted from its pool, band or the site (:func:`sample`), as a new
    group is."""
    book = RatioBook()
    for group, elapsed, limit in runs:
        book.add(group, elapsed, limit)
    return book.capped(max_keys)


def _is_band(key: GroupKey) -> bool:
    """A key of :func:`band_key` (a name no job has)."""
    return key[0] == ANY_USER and key[2] == 0 and key[1].startswith(f"{ANY_USER}limit~")


def sample(ratios: Ratios, group: GroupKey, limit_s: float) -> tuple[float, ...]:
    """The ratios a job of ``group`` with time limit ``limit_s`` is predicted from: its group's,
    else its pool's, else its limit band's, else the site's, each only with at least
    :data:`MIN_RUNS` runs; () when none has enough."""
    for key in (group, pool_key(group), band_key(limit_s), SITE):
        got = ratios.get(key, ())
        if len(got) >= MIN_RUNS:
            return got
    return ()


def expected_run_s(limit_s: float, attained_s: float, ratios: Sequence[float] = ()) -> float:
    """The run time expected of a job with time limit ``limit_s`` that ran ``attained_s`` seconds,
    from the use ratios of its group's finished runs (sorted ascending, as :func:`learn_ratios`
    and :func:`sample` give them; module docstring): the median of the past run times (scaled to
    this limit) longer than ``attained_s``; the limit when none is (or no sample). In
    ``[attained_s, max(limit_s, attained_s)]``."""
    limit = max(0.0, float(limit_s))
    ran = max(0.0, float(attained_s))
    if limit <= 0:
        return ran
    longer = ratios[bisect.bisect_right(ratios, ran / limit):]
    if not longer:
        return max(limit, ran)
    mid = centre(longer, limit)
    return min(max(mid * limit, ran), max(limit, ran))


def run_s_at(limit_s: float, attained_s: float, ratios: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0: the shortest, 1: the longest) of the run times of the past runs
    still going at ``attained_s`` (scaled to ``limit_s``; ``ratios`` sorted ascending), the
    spread behind :func:`expected_run_s`: a low ``q`` is how short the job may still turn out,
    which a finish-time ratio weighs (docs/oef.md, "A size that is a band"). The limit when no
    past run is longer (or no sample); in ``[attained_s, max(limit_s, attained_s)]``."""
    limit = max(0.0, float(limit_s))
    ran = max(0.0, float(attained_s))
    if limit <= 0:
        return ran
    longer = ratios[bisect.bisect_right(ratios, ran / limit):]
    if not longer:
        return max(limit, ran)
    return min(max(_quantile(longer, q) * limit, ran), max(limit, ran))


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted, non-empty ``values`` (linear between the nearest ranks)."""
    at = min(1.0, max(0.0, q)) * (len(values) - 1)
    lo = int(at)
    return values[lo] + (values[min(lo + 1, len(values) - 1)] - values[lo]) * (at - lo)


def centre(longer: Sequence[float], limit_s: float) -> float:
    """The use ratio predicted from ``longer`` (sorted, not empty: the ratios of the past runs
    still going) for a job with limit ``limit_s``, by :data:`CENTRE`. The harmonic mean weighs
    the chance that the job is short: a job that may run seconds or hours is expected to pay,
    for each second it waits, the latency ratio ``E[1 / S]`` of that spread, which the median
    (a middle run) understates when short runs are common; run times count from 1 s."""
    if CENTRE == "harmonic":
        return len(longer) / sum(1.0 / max(r * limit_s, 1.0) for r in longer) / limit_s
    return _quantile(longer, QUANTILE)
