"""What a job asked for, derived once (controller/asked.py), and the one rule for an empty plan
field (controller/diff.py): a user's later move always wins; no value means given back."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.asked import plugin_mark, request_of, requests
from slurm_fair.controller.diff import PLAN_FIELDS, diff, give_backs
from slurm_fair.controller.ownership import reconcile
from slurm_fair.controller.plan.types import JobPlan, Plan
from slurm_fair.controller.revert import marked_jobs
from slurm_fair.controller.scope import Scope, read_pilot
from slurm_fair.controller.state.fields import Owned

from .builders import cluster, job, snapshot
from .test_plan_diff import plan_for

NEW = "slurm-fair:partition=gpu slurm-fair:routed=v100,p100"
OLD = "slurm-fair:partition=gpu"


def test_a_routed_job_asked_for_what_the_plugin_recorded_until_someone_moves_it():
    routed = job("1", "a", partition="p100,v100", admin_comment=NEW)  # Slurm may reorder the list
    r = request_of(routed, {})
    assert (r.partition, r.routed, r.choice) == ("gpu", True, None)
    moved = replace(routed, partition="k80")  # its user: scontrol update Partition=k80
    r = request_of(moved, {})
    assert (r.partition, r.routed, r.moved) == ("k80", False, True)
    assert request_of(routed, {}).moved is False
    # back where it was submitted reads as submitted there (a give-back puts it there too)
    r = request_of(replace(routed, partition="gpu"), {})
    assert (r.partition, r.routed, r.moved, r.choice) == ("gpu", False, False, None)
    several = replace(routed, partition="k80,p100")  # -p k80,p100
    r = request_of(several, {})
    assert (r.partition, r.routed, r.choice) == ("k80,p100", False, "asked for several partitions")
    # a mark written before the plugin recorded what it gave: trusted while away from "gpu"
    assert request_of(job("2", "a", partition="v100", admin_comment=OLD), {}).partition == "gpu"
    old = request_of(job("2", "a", partition="gpu", admin_comment=OLD), {})
    assert (old.routed, old.moved) == (False, False)  # an old record cannot tell a move
    assert plugin_mark(job("3", "a", admin_comment="ticket-1")) is None


def test_the_controllers_rows_say_what_it_found_and_a_released_row_is_the_users_move():
    row = Owned("1", "partition", "a", "v100,p100", written="v100")  # it moved the routed job
    j = job("1", "a", partition="v100", admin_comment=NEW)
    assert request_of(j, {("1", "partition"): row}).partition == "gpu"  # the plugin had it
    # the user moved it before the controller came: what it held then is theirs
    own = Owned("1", "partition", "a", "k80", written="v100")
    assert request_of(j, {("1", "partition"): own}).partition == "k80"
    # someone moved it after the controller: their partition now, not the row's original
    gone = replace(row, released=True)
    assert request_of(replace(j, partition="k80"), {("1", "partition"): gone}).partition == "k80"
    # node list and GPU request: the value before the controller's first write, while it holds it
    pin = Owned("1", "nodes", "a", "", written="v100-1")
    r = request_of(replace(j, req_nodes=("v100-1",)), {("1", "nodes"): pin})
    assert (r.nodes, r.choice) == ("", None)
    r = request_of(replace(j, req_nodes=("v100-2",)), {("1", "nodes"): replace(pin, released=True)})
    assert (r.nodes, r.choice) == ("v100-2", "asked for nodes")


def test_a_routed_job_its_user_moved_is_not_steered_again_nor_put_back():
    snap = snapshot(cluster(v100=4, p100=4, k80=4),
                    [job("1", "a", partition="k80", admin_comment=NEW),
                     job("2", "a", partition="v100,p100", admin_comment=NEW),
                     job("3", "a", partition="p100", admin_comment=NEW)])  # moved to p100
    pilot = read_pilot(snap, {}, Scope())
    assert pilot.asked.partitions == {"1": "k80", "2": "gpu", "3": "p100"}
    assert {("1", "partition"), ("3", "partition")} <= pilot.released
    # k80, p100 have one type each: their jobs keep it; and their partitions are their users'
    plan = plan_for(snap, {j: {"v100": 1.0} for j in "123"}, {j: "v100" for j in "123"})
    assert plan.jobs["2"].partition == "v100"  # still the plugin's: the controller's to steer
    assert plan.jobs["1"].partition is None and plan.jobs["3"].partition is None
    acts = diff(plan, snap, {}, {}, pilot.requests)
    assert not [a for a in acts if a.job in ("1", "3") and a.kind != "set_site_factor"]
    # revert and failsafe put back only what the plugin still holds
    back = marked_jobs(snap, requests(snap.jobs, {}))
    assert [(a.job, a.after) for a in back] == [("2", "gpu")]


def test_a_job_moved_out_of_the_pilot_stops_being_managed_and_gets_the_rest_back():
    row = Owned("1", "partition", "a", "gpu", written="v100")
    push = Owned("1", "site_factor", "a", "0", written="-64")
    j = job("1", "a", partition="other", site_factor=-64)  # its user moved it out of the pilot
    snap = snapshot(cluster(v100=4, k80=4), [j])
    owned = {("1", "partition"): row, ("1", "site_factor"): push}
    reading = reconcile(owned, {"1": j}, 0.0)
    pilot = read_pilot(snap, owned, Scope.of((), ["gpu", "v100", "k80"]))
    assert not pilot.view.snapshot.jobs and pilot.requests["1"].partition == "other"
    acts = diff(Plan({}, {}), snap, pilot.owned, reading.ours, pilot.requests)
    assert [(a.kind, a.after, a.params["give_back"]) for a in acts] == [("set_site_factor", 0, True)]


def test_a_steered_job_that_excludes_its_types_nodes_goes_back_where_it_asked():
    row = Owned("1", "partition", "a", "gpu", written="v100")
    j = job("1", "a", partition="v100", exc_nodes=("v100-1",))  # every v100 node of the cluster
    snap = snapshot(cluster(v100=4, k80=4), [j])
    owned = {("1", "partition"): row}
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, owned=owned)
    assert plan.jobs["1"].partition is None  # the user's choice: the plan names no partition
    pilot = read_pilot(snap, owned, Scope())
    acts = diff(plan, snap, pilot.owned, pilot.reading.ours, pilot.requests)
    assert [(a.kind, a.after, a.params["give_back"]) for a in acts if a.job == "1"] == \
        [("set_partition", "gpu", True)]


def test_a_routed_job_the_plan_leaves_gets_the_plugins_partition_back():
    """The plugin's routing is slurm-fair's partition too: a routed job whose user then excludes
    every node of its type, or that the plan no longer mentions (held, out of the pilot), goes
    back to what it was submitted to."""
    mark = "slurm-fair:partition=gpu slurm-fair:routed=v100"
    j = job("1", "a", partition="v100", admin_comment=mark, exc_nodes=("v100-1",))
    held = job("2", "a", partition="v100", admin_comment=mark, reason="JobHeldUser")
    snap = snapshot(cluster(v100=4, p100=4, k80=4), [j, held])
    pilot = read_pilot(snap, {}, Scope())
    assert pilot.requests["1"].routed and pilot.requests["1"].choice == "excludes nodes"
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"})
    assert plan.jobs["1"].partition is None and plan.jobs["2"].partition is None
    acts = diff(plan, snap, {}, {}, pilot.requests)
    assert sorted((a.job, a.kind, a.after, a.params["give_back"]) for a in acts if a.kind == "set_partition") == [
        ("1", "set_partition", "gpu", True), ("2", "set_partition", "gpu", True)]
    # once back, it reads as submitted there: steerable again, nothing more to give back
    back = replace(j, partition="gpu", exc_nodes=())
    assert request_of(back, {}) == replace(pilot.requests["1"], routed=False, choice=None)


def test_order_none_gives_back_every_push():
    j = job("1", "a", partition="gpu", site_factor=-64)
    snap = snapshot(cluster(v100=4), [j])
    owned = {("1", "site_factor"): Owned("1", "site_factor", "a", "0", written="-64")}
    ours = reconcile(owned, {"1": j}, 0.0).ours
    plan = Plan({}, {"1": JobPlan("1", "a", None, 1, False)})  # order = "none": no site factor
    acts = diff(plan, snap, owned, ours)
    assert [(a.kind, a.after, a.params["give_back"]) for a in acts] == [("set_site_factor", 0, True)]


_VALUES = {"partition": ("v100", "k80"), "gres": ("v100", "k80"), "nodes": ("v100-1", ""),
           "site_factor": ("-64", "-128")}


@settings(max_examples=scaled(150), deadline=None)
@given(st.fixed_dictionaries({f: st.sampled_from((None,) + _VALUES[f]) for f in PLAN_FIELDS}),
       st.fixed_dictionaries({f: st.sampled_from((None, "held", "released")) for f in PLAN_FIELDS}))
def test_one_rule_for_every_plan_field(want, rows):
    """For every field alike: a value is written where Slurm shows another (never over a
    released field: the plan does not name those); no value gives the controller's back."""
    j = job("1", "a", partition="v100", gpus=1, site_factor=-64, req_nodes=("v100-1",))
    j = replace(j, gpu_request=replace(j.gpu_request, gpu_type="v100", raw="TresPerNode=gres:gpu:v100:1"))
    held = {"partition": ("gpu", "v100"), "gres": ("TresPerNode=gres:gpu:1", "v100"),
            "nodes": ("", "v100-1"), "site_factor": ("0", "-64")}
    owned = {("1", f): Owned("1", f, "a", held[f][0], written=held[f][1], released=rows[f] == "released")
             for f in PLAN_FIELDS if rows[f]}
    want = {f: (None if rows[f] == "released" else v) for f, v in want.items()}
    jp = JobPlan("1", "a", want["gres"], 1, False, site_factor=None if want["site_factor"] is None
                 else int(want["site_factor"]), partition=want["partition"], nodes=want["nodes"])
    snap = snapshot(cluster(v100=4, k80=4), [j])
    ours = reconcile(owned, {"1": j}, 0.0).ours
    acts = {a.field: a for a in diff(Plan({}, {"1": jp}), snap, owned, ours)}
    shown = {"partition": "v100", "gres": "v100", "nodes": "v100-1", "site_factor": "-64"}
    for f in PLAN_FIELDS:
        if want[f] is None:
            if rows[f] == "held":
                assert acts[f].params["give_back"] and acts[f].params["value"] == held[f][0], f
            else:
                assert f not in acts, f
        elif want[f] != shown[f]:
            assert acts[f].params["value"] == want[f], f
        else:
            assert f not in acts, f
    # revert and failsafe: every field the controller holds, and only those
    assert {a.field for a in give_backs(snap, owned, ours)} == {f for f in PLAN_FIELDS if rows[f] == "held"}


