"""The pure parts of ``testbed replay``: tenant mapping, submission argv, controller config,
trace-time conversion and the records scored by the simulator's metrics."""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path

import pytest

from slurm_fair.estimates import gavel as tt
from slurm_fair.config import load as load_config
from slurm_fair.errors import UserError
from slurm_fair.sim.workload import make_workload, TraceJob
from slurm_fair.slurm.model import AccountingRecord
from slurm_fair.testbed.replay import controller, plan, score, submit
from slurm_fair.testbed.emulator import Checkpoint, Segment

T0 = 1_700_000_000.0
TYPES = ["k80", "p100", "v100"]


def _job(**kw: object) -> plan.ReplayJob:
    base = dict(trace_id="vc1/1", trace_tenant="vc1", account="physics", job_type="ResNet-18 (batch size 32)",
                gpus=1, total_steps=1200.0, arrival_s=0.0, tput={"k80": 1.0, "p100": 2.0, "v100": 4.0})
    base.update(kw)
    return plan.ReplayJob(**base)  # type: ignore[arg-type]


def _acct(job_id: str, submit: float, start: float, end: float | None, gpu_type: str = "v100",
          state: str = "COMPLETED", gpus: int = 1) -> AccountingRecord:
    ts = datetime.fromtimestamp
    return AccountingRecord(job_id, "physics", "root", state, gpu_type, gpus, ts(submit), ts(start),
                            ts(end) if end is not None else None, (end - start) if end is not None else 0.0)


def test_tenants_that_are_accounts_map_to_themselves() -> None:
    assert plan.tenant_map(["biology", "physics"], ["physics", "biology", "chemistry"]) == {
        "biology": "biology", "physics": "physics"}


def test_other_tenants_map_round_robin_in_sorted_order() -> None:
    m = plan.tenant_map(["vc3", "vc1", "vc2", "vc4", "vc1"], ["physics", "biology", "chemistry"])
    assert m == {"vc1": "physics", "vc2": "biology", "vc3": "chemistry", "vc4": "physics"}


def test_plan_jobs_looks_up_every_testbed_type_and_refuses_jobs_that_run_nowhere() -> None:
    table = tt.load(None)
    wl = make_workload([TraceJob("vc1/1", "vc1", "ResNet-18 (batch size 32)", 1, 100.0, 5.0)])
    [job] = plan.plan_jobs(wl, {"vc1": "physics"}, table, TYPES, {"physics": 2.0})
    assert set(job.tput) == set(TYPES) and job.tput["v100"] > job.tput["k80"] > 0
    assert job.weight == 2.0 and job.klass == "resnet-18-bs32"
    plan.check_fits([job], {"k80-1": ("k80", 8)})
    with pytest.raises(UserError, match="fit on no testbed node"):
        plan.check_fits([_job(gpus=8)], {"v100-1": ("v100", 4)})


def test_jobs_are_submitted_untyped_requeueable_and_tagged(tmp_path: Path) -> None:
    job = _job(gpus=2)
    argv = submit.sbatch_args(job, tmp_path / "s.sh", tmp_path, 60.0)
    assert "--gres=gpu:2" in argv and "--requeue" in argv
    assert not any(a.startswith("--gres=gpu:") and a.count(":") > 1 for a in argv)
    assert argv[argv.index("--comment") + 1] == "fair:class=resnet-18-bs32 fair:preemptible"
    assert argv[argv.index("-A") + 1] == "physics"
    # slowest type: 1200 steps / 1 step/s = 1200 trace s = 20 real s at S=60; x4 = 80 s -> 2 min + 2
    assert argv[argv.index("-t") + 1] == "4"


def test_batch_script_quotes_job_types_with_spaces(tmp_path: Path) -> None:
    job = _job(job_type="LM (batch size 20)")
    spec = plan.ReplaySpec(Path("t.csv"), 60.0, None, tmp_path, python="/x/python")
    argv = submit.emulator_argv(job, spec, {"v100-1": "v100"}, tmp_path / "c k.json")
    text = submit.batch_script(argv)
    assert text.startswith("#!/bin/sh\nexec ")
    assert shlex.split(text.splitlines()[1])[1:] == argv


def test_controller_config_is_valid_and_scaled(tmp_path: Path) -> None:
    spec = plan.ReplaySpec(Path("t.csv"), 60.0, "oef", tmp_path, round_s=360.0)
    path = tmp_path / "c.toml"
    path.write_text(controller.controller_config(spec, "replaytb", {"physics": 2.0, "biology": 1.0}, "cbc",
                                        tmp_path / "plan.json", hold_real_s=11.0))
    cfg = load_config(path)
    c = cfg["controller"]
    # a round of 360 trace s is 6 real s; a cycle every trace minute; a requeue costs hold + restart
    assert c["policy"] == "oef" and c["interval_s"] == pytest.approx(1.0) and c["round_s"] == pytest.approx(6.0)
    assert c["requeue_cost_s"] == pytest.approx(11.0 + controller.RESTART_REAL_S)
    assert c["plan_file"] == str(tmp_path / "plan.json")
    assert Path(c["state_dir"]).parent == tmp_path
    assert cfg.tenants["physics"]["weight"] == 2.0


