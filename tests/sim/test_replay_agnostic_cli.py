"""``simulate --sacct-file``: ``agnostic`` is the modelled site Slurm (``--agnostic-as``), with
slurm.conf's node weights, priority and backfill interval; mistakes exit 2."""

from __future__ import annotations

import json

import pytest
from test_accounting import history_text

from slurm_fair.cli import main


@pytest.fixture()
def history_file(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(history_text())
    return path


def _doc(path, out, *extra):
    assert main(["simulate", "--sacct-file", str(path), "--policy", "agnostic", "--json", "-o", str(out), "--quiet",
                 *extra]) == 0
    return json.loads(out.read_text())


def test_agnostic_is_the_sites_slurm_by_default(history_file, tmp_path):
    doc = _doc(history_file, tmp_path / "a.json")
    assert doc["agnostic_as"].startswith("the site's Slurm as modelled (fifo priority")
    agn = doc["policies"]["agnostic"]
    # never preempted: no restarts, no solves; every replayed job finishes
    assert agn["restarts"] == 0 and agn["solves"] == 0 and agn["jobs_completed"] == doc["history"]["jobs_simulated"]
    policy = _doc(history_file, tmp_path / "p.json", "--agnostic-as", "policy")
    assert policy["agnostic_as"] == "slurm-fair's agnostic policy" and policy["policies"]["agnostic"]["solves"] > 0


def test_node_weights_change_where_jobs_go(history_file, tmp_path):
    # the v100 node weighted first: the jobs that ran on a100 in the history move there (slower)
    plain = _doc(history_file, tmp_path / "a.json")["policies"]["agnostic"]
    weighted = _doc(history_file, tmp_path / "w.json", "--node-weight", "v100-01=1", "--node-weight",
                    "a100-[01-02]=5")["policies"]["agnostic"]
    assert weighted["avg_jct_s"] > plain["avg_jct_s"]


@pytest.mark.parametrize("extra, message", [
    (["--node-weight", "v100-01=heavy"], "--node-weight 'v100-01=heavy': the weight 'heavy' is not a number"),
    (["--node-weight", "v100-01"], "--node-weight 'v100-01': expected HOSTLIST=W"),
    (["--node-weight", "gpu-9=1"], "--node-weight: no node gpu-9 in the replayed cluster"),
    (["--agnostic-as", "policy", "--slurm-priority", "fairshare"], "describe the Slurm that runs agnostic"),
])
def test_mistakes_exit_2(history_file, extra, message, capsys):
    assert main(["simulate", "--sacct-file", str(history_file), "--policy", "agnostic", "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_gang_over_two_types_is_replayed_at_its_slowest():
    from test_accounting import HEADER, ROWS

    from slurm_fair.sim.accounting import build_replay
    from slurm_fair.slurm.parse.history import parse_history

    # 2 GPUs on a100-01 and 2 on v100-01, untyped (sacct would list both types): 1 h
    row = ("110|dan|physics|wide|gpu|billing=4,cpu=8,gres/gpu=4,mem=8G,node=2|a100-01,v100-01|2|"
           "2026-01-05T02:00:00|2026-01-05T02:00:00|2026-01-05T03:00:00|01:00:00|02:00:00|COMPLETED")
    replay = build_replay(parse_history("\n".join([HEADER, *ROWS, row]) + "\n", "h.txt"), "h.txt")
    job = next(j for j in replay.workload.jobs if j.id == "physics/110")
    rec = next(r for r in replay.history if r.job_id == "physics/110")
    speed = {k: replay.table.lookup(job.job_type, job.gpus, k) for k in ("a100", "v100")}
    slowest = min(speed, key=lambda k: speed[k])
    assert rec.gpu_type == slowest and job.nodes == 2
    assert job.total_steps == 3600 * speed[slowest]  # placed as it ran, it takes the hour it took
    assert dict(rec.gpu_seconds) == {"a100": 2 * 3600.0, "v100": 2 * 3600.0}
    assert replay.counts["gangs over several types (at their slowest)"] == 1


@pytest.mark.parametrize("extra, message", [
    (["--slurm-billing", "v100"], "--slurm-billing 'v100': expected TYPE=W"),
    (["--slurm-billing", "v100=-1"], "expected TYPE=W with W a number >= 0"),
    (["--slurm-billing", "h100=1"], "--slurm-billing: no GPU type h100 in the replayed cluster"),
    (["--agnostic-as", "policy", "--slurm-billing", "v100=1"], "describe the Slurm that runs agnostic"),
    (["--agnostic-as", "policy", "--slurm-fairshare", "classic"], "describe the Slurm that runs agnostic"),
])
def test_fair_share_mistakes_exit_2(history_file, extra, message, capsys):
    assert main(["simulate", "--sacct-file", str(history_file), "--policy", "agnostic", "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_fair_share_algorithm_is_named_and_classic_kept(history_file, tmp_path):
    tree = _doc(history_file, tmp_path / "t.json", "--slurm-priority", "fairshare")
    classic = _doc(history_file, tmp_path / "c.json", "--slurm-priority", "fairshare", "--slurm-fairshare", "classic",
                   "--slurm-billing", "v100=0.5")
    assert "fairshare (fair-tree) priority" in tree["agnostic_as"]
    assert "fairshare (classic) priority" in classic["agnostic_as"]
