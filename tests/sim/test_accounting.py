"""``simulate --sacct-file``: a site's accounting replayed (issue 42).

The history below is written the way ``sacct -P -X -D -o ...`` prints it (22.05's standard time
format, typed and untyped AllocTRES, an array task, a requeued job's two runs, job steps, a
cancelled pending job, a running one, a CPU-only job and an unreadable row).
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime

import pytest
from hypothesis import given, settings, strategies as st
from click.testing import CliRunner

from slurm_fair import policies
from slurm_fair.cli import cli, main
from slurm_fair.errors import UserError
from slurm_fair.sim.accounting import build_replay
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.slurm.parse.history import parse_history

HEADER = "JobID|User|Account|JobName|Partition|AllocTRES|NodeList|NNodes|Submit|Start|End|Elapsed|Timelimit|State"
ROWS = [
    # a job that ran alone on a100 for an hour, typed
    "100|ann|physics|train|gpu|billing=1,cpu=4,gres/gpu=1,gres/gpu:a100=1,mem=8G,node=1|a100-01|1|"
    "2026-01-05T00:00:00|2026-01-05T00:00:00|2026-01-05T01:00:00|01:00:00|02:00:00|COMPLETED",
    "100.batch|||batch||cpu=4,gres/gpu=1|a100-01|1|2026-01-05T00:00:00|2026-01-05T00:00:00|"
    "2026-01-05T01:00:00|01:00:00||COMPLETED",
    # the same group on v100, untyped: NodeList tells (v100-01 is typed by job 103)
    "101|ann|physics|train|gpu|billing=1,cpu=4,gres/gpu=1,mem=8G,node=1|v100-01|1|"
    "2026-01-05T00:10:00|2026-01-05T00:30:00|2026-01-05T03:30:00|03:00:00|04:00:00|COMPLETED",
    # an array task of 2 GPUs on one node, waited 10 minutes
    "102_3|bob|biology|sweep|gpu|billing=2,cpu=8,gres/gpu=2,gres/gpu:a100=2,mem=8G,node=1|a100-01|1|"
    "2026-01-05T00:20:00|2026-01-05T00:30:00|2026-01-05T01:30:00|01:00:00|UNLIMITED|COMPLETED",
    # requeued after 20 minutes on v100 (SubmitTime reset on the requeue), then completed
    "103|bob|biology|big|gpu|billing=4,cpu=8,gres/gpu=4,gres/gpu:v100=4,mem=8G,node=1|v100-01|1|"
    "2026-01-05T00:00:00|2026-01-05T00:05:00|2026-01-05T00:25:00|00:20:00|1-00:00:00|REQUEUED",
    "103|bob|biology|big|gpu|billing=4,cpu=8,gres/gpu=4,gres/gpu:v100=4,mem=8G,node=1|v100-01|1|"
    "2026-01-05T00:25:00|2026-01-05T04:00:00|2026-01-05T05:00:00|01:00:00|1-00:00:00|COMPLETED",
    # cancelled after running 30 minutes
    "104|cat|physics|eval|gpu|billing=1,cpu=4,gres/gpu=1,gres/gpu:a100=1,mem=8G,node=1|a100-02|1|"
    "2026-01-05T01:00:00|2026-01-05T01:00:00|2026-01-05T01:30:00|00:30:00|01:00:00|CANCELLED by 1001",
    # cancelled while pending: never ran
    "105|cat|physics|eval|gpu||None assigned|1|2026-01-05T01:00:00|Unknown|2026-01-05T02:00:00|00:00:00|"
    "01:00:00|CANCELLED by 1001",
    # still running when the history was taken
    "106|ann|physics|train|gpu|billing=1,cpu=4,gres/gpu=1,gres/gpu:a100=1,mem=8G,node=1|a100-02|1|"
    "2026-01-05T05:00:00|2026-01-05T05:00:00|Unknown|02:00:00|04:00:00|RUNNING",
    # still pending
    "107|bob|biology|big|gpu||None assigned|1|2026-01-05T06:00:00|Unknown|Unknown|00:00:00|1-00:00:00|PENDING",
    # a CPU-only job
    "108|cat|chemistry|prep|cpu|billing=8,cpu=8,mem=8G,node=1|c01|1|2026-01-05T00:00:00|2026-01-05T00:00:00|"
    "2026-01-05T00:10:00|00:10:00|01:00:00|COMPLETED",
    # an unreadable row (a time that is none)
    "109|cat|physics|eval|gpu|gres/gpu:a100=1|a100-02|1|2026-01-05T00:00:00|soon|2026-01-05T00:10:00|00:10:00|"
    "01:00:00|COMPLETED",
]
T0 = datetime(2026, 1, 5).timestamp()


def history_text(rows=ROWS) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


@pytest.fixture()
def replay():
    return build_replay(parse_history(history_text(), "h.txt"), "h.txt")


def test_every_row_is_simulated_or_counted(replay):
    assert replay.ended == {"COMPLETED": 4, "CANCELLED": 1, "RUNNING (work so far)": 1}
    assert replay.left_out == {"never ran (CANCELLED)": 1, "never ran (PENDING)": 1, "rows: job step": 1,
                               "rows: no GPU": 1, "rows: junk": 1}
    assert replay.counts["array tasks"] == 1 and replay.counts["requeued (runs joined)"] == 1
    assert {j.id for j in replay.workload.jobs} == {"physics/100", "physics/101", "biology/102_3", "biology/103",
                                                   "physics/104", "physics/106"}
    assert replay.workload.tenants == ["biology", "physics"]


def test_jobs_keep_submit_gang_limit_and_group(replay):
    jobs = {j.id: j for j in replay.workload.jobs}
    # the requeued job arrives at its first submit, not at the reset SubmitTime
    assert jobs["biology/103"].arrival_s == 0.0
    assert jobs["physics/101"].arrival_s == 600.0
    assert jobs["biology/102_3"].gpus == 2 and jobs["biology/102_3"].nodes == 1
    assert jobs["physics/100"].job_type == "ann|train"
    assert replay.jobs["physics/100"].time_limit_s == 7200.0
    assert replay.jobs["biology/102_3"].time_limit_s is None
    assert replay.origin_s == T0


def test_work_is_the_time_run_on_each_type_times_the_speed_there(replay):
    jobs = {j.id: j for j in replay.workload.jobs}
    speed = {k: replay.table.lookup("ann|train", 1, k) for k in ("a100", "v100")}
    # group ann|train|1 completed on both types: one hour on a100, three on v100
    assert speed["a100"] == pytest.approx(1.0) and speed["v100"] < speed["a100"]
    assert jobs["physics/100"].total_steps == pytest.approx(3600 * speed["a100"])
    assert jobs["physics/101"].total_steps == pytest.approx(3 * 3600 * speed["v100"])
    big = {k: replay.table.lookup("bob|big", 4, k) for k in ("a100", "v100")}
    assert jobs["biology/103"].total_steps == pytest.approx((1200 + 3600) * big["v100"])
    # cat|eval never completed: the priors
    assert replay.speed_sources == {"learned": 5, "prior": 1}


def test_the_cluster_is_what_the_history_used(replay):
    # a100-01 held 1 + 2 GPUs at once, a100-02 one; every node of a type gets the largest size
    assert dict(replay.cluster.capacity) == {"a100": 6, "v100": 4}
    assert dict(replay.cluster.node_gpus) == {"a100": 3, "v100": 4}


def test_the_history_as_it_ran_keeps_its_times(replay):
    rec = {r.job_id: r for r in replay.history}
    assert rec["physics/101"].start_s == 1800.0 and rec["physics/101"].jct_s == 3.5 * 3600 - 600
    assert rec["biology/103"].wait_s == 5 * 3600 - 4800  # in the system 5 h, ran 20 min + 1 h
    assert rec["physics/106"].end_s is None


def test_a_job_on_the_type_it_ran_on_takes_the_time_it_took():
    one = [ROWS[0]]
    replay = build_replay(parse_history(history_text(one), "h.txt"), "h.txt")
    res = simulate(replay.workload, replay.cluster, replay.table, policies.get("fifo"),
                   SimConfig(restart_s=0.0, check_fairness=False))
    assert res.records[0].jct_s == pytest.approx(3600.0)


def test_a_history_without_times_is_refused_naming_the_file():
    text = "JobID|User|Account|JobName|Partition|AllocTRES|NodeList|Elapsed|State\n" \
           "1|a|b|c|gpu|gres/gpu:a100=1|n1|01:00:00|COMPLETED\n"
    with pytest.raises(UserError, match="h.txt: a replay needs the columns Submit, Start and End"):
        build_replay(parse_history(text, "h.txt"), "h.txt")


def test_speeds_learn_reads_the_same_rows_as_before():
    """The timing columns change nothing the learner sees."""
    h = parse_history(history_text(), "h.txt")
    assert [r.job_id for r in h.rows] == ["100", "101", "102_3", "103"]
    assert h.rows[3].earlier and h.first_submit["103"] == T0


@pytest.fixture()
def history_file(tmp_path):
    p = tmp_path / "h.txt"
    p.write_text(history_text())
    return p


def test_cli_shows_the_history_beside_the_policies(history_file, tmp_path):
    out = tmp_path / "o.json"
    res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(history_file), "--policy", "agnostic",
                                   "--policy", "fifo", "--json", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "line 13: unreadable row" in res.stderr
    doc = json.loads(out.read_text())
    hist = doc["history"]
    assert hist["ended"]["COMPLETED"] == 4 and hist["left_out"]["never ran (PENDING)"] == 1
    # independent: the JCTs of the finished jobs of the history, by hand from the rows
    jcts = [3600, 3.5 * 3600 - 600, 70 * 60, 5 * 3600, 30 * 60]
    assert hist["avg_jct_s"] == pytest.approx(sum(jcts) / len(jcts))
    assert hist["tenants"]["biology"]["avg_jct_s"] == pytest.approx((70 * 60 + 5 * 3600) / 2)
    assert set(doc["policies"]) == {"agnostic", "fifo"}
    assert doc["policies"]["fifo"]["jobs_completed"] == 6


def test_cli_table_has_a_history_column_and_tenants(history_file):
    res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(history_file), "--policy", "fifo", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "history (Slurm)" in res.stdout and "per tenant" in res.stdout and "biology" in res.stdout


@pytest.mark.parametrize("extra, message", [
    (["--cluster", "v100=4"], "no --cluster"),
    (["--synthetic", "5"], "no --trace or --synthetic"),
    (["--days", "3"], "--days applies to --from-slurm"),
    (["--strict"], "line 13"),
])
def test_cli_mistakes_exit_2(history_file, extra, message, capsys):
    assert main(["simulate", "--sacct-file", str(history_file), "--policy", "fifo", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_history_options_need_a_history(capsys):
    assert main(["simulate", "--synthetic", "5", "--cluster", "v100=4", "--policy", "fifo", "--tenant-by", "user"]) == 2
    assert "apply to a history" in capsys.readouterr().err


def test_tenant_by_user(history_file, tmp_path):
    out = tmp_path / "o.json"
    res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(history_file), "--tenant-by", "user",
                                   "--policy", "fifo", "--json", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert set(json.loads(out.read_text())["history"]["tenants"]) == {"ann", "bob", "cat"}


def test_parallel_runs_give_the_figures_of_one_process(history_file, tmp_path):
    docs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"o{jobs}.json"
        res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(history_file), "--policy", "agnostic",
                                       "--policy", "fifo", "--jobs", jobs, "--json", "-o", str(out), "--quiet"])
        assert res.exit_code == 0, res.output
        docs.append(json.loads(out.read_text()))
    for name in ("agnostic", "fifo"):
        a, b = docs[0]["policies"][name], docs[1]["policies"][name]
        for key in ("avg_jct_s", "avg_wait_s", "makespan_s", "jobs_completed", "solves"):
            assert a[key] == b[key] or (a[key] is not None and math.isclose(a[key], b[key]))


def test_what_if_per_tenant_and_the_jobs_that_gain(history_file, tmp_path):
    page, data = tmp_path / "w.html", tmp_path / "w.json"
    for path in (page, data):
        res = CliRunner().invoke(cli, ["simulate", "--sacct-file", str(history_file), "--policy", "fifo",
                                       "--what-if", str(path), "--quiet"])
        assert res.exit_code == 0, res.output
    doc = json.loads(data.read_text())
    assert doc["columns"] == ["history (Slurm)", "fifo"]
    bio = doc["tenants"]["biology"]
    assert bio["history (Slurm)"]["avg_jct_s"] == pytest.approx((70 * 60 + 5 * 3600) / 2)
    # GPU-hours by type of the history: 2 GPUs x 1 h on a100; 4 GPUs x (20 min + 1 h) on v100
    assert bio["history (Slurm)"]["gpu_hours"] == pytest.approx({"a100": 2.0, "v100": 4 * 80 / 60})
    # the requeued job waited 3.5 h in the history: on an empty cluster it gains most
    top = doc["gains"]["fifo"][0]
    assert top["job"] == "biology/103" and top["user"] == "bob" and top["gain_s"] > 3 * 3600
    html = page.read_text()
    assert "<caption>biology</caption>" in html and "jobs that would have gained most under fifo" in html


def test_what_if_needs_a_history(capsys):
    assert main(["simulate", "--synthetic", "5", "--cluster", "v100=4", "--policy", "fifo", "--what-if", "w.json"]) == 2
    assert "--what-if compares a history" in capsys.readouterr().err


# --- speeds drawn on the types a group never completed on (issue 42) ---------------------------

_TYPES = ["h100", "a100", "l40s", "v100"]


@given(st.dictionaries(st.sampled_from(_TYPES), st.just(0.0) | st.floats(1e-3, 1.0), min_size=1),
       st.lists(st.sampled_from(_TYPES), unique=True), st.floats(0.0, 1.0), st.text(max_size=8),
       st.integers(0, 2**64 - 1))
@settings(max_examples=120, deadline=None)
def test_drawn_speeds_keep_the_completed_types_ratios_zeros_and_fastest_one(speed, completed, spread, name, seed):
    """``varied``: the types completed on keep their ratios to each other, a type marked failing
    (0) stays 0, the fastest is 1.0 (when any type runs), the same group and seed draw the same
    speeds, and a spread of 0 changes nothing; whatever the seed (``simulate --seed``)."""
    from slurm_fair.sim.accounting import varied

    group = ("u", name, 2)
    out = varied(speed, group, completed, spread, seed)
    assert set(out) == set(speed) and out == varied(speed, group, completed, spread, seed)
    assert all(out[k] == 0.0 for k, v in speed.items() if v <= 0)
    assert varied(speed, group, completed, 0.0, seed) == speed
    if any(v > 0 for v in speed.values()) and spread > 0:
        assert max(out.values()) == pytest.approx(1.0)
        done = [k for k in completed if speed.get(k, 0) > 0]
        for a, b in zip(done, done[1:]):
            assert math.log(out[a] / out[b]) == pytest.approx(math.log(speed[a] / speed[b]), abs=1e-9)


def _sd(values):
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((d - mean) ** 2 for d in values) / len(values))


@pytest.mark.parametrize("m", [1, 2, 3])
def test_drawn_ratios_scatter_as_a_groups_true_ratios_would(m):
    """Groups whose speed on each type is the prior times an independent log-normal factor
    (sd ``s``), seen on ``m`` types: the true log ratio of an unseen type to the seen ones'
    mean scatters by ``s sqrt(1 + 1/m)`` (its own factor and the seen ones' mean), and two unseen
    types' by ``s sqrt 2``. Drawn over many groups from the posterior mean, the ratios do the
    same, around the learned ones."""
    from slurm_fair.sim.accounting import varied

    types = ["h100", "a100", "l40s", "v100", "t4"]
    seen, unseen = types[:m], types[m:]
    speed = {k: 1.0 / (i + 1) for i, k in enumerate(types)}
    to_seen, between = [], []
    for i in range(3000):
        out = varied(speed, ("u", f"job{i}", 1), seen, 0.3)
        ref = sum(math.log(out[k] / speed[k]) for k in seen) / m
        to_seen.append(math.log(out[unseen[0]] / speed[unseen[0]]) - ref)
        between.append(math.log(out[unseen[0]] / speed[unseen[0]]) - math.log(out[unseen[1]] / speed[unseen[1]]))
    mean, sd = _sd(to_seen)
    assert abs(mean) < 0.03 and sd == pytest.approx(0.3 * math.sqrt(1 + 1 / m), rel=0.06)
    mean, sd = _sd(between)
    assert abs(mean) < 0.03 and sd == pytest.approx(0.3 * math.sqrt(2), rel=0.06)


def test_another_seed_draws_another_site_like_it_on_the_unseen_types_only():
    """``simulate --seed S`` (``draw_seed``): seed 0 is the replay of earlier releases; another
    seed changes the drawn ratio of the types a group never completed on, never those it did."""
    from slurm_fair.sim.accounting import varied

    speed = {"h100": 1.0, "a100": 0.7, "l40s": 0.4, "v100": 0.3}
    seen = ["a100", "v100"]
    draws = [varied(speed, ("u", f"job{i}", 1), seen, 0.3, seed) for i in range(50) for seed in (0, 1)]
    assert all(d[0]["a100"] / d[0]["v100"] == pytest.approx(d[1]["a100"] / d[1]["v100"])
               for d in zip(draws[::2], draws[1::2]))
    assert sum(a["l40s"] / a["a100"] != pytest.approx(b["l40s"] / b["a100"]) for a, b in zip(draws[::2], draws[1::2])) >= 45
    assert varied(speed, ("u", "job0", 1), seen, 0.3) == varied(speed, ("u", "job0", 1), seen, 0.3, 0)


# a gang over a V100 and an A100 node, untyped (``--gres=gpu:4`` per node), requeued after 20
# minutes, then completed on the same two nodes in 40 (a100-01 and v100-01 are typed by job 100
# and 103 of ROWS)
GANG = [
    "110|dan|physics|wide|gpu|billing=8,cpu=8,gres/gpu=8,mem=8G,node=2|a100-01,v100-01|2|"
    "2026-01-05T06:00:00|2026-01-05T06:00:00|2026-01-05T06:20:00|00:20:00|02:00:00|REQUEUED",
    "110|dan|physics|wide|gpu|billing=8,cpu=8,gres/gpu=8,mem=8G,node=2|a100-01,v100-01|2|"
    "2026-01-05T06:20:00|2026-01-05T06:21:00|2026-01-05T07:01:00|00:40:00|02:00:00|COMPLETED",
]


def test_a_requeued_gang_over_two_types_is_replayed_at_its_slowest_run_by_run():
    """Its runs spanned nodes of two types: each went at the pace of the slower (Slurm's ranks
    wait for each other). It is replayed, not left out (a replay without it had GPUs the site's
    Slurm did not have), its GPU-seconds split over the two types as held, its work the time of
    each run at its slower type's speed: placed alone on two such nodes it takes the hour it ran."""
    from slurm_fair.sim.slurmlike import SlurmModel, replay_slurm

    replay = build_replay(parse_history(history_text(ROWS + GANG), "h.txt"), "h.txt")
    assert "GPU type unknown" not in replay.left_out
    job = next(j for j in replay.workload.jobs if j.id == "physics/110")
    record = next(r for r in replay.history if r.job_id == "physics/110")
    assert record.gpu_seconds == pytest.approx({"a100": 3600 * 4, "v100": 3600 * 4})
    assert record.run_s == pytest.approx(3600)
    speed = {k: replay.table.lookup(job.job_type, job.gpus, k) for k in ("a100", "v100")}
    slow = min(speed, key=lambda k: speed[k])
    assert record.gpu_type == slow and job.total_steps == pytest.approx(3600 * speed[slow])
    assert replay.counts["gangs over several types (at their slowest)"] == 1
    alone = dataclasses.replace(replay.workload, jobs=(job,))
    nodes = [n for n in replay.nodes if n.name in ("a100-01", "v100-01")]
    records, _ = replay_slurm(alone, nodes, replay.table, {job.id: 7200.0}, SlurmModel(), replay.prior_rel)
    assert records[0].end_s - records[0].start_s == pytest.approx(3600)