def test_trace_time_is_real_time_since_t0_times_the_scale() -> None:
    assert score.to_trace(T0 + 2.5, T0, 60.0) == pytest.approx(150.0)
    assert score.to_trace(datetime.fromtimestamp(T0 + 10), T0, 60.0) == pytest.approx(600.0)
    assert score.to_trace(None, T0, 60.0) is None


def test_record_of_a_plain_job_comes_from_sacct() -> None:
    job = _job(slurm_id="7", submitted_wall=T0 + 1.4)
    rec = score.job_record(job, _acct("7", T0 + 1, T0 + 2, T0 + 7), None, T0, 60.0)
    assert (rec.arrival_s, rec.start_s, rec.end_s, rec.jct_s) == (60.0, 120.0, 420.0, 360.0)
    assert rec.gpu_type == "v100" and rec.work == 1200.0 and rec.used_gpu_seconds() == {"v100": 300.0}


def test_record_of_a_requeued_job_keeps_its_first_submit_and_start() -> None:
    # Slurm resets Submit on requeue; sacct -X shows the last run only
    job = _job(slurm_id="8", submitted_wall=T0 + 1.2)
    ck = Checkpoint(1200.0, 1200.0, True, [Segment("k80", "k80-1", T0 + 2.1, T0 + 5.1, 180.0),
                                            Segment("v100", "v100-1", T0 + 9.0, T0 + 13.25, 1020.0)])
    rec = score.job_record(job, _acct("8", T0 + 6, T0 + 9, T0 + 14), ck, T0, 60.0)
    assert rec.arrival_s == 60.0 and rec.start_s == 120.0 and rec.end_s == 840.0
    assert rec.used_gpu_seconds() == pytest.approx({"k80": 180.0, "v100": 255.0})
    # it held GPUs for the emulator's first run (180 s) and Slurm's last run (540..840, launch
    # included): waited 780 - 480 s, the time between its runs included
    assert rec.ran_s() == pytest.approx(480.0) and rec.wait_s == pytest.approx(300.0)


def test_a_plain_job_waited_from_submit_to_start_and_scores_the_papers_metrics() -> None:
    job = _job(slurm_id="7", submitted_wall=T0 + 1.0)
    rec = score.job_record(job, _acct("7", T0 + 1, T0 + 3, T0 + 8), None, T0, 60.0)
    assert rec.wait_s == pytest.approx(120.0)
    # age (Eq. 9) on 1 k80 + 1 p100 + 2 v100: (1200/1 + 1200/2 + 2 * 1200/4) / 4 = 600 s
    accts, cks = {"7": _acct("7", T0 + 1, T0 + 3, T0 + 8)}, {}
    _, m, _ = score.score([job], accts, cks, {"k80": 1, "p100": 1, "v100": 2}, T0, 60.0, 60.0)
    assert m["avg_wait_s"] == pytest.approx(120.0)
    assert m["latency_ratio_max"] == m["latency_ratio_mean"] == pytest.approx(120.0 / 600.0)
    # rounds of 60 trace s from arrival 60: it waits (all 4 GPUs idle) in rounds 0-1, runs on one
    # v100 in rounds 2-6 (nobody waits): Avg.frag = 8 / 7
    assert m["rounds"] == 7 and m["fragmentation"] == pytest.approx(8 / 7)


def test_unfinished_jobs_have_no_end() -> None:
    job = _job(slurm_id="9", submitted_wall=T0)
    rec = score.job_record(job, _acct("9", T0, T0 + 1, T0 + 3, state="CANCELLED by 0"), None, T0, 60.0)
    assert rec.end_s is None and not rec.finished


def test_emulation_error_compares_elapsed_with_work_over_throughput() -> None:
    job = _job(slurm_id="7")  # 1200 steps at 4/s on a v100 = 300 trace s = 5 real s at S=60
    ck = Checkpoint(1200.0, 1200.0, True, [Segment("v100", "v100-1", T0 + 0.3, T0 + 5.3)])
    accts, cks = {"7": _acct("7", T0, T0, T0 + 6)}, {"vc1/1": ck}
    [e] = score.emulation_errors([job], accts, cks, 60.0, min_real_s=1.0)
    assert e["expected_s"] == 300.0 and e["elapsed_s"] == 360.0 and e["rel_error"] == pytest.approx(0.2)
    # 5 real seconds is too short to judge with sacct's 1-second resolution
    assert score.emulation_errors([job], accts, cks, 60.0, min_real_s=10.0) == []


