"""The controller learns untagged groups' speeds from where their jobs ran (accounting), daily."""

from __future__ import annotations

import json

import pytest
from datetime import timedelta

from slurm_fair.controller import learned
from slurm_fair.controller.cycle import run_cycle

from .conftest import make_config


def ran(fake, gpu_type, node, minutes, name="train"):
    j = fake.submit("alice", "--gres=gpu:1", hold=False, name=name)
    fake.start(j, node, gpu_type)
    fake.now += timedelta(minutes=minutes)
    fake.finish(j)


def test_a_cycle_learns_from_finished_runs_and_uses_it_for_the_next_run(tmp_path, fake):
    config = make_config(tmp_path)
    for _ in range(2):  # the truth for this group: k80 4x slower than v100 (priors say ~5x)
        ran(fake, "v100", "v100-1", 30)
        ran(fake, "k80", "k80-1", 120)
        ran(fake, "p100", "p100-1", 40)
    nxt = fake.submit("alice", "--gres=gpu:1", hold=False, name="train")
    clock = lambda: fake.now.timestamp()  # noqa: E731
    res = run_cycle(fake, config, clock=clock)
    assert res.exit_code == 0, res.message
    est = res.estimates[nxt]
    assert est.source == "learned"
    assert est.throughput["k80"] / est.throughput["v100"] > 0.23  # the data (0.25), not the prior (0.2)
    assert est.throughput["p100"] / est.throughput["v100"] < 0.85
    doc = json.loads((tmp_path / "state" / learned.FILE).read_text())
    (g,) = [g for g in doc["groups"] if g["job_name"] == "train"]
    assert g["runs"] == 6 and g["gpus"] == 1
    # within the refresh interval the table is not rebuilt; a dry run never writes it
    before = (tmp_path / "state" / learned.FILE).stat().st_mtime_ns
    fake.now += timedelta(hours=1)
    run_cycle(fake, config, clock=clock)
    assert (tmp_path / "state" / learned.FILE).stat().st_mtime_ns == before


def test_a_different_job_name_is_another_group_and_keeps_the_priors(tmp_path, fake):
    for _ in range(2):
        ran(fake, "v100", "v100-1", 30)
        ran(fake, "k80", "k80-1", 30)
    other = fake.submit("alice", "--gres=gpu:1", hold=False, name="infer")
    res = run_cycle(fake, make_config(tmp_path), clock=lambda: fake.now.timestamp())
    assert res.estimates[other].source == "prior"


def test_a_broken_table_is_rebuilt_not_an_error(tmp_path):
    (tmp_path / learned.FILE).write_text("{not json")
    assert learned.load(tmp_path) == learned.LearnedTable()


def test_a_group_that_failed_on_a_type_is_never_sent_there_and_explain_says_why(tmp_path, fake):
    config = make_config(tmp_path)
    for _ in range(2):
        ran(fake, "v100", "v100-1", 30, name="rn128")
    j = fake.submit("alice", "--gres=gpu:1", hold=False, name="rn128")
    fake.start(j, "k80-1", "k80")
    fake.now += timedelta(minutes=1)
    fake.finish(j, state="OUT_OF_MEMORY")
    nxt = fake.submit("alice", "--gres=gpu:1", hold=False, name="rn128")
    res = run_cycle(fake, config, clock=lambda: fake.now.timestamp())
    assert res.exit_code == 0, res.message
    est = res.estimates[nxt]
    assert est.throughput["k80"] == 0 and est.sources["k80"] == "fails" and est.runs["v100"] == 2
    assert est.labels()["v100"] == "learned (2 runs)" and est.labels()["k80"] == "fails (1 run)"
    assert est.throughput["p100"] > 0
    doc = json.loads((tmp_path / "state" / learned.FILE).read_text())
    (g,) = [g for g in doc["groups"] if g["job_name"] == "rn128"]
    assert g["fails_on"] == {"k80": 1} and g["runs_per_type"] == {"v100": 2}
    back = learned.load(tmp_path / "state").speeds[(g["user"], "rn128", 1)]
    assert back.fails == {"k80": 1} and back.runs == {"v100": 2} and back["k80"] == 0
    from slurm_fair.controller.explain import explain, render

    shown = explain(config, nxt)
    assert shown["runs"] == {"k80": 1, "v100": 2} and shown["sources"]["k80"] == "fails"
    assert "k80 0 (fails (1 run))" in render(shown), render(shown) and "(learned (2 runs))" in render(shown)
    from slurm_fair.commands.snapshot import controller_problem

    (snap,) = [j for j in controller_problem(fake, config).jobs if j.id == nxt]
    assert snap.extra["runs"] == {"k80": 1, "v100": 2} and snap.extra["sources"]["k80"] == "fails"
    assert "k80" not in snap.throughput or snap.throughput["k80"] == 0


