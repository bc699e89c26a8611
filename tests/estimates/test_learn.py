"""The learner: exact on clean runs, robust to work spread, outliers and slow nodes, shrinks to priors."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from slurm_fair.estimates.learn import Run, learn

TYPES = ["h100", "a100", "l4"]


def runs_of(group, speeds, n=3, work=1000.0, spread=0.0, rng=None, nodes=None):
    rng = rng or random.Random(0)
    out = []
    for k, s in speeds.items():
        for i in range(n):
            w = work * (1 + rng.uniform(-spread, spread))
            out.append(Run(group, k, w / s, ((nodes or {}).get(k, f"{k}-{i}"),)))
    return out


@given(st.dictionaries(st.sampled_from(TYPES), st.floats(0.05, 1.0), min_size=2), st.floats(10, 1e6))
@settings(max_examples=60, deadline=None)
def test_clean_runs_give_the_true_ratios(speeds, work):
    g = ("u", "job", 1)
    model = learn(runs_of(g, speeds, work=work))
    learned = model.groups[g]
    top = max(speeds.values())
    for k, s in speeds.items():
        assert learned.speed[k] == pytest.approx(s / top, rel=0.02)
        assert learned.sources[k] == "learned"
    assert max(learned.speed.values()) == pytest.approx(1.0)


def test_an_unseen_type_takes_the_prior_anchored_to_the_seen_ones():
    g = ("u", "job", 1)
    model = learn(runs_of(g, {"h100": 1.0}), types=["h100", "a100", "rtx2080"])
    learned = model.groups[g]
    assert learned.sources == {"h100": "learned", "a100": "prior", "rtx2080": "assumed"}
    assert learned.speed["a100"] < learned.speed["h100"]
    assert learned.speed["rtx2080"] <= learned.speed["a100"]
    assert model.warnings and "rtx2080" in model.warnings[0]


def test_an_outlier_among_three_runs_does_not_move_the_estimate():
    g = ("u", "job", 1)
    runs = runs_of(g, {"h100": 1.0, "a100": 0.5})
    runs.append(Run(g, "a100", 1000 / 0.5 * 5, ("a100-9",)))  # a run that did 5x the work
    learned = learn(runs).groups[g]
    assert learned.speed["a100"] / learned.speed["h100"] == pytest.approx(0.5, rel=0.05)


def test_a_slow_node_is_found_and_corrected():
    rng = random.Random(3)
    runs = []
    for i in range(12):
        g = ("u", f"job{i}", 1)
        truth = {"h100": 1.0, "a100": rng.uniform(0.3, 0.9)}
        for k, s in truth.items():
            for j in range(4):
                node = f"{k}-{j % 2}"
                slow = 1.6 if node == "a100-0" else 1.0
                runs.append(Run(g, k, 1000 / s * slow * (1 + rng.uniform(-0.1, 0.1)), (node,)))
    model = learn(runs)
    assert set(model.node_excess) == {"a100-0"}
    assert model.node_excess["a100-0"] == pytest.approx(math.log(1.6), abs=0.1)


def test_noisy_runs_are_close_and_few_runs_shrink_toward_the_prior():
    rng = random.Random(5)
    g = ("u", "job", 1)
    learned = learn(runs_of(g, {"h100": 1.0, "l4": 0.2}, n=6, spread=0.15, rng=rng)).groups[g]
    assert learned.speed["l4"] == pytest.approx(0.2, rel=0.15)
    # a single pair of runs far from the prior is believed less than many runs
    one = learn(runs_of(g, {"h100": 1.0, "l4": 0.9}, n=1)).groups[g]
    many = learn(runs_of(g, {"h100": 1.0, "l4": 0.9}, n=8)).groups[g]
    assert one.speed["l4"] < many.speed["l4"] <= 0.9 + 1e-9


def test_the_learner_is_deterministic_and_ignores_nonpositive_times():
    g = ("u", "job", 2)
    runs = runs_of(g, {"h100": 1.0, "a100": 0.4}) + [Run(g, "a100", 0.0), Run(g, "a100", float("nan"))]
    assert learn(runs) == learn(list(reversed(runs)))


RUNS = st.lists(st.tuples(st.sampled_from(["g1", "g2"]), st.sampled_from(TYPES + ["rtx"]),
                          st.floats(1e-3, 1e7), st.sampled_from(["n1", "n2", "n3"])), max_size=40)


@given(RUNS)
@settings(max_examples=80, deadline=None)
def test_any_runs_give_finite_speeds_fastest_one_on_every_type(rows):
    model = learn([Run(("u", g, 1), k, s, (n,)) for g, k, s, n in rows], types=TYPES + ["rtx"])
    for learned in model.groups.values():
        assert set(learned.speed) == set(TYPES + ["rtx"])
        assert all(0 < v <= 1 + 1e-9 and math.isfinite(v) for v in learned.speed.values())
        assert max(learned.speed.values()) == pytest.approx(1.0)
    assert all(e > 0 for e in model.node_excess.values())


# ---------------------------------------------------------------- types a group fails on

from slurm_fair.estimates.learn import Failure, fails_on  # noqa: E402

G = ("ann", "train", 4)
TYPES3 = ["k80", "p100", "v100"]


def done_on(*types, group=G):
    return [Run(group, k, 1000.0) for k in types for _ in range(2)]


def test_out_of_memory_marks_the_type_at_once_and_the_speed_is_zero_there():
    m = learn(done_on("v100", "p100"), TYPES3, [Failure(G, "k80", "OUT_OF_MEMORY", "7")])
    g = m.groups[G]
    assert g.speed["k80"] == 0.0 and g.sources["k80"] == "fails" and g.fails_on == {"k80": 1}
    assert max(g.speed.values()) == 1.0 and g.speed["p100"] > 0
    assert g.to_dict()["fails_on"] == {"k80": 1}


def test_one_failure_counts_only_when_the_group_completes_elsewhere_two_always():
    one = [Failure(G, "k80", "FAILED")]
    assert fails_on([], one, TYPES3) == {}  # its code may be broken: not the type's fault yet
    assert fails_on(done_on("v100"), one, TYPES3) == {G: {"k80": 1}}
    assert fails_on([], one * 2, TYPES3) == {G: {"k80": 2}}


@pytest.mark.parametrize("state", ["NODE_FAIL", "CANCELLED", "TIMEOUT", "PREEMPTED"])
def test_states_that_are_not_the_types_fault_mark_nothing(state):
    assert fails_on(done_on("v100"), [Failure(G, "k80", state)] * 3, TYPES3) == {}


def test_a_completion_on_the_type_clears_it_and_other_groups_are_untouched():
    fails = [Failure(G, "k80", "OUT_OF_MEMORY")]
    assert fails_on(done_on("v100", "k80"), fails, TYPES3) == {}
    other = ("bob", "train", 4)
    m = learn(done_on("v100") + done_on("v100", "k80", group=other), TYPES3, fails)
    assert m.groups[other].speed["k80"] > 0 and m.groups[G].speed["k80"] == 0


def test_failing_on_every_type_marks_none_and_a_group_seen_only_failing_keeps_priors_elsewhere():
    everywhere = [Failure(G, k, "OUT_OF_MEMORY") for k in TYPES3]
    assert fails_on([], everywhere, TYPES3) == {}
    m = learn([], TYPES3, [Failure(G, "k80", "OUT_OF_MEMORY")])
    g = m.groups[G]
    assert g.speed["k80"] == 0 and g.sources == {"k80": "fails", "p100": "prior", "v100": "prior"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(TYPES3),
                          st.sampled_from(["COMPLETED", "FAILED", "OUT_OF_MEMORY", "TIMEOUT"])), max_size=14))
def test_marked_types_never_completed_and_every_group_keeps_a_type(rows):
    runs = [Run((u, "x", 1), k, 100.0) for u, k, s in rows if s == "COMPLETED"]
    fails = [Failure((u, "x", 1), k, s) for u, k, s in rows if s != "COMPLETED"]
    m = learn(runs, TYPES3, fails)
    completed = {(r.group, r.gpu_type) for r in runs}
    for g, got in m.groups.items():
        assert any(v > 0 for v in got.speed.values())
        for k in TYPES3:
            assert (got.speed[k] == 0) == (k in got.fails_on) == (got.sources[k] == "fails")
            if k in got.fails_on:
                assert (g, k) not in completed
                states = [f.state for f in fails if f.group == g and f.gpu_type == k]
                assert "OUT_OF_MEMORY" in states or states.count("FAILED") >= 2 or any(
                    c[0] == g for c in completed)


# ---------------------------------------------------------------- pools over users

def test_a_users_unseen_type_and_a_new_user_take_the_names_pool_not_the_prior():
    truth = {"v100": 1.0, "k80": 0.5}  # the generic prior says about 0.2
    a, b, c = ("ann", "bert", 1), ("bob", "bert", 1), ("cy", "bert", 1)
    runs = runs_of(a, truth, n=3) + runs_of(b, {"v100": 1.0}, n=2) + runs_of(("dee", "bert", 1), truth, n=3)
    m = learn(runs, ["k80", "v100"])
    pool = m.pools[("*", "bert", 1)]
    # two users are two samples (the pool's runs count users) of an unmeasured spread: part of
    # the way from the prior (about 0.2) to what they show; six agreeing users: all the way
    assert 0.25 < pool.speed["k80"] <= 0.5 and pool.runs == {"k80": 2, "v100": 3}
    assert 0.25 < m.groups[b].speed["k80"] <= 0.5
    many = learn([r for i in range(6) for r in runs_of((f"u{i}", "bert", 1), truth, n=2)], ["k80", "v100"])
    assert many.pools[("*", "bert", 1)].speed["k80"] == pytest.approx(0.5, rel=0.1)
    assert m.belief(c) is pool and m.belief(("cy", "other", 1)) is None
    alone = learn(runs_of(b, {"v100": 1.0}, n=2), ["k80", "v100"])
    assert not alone.pools and alone.groups[b].speed["k80"] < 0.3  # one user: the prior


def test_a_name_whose_users_run_wildly_different_work_moves_little_off_the_prior():
    """The pool's own spread sets its weight: a tidy name reaches its truth, a junk name
    ("bash": any work) stays near the prior (what a group seen on one type gets; learned
    apart from the tidy name, whose groups would move the site's k80 offset; median over seeds:
    one seed may move by chance)."""
    moves = []
    for seed in range(9):
        rng = random.Random(seed)
        tidy, junk = [], []
        for i in range(6):
            tidy += runs_of((f"u{i}", "train", 1), {"v100": 1.0, "k80": 0.6}, n=2, spread=0.05, rng=rng)
            work = 10 ** rng.uniform(1, 5)  # "bash": anything
            junk += runs_of((f"u{i}", "bash", 1), {"v100": 1.0} if i % 2 else {"k80": 0.6}, n=2, work=work, rng=rng)
        assert learn(tidy, ["k80", "v100"]).pools[("*", "train", 1)].speed["k80"] == pytest.approx(0.6, rel=0.1)
        m = learn(junk + runs_of(("z", "z", 1), {"v100": 1.0}, n=1), ["k80", "v100"])
        base = m.groups[("z", "z", 1)].speed["k80"]
        assert m.pools[("*", "bash", 1)].speed["k80"] > 0
        moves.append(abs(math.log(m.pools[("*", "bash", 1)].speed["k80"] / base)))
    assert sorted(moves)[4] < 0.5 * abs(math.log(0.6 / base))


def test_one_failure_after_the_job_ran_elsewhere_marks_the_type():
    """Requeued from P100 (it ran there) to K80, where it failed at once: its code runs."""
    moved = Failure(G, "k80", "FAILED", "53", ran_on=("p100", "p100"))
    assert fails_on([], [moved], TYPES3) == {G: {"k80": 1}}
    assert fails_on([], [Failure(G, "k80", "FAILED", "53", ran_on=("k80",))], TYPES3) == {}


# --- issue 41: a prior's spread feeds the shrinkage --------------------------------------------

def _t4_group(n_runs: int, truth: float, spreads):
    """A group that ran ``n_runs`` times on each of a100_80g and t4 (t4 at ``truth`` of the A100),
    learned against the transformer priors (T4 0.09), with ``spreads`` or the flat default."""
    from slurm_fair.estimates import priors as pr
    from slurm_fair.estimates.learn import learn_group

    logp = pr.log_prior_table(["a100_80g", "t4"])
    fam = {"transformer": logp["transformer"], pr.GENERIC: logp["transformer"]}
    cells = {"a100_80g": [math.log(1000.0)] * n_runs, "t4": [math.log(1000.0 / truth)] * n_runs}
    g = learn_group(("u", "small-lm", 1), cells, ["a100_80g", "t4"], fam, 0.15, spreads=spreads)
    return g.speed["t4"]


@pytest.mark.parametrize("truth", [0.63, 0.17])
def test_a_wide_prior_is_left_faster(truth):
    """T4 vs A100 on transformers: the table says 0.09, measured 0.17 overall and 0.63 for a small
    model (issue 41). Its spread (1.0 in log) lets the group's runs win sooner than the default."""
    from slurm_fair.estimates import priors as pr

    spreads = pr.log_spread_table(["a100_80g", "t4"])
    spreads = {"transformer": spreads["transformer"], pr.GENERIC: spreads["transformer"]}
    for n in range(1, 6):
        wide, flat = _t4_group(n, truth, spreads), _t4_group(n, truth, None)
        assert abs(math.log(wide / truth)) < abs(math.log(flat / truth)), n
    # one run of each is enough to land within 10 % of what the runs show
    assert _t4_group(1, truth, spreads) == pytest.approx(truth, rel=0.10)


