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


def learn_ratios(runs: Iterable[tuple[GroupKey, float, float | None]],
                 max_keys: int = MAX_KEYS) -> dict[GroupKey, tuple[float, ...]]:
    """Per group, pool, limit band and :data:`SITE`: the sorted use ratios of ``runs`` (group,
    elapsed seconds, time limit seconds or None), in the order given (oldest first); the last
    :data:`MAX_RUNS` of each key are kept, and at most ``max_keys`` keys (:data:`MAX_KEYS`: the
    bands and the site, then the groups and pools used last). Runs with no limit are skipped.
    A group left out is predicted from its pool, band or the site (:func:`sample`), as a new
    group is."""
    by: dict[GroupKey, list[float]] = {}
    last: dict[GroupKey, int] = {}
    for n, (group, elapsed, limit) in enumerate(runs):
        r = use_ratio(elapsed, limit)
        if r is None or limit is None:
            continue
        for key in {group, pool_key(group), band_key(limit), SITE}:
            by.setdefault(key, []).append(r)
            last[key] = n
    if len(by) > max_keys:
        fixed = [k for k in by if k == SITE or _is_band(k)]
        rest = sorted((k for k in by if k not in fixed), key=lambda k: (last[k], len(by[k]), k), reverse=True)
        by = {k: by[k] for k in fixed + rest[:max(0, max_keys - len(fixed))]}
    return {key: tuple(sorted(rs[-MAX_RUNS:])) for key, rs in by.items()}


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
    at = QUANTILE * (len(longer) - 1)  # linear interpolation between the two nearest ranks
    lo = int(at)
    mid = longer[lo] + (longer[min(lo + 1, len(longer) - 1)] - longer[lo]) * (at - lo)
    return min(max(mid * limit, ran), max(limit, ran))