def test_tenant_fairness_over_the_run_by_hand():
    """Issue 39, item 5: the replay's per-tenant SI ratio and envy (the report's definitions),
    on a run worked out by hand: 2 v100 for 2 h, equal weights; tenant a runs two 1-GPU jobs the
    whole time, b's one job waits the whole time. a's equal share is 1 GPU x 2 h, its jobs use 4
    GPU-hours: SI ratio 2; b got nothing: 0, and envies a's bundle infinitely (it could use 2
    GPU-hours of it, and has 0)."""
    from datetime import timedelta

    t0 = datetime(2026, 1, 1, 12, 0, 0)
    t1 = t0 + timedelta(hours=2)
    jobs = [plan.ReplayJob(f"j{i}", u, u, "ResNet-18", 1, 1.0, 0.0, {"v100": 1.0, "k80": 0.5}, slurm_id=str(i))
            for i, u in enumerate(["a", "a", "b"])]
    accts = {"0": AccountingRecord("0", "a", "u", "COMPLETED", "v100", 1, t0, t0, t1, 7200.0),
             "1": AccountingRecord("1", "a", "u", "COMPLETED", "v100", 1, t0, t0, t1, 7200.0),
             "2": AccountingRecord("2", "b", "u", "CANCELLED", None, 1, t0, None, t1, 0.0)}
    got = score.tenant_fairness(jobs, list(accts.values()), {"v100": 2}, {"a": 1.0, "b": 1.0}, t0, t1)
    assert got["a"]["si_ratio"] == pytest.approx(2.0)
    assert got["b"]["si_ratio"] == pytest.approx(0.0)
    assert got["b"]["envy_of"] == "a" and got["b"]["envy_max"] == float("inf")
    assert got["a"]["envy_max"] is None or got["a"]["envy_max"] <= 1.0  # b holds nothing a would want


def test_tenant_fairness_counts_only_the_types_whose_nodes_hold_the_gang():
    """The report's rule (``gang_feasible``) in the replay's figures: an 8-GPU single-node job
    that can only run on the one 8-GPU k80 node is owed nothing of the 4-GPU v100 nodes. By
    hand: 2 x 4 v100 + 1 x 8 k80, tenant a alone runs its 8-GPU job on the k80 node for 1 h
    (true speed there a quarter of v100's). Its equal share is the whole cluster; the job's best
    use of it is the k80 node (the only one that holds it), where n = 1: SI ratio 1. Without
    node sizes the v100s (n = 1, k80 n = 0.25) would be counted: 0.25."""
    from datetime import timedelta

    t0 = datetime(2026, 1, 1, 12, 0, 0)
    t1 = t0 + timedelta(hours=1)
    jobs = [plan.ReplayJob("j0", "a", "a", "Transformer", 8, 1.0, 0.0, {"v100": 4.0, "k80": 1.0}, slurm_id="0")]
    accts = [AccountingRecord("0", "a", "u", "COMPLETED", "k80", 8, t0, t0, t1, 3600.0)]
    cap = {"v100": 8, "k80": 8}
    assert score.tenant_fairness(jobs, accts, cap, {"a": 1.0}, t0, t1)["a"]["si_ratio"] == pytest.approx(0.25)
    got = score.tenant_fairness(jobs, accts, cap, {"a": 1.0}, t0, t1, {"v100": [4, 4], "k80": [8]})
    assert got["a"]["si_ratio"] == pytest.approx(1.0)


def test_the_replay_table_shows_each_tenants_si_ratio_and_envy_beside_its_jct_and_rho():
    from rich.console import Console

    from slurm_fair.commands.replay import results_table

    doc = {"metrics": {"avg_jct_s": 7200.0, "tenants": {
        "physics": {"si_ratio": 0.9612, "envy_max": 0.84, "avg_jct_s": 3600.0, "ftf_rho_mean": 1.2},
        "biology": {"si_ratio": None, "envy_max": float("inf"), "avg_jct_s": 1800.0, "ftf_rho_mean": 0.5}}}}
    console = Console(width=120, record=True)
    console.print(results_table({"oef": doc}, "t"))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in text.splitlines() if line.count("│") == 3}
    assert rows["physics: SI ratio"] == "0.96" and rows["physics: envy max"] == "0.84"
    assert rows["physics: avg JCT h"] == "1.00" and rows["physics: rho mean"] == "1.20"
    assert rows["biology: SI ratio"] == "-" and rows["biology: envy max"] == "inf"
