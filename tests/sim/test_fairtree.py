"""Slurm's Fair Tree factor (``sim/fairtree.py``): rankings computed by hand from the algorithm
of Slurm's "Fair Tree Fairshare Algorithm" page, and its invariants."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.sim.fairtree import Assoc, fair_tree, flat_tree, level_fairshares
from slurm_fair.sim.slurmlike import Node, SlurmModel, replay_slurm
from slurm_fair.sim.workload import TraceJob, make_workload

from test_slurmlike import _table


def user(name: str, usage: float, shares: float = 1.0) -> Assoc:
    return Assoc(name, shares, usage)


def acct(name: str, shares: float, *children: Assoc) -> Assoc:
    return Assoc(name, shares, 0.0, children)


def test_level_fairshare_is_share_over_usage_among_siblings():
    # shares 1 : 3, usage 30 : 10 -> S 0.25, 0.75; U 0.75, 0.25 -> LF 1/3, 3
    lf = level_fairshares([user("a", 30, 1), user("b", 10, 3)])
    assert math.isclose(lf[0], 1 / 3) and math.isclose(lf[1], 3.0)
    # no usage: infinite (first); no shares: 0 (last), whatever its usage
    assert level_fairshares([user("a", 0), user("b", 5)])[0] == math.inf
    assert level_fairshares([user("a", 0, 0), user("b", 5)])[0] == 0.0


def test_a_users_rank_follows_its_accounts_not_its_own_usage():
    # Hand computed. Root's children: A (shares 1, usage 10 + 50 = 60), B (1, 30), C (2, 10).
    # S: A .25, B .25, C .5; U: A .6, B .3, C .1 -> LF A .417, B .833, C 5: order C, B, A.
    # C's one user ranks 5 of 5; B's users: b1 (usage 30), b2 (0): LF b2 inf > b1 -> b2 4, b1 3;
    # A's: a1 (10) LF (.5 / (10/60)) = 3 > a2 (.5 / (50/60)) = .6 -> a1 2, a2 1. Factor rank / 5.
    # a1 used less than b1 and than C's user per share, and still ranks below them: its account
    # used more than its share.
    tree = [acct("A", 1, user("a1", 10), user("a2", 50)),
            acct("B", 1, user("b1", 30), user("b2", 0)),
            acct("C", 2, user("c1", 10))]
    f = fair_tree(tree)
    assert f == {("C", "c1"): 1.0, ("B", "b2"): 0.8, ("B", "b1"): 0.6, ("A", "a1"): 0.4, ("A", "a2"): 0.2}


def test_tied_users_share_a_rank_and_the_next_one_skips():
    # three users in one account, two with the same usage: ranks 3, 2, 2 of 4, and the last 0.25
    tree = [acct("A", 1, user("x", 1), user("y", 5), user("z", 5), user("w", 20))]
    f = fair_tree(tree)
    assert f == {("A", "x"): 1.0, ("A", "y"): 0.75, ("A", "z"): 0.75, ("A", "w"): 0.25}


def test_tied_accounts_merge_their_children():
    # A and B have the same shares and usage (LF 1 each): their users are ranked together, by
    # their LF within their own account: a1 (S .5, U .25 -> 2), b1 (S 1, U 1 -> 1), a2 (.5/.75)
    tree = [acct("A", 1, user("a1", 10), user("a2", 30)), acct("B", 1, user("b1", 40))]
    f = fair_tree(tree)
    assert f == {("A", "a1"): 1.0, ("B", "b1"): 2 / 3, ("A", "a2"): 1 / 3}


def test_no_usage_anywhere_every_user_ties_first():
    f = fair_tree(flat_tree({"a": 2.0}, {}, {"a": ["u", "v"], "b": ["w"]}))
    assert set(f.values()) == {1.0}


def test_a_deeper_tree_keeps_each_subtree_together():
    # root -> P (shares 1: X, Y), Q (shares 1: one user); P used less than Q: all of P's users
    # first, whatever they used themselves
    tree = [acct("P", 1, acct("X", 1, user("x1", 40)), acct("Y", 1, user("y1", 1), user("y2", 1))),
            acct("Q", 1, user("q1", 50))]
    f = fair_tree(tree)
    assert f[("Q", "q1")] == 0.25
    # X: S .5, U 40/42 ~ .95; Y: .5 / (2/42): Y first; y1 and y2 tie
    assert f[("P", "Y", "y1")] == f[("P", "Y", "y2")] == 1.0 and f[("P", "X", "x1")] == 0.5


trees = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.integers(0, 6), min_size=1, max_size=4)),
    min_size=1, max_size=5)


def _build(spec, scale: float = 1.0, share_scale: float = 1.0) -> list[Assoc]:
    return [acct(f"a{i}", shares * share_scale, *(user(f"u{k}", u * scale) for k, u in enumerate(users)))
            for i, (shares, users) in enumerate(spec)]


@settings(max_examples=scaled(150), deadline=None)
@given(trees, st.floats(0.01, 1000.0))
def test_factors_depend_only_on_ratios_not_units(spec, scale):
    # usage in GPU-seconds or GPU-hours, shares 1:2 or 10:20: the same ranks (only the order of
    # the level fair-shares counts)
    assert fair_tree(_build(spec)) == fair_tree(_build(spec, scale, 10.0))


@settings(max_examples=scaled(150), deadline=None)
@given(trees)
def test_factors_are_ranks_and_accounts_stay_together(spec):
    tree = _build(spec)
    f = fair_tree(tree)
    n = sum(len(users) for _, users in spec)
    assert len(f) == n
    # every factor is a rank over the users: k / n with 1 <= k <= n, and the top user has 1
    assert all(math.isclose(v * n, round(v * n)) and 1 <= round(v * n) <= n for v in f.values())
    assert max(f.values()) == 1.0
    # an account whose LF is strictly above a sibling's has all its users at or above all of
    # that sibling's (strictly above: ties between accounts merge their users)
    lf = dict(zip((a.name for a in tree), level_fairshares(tree)))
    for a in tree:
        for b in tree:
            if lf[a.name] > lf[b.name] * (1 + 1e-6):
                lo = min(f[(a.name, u.name)] for u in a.children)
                hi = max(f[(b.name, u.name)] for u in b.children)
                assert lo > hi


@settings(max_examples=scaled(100), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 50)), min_size=2, max_size=6))
def test_one_user_per_account_orders_as_classic(spec):
    # a flat tree of one user per account: Fair Tree's order is the classic 2^(-U/S)'s
    tree = [acct(f"a{i}", s, user("u", u)) for i, (s, u) in enumerate(spec)]
    f = fair_tree(tree)
    total_s = sum(s for s, _ in spec)
    total_u = sum(u for _, u in spec) or 1
    classic = {f"a{i}": 2 ** (-(u / total_u) / (s / total_s)) for i, (s, u) in enumerate(spec)}
    for a in classic:
        for b in classic:
            if classic[a] > classic[b] + 1e-12:
                assert f[(a, "u")] > f[(b, "u")]


def test_the_modelled_slurm_ranks_an_accounts_users_by_their_own_usage():
    # One 4-GPU node. Account A's heavy user ran first; then A's heavy user, A's light user and
    # B's user queue. B has used nothing: it goes first; then, of A's, the light user (no usage)
    # before the heavy one, though the heavy one's job came first. The classic factor, by
    # tenant, cannot tell A's users apart: their jobs go in submit order.
    nodes = [Node("n1", "a100", 4)]
    jobs = [TraceJob("h0", "A", "x", 4, 1000, 0), TraceJob("h1", "A", "x", 4, 100, 10),
            TraceJob("l1", "A", "x", 4, 100, 20), TraceJob("b1", "B", "x", 4, 100, 30)]
    users = {"h0": "heavy", "h1": "heavy", "l1": "light", "b1": "bob"}

    def order(fairshare: str) -> list[str]:
        records, _ = replay_slurm(make_workload(jobs, {}, ["test"]), nodes, _table(jobs, {"a100": 1.0}),
                                  {}, SlurmModel(priority="fairshare", fairshare=fairshare), users=users)
        return [r.job_id for r in sorted(records, key=lambda r: r.start_s)]

    assert order("fair-tree") == ["h0", "b1", "l1", "h1"]
    assert order("classic") == ["h0", "b1", "h1", "l1"]


def test_billing_weights_charge_a_cheap_type_less():
    # A ran 4 GPUs on the k80 node, B 2 GPUs on the v100 node, both for 1,000 s; then each queues
    # a job for a whole node, B's first, while C holds both. By GPU-seconds A used more (4,000 against 2,000):
    # B goes first. At the partition's billing (k80 0.25) A used 1,000 against 2,000: A first.
    nodes = [Node("k80-1", "k80", 4), Node("v100-1", "v100", 4)]
    jobs = [TraceJob("a0", "A", "x", 4, 1000, 0, 1), TraceJob("b0", "B", "x", 2, 1000, 0, 1),
            TraceJob("b1", "B", "x", 4, 100, 1100, 1), TraceJob("a1", "A", "x", 4, 100, 1101, 1),
            TraceJob("f", "C", "x", 4, 2000, 1000, 1),  # holds the k80 node
            TraceJob("g", "C", "x", 4, 200, 1000, 1)]  # and the v100 node until 1,200: both wait

    def first(billing: dict[str, float]) -> str:
        records, _ = replay_slurm(make_workload(jobs, {}, ["test"]), nodes,
                                  _table(jobs, {"k80": 1.0, "v100": 1.0}), {},
                                  SlurmModel(priority="fairshare", billing=billing))
        starts = {r.job_id: r.start_s for r in records}
        return min(("a1", "b1"), key=lambda j: starts[j])

    assert first({}) == "b1"
    assert first({"k80": 0.25}) == "a1"
