"""A job's run time from its time limit and its group's finished runs (slurm_fair.estimates.runtime)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import example, given, strategies as st

from slurm_fair import fairness
from slurm_fair.estimates import runtime
from slurm_fair.estimates.learn import ANY_USER
from slurm_fair.model import Job

ratio = st.floats(0.0, 1.0, allow_nan=False)
ratios = st.lists(ratio, max_size=40).map(lambda xs: tuple(sorted(xs)))
seconds = st.floats(0.0, 1e7, allow_nan=False)
limits = st.floats(1.0, 1e7, allow_nan=False)
G = ("alice", "train", 1)


@given(limits, seconds, ratios)
def test_the_prediction_is_between_the_time_run_and_the_limit(limit, ran, rs):
    got = runtime.expected_run_s(limit, ran, rs)
    assert got >= ran
    assert got <= max(limit, ran) * (1 + 1e-12)


@given(limits, seconds, ratios)
@example(limit=1.5, ran=5e-324, rs=(5e-324,))
def test_the_prediction_is_a_median_of_the_past_runs_still_going_or_the_limit(limit, ran, rs):
    """Checked against a plain computation: the past runs (scaled to this limit) longer than
    what the job ran, their median; the limit when there are none. "Longer" compares use
    ratios, as a run's record is one (``r > ran / limit``; ``r * limit > ran`` is the same in
    reals but not in floats: 5e-324 * 1.5 rounds up)."""
    longer = [r * limit for r in rs if r > ran / limit]
    want = min(max(statistics.median(longer), ran), max(limit, ran)) if longer else max(limit, ran)
    assert runtime.expected_run_s(limit, ran, rs) == pytest.approx(want, rel=1e-9)


@given(limits, st.floats(0.0, 1.0), ratios)
def test_a_job_that_ran_longer_is_never_predicted_to_end_sooner(limit, frac, rs):
    """The prediction never decreases with the time run: a job that outlived its group's
    typical run is not taken for nearly done."""
    a, b = frac * limit * 0.5, frac * limit
    assert runtime.expected_run_s(limit, b, rs) >= runtime.expected_run_s(limit, a, rs) - 1e-6 * limit


def test_without_history_the_limit_is_the_prediction_as_before():
    assert runtime.expected_run_s(3600.0, 600.0, ()) == 3600.0
    assert runtime.expected_run_s(3600.0, 4000.0, ()) == 4000.0


def test_a_fresh_job_of_a_group_that_uses_a_quarter_of_its_limits_is_predicted_a_quarter():
    rs = (0.2, 0.25, 0.3)
    assert runtime.expected_run_s(4000.0, 0.0, rs) == pytest.approx(1000.0)
    # past the group's typical run: the median of the longer ones, then the limit
    assert runtime.expected_run_s(4000.0, 1050.0, rs) == pytest.approx(1200.0)
    assert runtime.expected_run_s(4000.0, 1300.0, rs) == 4000.0


def test_ratios_are_learned_per_group_pool_and_site_and_a_sample_needs_min_runs():
    runs = [(G, 100.0, 1000.0)] * 3 + [(("bob", "train", 1), 500.0, 1000.0), (("bob", "eval", 1), 50.0, None),
                                       (("bob", "eval", 1), 2000.0, 1000.0)]
    got = runtime.learn_ratios(runs)
    assert got[G] == (0.1, 0.1, 0.1)
    assert got[(ANY_USER, "train", 1)] == (0.1, 0.1, 0.1, 0.5)
    assert got[runtime.SITE] == (0.1, 0.1, 0.1, 0.5, 1.0)  # no limit: skipped; past its limit: 1
    assert runtime.sample(got, G, 1000.0) == (0.1, 0.1, 0.1)
    assert runtime.sample(got, ("bob", "train", 1), 1000.0) == (0.1, 0.1, 0.1, 0.5)  # its name's pool
    assert runtime.sample({}, G, 1000.0) == ()
    # no run of the group's name: the site's runs with about the same limit, else all the site's
    more = runtime.learn_ratios(runs + [(("dan", f"j{i}", 1), 9000.0, 10000.0) for i in range(3)])
    assert runtime.sample(more, ("carol", "other", 2), 900.0) == (0.1, 0.1, 0.1, 0.5, 1.0)
    assert runtime.sample(more, ("carol", "other", 2), 9500.0) == (0.9, 0.9, 0.9)
    assert runtime.sample(more, ("carol", "other", 2), 90000.0) == (0.1, 0.1, 0.1, 0.5, 0.9, 0.9, 0.9, 1.0)


@given(st.floats(1.0, 1e8), st.floats(1.0, 1e8))
def test_limits_of_one_rounded_power_of_two_share_a_band_and_a_factor_of_3_never_does(a, b):
    lo, hi = sorted((a, b))
    if hi <= lo * 2 ** 0.5 and round(math.log2(lo)) == round(math.log2(hi)):
        assert runtime.band_key(lo) == runtime.band_key(hi)
    if hi >= 3 * lo:
        assert runtime.band_key(lo) != runtime.band_key(hi)
    assert runtime.band_key(a)[2] == 0 and runtime.band_key(a)[1].startswith("*")


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]), seconds,
                          st.one_of(st.none(), limits)), max_size=30))
def test_learned_ratios_are_sorted_within_0_and_1_and_at_most_max_runs(rows):
    got = runtime.learn_ratios([((u, n, 1), e, lim) for u, n, e, lim in rows])
    for rs in got.values():
        assert list(rs) == sorted(rs) and all(0 <= r <= 1 for r in rs) and len(rs) <= runtime.MAX_RUNS
    assert len(got.get(runtime.SITE, ())) == sum(1 for *_, lim in rows if lim is not None)


@given(limits, seconds, ratios, st.floats(1e-3, 100.0))
def test_known_remaining_reads_the_prediction_never_negative(limit, ran, rs, best):
    """The one home of a size a site knows reads the prediction: what is left of it at the job's
    best rate, never negative; a true remaining work given to the job wins (a tagged job)."""
    job = Job(id="j", tenant="t", gpus=1, throughput={"v100": best}, attained_s=ran,
              extra={"time_limit_s": limit, runtime.EXTRA_KEY: rs})
    got = fairness.known_remaining(job)
    assert got is not None and got >= 0
    assert got == pytest.approx((runtime.expected_run_s(limit, ran, rs) - ran) * best, rel=1e-9, abs=1e-9)
    assert got <= max(0.0, limit - ran) * best * (1 + 1e-9) + 1e-9


def test_known_remaining_uses_the_groups_history_over_the_limit():
    job = Job(id="j", tenant="t", gpus=1, throughput={"v100": 2.0}, attained_s=0.0,
              extra={"time_limit_s": 4000.0, runtime.EXTRA_KEY: (0.2, 0.25, 0.3)})
    assert fairness.known_remaining_s(job) == pytest.approx(1000.0)
    assert fairness.known_remaining_s(Job(id="j", tenant="t", gpus=1, throughput={"v100": 2.0},
                                          extra={"time_limit_s": 4000.0})) == pytest.approx(4000.0)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6), seconds, st.one_of(st.none(), limits)), max_size=80),
       st.integers(0, 25))
def test_at_most_max_keys_are_kept_the_site_and_bands_always_then_the_keys_used_last(rows, max_keys):
    """Checked against a plain computation: every key with the runs that name it (their index
    in the history), uncapped; the capped result keeps the site and the limit bands, then the
    groups and pools whose last run is the latest, each with exactly its uncapped ratios."""
    runs = [((f"u{u}", f"n{n}", 1), e, lim) for u, n, e, lim in rows]
    full = runtime.learn_ratios(runs, max_keys=10**9)
    got = runtime.learn_ratios(runs, max_keys=max_keys)
    last: dict = {}
    for i, (g, e, lim) in enumerate(runs):
        if runtime.use_ratio(e, lim) is not None:
            for key in (g, (ANY_USER, g[1], g[2]), runtime.band_key(lim), runtime.SITE):
                last[key] = i
    assert set(last) == set(full)
    always = {k for k in full if k == runtime.SITE or k[1].startswith(f"{ANY_USER}limit~")}
    assert always <= set(got)
    assert len(got) == max(len(always), min(len(full), max_keys))
    assert all(got[k] == full[k] for k in got)
    kept = [last[k] for k in got if k not in always]
    dropped = [last[k] for k in full if k not in got]
    if kept and dropped:
        assert min(kept) >= max(dropped)


def test_a_history_of_ever_new_groups_keeps_the_learned_table_within_a_bound(tmp_path):
    """100,000 runs of 50,000 groups (each user's job names new every other run): the controller's
    table keeps MAX_KEYS keys of ratios, and its file stays a few MB however long the history."""
    from slurm_fair.controller import learned

    runs = [((f"u{i % 500}", f"job-{i // 2}", 1 + i % 4), 600.0 + i % 3000, 7200.0) for i in range(100_000)]
    ratios = runtime.learn_ratios(runs)
    assert len(ratios) == runtime.MAX_KEYS
    assert ratios[runtime.SITE] == runtime.learn_ratios(runs, max_keys=10**9)[runtime.SITE]
    newest = runs[-1][0]
    assert newest in ratios and (ANY_USER, newest[1], newest[2]) in ratios
    assert runs[0][0] not in ratios
    assert learned._save(tmp_path, learned.LearnedTable(ratios=ratios)) is None  # the controller's own writer
    assert (tmp_path / learned.FILE).stat().st_size < 8 * 2**20
    assert learned.load(tmp_path).ratios == ratios


_groups = st.tuples(st.sampled_from(["alice", "bob"]), st.sampled_from(["train", "eval", "tune"]), st.sampled_from([1, 2]))
_runs = st.lists(st.tuples(_groups, st.floats(0.0, 1e5, allow_nan=False),
                           st.one_of(st.none(), st.floats(1.0, 1e5, allow_nan=False))), max_size=60)


@given(_runs, st.integers(1, 8))
def test_ratios_learned_one_run_at_a_time_are_those_of_every_run_at_once(runs, keep):
    """The incremental book (what a simulation updates after each finished job) against a plain
    computation over all the runs so far: per key, its last MAX_RUNS ratios, sorted; after
    every run, not only at the end."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "MAX_RUNS", keep)
        book = runtime.RatioBook()
        for n, (group, elapsed, limit) in enumerate(runs, 1):
            book.add(group, elapsed, limit)
            plain: dict = {}
            for g, e, lim in runs[:n]:
                if lim is None:
                    continue
                r = min(1.0, e / lim)
                for key in {g, (ANY_USER, g[1], g[2]), runtime.band_key(lim), runtime.SITE}:
                    plain.setdefault(key, []).append(r)
            assert book.ratios == {k: tuple(sorted(v[-keep:])) for k, v in plain.items()}


@given(limits, seconds, ratios, st.floats(0.0, 1.0))
def test_the_harmonic_centre_is_the_harmonic_mean_of_the_runs_still_going_and_keeps_every_bound(limit, ran, rs, frac):
    """``CENTRE = "harmonic"`` against a plain computation (statistics.harmonic_mean of the past
    run times longer than what the job ran, from 1 s), and the invariants of the median: in
    ``[ran, max(limit, ran)]``, never sooner for a job that ran longer."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "CENTRE", "harmonic")
        longer = [max(r * limit, 1.0) for r in rs if r > ran / limit]
        want = min(max(statistics.harmonic_mean(longer), ran), max(limit, ran)) if longer else max(limit, ran)
        got = runtime.expected_run_s(limit, ran, rs)
        assert got == pytest.approx(want, rel=1e-9)
        assert ran <= got <= max(limit, ran) * (1 + 1e-12)
        a, b = frac * limit * 0.5, frac * limit
        assert runtime.expected_run_s(limit, b, rs) >= runtime.expected_run_s(limit, a, rs) - 1e-6 * limit


def test_the_harmonic_centre_weighs_the_chance_of_a_short_run():
    """Half the group's runs take a minute, half ten hours: the median of the four is mid-way
    (five hours), the harmonic mean about two minutes (a wait of a round costs such a job, in
    expectation, about the latency ratio of a two-minute job)."""
    rs = (60 / 36000, 60 / 36000, 1.0, 1.0)
    assert runtime.expected_run_s(36000.0, 0.0, rs) == pytest.approx(18030.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "CENTRE", "harmonic")
        assert runtime.expected_run_s(36000.0, 0.0, rs) == pytest.approx(4 / (2 / 60 + 2 / 36000))
        # once it outlived the short runs it is predicted like the long ones
        assert runtime.expected_run_s(36000.0, 120.0, rs) == pytest.approx(36000.0)


@given(limits, seconds, ratios, st.floats(0.0, 1.0))
def test_a_quantile_of_the_runs_still_going_is_a_plain_quantile_within_the_bounds(limit, ran, rs, q):
    """``run_s_at``, checked against numpy's quantile (linear) of the past runs (scaled to this
    limit) longer than what the job ran; the limit when there are none; the median at 0.5."""
    import numpy as np

    longer = [r * limit for r in rs if r > ran / limit]
    want = min(max(float(np.quantile(longer, q)), ran), max(limit, ran)) if longer else max(limit, ran)
    got = runtime.run_s_at(limit, ran, rs, q)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert ran <= got <= max(limit, ran) * (1 + 1e-12)
    if runtime.CENTRE == "median":
        assert runtime.run_s_at(limit, ran, rs, 0.5) == pytest.approx(runtime.expected_run_s(limit, ran, rs), rel=1e-9)


@given(limits, seconds, ratios, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_lower_quantile_is_never_a_longer_run(limit, ran, rs, q1, q2):
    lo, hi = sorted((q1, q2))
    assert runtime.run_s_at(limit, ran, rs, lo) <= runtime.run_s_at(limit, ran, rs, hi) * (1 + 1e-12)


def test_a_known_size_has_no_band_and_a_time_limit_has_one():
    sure = Job("s", "a", 1, {"v100": 1.0}, remaining_work=600.0)
    assert fairness.predicted_run_s_at(sure, 0.1) is None
    band = Job("b", "a", 1, {"v100": 2.0}, extra={"time_limit_s": 1000.0, runtime.EXTRA_KEY: (0.05, 0.2, 0.5, 0.9)})
    assert fairness.predicted_run_s_at(band, 0.0) == pytest.approx(50.0)
    assert fairness.predicted_run_s_at(band, 1.0) == pytest.approx(900.0)
    assert fairness.predicted_run_s_at(Job("n", "a", 1, {"v100": 1.0}), 0.1) is None
