"""Apply at scale: one Slurm call per change and chunk, and ownership records exact per job.

The cases a batch meets on a real cluster (``tests/slurm/recorded_writes.json``): a job that
started or ended between the snapshot and the write, a job Slurm refuses, Slurm gone mid-way.
"""

from __future__ import annotations

import threading
import time

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.controller.state.fields import IN_DOUBT_S
from slurm_fair.errors import SlurmCommandError, SlurmUnavailable

from .conftest import make_config


def submit(fake, n: int, **kw) -> list[str]:
    return [fake.submit(("alice", "bob")[i % 2], f"--gres=gpu:{1 + i % 2}", hold=False,
                        comment="fair:class=" + ("resnet-50-bs32", "a3c", "lm-bs20")[i % 3], **kw)
            for i in range(n)]


def rows(config) -> dict:
    with StateStore.in_dir(config["controller"]["state_dir"]) as store:
        return store.owned()


def test_a_job_that_started_meanwhile_is_skipped_and_the_rest_of_its_batch_recorded(fake, config, monkeypatch):
    ids = submit(fake, 12)
    real = fake.update_jobs
    seen: dict[str, object] = {}
    first = threading.Lock()  # calls may be in flight side by side: only one starts a job

    def update_jobs(job_ids, fields):
        if "Partition" in fields and first.acquire(blocking=False):
            # what the store held when the batch went out: every job's intent, none written yet
            seen.update(rows(config))
            fake.start(job_ids[0], "k80-1", "k80")  # starts between the snapshot and the write
            seen["started"] = job_ids[0]
            seen["batch"] = list(job_ids)
        return real(job_ids, fields)

    monkeypatch.setattr(fake, "update_jobs", update_jobs)
    res = run_cycle(fake, config)
    started = str(seen.pop("started"))
    first_batch = seen.pop("batch")
    assert res.exit_code == 0, res.message
    assert {j for j, f in seen if f == "partition"} >= set(first_batch)
    assert all(r.intent is not None and r.written is None for (j, f), r in seen.items() if j in first_batch)
    by_job = {r.action.job: r for r in res.results if r.action.kind == "set_partition"}
    assert by_job[started].skipped and not by_job[started].applied
    assert all(by_job[j].applied for j in ids if j != started)
    owned = rows(config)
    assert (started, "partition") not in owned  # never written: no row, nothing to give back
    for j in ids:
        if j != started:
            row = owned[(j, "partition")]
            assert (row.original, row.written, row.intent) == ("gpu", fake.job(j).partition, None)
    assert revert(fake, config).exit_code == 0
    assert all(fake.job(j).partition == "gpu" for j in ids if j != started)
    assert {k: v for k, v in rows(config).items() if k[1] == "partition"} == {}


def test_a_refused_job_drops_its_intent_and_the_others_keep_theirs(fake, config, monkeypatch):
    ids = submit(fake, 8)
    real = fake.update_jobs
    refused = ids[3]

    def update_jobs(job_ids, fields):
        out = dict(real([j for j in job_ids if j != refused], fields))
        if refused in job_ids:
            out[refused] = SlurmCommandError(["scontrol", "update"], 1, f"Invalid partition name specified for job {refused}")
        return out

    monkeypatch.setattr(fake, "update_jobs", update_jobs)
    res = run_cycle(fake, config)
    assert res.exit_code == 1  # a failed write is reported
    failed = [r for r in res.results if not r.applied and not r.skipped]
    assert {r.action.job for r in failed} == {refused}
    owned = rows(config)
    assert (refused, "partition") not in owned  # refused: its intent went, and with it the row
    assert all(owned[(j, "partition")].written == fake.job(j).partition for j in ids if j != refused)
    assert fake.job(refused).partition == "gpu"


