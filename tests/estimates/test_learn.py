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