def test_a_narrow_prior_is_not_trusted_more_than_the_default():
    """Spreads below TAU never make the learner stickier than before (TAU is the floor)."""
    from slurm_fair.estimates.learn import TAU, _tau

    assert _tau({"a100_80g": 0.0}, "a100_80g", {"a100_80g": 0.1}) == TAU
    assert _tau({"t4": 0.0}, "t4", {"t4": 1.0}) == 1.0
    assert _tau({}, "rtx30", {"rtx30": 1.0}) > TAU  # no prior: the unknown's uncertainty


def test_learn_feeds_the_spreads_end_to_end(monkeypatch):
    from slurm_fair.estimates import priors as pr

    g = ("u", "small-lm", 1)
    runs = runs_of(g, {"a100_80g": 1.0, "t4": 0.63}, n=1)
    with_spreads = learn(runs).groups[g].speed["t4"]
    monkeypatch.setattr(pr, "log_spread_table", lambda types: {})
    without = learn(runs).groups[g].speed["t4"]
    assert abs(math.log(with_spreads / 0.63)) < abs(math.log(without / 0.63))


# --- the site's level, learned across groups (issue 42) ------------------------------------------

def _site(rng, ratio_of, n_groups=30, types=("h100", "l40s"), noise=0.2):
    """Groups that ran 3 times on each of ``types``: speed ``ratio_of(type)`` times a per-group
    log-normal factor (``noise``), and one group seen on the first type only."""
    runs = []
    for i in range(n_groups):
        speeds = {k: ratio_of(k) * math.exp(rng.gauss(0, noise)) for k in types}
        runs += runs_of(("u", f"job{i}", 1), speeds, n=3, spread=0.05, rng=rng)
    runs += runs_of(("v", "new", 1), {types[0]: 1.0}, n=3, rng=rng)
    return learn(runs, list(types))


