"""Issue 27 on the fake: records you can trust, shadow mode, pruning, fail open, and giving back
what a store of slurm-fair 0.1 left (its ``fair_`` QOS) without stranding a job."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import timedelta

import pytest
from click.testing import CliRunner

from slurm_fair import cli
from slurm_fair.controller.audit import AuditLog
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.controller.state.fields import FieldTables

from .conftest import make_config
from .test_cycle_fake import WRITES, submit_mix


def writes(fake):
    return [c for c in fake.calls if c[0] in WRITES]


def test_a_store_that_cannot_be_written_fails_the_cycle_cleanly_and_stops_writing(fake, config, monkeypatch):
    submit_mix(fake)

    def full(self, *a, **kw):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(FieldTables, "record_intents", full)
    res = run_cycle(fake, config)
    assert (res.status, res.exit_code) == ("failed", 1)
    assert "disk is full" in res.message and "nothing more is changed" in res.message
    assert not writes(fake)  # no write to Slurm without its intent on disk
    monkeypatch.undo()
    with StateStore.in_dir(config["controller"]["state_dir"]) as store:
        assert store.cycles(1)[0]["status"] == "failed"
    assert run_cycle(fake, config).status == "ok"  # the loop goes on once the disk has room


def test_a_killed_cycle_is_marked_interrupted_and_its_intents_settled(fake, config, tmp_path):
    ids = submit_mix(fake)
    state = tmp_path / "state"
    with StateStore.in_dir(state) as store:  # what a cycle killed between intent and write leaves
        store.start_cycle("dead", time.time() - 60, "oef", False)
        store.record_intents([(ids[0], "partition", "alice", "gpu", "k80")], "dead", 1.0)
    res = run_cycle(fake, config)
    assert res.status == "ok" and any("interrupted" in w for w in res.warnings)
    with StateStore.in_dir(state) as store:
        assert {c["cycle_id"]: c["status"] for c in store.cycles()}["dead"] == "interrupted"
        row = store.owned()[(ids[0], "partition")]
    # the dead intent was never written (the job still showed "gpu"): dropped, and this
    # cycle's own write recorded with "gpu" as the original
    assert row.original == "gpu" and row.intent is None and row.written == fake.job(ids[0]).partition


def test_a_signal_stops_apply_between_writes_and_the_next_cycle_completes(fake, config):
    ids = [fake.submit(("alice", "bob")[i % 2], "--gres=gpu:1", hold=False,
                       comment="fair:class=" + ("resnet-50-bs32", "a3c", "lm-bs20")[i % 3]) for i in range(12)]
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len([c for c in fake.calls if c[0] == "update_jobs"]) >= 1

    res = run_cycle(fake, config, stop=stop)
    assert (res.status, res.exit_code) == ("interrupted", 1)
    assert any("not attempted: interrupted" in r.error for r in res.results)
    fake.now += timedelta(seconds=60)
    assert run_cycle(fake, config).status == "ok"
    assert revert(fake, config).exit_code == 0
    assert all(fake.job(i).partition == "gpu" for i in ids)


def test_every_applied_requeue_is_recorded(tmp_path, fake):
    from slurm_fair.rounding import Placement

    config = make_config(tmp_path, round_s=600)
    hog = fake.submit("alice", "--gres=gpu:4", hold=False, comment="fair:preemptible")
    fake._put(fake.job(hog), requeue=True)
    fake.start(hog, "v100-1", "v100")
    fake.now += timedelta(hours=1)
    waiting = fake.submit("bob", "--gres=gpu:4", hold=False)
    res = run_cycle(fake, config, place=lambda *a, **k: Placement(types={waiting: "v100"}))
    assert [r.action.job for r in res.results if r.action.kind == "requeue" and r.applied] == [hog]
    with StateStore.in_dir(tmp_path / "state") as store:
        (row,) = store.requeues_of(hog)
        assert json.loads(row["for_jobs_json"]) == [waiting] and row["reason"] == "make-room"


def test_shadow_mode_decides_records_and_changes_nothing(tmp_path, fake):
    config = make_config(tmp_path, mode="shadow")
    submit_mix(fake)
    res = run_cycle(fake, config)
    assert (res.status, res.mode) == ("ok", "shadow") and res.planned and not res.results
    assert not writes(fake)
    assert not (tmp_path / "state" / "plan.json").exists()  # the submit plugin is not steered
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.cycles(1)[0]["mode"] == "shadow" and store.last_plan() is not None
        assert store.owned() == {}
    shadow = [e for e in AuditLog(tmp_path / "audit.jsonl").entries() if e.get("shadow")]
    assert {e["job"] for e in shadow if e["kind"] == "set_partition"} == {r.job for r in res.planned
                                                                          if r.kind == "set_partition"}
    # run --shadow overrides a live configuration the same way
    live = make_config(tmp_path / "live")
    assert run_cycle(fake, live, shadow=True).mode == "shadow" and not writes(fake)


def test_report_shadow_compares_slurm_with_the_plan(tmp_path, fake, monkeypatch):
    config_path = tmp_path / "sf.toml"
    config_path.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\naudit_log = "{tmp_path / "a.jsonl"}"\n'
                           'mode = "shadow"\n')
    from slurm_fair.config import load
    config = load(str(config_path))
    ids = submit_mix(fake)
    run_cycle(fake, config)
    fake.start(ids[0], "k80-1", "k80")
    fake.now += timedelta(minutes=10)
    run_cycle(fake, config)
    monkeypatch.setattr("slurm_fair.commands.report.make_port", lambda cfg: fake)
    out = CliRunner().invoke(cli.cli, ["report", "--shadow", "--format", "json", "--config", str(config_path),
                                       "--since", "2025-12-31"], standalone_mode=False)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["cycles"] == 2
    rows = {(r["tenant"], r["gpu_type"]): r for r in doc["tenants"]}
    # alice's job ran 10 minutes on one k80 GPU: Slurm gave it 600 GPU-seconds
    assert rows[("alice", "k80")]["slurm_gpu_s"] == pytest.approx(600.0)
    assert all(r["plan_gpus"] >= 0 for r in rows.values()) and any(r["plan_gpus"] > 0 for r in rows.values())
    assert set(doc["would_move"]) <= set(ids) and doc["would_move"]
    text = CliRunner().invoke(cli.cli, ["report", "--shadow", "--config", str(config_path), "--since", "2025-12-31"],
                              standalone_mode=False)
    assert text.exit_code == 0 and "would have moved" in text.output


def test_the_store_is_pruned_after_keep_days(tmp_path, fake):
    config = make_config(tmp_path, keep_days=1)
    submit_mix(fake)
    clock = lambda: fake.now.timestamp()  # noqa: E731
    run_cycle(fake, config, clock=clock)
    with StateStore.in_dir(tmp_path / "state") as store:
        first = store.cycles(1)[0]["cycle_id"]
        store.set_meta("last_prune_at", "0")
    fake.now += timedelta(days=2)
    run_cycle(fake, config, clock=clock)
    with StateStore.in_dir(tmp_path / "state") as store:
        ids = [c["cycle_id"] for c in store.cycles(10)]
        assert first not in ids and len(ids) == 1
        assert not [r for r in store.table("job_cycle") if r["cycle_id"] == first]
        assert store.last_plan() is not None  # the newest plan is always kept


def test_failsafe_is_a_noop_while_cycles_complete_and_gives_back_after(fake, config):
    ids = submit_mix(fake)
    t0 = fake.now.timestamp()
    run_cycle(fake, config, clock=lambda: t0)
    steered = {i: fake.job(i).partition for i in ids}
    assert all(p != "gpu" for p in steered.values())
    quiet = failsafe(fake, config, clock=lambda: t0 + 300)
    assert quiet.lifted is None and "nothing to do" in quiet.message and quiet.exit_code == 0
    assert {i: fake.job(i).partition for i in ids} == steered
    lifted = failsafe(fake, config, clock=lambda: t0 + 700)
    assert lifted.exit_code == 0 and "gave back" in lifted.message, lifted.to_dict()
    assert all(fake.job(i).partition == "gpu" for i in ids)
    again = failsafe(fake, config, clock=lambda: t0 + 760)
    assert again.exit_code == 0 and "nothing to lift" in again.message


def test_a_0_1_store_is_given_back_without_stranding_a_job(tmp_path, fake):
    """0.1 made fair_alice the account's default QOS and moved a job into it; a job submitted
    meanwhile got it as its default. revert must move both off it before deleting it."""
    fake.ensure_qos("fair_alice", {"gres/gpu:v100": 2, "gres/gpu": 4})
    fake.attach_qos("alice", "fair_alice", default=True)
    moved = fake.submit("alice", "--gres=gpu:1", hold=False, qos="fair_alice")
    meanwhile = fake.submit("alice", "--gres=gpu:1", hold=False, qos="fair_alice")
    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "state.sqlite")  # the 0.1 tables, as that version wrote them
    db.executescript("""
      PRAGMA application_id = 1399604833;
      CREATE TABLE original_requests (job_id TEXT PRIMARY KEY, account TEXT NOT NULL, gres_raw TEXT NOT NULL,
        gpu_type TEXT, gpu_count INTEGER NOT NULL, gpu_per TEXT NOT NULL, priority INTEGER NOT NULL,
        nice INTEGER NOT NULL, partition TEXT NOT NULL, qos TEXT NOT NULL, recorded_at REAL NOT NULL,
        cycle_id TEXT NOT NULL, reverted INTEGER NOT NULL DEFAULT 0, req_nodes TEXT NOT NULL DEFAULT '');
      CREATE TABLE managed_qos (name TEXT PRIMARY KEY, account TEXT NOT NULL, created_at REAL NOT NULL,
        existed_before INTEGER NOT NULL, account_had_qos INTEGER NOT NULL, prev_default_qos TEXT NOT NULL,
        prev_grp_tres_json TEXT NOT NULL);
    """)
    db.execute("INSERT INTO original_requests VALUES (?, 'alice', 'TresPerNode=gres:gpu:1', NULL, 1, 'node',"
               " 1000, 0, 'gpu', 'normal', 1.0, 'c0', 0, '')", (moved,))
    db.execute("INSERT INTO managed_qos VALUES ('fair_alice', 'alice', 1.0, 0, 0, 'normal', '{}')")
    db.commit()
    db.close()
    config = make_config(tmp_path)
    res = revert(fake, config)
    assert res.exit_code == 0, (res.failed, res.problems)
    assert fake.job(moved).qos == fake.job(meanwhile).qos == "normal"
    assert "fair_alice" not in {q.name for q in fake.qos()}
    assert {a.name: a.default_qos for a in fake.accounts()}["alice"] == "normal"
    kinds = [s["kind"] for s in res.steps if s["applied"]]
    assert kinds.index("revert_restore_default_qos") < kinds.index("revert_set_job_qos") < kinds.index(
        "revert_delete_qos")
    with StateStore.in_dir(state) as store:
        assert store.owned() == {} and store.managed_qos() == {}


def test_revert_names_what_it_could_not_give_back(fake, config, monkeypatch):
    ids = submit_mix(fake)
    run_cycle(fake, config)
    real = fake.update_jobs

    def refuse(job_ids, fields):
        out = dict(real([j for j in job_ids if j != ids[0]], fields))
        if ids[0] in job_ids:
            from slurm_fair.errors import SlurmError
            out[ids[0]] = SlurmError("Access/permission denied")
        return out

    monkeypatch.setattr(fake, "update_jobs", refuse)
    res = revert(fake, config)
    assert res.exit_code == 1 and any(ids[0] in p for p in res.problems)
