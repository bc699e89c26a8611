"""``report`` and ``simulate --what-if`` give the same sharing-incentive ratio for the same jobs.

The jobs are written once (:data:`JOBS`) as two outputs of sacct: the columns ``report`` asks
for (:data:`slurm_fair.slurm.parse.sacct.SACCT_FIELDS`, read by its parser into the report's
inputs) and a history ``simulate --sacct-file`` replays. The report is built by
``report.tables.build`` with each job's speeds those the replay gives it; the what-if's history
column must show the same ``si_ratio`` per tenant. Then a simulated run with restarts: the
ratio of its records through :mod:`slurm_fair.report.simulated` equals the report's over the
accounting those records stand for.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli
from slurm_fair.report import tables
from slurm_fair.report.data import JobSpeed, ReportInputs
from slurm_fair.report.window import Window
from slurm_fair.sim.accounting import build_replay
from slurm_fair.report.simulated import accounting, si_ratios
from slurm_fair.sim.metrics import JobRecord
from slurm_fair.slurm.parse.history import parse_history
from slurm_fair.slurm.parse.sacct import SACCT_FIELDS, parse_sacct

T0 = datetime(2026, 3, 2)
#: (job id, account, user, name, type, GPUs, node, submit min, start min, end min)
JOBS = [
    ("1", "physics", "ann", "train", "a100", 2, "a100-01", 0, 0, 120),
    ("2", "physics", "ann", "train", "v100", 2, "v100-01", 10, 10, 250),
    ("3", "biology", "bob", "fold", "a100", 2, "a100-01", 5, 120, 180),
    ("4", "biology", "bob", "fold", "v100", 2, "v100-01", 30, 250, 400),
    ("5", "chemistry", "cat", "md", "a100", 4, "a100-02", 0, 0, 60),
    ("6", "chemistry", "cat", "md", "a100", 4, "a100-02", 50, 60, 200),
    ("7", "physics", "dan", "eval", "v100", 2, "v100-01", 100, 100, 130),
]


def _t(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S")


def _tres(k: str, g: int) -> str:
    return f"billing={g},cpu=4,gres/gpu={g},gres/gpu:{k}={g},mem=8G,node=1"


def history_text() -> str:
    head = "JobID|User|Account|JobName|Partition|AllocTRES|NodeList|NNodes|Submit|Start|End|Elapsed|Timelimit|State"
    rows = [f"{j}|{u}|{a}|{n}|gpu|{_tres(k, g)}|{node}|1|{_t(s)}|{_t(b)}|{_t(e)}|"
            f"{(e - b) // 60:02d}:{(e - b) % 60:02d}:00|10:00:00|COMPLETED"
            for j, a, u, n, k, g, node, s, b, e in JOBS]
    return "\n".join([head, *rows]) + "\n"


def report_text(fs: str = "#|#") -> str:
    assert SACCT_FIELDS[:11] == ("JobID", "Account", "User", "State", "Partition", "AllocTRES", "ElapsedRaw",
                                 "Submit", "Start", "End", "NNodes")
    return "".join(fs.join([j, a, u, "COMPLETED", "gpu", _tres(k, g), str((e - b) * 60), _t(s), _t(b), _t(e), "1",
                            n, ""]) + "\n" for j, a, u, n, k, g, node, s, b, e in JOBS)


def test_report_and_simulate_give_the_same_si_ratio(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(history_text())
    out = tmp_path / "w.json"
    res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(path), "--policy", "fifo", "--what-if", str(out),
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    simulated = {t: cols["history (Slurm)"]["si_ratio"] for t, cols in doc["tenants"].items()}
    assert doc["not_computed"] == []

    # the report over the same jobs, read by its own parser, each job at the replay's speeds
    replay = build_replay(parse_history(history_text(), "h.txt"), "h.txt")
    table = replay.table
    speeds = {}
    for j in replay.workload.jobs:
        n = {k: table.lookup(j.job_type, j.gpus, k) for k in replay.cluster.capacity}
        speeds[replay.jobs[j.id].slurm_id] = JobSpeed({k: v / max(n.values()) for k, v in n.items()}, "learned")
    records = parse_sacct(report_text(), "#|#")
    inputs = ReportInputs(window=Window(T0 - timedelta(hours=1), T0 + timedelta(days=1)), records=tuple(records),
                          capacity=dict(replay.cluster.capacity), weights={}, speeds=speeds,
                          now=T0 + timedelta(days=2))
    report = tables.build(inputs)
    reported = {row.tenant: row.si_ratio for row in report.tenants.itertuples(index=False)}
    assert set(reported) == set(simulated) == {"physics", "biology", "chemistry"}
    for t, v in reported.items():
        assert simulated[t] == pytest.approx(v, rel=1e-9), t
    # not a vacuous equality: the tenants' ratios differ
    assert len({round(v, 6) for v in reported.values()}) == 3


def test_a_simulated_run_with_restarts_scores_as_its_accounting():
    """Records of a run (one job stopped and restarted on another type) and the accounting
    they stand for, built independently here: the same ratios."""
    speeds = {"a100": 2.0, "v100": 1.0}
    recs = [
        JobRecord("x/1", "x", 0.0, 0.0, 7200.0, "a100", 2, throughput=speeds,
                  runs=((0.0, 3600.0, "v100"), (4000.0, 7200.0, "a100"))),
        JobRecord("y/2", "y", 0.0, 0.0, 5000.0, "a100", 2, throughput=speeds),
        JobRecord("y/3", "y", 600.0, 3600.0, 8000.0, "v100", 2, throughput={"a100": 1.0, "v100": 1.0}),
    ]
    capacity = {"a100": 2, "v100": 2}
    acct = accounting(recs, T0)
    # the accounting as Slurm keeps it: one record per run, SubmitTime reset at the requeue
    assert [(a.job_id, a.state, a.gpu_type, a.submit_time, a.start_time, a.end_time) for a in acct] == [
        ("x/1", "REQUEUED", "v100", T0, T0, T0 + timedelta(seconds=3600)),
        ("x/1", "COMPLETED", "a100", T0 + timedelta(seconds=3600), T0 + timedelta(seconds=4000),
         T0 + timedelta(seconds=7200)),
        ("y/2", "COMPLETED", "a100", T0, T0, T0 + timedelta(seconds=5000)),
        ("y/3", "COMPLETED", "v100", T0 + timedelta(seconds=600), T0 + timedelta(seconds=3600),
         T0 + timedelta(seconds=8000)),
    ]
    inputs = ReportInputs(window=Window(T0, T0 + timedelta(seconds=8001)), records=tuple(acct), capacity=capacity,
                          weights={}, now=T0 + timedelta(seconds=8001),
                          speeds={"x/1": JobSpeed({"a100": 1.0, "v100": 0.5}, "learned"),
                                  "y/2": JobSpeed({"a100": 1.0, "v100": 0.5}, "learned"),
                                  "y/3": JobSpeed({"a100": 1.0, "v100": 1.0}, "learned")})
    reported = {row.tenant: row.si_ratio for row in tables.build(inputs).tenants.itertuples(index=False)}
    assert si_ratios(recs, capacity, {}, T0) == pytest.approx(reported)
