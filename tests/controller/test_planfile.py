"""The plan file the submit plugin reads: flat, line-parsable, with an expiry; and the order in
which it offers GPU types (checked against what Slurm does with a partition list)."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller import planfile
from slurm_fair.estimates import estimate
from slurm_fair.estimates.classes import ClassTable
from slurm_fair.controller.plan import PlanInputs, make_plan
from slurm_fair.controller.plan.types import PlanSettings
from slurm_fair.model import Allocation, Job, Problem

from .builders import cluster, job, node, snapshot

#: the pattern docs/controller.md gives Lua plugin authors
LUA_LINE = re.compile(r'^"([^"]+)": "?([^",]*)"?,?$')
TABLE = ClassTable({"resnet": {"k80": 1.0, "v100": 8.0}, "a3c": {"k80": 3.0, "v100": 3.1},
                    "rec": {"k80": 2.0, "v100": 1.0}}, "t")
TIERS = {"v100": 3, "p100": 2, "k80": 1}


def tiered(nodes):
    """The testbed's layout: each node in ``gpu`` and in its type's partition, tiers by speed."""
    return [replace(n, tiers={"gpu": 1, **{k: TIERS[k] for k in n.gpus_total}}, memory_mb=64000) for n in nodes]


def test_plan_file_round_trip_and_line_format(tmp_path):
    snap = snapshot(tiered(cluster(v100=4, k80=8)), [job("1", "alice", gpus=2), job("2", "bob")])
    prob = Problem(snap.capacity(), {}, (Job("1", "alice", 2, {"v100": 8, "k80": 1}), Job("2", "bob", 1, {"v100": 1, "k80": 1})))
    x = {"1": {"v100": 1.0}, "2": {"k80": 1.0}}
    plan = make_plan(snap, prob, Allocation("t", x), PlanInputs({"1": "v100", "2": "k80"}), PlanSettings())
    entries = planfile.plan_entries(plan, snap, TABLE)
    text = planfile.render(entries, 1000.4, 180, "cyc")
    planfile.write(tmp_path / "plan.json", text)
    doc = planfile.read(tmp_path / "plan.json")
    assert doc["generated_at"] == 1000 and doc["expires_at"] == 1180 and doc["format"] == 2
    lua = {}
    for line in text.splitlines()[1:-1]:
        m = LUA_LINE.match(line)
        assert m, line
        lua[m.group(1)] = m.group(2)
    assert {k: str(v) for k, v in doc.items()} == lua
    assert doc["spans/gpu"] == "k80 v100" and doc["partition/v100"] == "v100" and "pin_gres" not in doc
    assert (doc["tier/v100"], doc["tier/k80"]) == ("3", "1")
    # one 4-GPU v100 node; two 4-GPU k80 nodes (32 CPUs, 64000 MB each)
    assert doc["shapes/v100"] == "4x32x64000x1" and doc["shapes/k80"] == "4x32x64000x2"
    assert doc["speeds/resnet"] == "k80=0.125 v100=1"
    # a job of no known class: what the controller assumes of an untagged job it has never seen
    # (the type priors), not flat, where the plugin would offer k80 first
    guess, _ = estimate.untagged(job("9", "carol"), ["k80", "v100"], {}, set())
    assert doc["speeds/*"] == planfile._speeds(guess)
    assert [float(v.split("=")[1]) for v in doc["speeds/*"].split()][0] < 0.5  # k80 well below v100
    # room: the larger of the limit and the fair share (half of each type), minus what is held:
    # alice's 2-GPU job is on v100, bob's 1-GPU job on k80
    assert doc["room/alice"] == "k80" and doc["room/bob"] == "k80 v100"
    assert doc["room/*"] == "k80 v100"  # free GPUs


def test_gang_sizes_get_their_own_speeds_and_the_lookup_takes_the_largest_size_below():
    snap = snapshot(tiered(cluster(v100=4, k80=8)), [job("1", "alice")])
    prob = Problem(snap.capacity(), {}, (Job("1", "alice", 1, {"v100": 1, "k80": 1}),))
    plan = make_plan(snap, prob, Allocation("t", {"1": {"v100": 1.0}}), PlanInputs({"1": "v100"}), PlanSettings())
    table = ClassTable({"big": {"k80": 1.0, "v100": 4.0}}, "t", {"big": {4: {"k80": 0.0, "v100": 8.0}}})
    entries = planfile.plan_entries(plan, snap, table)
    assert entries["speeds/big"] == "k80=0.25 v100=1" and entries["speeds/big@4"] == "v100=1"  # no k80 at 4
    key = planfile.speed_key
    assert [key(entries, "big", g) for g in (1, 3, 4, 9)] == ["speeds/big", "speeds/big", "speeds/big@4", "speeds/big@4"]
    assert key(entries, "nope", 4) == "speeds/*"
    # a class measured on gangs only: a smaller job reads its smallest size, as ClassTable.row
    gangs_only = ClassTable({}, "t", {"g": {4: {"k80": 1.0, "v100": 2.0}, 8: {"v100": 3.0}}})
    e2 = planfile.plan_entries(plan, snap, gangs_only)
    for g in (1, 4, 8):
        want = gangs_only.row("g", g)
        assert e2[key(e2, "g", g)] == planfile._speeds({k: want.get(k, 0.0) for k in ("k80", "v100")}), g


def test_unsafe_names_are_left_out():
    snap = snapshot(cluster(v100=4), [job("1", 'ev"il')])
    prob = Problem(snap.capacity(), {}, (Job("1", 'ev"il', 1, {"v100": 1}),))
    plan = make_plan(snap, prob, Allocation("t", {"1": {"v100": 1}}), PlanInputs({"1": "v100"}), PlanSettings())
    assert not any('"' in k for k in planfile.plan_entries(plan, snap, TABLE))


def test_a_partition_whose_types_cannot_all_be_steered_is_not_offered():
    nodes = [node("v100-1", "v100", partitions=("gpu", "v100")), node("k80-1", "k80", partitions=("gpu",))]
    snap = snapshot(nodes, [job("1", "a")])
    plan = make_plan(snap, Problem(snap.capacity(), {}, ()), Allocation("t", {}), PlanInputs({}), PlanSettings())
    entries = planfile.plan_entries(plan, snap, TABLE)
    assert "spans/gpu" not in entries and "partition/k80" not in entries


def slurm_choice(offered, free, tiers):
    """Slurm tries a job's partitions highest PriorityTier first (equal tiers: any order) and
    starts it in the first with room: every type it might pick."""
    avail = [k for k in offered if k in free]
    if not avail:
        return []
    top = max(tiers.get(k, 0) for k in avail)
    return [k for k in avail if tiers.get(k, 0) == top]


TYPES = ["a100", "v100", "p100", "k80"]


@settings(max_examples=scaled(400), deadline=None)
@given(
    speed=st.fixed_dictionaries({k: st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.1, 3.0, 8.0]) for k in TYPES}),
    tiers=st.fixed_dictionaries({k: st.integers(0, 3) for k in TYPES}),
    room=st.one_of(st.none(), st.fixed_dictionaries({k: st.integers(-1, 2) for k in TYPES})),
)
def test_property_slurm_never_starts_a_job_much_slower_than_an_offered_free_type(speed, tiers, room):
    offered = planfile.prefer(TYPES, speed, room, tiers)
    runnable = [k for k in TYPES if speed[k] > 0]
    assert set(offered) <= set(runnable)
    assert bool(offered) == bool(runnable)
    if offered:
        roomy = [k for k in runnable if room is None or room[k] > 0]
        pool = roomy or runnable
        assert speed[offered[0]] == max(speed[k] for k in pool)  # the best type is always offered
        assert set(offered) <= set(pool)
        if roomy:  # entitled somewhere: nothing much slower than the best of those is offered
            assert min(speed[k] for k in offered) >= planfile.SLOWER * speed[offered[0]] - 1e-12
    # whichever of the offered types are free, Slurm's pick is within 10 % of the best free one
    for r in range(1, len(offered) + 1):
        for free in itertools.combinations(offered, r):
            best = max(speed[k] for k in free)
            for pick in slurm_choice(offered, set(free), tiers):
                assert speed[pick] >= planfile.SLOWER * best - 1e-12, (offered, free, pick)
