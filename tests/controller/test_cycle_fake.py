"""Full cycles against the fake Slurm port: the controller's behaviour end to end."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from slurm_fair.controller.audit import AuditLog
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.lock import ControllerLock
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.rounding import Placement
from slurm_fair.errors import LockHeld, SlurmUnavailable, SolverError

from .conftest import make_config

WRITES = {"set_gpu_type", "restore_gpu_request", "set_gpu_types", "restore_gpu_requests",
          "set_priority", "set_nice", "hold", "release",
          "requeue", "update_job", "update_jobs", "ensure_qos", "delete_qos", "attach_qos", "detach_qos"}


def submit_mix(fake):
    ids = [
        fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=resnet-50-bs32"),
        fake.submit("alice", "--gres=gpu:2", hold=False, comment="fair:class=a3c"),
        fake.submit("bob", "--gpus=2", hold=False, comment="fair:class=lm-bs20"),
        fake.submit("bob", "--gres=gpu:1", hold=False),
    ]
    return ids


def test_first_cycle_steers_every_job_and_makes_no_qos(fake, config):
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    assert (res.status, res.exit_code) == ("ok", 0), res.message
    jobs = {j.job_id: j for j in fake.jobs()}
    for i in ids:
        # steered by partition: the partition of one GPU type, the request left as submitted
        assert jobs[i].partition in ("v100", "p100", "k80")
        assert jobs[i].gpu_request.gpu_type is None
        assert jobs[i].qos == "normal"  # the job's own QOS is never replaced
        assert res.plan.jobs[i].planned_type == jobs[i].partition
    # nothing in accounting: no QOS made or changed, no default QOS moved
    assert [q.name for q in fake.qos()] == ["normal"]
    assert {a.name: a.default_qos for a in fake.accounts()} == {"alice": "normal", "bob": "normal"}
    assert not [c for c in fake.calls if c[0] in ("ensure_qos", "attach_qos", "detach_qos", "delete_qos")]
    # the request form is kept: --gpus stays per job
    assert jobs[ids[2]].gpu_request.per == "job" and jobs[ids[2]].gpu_request.total == 2


def test_job_writes_go_in_groups_and_every_intent_is_stored_first(fake, config, tmp_path):
    ids = [fake.submit(("alice", "bob")[i % 2], f"--gres=gpu:{1 + i % 2}", hold=False,
                       comment="fair:class=" + ("resnet-50-bs32", "a3c", "lm-bs20")[i % 3]) for i in range(60)]
    res = run_cycle(fake, config)
    assert (res.status, res.exit_code) == ("ok", 0), res.message
    kinds = [c[0] for c in fake.calls]
    assert "update_job" not in kinds and "set_nice" not in kinds
    batches = [c[1] for c in fake.calls if c[0] == "update_jobs"]
    # one call per (field, value): at most three partitions, a few site factors
    values = {(f, v) for _, fields in batches for f, v in fields.items()}
    assert len(batches) == len(values) < 15
    job_actions = [r for r in res.results if r.action.job]
    assert len(job_actions) >= 60 and all(r.applied for r in job_actions)
    assert all(fake.job(i).qos == "normal" for i in ids)
    with StateStore.in_dir(tmp_path / "state") as store:
        owned = store.owned()
    assert {j for j, f in owned if f == "partition"} == set(ids)
    assert all(r.original == "gpu" and r.written == fake.job(r.job_id).partition and r.intent is None
               for (j, f), r in owned.items() if f == "partition")
    assert revert(fake, config).exit_code == 0
    jobs = {j.job_id: j for j in fake.jobs()}
    assert all(jobs[i].qos == "normal" and jobs[i].partition == "gpu" for i in ids)
    assert all(jobs[i].site_factor in (None, 0) for i in ids)


def test_second_cycle_with_nothing_changed_applies_nothing(fake, config):
    submit_mix(fake)
    assert run_cycle(fake, config).exit_code == 0
    n = len(fake.calls)
    fake.now += timedelta(seconds=60)
    res = run_cycle(fake, config)
    assert res.exit_code == 0 and res.results == [] and len(fake.calls) == n


def test_dry_run_changes_nothing(fake, config, tmp_path):
    submit_mix(fake)
    res = run_cycle(fake, config, dry_run=True)
    assert res.exit_code == 0 and res.planned and not res.results
    assert not [c for c in fake.calls if c[0] in WRITES]
    assert not (tmp_path / "audit.jsonl").exists()
    d = res.to_dict()
    assert all(a["applied"] is False for a in d["actions"]) and d["plan"]["jobs"]


def test_records_owned_fields_audit_and_plan(fake, config, tmp_path):
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    with StateStore.in_dir(tmp_path / "state") as store:
        owned = store.owned()
        for i in ids:
            row = owned[(i, "partition")]
            assert (row.original, row.written, row.released) == ("gpu", fake.job(i).partition, False)
        assert store.last_plan()[0] == res.cycle_id
        assert store.cycles()[0]["status"] == "ok"
        assert set(json.loads(store.cycles()[0]["timings_json"])) >= {"snapshot", "policy", "plan", "apply"}
    entries = list(AuditLog(tmp_path / "audit.jsonl").entries())
    intents = [e for e in entries if e.get("intent")]
    outcomes = [e for e in entries if not e.get("intent")]
    # every intent is logged before any outcome (a killed cycle leaves a trace)
    assert entries[:len(intents)] == intents and len(intents) == len(outcomes) == len(res.results)
    assert all(e["cycle"] == res.cycle_id for e in entries) and all(e["applied"] for e in outcomes)
    assert (tmp_path / "state" / "plan.json").exists()


class VanishingPort:
    """Wraps a port; the given job ends right after the snapshot (between read and write)."""

    def __init__(self, port, job_id):
        self.port, self.job_id = port, job_id

    def snapshot(self):
        snap = self.port.snapshot()
        self.port.finish(self.job_id)
        return snap

    def __getattr__(self, name):
        return getattr(self.port, name)


def test_job_ending_mid_cycle_is_skipped(fake, config):
    ids = submit_mix(fake)
    res = run_cycle(VanishingPort(fake, ids[0]), config)
    assert (res.status, res.exit_code) == ("ok", 0)
    mine = [r for r in res.results if r.action.job == ids[0]]
    assert mine and all(r.skipped and not r.applied for r in mine)
    others = [r for r in res.results if r.action.job and r.action.job != ids[0]]
    assert others and all(r.applied for r in others)


class DownPort:
    def __init__(self, port, after_writes=None):
        self.port, self.after = port, after_writes
        self.writes = 0

    def snapshot(self):
        if self.after is None:
            raise SlurmUnavailable("slurmctld not responding")
        return self.port.snapshot()

    def __getattr__(self, name):
        attr = getattr(self.port, name)
        if name not in WRITES:
            return attr

        def wrapped(*a, **kw):
            if self.writes >= self.after:
                raise SlurmUnavailable("slurmctld not responding")
            self.writes += 1
            return attr(*a, **kw)

        return wrapped


def test_slurm_unreadable_changes_nothing(fake, config):
    submit_mix(fake)
    res = run_cycle(DownPort(fake), config)
    assert res.exit_code == 1 and res.status == "slurm-unavailable" and "nothing changed" in res.message
    assert not [c for c in fake.calls if c[0] in WRITES]


def test_slurm_lost_mid_apply_is_reported_and_recovered(fake, config, tmp_path):
    submit_mix(fake)
    res = run_cycle(DownPort(fake, after_writes=1), config)
    assert (res.status, res.exit_code) == ("partial", 1)
    applied = [r for r in res.results if r.applied]
    first = fake.calls[[c[0] for c in fake.calls].index("update_jobs")][1]
    assert applied and all(r.action.kind == applied[0].action.kind for r in applied)  # the one batch
    rest = [r for r in res.results if not r.applied]
    assert rest and all("not attempted" in r.error or "not responding" in r.error for r in rest)
    entries = [e for e in AuditLog(tmp_path / "audit.jsonl").entries() if not e.get("intent")]
    assert sum(e["applied"] for e in entries) == len(applied) and len(entries) == len(res.results)
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.last_plan() is None  # a partial cycle is not a good plan
        owned = store.owned()
    # what was written is recorded; a write Slurm did not answer is in doubt (it may yet
    # happen), to be settled by the next cycles
    assert {j for (j, _), r in owned.items() if r.written is not None} == {r.action.job for r in applied}
    uncertain = {r.action.job for r in res.results if r.uncertain}
    assert uncertain and {j for (j, _), r in owned.items() if r.doubt is not None} == uncertain and first
    assert not [r for r in owned.values() if r.intent is not None]
    # next cycle with Slurm back finishes the job and then is quiet
    assert run_cycle(fake, config).exit_code == 0
    fake.now += timedelta(seconds=60)
    assert run_cycle(fake, config).results == []


def failing_policy(name, problem, options):
    raise SolverError("time limit reached", status="Not Solved")


def test_solver_failure_without_earlier_plan_leaves_slurm_alone(fake, config):
    submit_mix(fake)
    res = run_cycle(fake, config, allocate=failing_policy)
    assert res.exit_code == 1 and res.status == "policy-failed"
    assert not [c for c in fake.calls if c[0] in WRITES]


def test_solver_failure_keeps_last_good_plan(fake, config):
    ids = submit_mix(fake)
    run_cycle(fake, config)
    steered = {j.job_id: j.partition for j in fake.jobs()}
    # Slurm lost a change (as after a restart) and a new untyped job arrived
    fake.update_job(ids[0], {"Partition": "gpu"})
    new = fake.submit("bob", "--gres=gpu:1", hold=False)
    fake.now += timedelta(seconds=60)
    res = run_cycle(fake, config, allocate=failing_policy)
    assert res.exit_code == 1 and "last good plan" in res.message
    assert fake.job(ids[0]).partition == steered[ids[0]] != "gpu"  # re-applied
    assert fake.job(new).partition == "gpu"  # unknown to the old plan: untouched


def test_lock_held_does_nothing(fake, config, tmp_path):
    submit_mix(fake)
    with ControllerLock(tmp_path / "state"):
        with pytest.raises(LockHeld):
            run_cycle(fake, config)
    assert not [c for c in fake.calls if c[0] in WRITES]


def test_hostile_comment_changes_nothing_it_should_not(fake, config):
    ids = submit_mix(fake)
    evil = fake.submit("bob", "--gres=gpu:1", hold=False,
                       comment='fair:preemptible fair:class=";scancel 1" fair:tput=1e999 $(reboot)')
    fake.start(evil, "v100-1", "v100")
    fake.now += timedelta(hours=2)
    res = run_cycle(fake, config)
    assert res.exit_code == 0
    assert not [r for r in res.results if r.action.kind == "requeue"]  # no --requeue: never requeued
    assert fake.job(evil).running
    assert {j.job_id for j in fake.jobs()} == set(ids) | {evil}
    assert res.estimates[evil].source == "prior"  # the malformed class tag is ignored


def test_preemptible_job_is_requeued_only_at_round_boundaries(tmp_path, fake):
    config = make_config(tmp_path, round_s=600)
    hog = fake.submit("alice", "--gres=gpu:4", hold=False, comment="fair:preemptible")
    fake._put(fake.job(hog), requeue=True)
    fake.start(hog, "v100-1", "v100")
    stuck = fake.submit("bob", "--gres=gpu:4", hold=False)
    fake.start(stuck, "k80-1", "k80")  # running, not opted in
    fake.now += timedelta(hours=1)

    waiting = fake.submit("bob", "--gres=gpu:4", hold=False)

    def keep_none(problem, allocation, received=None, prev=None, prev_nodes=None, fixed=None, sticky=False, **_rules):
        # this round runs the waiting job on v100, where the opted-in job holds every GPU
        return Placement(types={waiting: "v100"})

    # the first cycle is a round boundary: the opted-in job is requeued, the other is not
    res = run_cycle(fake, config, place=keep_none)
    assert [(r.action.kind, r.action.job, r.applied) for r in res.results if r.action.kind == "requeue"] == [
        ("requeue", hog, True)]
    assert fake.job(hog).pending and fake.job(stuck).running
    # within the same round nothing is requeued even though the placement still leaves it out
    fake.start(hog, "v100-1", "v100")
    fake._put(fake.job(hog), start_time=fake.now - timedelta(hours=1))
    fake.now += timedelta(seconds=60)
    res = run_cycle(fake, config, place=keep_none)
    assert not [r for r in res.results if r.action.kind == "requeue"]
    # the next round boundary requeues it again
    fake.now += timedelta(seconds=600)
    res = run_cycle(fake, config, place=keep_none)
    assert [r.action.job for r in res.results if r.action.kind == "requeue"] == [hog]
    assert not [c for c in fake.calls if c[0] == "scancel"]


def test_observed_throughput_is_folded_in(fake, config, tmp_path):
    j = fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=a3c fair:tput=100")
    fake.start(j, "k80-1", "k80")
    run_cycle(fake, config)
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.estimates() == {"a3c": {"k80": 100.0}}
    p = fake.submit("bob", "--gres=gpu:1", hold=False, comment="fair:class=a3c")
    fake.now += timedelta(seconds=60)
    res = run_cycle(fake, config)
    assert res.estimates[p].throughput["k80"] == 100.0 and res.estimates[p].sources["k80"] == "observed"


def test_a_dry_run_shows_the_decision_the_real_cycle_makes(fake, config):
    """One decision (decide.py) for both: this cycle's reports and service count in a dry run
    too (it used to decide from the history without them)."""
    j = fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=a3c fair:tput=100")
    fake.start(j, "k80-1", "k80")
    submit_mix(fake)
    run_cycle(fake, config)
    fake.now += timedelta(minutes=10)
    fake._put(fake.job(j), comment="fair:class=a3c fair:tput=40", tags={"class": "a3c", "tput": "40"})
    dry = run_cycle(fake, config, dry_run=True)
    real = run_cycle(fake, config)
    assert dry.estimates[j].throughput["k80"] == real.estimates[j].throughput["k80"] == 0.3 * 40 + 0.7 * 100
    assert dry.plan.to_dict() == real.plan.to_dict()
    assert [a.to_dict() for a in dry.planned] == [a.to_dict() for a in real.planned]


@pytest.mark.parametrize("pin", [True, "auto"])
def test_pin_gres_type_rewrites_requests_only_where_slurm_can_undo_it(tmp_path, fake, pin):
    fake.slurm_version = "24.11.5"  # typed requests can change: "auto" (the default) pins too
    config = make_config(tmp_path, **({} if pin == "auto" else {"pin_gres_type": pin}))
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    assert res.exit_code == 0 and not res.warnings
    for i in ids:
        assert fake.job(i).gpu_request.gpu_type == res.plan.jobs[i].planned_type
        assert fake.job(i).gpu_request.gpu_type in ("v100", "p100", "k80")
        assert fake.job(i).partition == "gpu"
    assert not [r for r in res.results if r.action.kind == "set_partition"]
    rv = revert(fake, config)  # the original untyped requests come back, count and form kept
    assert rv.exit_code == 0
    for i in ids:
        assert fake.job(i).gpu_request.gpu_type is None


def test_pin_gres_type_false_steers_by_partition_on_24_11(tmp_path, fake):
    fake.slurm_version = "24.11.5"
    config = make_config(tmp_path, pin_gres_type=False)
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    assert res.exit_code == 0 and not [c for c in fake.calls if c[0] == "set_gpu_type"]
    assert all(fake.job(i).partition in ("v100", "p100", "k80") for i in ids)


def test_pin_gres_type_auto_on_22_05_steers_by_partition_silently(tmp_path, fake):
    ids = submit_mix(fake)  # the fixture's fake is 22.05
    res = run_cycle(fake, make_config(tmp_path))
    assert res.exit_code == 0 and not res.warnings
    assert all(fake.job(i).partition in ("v100", "p100", "k80") for i in ids)


def test_pin_gres_type_on_22_05_steers_by_partition_and_says_so(tmp_path, fake):
    fake.slurm_version = "22.05.8"
    config = make_config(tmp_path, pin_gres_type=True)
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    assert res.exit_code == 0 and any("pin_gres_type" in w for w in res.warnings)
    assert not [c for c in fake.calls if c[0] == "set_gpu_type"]
    assert all(fake.job(i).partition in ("v100", "p100", "k80") for i in ids)


def test_typed_jobs_and_type_partitions_keep_their_type(fake, config):
    """User-typed, plugin-typed (fair:auto: fixed on 22.05) and jobs the user sent to a
    partition of one type are part of the problem with that type, never moved."""
    fake.slurm_version = "22.05.8"
    user = fake.submit("alice", "--gres=gpu:k80:1", hold=False)
    auto = fake.submit("alice", "--gres=gpu:p100:1", hold=False, comment="fair:auto")
    chose = fake.submit("bob", "--gres=gpu:1", hold=False, partition="k80")
    free = fake.submit("bob", "--gres=gpu:1", hold=False)
    res = run_cycle(fake, config)
    assert res.exit_code == 0, res.message
    for j, k in ((user, "k80"), (auto, "p100"), (chose, "k80")):
        assert res.plan.jobs[j].planned_type == k
        assert not [r for r in res.results if r.action.job == j and r.action.kind in ("set_partition", "set_gpu_type")]
    assert fake.job(user).partition == fake.job(auto).partition == "gpu"
    assert fake.job(chose).partition == "k80"
    assert fake.job(free).partition in ("v100", "p100", "k80")


def test_accounts_scope_leaves_other_accounts_alone(tmp_path, fake):
    config = make_config(tmp_path, accounts=["alice"])
    ids = submit_mix(fake)
    res = run_cycle(fake, config)
    assert res.exit_code == 0
    assert {r.action.tenant for r in res.results} == {"alice"}
    assert all(fake.job(i).partition == "gpu" and fake.job(i).qos == "normal" for i in ids[2:])
    assert "fair_bob" not in {q.name for q in fake.qos()}


def test_the_plain_json_part_of_a_policy_state_is_kept_between_cycles(fake, config, tmp_path):
    """A policy's state with one entry that is not plain JSON (oef's in-process memo of an
    Allocation) used to be dropped whole, so oef's equilibrium prices never reached the next
    cycle; the plain JSON entries are persisted and given back, the other is not."""
    from slurm_fair import policies
    from slurm_fair.controller.history import read_history

    seen: list[dict] = []

    def remembering(name, problem, options):
        seen.append(dict(options.state))
        options.state["test.entry"] = {"v100": 0.5}
        options.state["test.memo"] = (object(), "not JSON")
        return policies.allocate(name, problem, options)

    submit_mix(fake)
    assert run_cycle(fake, config, allocate=remembering).exit_code == 0
    with StateStore.in_dir(tmp_path / "state") as store:
        kept = dict(read_history(store, config.get("controller", "policy")).policy_state)
    assert kept["test.entry"] == {"v100": 0.5} and "test.memo" not in kept
    assert "oef.ceei_prices" in kept and "oef.tenant_level" not in kept  # oef's prices, not its memo
    fake.now += timedelta(seconds=60)
    run_cycle(fake, config, allocate=remembering)
    assert seen[1]["test.entry"] == {"v100": 0.5} and "test.memo" not in seen[1]
    assert seen[1]["oef.ceei_prices"] == kept["oef.ceei_prices"]


def test_the_predicted_run_time_each_baseline_was_taken_for_is_kept_between_cycles(fake, config, tmp_path):
    """oef's inside order takes a predicted job's finish-time ratio also at a low quantile of
    its run time (docs/oef.md, "A size that is a band"), its baseline scaled from the run time
    predicted when the job was first seen: that run time is kept in the policy state with the
    baseline, from the time limit (no history yet: the limit itself), for jobs with a limit
    only; the controller never sees a true size."""
    from slurm_fair.controller.history import read_history
    from slurm_fair.policies._inside import ISO_RUN

    limited = fake.submit("alice", "--gres=gpu:1", hold=False, time_limit="1:00:00")
    open_ended = fake.submit("bob", "--gres=gpu:1", hold=False)
    assert run_cycle(fake, config).exit_code == 0
    with StateStore.in_dir(tmp_path / "state") as store:
        kept = dict(read_history(store, config.get("controller", "policy")).policy_state)
    assert kept[ISO_RUN] == {limited: pytest.approx(3600.0)}
    assert limited in kept["oef.iso_jct"]  # the baseline it belongs to
    assert open_ended not in kept[ISO_RUN]  # no limit: no predicted size, nothing to scale
