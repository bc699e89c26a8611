"""The generated site history (``benchmarks/make_site_history.py``) is what the replay reads:
every row parses, every job that ran is replayed or counted, and the truth covers every group."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slurm_fair.sim.accounting import build_replay
from slurm_fair.slurm.parse.history import parse_history

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from make_site_history import generate  # noqa: E402
from bench_replay_truth import spanning, true_replay  # noqa: E402


@pytest.mark.parametrize("per_node", [8, 4])
def test_a_generated_history_replays_whole(per_node):
    """In 4-GPU nodes gangs span nodes of two types, some of them requeued: they are replayed too
    (main's replay left a requeued one out as "GPU type unknown")."""
    site = generate(106, n_jobs=1500, days=3, gpus=64, n_types=4, accounts=4, load=0.7, per_node=per_node) \
        if per_node == 4 else generate(3, n_jobs=400, days=1, gpus=64, n_types=4, accounts=4)
    n_jobs = 1500 if per_node == 4 else 400
    history = parse_history("\n".join(site.lines) + "\n", "site", strict=True)
    assert history.junk == [] and history.ended_junk == []
    replay = build_replay(history, "site")
    ran = sum(replay.ended.values())
    never = sum(v for k, v in replay.left_out.items() if k.startswith("never ran"))
    assert ran + never == n_jobs - sum(1 for line in site.lines if "|PENDING|" in line)
    assert "GPU type unknown" not in replay.left_out
    assert replay.counts["array tasks"] > 0 and replay.counts["requeued (runs joined)"] >= 0
    truth = true_replay(replay, site.truth, history)
    # a job that completed in one run did, at its true speed, the work the generator gave it
    requeued = {line.split("|")[0] for line in site.lines if "|REQUEUED|" in line}
    checked = 0
    for job in truth.workload.jobs:
        meta = replay.jobs[job.id]
        if meta.state == "COMPLETED" and meta.slurm_id not in requeued:
            assert abs(job.total_steps - site.truth["work"][meta.slurm_id]) <= 1.0  # elapsed is whole seconds
            checked += 1
    assert checked > 100


def test_truth_options_change_only_the_truth_and_move_it_as_asked():
    """A family mix or a slower type changes the groups' true speeds, never the default history:
    the L40S at 0.6x their prior sit 0.6x lower against the H100 (geometric mean over groups,
    whose own factors have log spread 0.25)."""
    import math
    import statistics

    from slurm_fair.estimates.priors import prior_speeds

    plain = generate(5, n_jobs=600, days=1, gpus=64, n_types=4, accounts=4)
    assert generate(5, n_jobs=600, days=1, gpus=64, n_types=4, accounts=4, families=None).lines == plain.lines
    slow = generate(5, n_jobs=600, days=1, gpus=64, n_types=4, accounts=4, type_factor={"l40s": 0.6})
    prior = prior_speeds(["h100", "l40s"]).speed
    log_ratio = statistics.mean(math.log(s["l40s"] / s["h100"]) for s in slow.truth["groups"].values())
    assert len(slow.truth["groups"]) > 50
    bound = 3 * 0.25 * math.sqrt(2 / len(slow.truth["groups"])) + 0.02
    assert abs(log_ratio - math.log(0.6 * prior["l40s"] / prior["h100"])) < bound
    fp64 = generate(5, n_jobs=600, days=1, gpus=64, n_types=4, accounts=4, families={"fp64": 1.0})
    fp = prior_speeds(["h100", "l40s"], "fp64").speed
    log_ratio = statistics.mean(math.log(s["l40s"] / s["h100"]) for s in fp64.truth["groups"].values())
    assert abs(log_ratio - math.log(fp["l40s"] / fp["h100"])) < 0.15


def test_the_replay_draws_the_sites_spread_where_a_group_never_ran():
    """The generator's groups stray from the priors by a log-normal factor (sd 0.25) per type,
    so a group's true log ratio of a type it never ran on to the one type it completed on
    scatters between groups by 0.25 sqrt 2: the replay's drawn ratios scatter so (the learner
    measures the spread from the groups that ran on two types), the learner's mean alone not at
    all; on the types a group completed on both replays agree."""
    import math
    from collections import defaultdict

    site = generate(5, n_jobs=1200, days=3, gpus=64, n_types=4, accounts=6)
    history = parse_history("\n".join(site.lines) + "\n", "site")
    drawn, mean = build_replay(history, "site"), build_replay(history, "site", vary_unseen=False)
    assert drawn.counts["speeds drawn on a type the group never completed on"] > 0
    assert "speeds drawn on a type the group never completed on" not in mean.counts
    types = sorted(drawn.cluster.capacity)
    records = {r.job_id: r for r in drawn.history}
    done: dict[tuple, set] = defaultdict(set)
    for j in drawn.workload.jobs:
        if drawn.jobs[j.id].state == "COMPLETED":
            done[(j.job_type, j.gpus)] |= set(records[j.id].gpu_seconds)
    by_pair: dict[tuple, list] = defaultdict(list)
    for key, ran in done.items():  # one entry per group
        if len(ran) != 1:
            if len(ran) >= 2:
                a, b = sorted(ran)[:2]
                assert drawn.table.data[a][key] / drawn.table.data[b][key] == \
                    pytest.approx(mean.table.data[a][key] / mean.table.data[b][key], rel=1e-9)
            continue
        own = next(iter(ran))
        for k in types:
            if k == own or mean.table.data[k][key] <= 0:  # a type marked failing: never placed
                continue
            by_pair[(own, k)].append(tuple(math.log(t.data[k][key] / t.data[own][key])
                                           for t in (drawn.table, mean.table)))

    def spread(i: int) -> float:
        dev = [x[i] - sum(y[i] for y in v) / len(v) for v in by_pair.values() for x in v]
        return math.sqrt(sum(d * d for d in dev) / len(dev))

    assert sum(len(v) for v in by_pair.values()) > 100
    assert abs(spread(0) - 0.25 * math.sqrt(2)) < 0.08 and spread(1) < 0.05


def test_the_true_arm_runs_a_gang_over_several_types_at_its_slowest():
    """On 4-GPU nodes many gangs span nodes of two types; the generator ran them at their
    slowest type's true speed, so their true work is the time run times that speed (not the
    types' mean, which made the true world's jobs up to 3x longer than the history's)."""
    site = generate(106, n_jobs=500, days=1, gpus=64, n_types=4, accounts=4, per_node=4)
    history = parse_history("\n".join(site.lines) + "\n", "site")
    replay = build_replay(history, "site")
    gangs = spanning(history, site.truth["nodes"])
    assert gangs
    truth = true_replay(replay, site.truth, history)
    requeued = {line.split("|")[0] for line in site.lines if "|REQUEUED|" in line}
    checked = 0
    for job in truth.workload.jobs:
        meta = replay.jobs[job.id]
        if meta.state == "COMPLETED" and meta.slurm_id not in requeued and meta.slurm_id in gangs:
            assert job.total_steps == pytest.approx(site.truth["work"][meta.slurm_id], rel=0.01)
            checked += 1
    assert checked > 5


def test_a_draw_seed_changes_only_the_speeds_a_history_cannot_show():
    """``simulate --seed S`` on a history: the same jobs as they ran, the same speed ratios
    between the types a group completed on; another draw where it never did."""
    site = generate(3, n_jobs=400, days=1, gpus=64, n_types=4, accounts=4)
    history = parse_history("\n".join(site.lines) + "\n", "site")
    a, b = build_replay(history, "site"), build_replay(history, "site", draw_seed=7)
    def as_ran(replay):
        return [(r.job_id, r.arrival_s, r.start_s, r.end_s, r.gpu_type, dict(r.gpu_seconds)) for r in replay.history]

    assert as_ran(a) == as_ran(b) and len(a.workload.jobs) == len(b.workload.jobs) > 300
    completed: dict = {}
    for r in a.history:
        if a.jobs[r.job_id].state == "COMPLETED":
            job = next(j for j in a.workload.jobs if j.id == r.job_id)
            completed.setdefault((job.job_type, job.gpus), set()).update(r.gpu_seconds)
    same = differ = 0
    for key, done in completed.items():
        ran = sorted(done)
        for k in a.table.data:
            ra = a.table.data[k][key] / a.table.data[ran[0]][key]
            rb = b.table.data[k][key] / b.table.data[ran[0]][key]
            if k in done:
                assert ra == pytest.approx(rb)
                same += 1
            else:
                differ += ra != pytest.approx(rb)
    assert same > 20 and differ > 20


def test_simulate_seed_replays_another_draw(tmp_path):
    """``simulate --sacct-file H --seed S``: the seed reaches the drawn speeds (the modelled
    Slurm's jobs placed on a type their group never ran on take another time), and the same
    seed gives the same figures."""
    import json

    from slurm_fair.cli import main

    # busy enough that the modelled Slurm starts jobs on types their group never ran on
    site = generate(106, n_jobs=1500, days=3, gpus=64, n_types=4, accounts=4, load=0.7, per_node=4)
    history = tmp_path / "h.txt"
    history.write_text("\n".join(site.lines) + "\n")

    def jct(seed: int) -> float:
        out = tmp_path / f"out{seed}.json"
        assert main(["simulate", "--sacct-file", str(history), "--policy", "agnostic", "--seed", str(seed),
                     "--json", "-o", str(out), "--quiet"]) in (0, None)
        return json.loads(out.read_text())["policies"]["agnostic"]["avg_jct_s"]

    assert jct(0) == jct(0) != jct(7)
