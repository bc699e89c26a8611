"""slurmctld's "nothing changed since" answer (``SLURM_NO_CHANGE_IN_DATA``) on the real testbed.

The direct job read (:mod:`slurm_fair.slurm.libslurm_jobs`) asks ``slurm_load_jobs`` with the
pack time of its last full reply and, when slurmctld answers that no job changed since, gives the
last reply again (and the port the jobs it built from it). This checks, against the real
slurmctld, that the answer comes on a quiet queue and that what the controller reads shows in the
very next snapshot after it changes: a job submitted, one updated with ``scontrol update`` (time
limit, GPU request, comment), a priority set, a nice, a hold and a release, a job cancelled, a
node drained and resumed. Each change is made right after a snapshot answered "no change"
(within the same second, where slurmctld's one-second margin matters), and each next snapshot is
compared field by field with the command line's. (A slurmctld started again, whose "no change"
is not about the last reply, is replayed by ``test_libslurm_jobs.py``.)
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import suppress
from typing import Callable

import pytest

from slurm_fair.slurm.cli import SlurmCli

from slurm_harness import both_backends
from test_backends_agree import _equal_soon

pytestmark = pytest.mark.slurm


def _run(env, *argv: str) -> str:
    out = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (argv, out.stderr)
    return out.stdout.strip()


def _quiet(ps):
    """A snapshot slurmctld answered "no job changed" for (the scheduler and the priority
    plugin may move its update time between two reads: read until one does)."""
    reader = ps._field_reader()
    deadline = time.monotonic() + 30
    first = ps.snapshot()
    while time.monotonic() < deadline:
        snap = ps.snapshot()
        if reader.unchanged:
            return first, snap
        first = snap
        time.sleep(0.3)
    pytest.fail("slurmctld never answered that no job changed (30 s)")


def test_no_change_answer_reuses_the_last_read_and_every_change_shows_next(testbed, slurm_version):
    env, cli, ps = both_backends(testbed, slurm_version)
    from slurm_fair.slurm.pyslurm_port import PyslurmPort

    reader = ps._field_reader()
    assert reader is not None, "libslurm's job records are not read directly here"
    account = sorted(a.name for a in cli.accounts())[0]
    nodes = sorted(n.name for n in cli.nodes())
    down = f"sfnochg{os.getpid() % 10000}"
    _run(env, "scontrol", "create", f"PartitionName={down}", f"Nodes={nodes[0]}", "State=DOWN")
    ids: list[str] = []
    drained = nodes[-1]

    def sbatch(*args: str) -> str:
        ids.append(_run(env, "sbatch", "--parsable", "-o", "/dev/null", "-A", account, "-p", down, *args,
                        "--wrap", "sleep 600").split(";")[0])
        return ids[-1]

    def job(snap, job_id: str):
        return next((j for j in snap.jobs if j.job_id == job_id), None)

    try:
        for _ in range(3):
            sbatch("--gres=gpu:1", "-t", "30")
        before, again = _quiet(ps)
        # the answer gives the very jobs of the last full read: equal, and equal to the commands'
        assert again.jobs == before.jobs and len(again.jobs) >= 3
        assert reader.unchanged_reads >= 1
        # the answer was trusted after slurmctld's configuration answered "no change" too (the
        # same slurmctld: not started again since); its reply's first member read as its pack time
        assert abs(reader.conf_time - time.time()) < 120
        assert _equal_soon(cli, ps) == []

        def shows(change: Callable[[], None], seen: Callable[[object], bool], what: str) -> None:
            _quiet(ps)
            full = reader.full_reads
            change()
            snap = ps.snapshot()  # at once: most often within the second of the quiet answer
            assert seen(snap), f"{what}: not in the next snapshot"
            assert what.startswith("node") or reader.full_reads == full + 1, f"{what}: no full read"
            assert _equal_soon(cli, ps) == [], what

        new: list[str] = []
        shows(lambda: new.append(sbatch("--gpus=2", "-t", "20")), lambda s: job(s, new[0]) is not None,
              "a job submitted")
        a = ids[0]
        shows(lambda: _run(env, "scontrol", "update", f"JobId={a}", "TimeLimit=45"),
              lambda s: job(s, a).time_limit_min == 45, "scontrol update TimeLimit")
        shows(lambda: _run(env, "scontrol", "update", f"JobId={a}", "Gres=gpu:3"),
              lambda s: job(s, a).gpu_request.count == 3, "scontrol update Gres")
        shows(lambda: _run(env, "scontrol", "update", f"JobId={a}", "Comment=fair:class=a3c"),
              lambda s: job(s, a).tags.get("class") == "a3c", "scontrol update Comment")
        b = ids[1]
        shows(lambda: _run(env, "scontrol", "update", f"JobId={b}", "Nice=17"),  # before a priority set:
              lambda s: job(s, b).nice == 17, "a nice")  # slurmctld ignores a nice then
        shows(lambda: _run(env, "scontrol", "update", f"JobId={b}", "Priority=4242"),
              lambda s: job(s, b).priority == 4242, "a priority set")
        shows(lambda: ps.hold(b), lambda s: job(s, b).priority == 0, "a hold")
        shows(lambda: ps.release(b), lambda s: job(s, b).priority != 0, "a release")
        c = ids[2]
        shows(lambda: _run(env, "scancel", c), lambda s: job(s, c) is None, "a job cancelled")
        shows(lambda: _run(env, "scontrol", "update", f"NodeName={drained}", "State=DRAIN", "Reason=nochange-test"),
              lambda s: "drain" in next(n for n in s.nodes if n.name == drained).state.lower(), "node drained")
        shows(lambda: _run(env, "scontrol", "update", f"NodeName={drained}", "State=RESUME"),
              lambda s: "drain" not in next(n for n in s.nodes if n.name == drained).state.lower(), "node resumed")
        # a new port asks for everything (nothing is shared between ports)
        other = PyslurmPort(SlurmCli(env=dict(testbed.env), timeout_s=60))
        assert other._field_reader() is not reader
        other.snapshot()
        assert other._field_reader().full_reads == 1 and not other._field_reader().unchanged
    finally:
        for i in range(0, len(ids), 100):
            subprocess.run(["scancel", *ids[i:i + 100]], env=env, capture_output=True, timeout=60)
        with suppress(Exception):
            subprocess.run(["scontrol", "update", f"NodeName={drained}", "State=RESUME"], env=env,
                           capture_output=True, timeout=30)
        with suppress(Exception):
            subprocess.run(["scontrol", "delete", f"PartitionName={down}"], env=env, capture_output=True, timeout=30)
