"""The cycle's phases read data, not each other: the plan reads a table of users' groups made
once per cycle (no call back into decide), and the requeue step reads the types the plan can
reach (no call back into plan/jobs)."""

from __future__ import annotations

from dataclasses import replace

from slurm_fair.controller import decide
from slurm_fair.controller.decide import _groups
from slurm_fair.slurm.model import Partition

from .builders import cluster, job, snapshot
from .test_plan_diff import plan_for, steering


def test_users_groups_are_read_once_per_cycle_and_only_when_a_partition_needs_them(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(decide, "user_groups", lambda u: calls.append(u) or frozenset({"lab"}))
    nodes = cluster(v100=4, k80=4)
    snap = snapshot(nodes, [job("1", "a"), job("2", "a"), job("3", "b")])
    open_parts = replace(snap, partitions=(Partition("v100", ("v100-1",)),))
    assert _groups(snap, open_parts) == {} and calls == []
    closed = replace(snap, partitions=(Partition("v100", ("v100-1",), allow_groups=frozenset({"lab"})),))
    assert _groups(snap, closed) == {"u": frozenset({"lab"})} and calls == ["u"]  # three jobs, one user


def test_allow_groups_admits_by_the_cycles_table():
    nodes = cluster(v100=4, k80=4)
    rules = [Partition("gpu", tuple(n.name for n in nodes)),
             Partition("v100", ("v100-1",), allow_groups=frozenset({"lab"})), Partition("k80", ("k80-1",))]
    snap = snapshot(nodes, [job("1", "a")])
    # not admitted to v100: sent to the next type it may run on
    for groups, want in (({"u": frozenset({"lab"})}, "v100"), ({"u": frozenset({"other"})}, "k80"),
                         ({"u": None}, "k80"), ({}, "k80")):
        plan = plan_for(snap, {"1": {"v100": 1.0}}, {"1": "v100"}, s=steering(snap, partitions=rules, groups=groups))
        assert plan.jobs["1"].partition == want, groups