def test_a_type_slower_at_this_site_than_its_prior_is_learned_for_groups_that_never_ran_there():
    """The site's L40S run at 0.6x their prior for every job (say, power-capped): a group seen
    only on H100 is predicted near the site's L40S, not the table's; a site at its priors has
    offsets near 0 and leaves the prior alone."""
    from slurm_fair.estimates import priors as pr

    prior = pr.prior_speeds(["h100", "l40s"]).speed
    rel = {k: v / max(prior.values()) for k, v in prior.items()}
    slow = _site(random.Random(1), lambda k: rel[k] * (0.6 if k == "l40s" else 1.0))
    plain = _site(random.Random(1), lambda k: rel[k])
    site_ratio = 0.6 * rel["l40s"]
    new_slow = slow.groups[("v", "new", 1)].speed
    new_plain = plain.groups[("v", "new", 1)].speed
    assert new_slow["h100"] == 1.0 and new_slow["l40s"] < new_plain["l40s"]
    assert abs(math.log(new_slow["l40s"] / site_ratio)) < 0.5 * abs(math.log(new_plain["l40s"] / site_ratio))
    # part of the 0.6 may be read as a family whose L40S are slower; the offset carries the rest
    assert math.log(0.6) - 0.1 < slow.type_offsets["l40s"] - slow.type_offsets["h100"] < 0.5 * math.log(0.6)
    assert all(abs(v) < 0.1 for v in plain.type_offsets.values())
    assert slow.groups[("v", "new", 1)].sources == {"h100": "learned", "l40s": "prior"}