def test_the_submit_plugins_record_is_read_in_one_module():
    """No module but controller/asked.py reads the plugin's mark or re-derives a job's asked
    partition from the admin comment."""
    root = Path(__file__).resolve().parents[2] / "slurm_fair"
    readers = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "admin_comment" and path.name != "asked.py":
                readers.append(str(path.relative_to(root)))
            if isinstance(node, ast.Constant) and node.value == "slurm-fair:partition=" and path.name != "asked.py":
                readers.append(str(path.relative_to(root)))
    assert not [r for r in readers if r.startswith("controller/")], readers


_PARTS = st.lists(st.sampled_from(["gpu", "v100", "p100", "k80"]), min_size=1, max_size=3, unique=True).map(",".join)


@settings(max_examples=scaled(200), deadline=None)
@given(asked=_PARTS, routed=_PARTS, now=_PARTS, row=st.sampled_from([None, "held", "released"]),
       old_mark=st.booleans())
def test_a_later_move_always_wins(asked, routed, now, row, old_mark):
    """Whatever the plugin recorded and whatever the controller holds: a job anyone moved after
    them asked for where it is now; only the plugin's own routing, or the controller's own
    move, reads as what it was submitted to."""
    note = f"slurm-fair:partition={asked}" + ("" if old_mark else f" slurm-fair:routed={routed}")
    j = job("1", "a", partition=now, admin_comment=note)
    owned = {}
    if row:
        owned[("1", "partition")] = Owned("1", "partition", "a", routed, written=now, released=row == "released")
    r = request_of(j, owned)
    canon = lambda p: sorted(p.split(","))  # noqa: E731
    if row == "released":
        assert r.partition == now  # someone moved it after the controller
    elif row == "held":  # the controller moved it from where the plugin had put it
        plugin_had = not old_mark or canon(routed) != canon(asked)
        assert r.partition == (asked if plugin_had else routed)
    elif old_mark:
        assert r.partition == (asked if canon(now) != canon(asked) else now)
    else:
        assert r.partition == (asked if canon(now) == canon(routed) else now)
        assert r.routed == (canon(now) == canon(routed))
        assert r.moved == (not r.routed and canon(now) != canon(asked))