def test_slurm_lost_mid_batch_keeps_every_intent_of_it_in_doubt(fake, config, monkeypatch):
    """A batch that did not come back may have been carried out, or may still be, later than
    writes sent after it (seen on the 22.05 testbed: a request sent before slurmctld paused
    landed after the next cycle's and revert's writes). Its jobs' writes stay in doubt: the
    next cycle settles what landed, and revert, which finds writes still in doubt, waits and
    gives back the ones that land during the wait."""
    ids = submit(fake, 10)
    real = fake.update_jobs
    lost: list[str] = []
    late: list[tuple[list[str], dict]] = []
    first = threading.Lock()  # calls may be in flight side by side: only one is lost

    def update_jobs(job_ids, fields):
        if "Partition" in fields and first.acquire(blocking=False):
            lost.extend(job_ids)
            real(job_ids[: len(job_ids) // 2], fields)  # half of it happened before the timeout
            late.append((list(job_ids[len(job_ids) // 2:]), dict(fields)))  # the rest lands later
            raise SlurmUnavailable("scontrol did not answer within 30 s (3 attempts)")
        return real(job_ids, fields)

    monkeypatch.setattr(fake, "update_jobs", update_jobs)
    res = run_cycle(fake, config)
    assert res.exit_code != 0 and lost and late
    owned = rows(config)
    for j in lost:
        r = owned[(j, "partition")]
        assert r.intent is None and r.written is None and r.doubt == late[0][1]["Partition"], r
        assert r.doubt_until >= time.time() + IN_DOUBT_S - 5
    monkeypatch.setattr(fake, "update_jobs", real)
    again = run_cycle(fake, config)
    assert again.exit_code == 0, again.message
    owned = rows(config)
    assert all(owned[(j, "partition")].intent is None and owned[(j, "partition")].written == fake.job(j).partition
               for j in ids if fake.job(j).partition != "gpu")
    # revert gives back, finds writes in doubt, waits; the late half lands during the wait
    clock = [time.time()]
    notes: list[str] = []

    def sleep(s: float) -> None:
        if late:
            job_ids, fields = late.pop()
            real(job_ids, fields)
        clock[0] += s

    res = revert(fake, config, clock=lambda: clock[0], sleep=sleep, notify=notes.append)
    assert res.exit_code == 0, res.to_dict()
    assert notes and "may still land" in notes[0]
    assert clock[0] >= time.time() + IN_DOUBT_S - 5  # it waited (in the fake clock) until the doubt ended
    assert all(fake.job(j).partition == "gpu" for j in ids)
    assert not [k for k, r in rows(config).items() if r.written or r.intent]


def test_revert_without_writes_in_doubt_does_not_wait(fake, config):
    ids = submit(fake, 4)
    assert run_cycle(fake, config).exit_code == 0
    waited: list[float] = []
    res = revert(fake, config, sleep=waited.append)
    assert res.exit_code == 0 and not waited
    assert all(fake.job(j).partition == "gpu" for j in ids)


def test_gpu_types_go_in_one_call_per_type_on_24_11(tmp_path, fake):
    fake.slurm_version = "24.11.5"
    config = make_config(tmp_path)
    ids = submit(fake, 40)
    gone = ids[5]
    real = fake.set_gpu_types

    def set_gpu_types(changes):
        if gone in [j.job_id for j, _ in changes]:
            fake.finish(gone)  # ended between the snapshot and the write
        return real(changes)

    fake.set_gpu_types = set_gpu_types  # type: ignore[method-assign]
    res = run_cycle(fake, config)
    assert res.exit_code == 0, res.message
    calls = [c for c in fake.calls if c[0] == "set_gpu_types"]
    types = {r.action.params["gpu_type"] for r in res.results if r.action.kind == "set_gpu_type"}
    assert len(calls) == len(types) and not [c for c in fake.calls if c[0] == "set_gpu_type"]
    owned = rows(config)
    assert (gone, "gres") not in owned
    for j in ids:
        if j != gone:
            assert owned[(j, "gres")].written == fake.job(j).gpu_request.gpu_type
    rv = revert(fake, config)
    assert rv.exit_code == 0
    assert len([c for c in fake.calls if c[0] == "restore_gpu_requests"]) <= 2  # one per original request
    assert all(fake.job(j).gpu_request.gpu_type is None for j in ids if j != gone)


def test_a_stop_is_honoured_between_two_calls_of_one_group(fake, tmp_path):
    """One change for more jobs than one call takes goes in bounded calls, a bounded number in
    flight; a stop (SIGTERM) during the first round leaves the rest not attempted, with no
    intent stored for them."""
    from slurm_fair.controller.apply import JOB_CALLS, apply
    from slurm_fair.controller.diff import field_action
    from slurm_fair.slurm.batch import BATCH_JOBS

    ids = [fake.submit("alice", "--gres=gpu:1", hold=False) for _ in range(BATCH_JOBS * JOB_CALLS + 20)]
    snap = fake.snapshot()
    actions = [field_action(sj, "partition", "v100", {}, partition="v100") for sj in snap.jobs]
    sent = lambda: [c[1][0] for c in fake.calls if c[0] == "update_jobs"]  # noqa: E731
    with StateStore.in_dir(tmp_path / "state") as store:
        results = apply(actions, fake, snap, store, "c1", 0.0, stop=lambda: len(sent()) >= 1)
        owned = store.owned()
    assert [len(c) for c in sent()] == [BATCH_JOBS] * JOB_CALLS  # one round of calls in flight
    done = {r.action.job for r in results if r.applied}
    assert done == {j for c in sent() for j in c} and len(done) == BATCH_JOBS * JOB_CALLS
    rest = [r for r in results if not r.applied]
    assert len(rest) == 20 and all(r.error.startswith("not attempted") for r in rest)
    assert {j for j, _ in owned} == done  # no row, no intent for what was never sent
    assert all(fake.job(j).partition == ("v100" if j in done else "gpu") for j in ids)


def test_a_stop_during_revert_s_wait_names_the_writes_still_in_doubt(fake, config, monkeypatch):
    """SIGTERM while revert waits for writes in doubt: it stops waiting, exits 1 and names each
    write that may still land (run revert again after its minute)."""
    ids = submit(fake, 4)
    real = fake.update_jobs

    def lost(job_ids, fields):
        if "Partition" in fields:
            raise SlurmUnavailable("scontrol did not answer within 30 s (3 attempts)")
        return real(job_ids, fields)

    monkeypatch.setattr(fake, "update_jobs", lost)
    assert run_cycle(fake, config).exit_code != 0
    monkeypatch.setattr(fake, "update_jobs", real)
    slept: list[float] = []
    res = revert(fake, config, sleep=slept.append, stop=lambda: bool(slept))
    assert len(slept) == 1 and res.exit_code == 1
    assert res.problems and all("may still land" in p for p in res.problems)
    assert {p.split(":")[0] for p in res.problems} <= {f"job {j}" for j in ids}