@pytest.mark.parametrize("family", ["fp64", "cnn"])
def test_the_family_mix_is_learned_from_the_groups_and_predicts_an_unseen_type(family):
    """Every group's ratios follow one family's priors (with noise): the mix learns it, and a
    group seen on H100 alone takes that family's V100 and L40S, not the generic ones."""
    from slurm_fair.estimates import priors as pr

    types = ("h100", "a100", "l40s", "v100")
    table = pr.log_prior_table(types)[family]
    top = max(table.values())
    m = _site(random.Random(7), lambda k: math.exp(table[k] - top), n_groups=25, types=types, noise=0.1)
    assert max(m.family_mix, key=lambda f: m.family_mix[f]) == family
    assert m.family_mix[family] > 0.6 and sum(m.family_mix.values()) == pytest.approx(1.0)
    new = m.groups[("v", "new", 1)]
    assert new.family == family
    for k in ("l40s", "v100"):
        truth = math.exp(table[k] - top)
        generic = math.exp(pr.log_prior_table(types)[pr.GENERIC][k] - max(pr.log_prior_table(types)[pr.GENERIC].values()))
        assert abs(math.log(new.speed[k] / truth)) < abs(math.log(generic / truth)) + 0.05


@given(st.dictionaries(st.sampled_from(["h100", "a100", "l40s", "v100"]), st.floats(-3, 3), min_size=1),
       st.dictionaries(st.sampled_from(["transformer", "cnn", "inference", "fp64", "generic"]),
                       st.floats(0.01, 1.0), min_size=1))