def test_a_groups_finished_runs_shrink_what_a_pending_jobs_time_limit_says_of_its_size(tmp_path, fake):
    """The accounting the learner reads also gives each group's use ratios (elapsed / time limit):
    a pending job of a group whose runs used a quarter of their 4-hour limits is believed to need
    about an hour, not four (fairness.known_remaining); another group keeps the site's ratios."""
    from slurm_fair import fairness, policies
    from slurm_fair.estimates import runtime

    for minutes in (55, 60, 65):
        j = fake.submit("alice", "--gres=gpu:1", hold=False, name="train", time_limit="4:00:00")
        fake.start(j, "v100-1", "v100")
        fake.now += timedelta(minutes=minutes)
        fake.finish(j)
    nxt = fake.submit("alice", "--gres=gpu:1", hold=False, name="train", time_limit="4:00:00")
    seen = {}

    def spy(policy, problem, options):  # noqa: ANN001, ANN202 - records the problem decided on
        seen.update({j.id: j for j in problem.jobs})
        return policies.allocate(policy, problem, options)

    res = run_cycle(fake, make_config(tmp_path), clock=lambda: fake.now.timestamp(), allocate=spy)
    assert res.exit_code == 0, res.message
    doc = json.loads((tmp_path / "state" / learned.FILE).read_text())
    (g,) = [r for r in doc["run_ratios"] if r["job_name"] == "train" and r["user"] != "*"]
    assert g["ratios"] == pytest.approx([55 / 240, 60 / 240, 65 / 240], abs=1 / 240)  # sacct's whole minutes
    job = seen[nxt]
    assert job.extra[runtime.EXTRA_KEY] == tuple(g["ratios"])
    assert fairness.known_remaining_s(job) == pytest.approx(3600.0, rel=0.05)
    back = learned.load(tmp_path / "state").ratios
    assert back[(g["user"], "train", 1)] == tuple(g["ratios"]) and back[runtime.SITE] == tuple(g["ratios"])


def test_a_job_that_fails_at_its_start_on_a_type_is_learned_within_a_minute_not_at_the_refresh(tmp_path, fake):
    """Issue 39: a 4-GPU group's first job dies at its start on K80 (FAILED after 2 s). The
    table was refreshed a minute before, the next refresh is a day away; the next cycle after
    ``failures_check_s`` reads the failure, relearns and no longer plans the group's next job,
    nor a resubmission, on K80. Without a new failure nothing is relearned."""
    config = make_config(tmp_path)
    clock = lambda: fake.now.timestamp()  # noqa: E731
    ran(fake, "v100", "v100-1", 30, name="other")
    assert run_cycle(fake, config, clock=clock).exit_code == 0  # the daily refresh: nothing of rn50
    first = learned.load(tmp_path / "state")
    j = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    fake.start(j, "k80-1", "k80")
    fake.now += timedelta(seconds=2)
    fake.finish(j, state="FAILED")
    nxt = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    fake.now += timedelta(seconds=70)
    res = run_cycle(fake, config, clock=clock)
    assert res.exit_code == 0, res.message
    est = res.estimates[nxt]
    assert est.throughput["k80"] == 0 and est.sources["k80"] == "fails", est
    assert res.plan.jobs[nxt].planned_type != "k80"
    table = learned.load(tmp_path / "state")
    assert table.refreshed_at > first.refreshed_at
    assert learned.checked(tmp_path / "state") == pytest.approx(fake.now.timestamp(), abs=0.01)
    # nothing new failed: the next checks only read the window, the table is not relearned
    fake.now += timedelta(seconds=70)
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    again = learned.load(tmp_path / "state")
    assert again.refreshed_at == table.refreshed_at
    assert learned.checked(tmp_path / "state") == pytest.approx(fake.now.timestamp(), abs=0.01)


