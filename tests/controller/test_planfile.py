"""The plan file the submit plugin reads: flat, line-parsable, with an expiry."""

from __future__ import annotations

import re

from slurm_fair.controller.estimates import ClassTable
from slurm_fair.controller.plan import PlanSettings, make_plan
from slurm_fair.controller import planfile
from slurm_fair.model import Allocation, Job, Problem

from .builders import cluster, job, snapshot

#: the pattern docs/controller.md gives Lua plugin authors
LUA_LINE = re.compile(r'^"([^"]+)": "?([^",]*)"?,?$')
TABLE = ClassTable({"resnet": {"k80": 1.0, "v100": 8.0}, "a3c": {"k80": 3.0, "v100": 3.1}}, "t")


def test_plan_file_round_trip_and_line_format(tmp_path):
    snap = snapshot(cluster(v100=4, k80=8), [job("1", "alice", gpus=2), job("2", "bob")])
    prob = Problem(snap.capacity(), {}, (Job("1", "alice", 2, {"v100": 8, "k80": 1}), Job("2", "bob", 1, {"v100": 1, "k80": 1})))
    x = {"1": {"v100": 1.0}, "2": {"k80": 1.0}}
    plan = make_plan(snap, prob, Allocation("t", x), {"1": "v100", "2": "k80"}, {}, {}, {}, PlanSettings(), False)
    entries = planfile.plan_entries(plan, snap, TABLE)
    text = planfile.render(entries, 1000.4, 180, "cyc")
    planfile.write(tmp_path / "plan.json", text)
    doc = planfile.read(tmp_path / "plan.json")
    assert doc["generated_at"] == 1000 and doc["expires_at"] == 1180 and doc["format"] == 1
    lua = {}
    for line in text.splitlines()[1:-1]:
        m = LUA_LINE.match(line)
        assert m, line
        lua[m.group(1)] = m.group(2)
    assert {k: str(v) for k, v in doc.items()} == lua
    # alice's bundle is on v100; resnet is much faster there and alice has room there
    assert doc["gpu_type/alice/*"] == "v100" and doc["gpu_type/alice/resnet"] == "v100"
    assert doc["gpu_type/bob/*"] == "k80"
    assert doc["gpu_type/*/*"] in ("v100", "k80")


def test_unsafe_names_are_left_out():
    snap = snapshot(cluster(v100=4), [job("1", 'ev"il')])
    prob = Problem(snap.capacity(), {}, (Job("1", 'ev"il', 1, {"v100": 1}),))
    plan = make_plan(snap, prob, Allocation("t", {"1": {"v100": 1}}), {"1": "v100"}, {}, {}, {}, PlanSettings(), False)
    assert not any('"' in k for k in planfile.plan_entries(plan, snap, TABLE))