@settings(max_examples=80, deadline=None)
def test_family_weights_are_a_distribution_over_families_that_cover_the_seen_types(d, mix):
    from slurm_fair.estimates import priors as pr
    from slurm_fair.estimates.learn import family_weights

    logp = pr.log_prior_table(["h100", "a100", "l40s", "v100"])
    spreads = pr.log_spread_table(["h100", "a100", "l40s", "v100"])
    w = family_weights(d, {k: 0.01 for k in d}, logp, spreads, mix)
    assert sum(w.values()) == pytest.approx(1.0) and all(v >= 0 for v in w.values())
    assert all(f == pr.GENERIC or all(k in logp[f] for k in d) for f in w)
    if len(d) < 2:  # one type says nothing of the family: the weights are the mix's
        covered = {f: v for f, v in mix.items() if f in logp}
        for f, v in w.items():
            assert v == pytest.approx(covered[f] / sum(covered.values()), rel=1e-6, abs=1e-6)


# --- the site's between-group spread and the belief for a group with no runs (issue 42) ------

def _spread_site(seed: int, spread: float, n_groups: int = 60):
    """Groups at the generic priors times a per-group, per-type log-normal factor (``spread``),
    each seen on two to four types, 3 runs a cell with 5 % work noise."""
    from slurm_fair.estimates import priors as pr

    types = ["h100", "a100", "l40s", "v100"]
    table = pr.log_prior_table(types)[pr.GENERIC]
    rng = random.Random(seed)
    runs = []
    for i in range(n_groups):
        seen = rng.sample(types, rng.randint(2, 4))
        runs += runs_of(("u", f"job{i}", 1), {k: math.exp(table[k] + rng.gauss(0, spread)) for k in seen},
                        n=3, spread=0.05, rng=rng)
    return learn(runs, types)