def _fails_at_start(fake, node, gpu_type, name="rn50"):
    j = fake.submit("alice", "--gres=gpu:4", hold=False, name=name)
    fake.start(j, node, gpu_type)
    fake.now += timedelta(seconds=2)
    fake.finish(j, state="FAILED")


def test_a_failure_the_accounting_records_late_is_still_read(tmp_path, fake):
    """slurmdbd records a job's end after slurmctld (minutes late when it is busy): a failure
    that ended 30 s before a check but reached the accounting only after it is read by the next
    check (a window starting 5 s before the last check missed it for a day, on a loaded machine)."""
    config = make_config(tmp_path)
    clock = lambda: fake.now.timestamp()  # noqa: E731
    ran(fake, "v100", "v100-1", 30, name="other")
    assert run_cycle(fake, config, clock=clock).exit_code == 0  # the daily refresh
    fake.now += timedelta(seconds=70)
    assert run_cycle(fake, config, clock=clock).exit_code == 0  # a check: nothing failed yet
    checked_at = fake.now
    fake.now = checked_at - timedelta(seconds=32)  # it ended before that check ...
    _fails_at_start(fake, "k80-1", "k80")
    fake.now = checked_at + timedelta(seconds=70)  # ... and is in the accounting only now
    nxt = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    res = run_cycle(fake, config, clock=clock)
    assert res.exit_code == 0, res.message
    est = res.estimates[nxt]
    assert est.throughput["k80"] == 0 and est.sources["k80"] == "fails", est


def test_a_failure_read_once_calls_for_one_relearn_only(tmp_path, fake):
    """A group that failed at its start on two types is broken, not the types: the learner marks
    neither, so each later check within the overlap reads the same failures again; they were
    read, so the table is relearned once for them, not at every check."""
    config = make_config(tmp_path)
    clock = lambda: fake.now.timestamp()  # noqa: E731
    ran(fake, "v100", "v100-1", 30, name="other")
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    _fails_at_start(fake, "k80-1", "k80")
    _fails_at_start(fake, "p100-1", "p100")
    fake.now += timedelta(seconds=70)
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    once = learned.load(tmp_path / "state").refreshed_at
    assert once == pytest.approx(fake.now.timestamp(), abs=0.01)  # relearned for them
    for _ in range(3):
        fake.now += timedelta(seconds=70)
        assert run_cycle(fake, config, clock=clock).exit_code == 0
    assert learned.load(tmp_path / "state").refreshed_at == once
    assert learned.seen_failures(tmp_path / "state")  # still read, and known


def test_the_failure_check_can_be_turned_off(tmp_path, fake):
    from slurm_fair.config import validate

    config = validate({"controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl")},
                       "throughput": {"failures_check_s": 0}}, str(tmp_path / "slurm-fair.toml"))
    clock = lambda: fake.now.timestamp()  # noqa: E731
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    j = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    fake.start(j, "k80-1", "k80")
    fake.now += timedelta(seconds=2)
    fake.finish(j, state="FAILED")
    nxt = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    fake.now += timedelta(seconds=70)
    res = run_cycle(fake, config, clock=clock)
    assert res.estimates[nxt].throughput["k80"] > 0  # only the daily refresh will learn it


def test_a_job_that_failed_late_waits_for_the_refresh(tmp_path, fake):
    """A run that FAILED after 10 minutes may be its own bug, and alone marks nothing: the
    failure check does not relearn the table for it (a site where jobs fail all day would
    relearn its history every minute)."""
    config = make_config(tmp_path)
    clock = lambda: fake.now.timestamp()  # noqa: E731
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    first = learned.load(tmp_path / "state").refreshed_at
    j = fake.submit("alice", "--gres=gpu:4", hold=False, name="rn50")
    fake.start(j, "k80-1", "k80")
    fake.now += timedelta(minutes=10)
    fake.finish(j, state="FAILED")
    fake.now += timedelta(seconds=70)
    assert run_cycle(fake, config, clock=clock).exit_code == 0
    assert learned.load(tmp_path / "state").refreshed_at == first
    assert learned.checked(tmp_path / "state") == pytest.approx(fake.now.timestamp(), abs=0.01)