@given(st.floats(0.0, 0.6), st.integers(0, 10_000))
@settings(max_examples=15, deadline=None)
def test_the_between_group_spread_is_measured_from_groups_that_ran_on_two_types(spread, seed):
    """The spread a group's speed on a type strays from its family's prior is found within 0.15
    (log) of the truth, whatever the truth (0 to a factor 1.8); a family fit absorbs a little of
    it, so the estimate may sit somewhat low, never far above. 200 groups: the estimate's own
    sampling error is then about 0.02 at a spread of 0.5 (0.045 with 60 groups, where a seed in
    a few hundred falls 0.15 low), so the bounds are several of its standard deviations."""
    got = _spread_site(seed, spread, n_groups=200).group_spread
    assert spread - 0.15 < got < spread + 0.1


@given(st.floats(0.0, 0.5), st.integers(0, 10_000))
@settings(max_examples=10, deadline=None)
def test_what_every_group_shares_on_a_type_is_not_a_spread_between_groups(spread, seed):
    """Every group of the site runs the same ratios, flat across the types (a testbed of sleep
    jobs: far from every family's prior, alike each other) or at the priors with one type
    ``exp(spread)`` times faster for all of them: the spread between groups is about 0 (it
    measured 0.69 on the real testbed's history before the residuals were centred per type).
    Eight groups of three noisy runs leave sampling error: over 1,500 flat seeds the median is
    0.04, the 99th percentile 0.22 and the largest 0.26, so the bound is 0.3."""
    from slurm_fair.estimates import priors as pr

    types = ["h100", "a100", "l40s", "v100"]
    table = pr.log_prior_table(types)[pr.GENERIC]
    rng = random.Random(seed)
    flat = seed % 2 == 0
    runs = []
    for i in range(8):  # a small site: the type offsets, shrunk toward the priors, take out little
        seen = rng.sample(types, rng.randint(2, 4))
        speeds = {k: 1.0 if flat else math.exp(table[k] + (spread if k == "l40s" else 0.0)) for k in seen}
        runs += runs_of(("u", f"job{i}", 1), speeds, n=3, spread=0.05, rng=rng)
    assert learn(runs, types).group_spread < 0.3


def test_too_few_groups_on_two_types_give_no_spread():
    assert _spread_site(1, 0.4, n_groups=3).group_spread == 0.0


def test_a_group_with_no_runs_takes_the_sites_offsets_not_the_bare_priors():
    """The site's L40S at 0.6x their prior: a group that never ran (no runs, no pool) is
    believed slower there than the bare priors say; on a site at its priors the site belief is
    the priors' (fastest 1.0 on the same type)."""
    from slurm_fair.estimates import priors as pr

    prior = pr.prior_speeds(["h100", "l40s"]).speed
    rel = {k: v / max(prior.values()) for k, v in prior.items()}
    slow = _site(random.Random(1), lambda k: rel[k] * (0.6 if k == "l40s" else 1.0))
    plain = _site(random.Random(1), lambda k: rel[k])
    g = ("nobody", "never-ran", 4)
    assert slow.belief(g) is None and slow.speeds_for(g) is slow.site
    assert slow.site is not None and plain.site is not None
    assert slow.site.speed["h100"] == 1.0 and slow.site.speed["l40s"] < plain.site.speed["l40s"]
    assert abs(math.log(slow.site.speed["l40s"] / (0.6 * rel["l40s"]))) < \
        abs(math.log(rel["l40s"] / (0.6 * rel["l40s"])))
    assert set(slow.site.sources.values()) == {"prior"}
    assert learn([]).site is None


def test_a_site_that_taught_no_mix_gives_a_group_with_no_runs_the_generic_priors():
    """Too few groups on two types to learn a family mix: the belief of a group with no runs is
    the generic priors (not an even average over the families, which one poor family drags)."""
    from slurm_fair.estimates import priors as pr

    types = ["h100", "a100", "l40s", "v100"]
    model = learn(runs_of(("u", "job", 1), {"h100": 1.0, "a100": 0.5}), types)
    generic = pr.prior_speeds(types).speed
    top = max(generic.values())
    assert model.site is not None
    for k in types:
        assert model.site.speed[k] == pytest.approx(generic[k] / top, rel=0.02)


# --- issue 39: a group that fails at its start on one type -----------------------------------

def _recorded_failures(*job_ids):
    """Failures of ``sacct -a -X -D -P`` rows recorded on the 22.05 testbed: 691 and 710, a
    4-GPU ResNet-50 (the testbed's emulator, ``sfr-rn50``) sent to K80 where it has no
    throughput, exiting 3 at its start; 708 and 709, a script that exits 1 (``sfr-broken``), on
    V100 and on P100."""
    from pathlib import Path

    from slurm_fair.estimates.history import failures_from_history
    from slurm_fair.slurm.parse.history import parse_history

    path = Path(__file__).parent / "data" / "sacct_failed_at_start_22.05.txt"
    history = parse_history(path.read_text(), str(path))
    node_types = {"k80-1": "k80", "p100-1": "p100", "p100-2": "p100", "v100-1": "v100", "v100-2": "v100"}
    return [f for f in failures_from_history(history.failed, node_types) if f.job_id in job_ids]


def test_a_recorded_failure_at_the_start_on_one_type_marks_that_type():
    [rn50] = _recorded_failures("691")
    assert (rn50.gpu_type, rn50.state, rn50.elapsed_s) == ("k80", "FAILED", 0.0)
    assert fails_on([], [rn50], TYPES3) == {rn50.group: {"k80": 1}}
    m = learn([], TYPES3, [rn50])
    assert m.groups[rn50.group].speed["k80"] == 0 and m.groups[rn50.group].speed["v100"] > 0


def test_a_recorded_script_that_fails_at_its_start_everywhere_marks_no_type():
    """The job's own fault: failing at the start on V100 and P100 says nothing of either type."""
    broken = _recorded_failures("708", "709")
    assert sorted(f.gpu_type for f in broken) == ["p100", "v100"]
    assert fails_on([], broken, TYPES3) == {}
    # only one of them seen so far: its type is marked (the next job goes elsewhere and fails
    # there too, which lifts the mark: the rule cannot tell before)
    assert fails_on([], broken[:1], TYPES3) == {broken[0].group: {broken[0].gpu_type: 1}}


def test_a_late_failure_alone_marks_nothing_and_unknown_elapsed_is_not_at_the_start():
    from slurm_fair.estimates.learn import FAST_FAIL_S

    assert fails_on([], [Failure(G, "k80", "FAILED", elapsed_s=FAST_FAIL_S + 1)], TYPES3) == {}
    assert fails_on([], [Failure(G, "k80", "FAILED")], TYPES3) == {}
    assert fails_on([], [Failure(G, "k80", "FAILED", elapsed_s=FAST_FAIL_S)], TYPES3) == {G: {"k80": 1}}
    # a completion there clears it, as for every other rule
    assert fails_on(done_on("k80"), [Failure(G, "k80", "FAILED", elapsed_s=1.0)], TYPES3) == {}
    # not the type's fault: NODE_FAIL, CANCELLED at the start mark nothing
    assert fails_on([], [Failure(G, "k80", s, elapsed_s=1.0) for s in ("NODE_FAIL", "CANCELLED")], TYPES3) == {}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPES3), st.sampled_from(["FAILED", "COMPLETED"]),
                          st.sampled_from([1.0, 50.0, 5000.0])), max_size=8))
def test_failures_at_the_start_on_two_types_never_mark_by_that_rule(rows):
    runs = [Run(G, k, 100.0) for k, s, _ in rows if s == "COMPLETED"]
    fails = [Failure(G, k, s, elapsed_s=e) for k, s, e in rows if s != "COMPLETED"]
    marked = fails_on(runs, fails, TYPES3).get(G, {})
    done = {r.gpu_type for r in runs}
    fast = {f.gpu_type for f in fails if f.elapsed_s <= 300 and f.gpu_type not in done}
    for k, n in marked.items():
        assert k not in done
        # marked by another rule, or the one type the group failed at its start on
        assert n >= 2 or done - {k} or fast == {k}, (k, rows)
    assert len(marked) < len(TYPES3)
