"""A job list in one ``scontrol update``: read per job from what Slurm printed.

The stand-in ``scontrol`` replays what the real one printed on the 22.05 and 24.11 testbeds
(``recorded_writes.json``: argv, exit status, stdout, stderr, and which jobs Slurm then showed
changed) through the real :class:`~slurm_fair.slurm.run.Runner`, so exit status and stderr go
through the same error mapping as on a cluster. A call the recording does not hold (a single
job, the fallback) succeeds and is logged.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from slurm_fair.errors import JobGone, SlurmCommandError, SlurmUnavailable
from slurm_fair.slurm import batch
from slurm_fair.slurm.run import Runner

RECORDED = json.loads((Path(__file__).with_name("recorded_writes.json")).read_text())["versions"]
CASES = [(v, name) for v, cases in RECORDED.items() for name in cases]

_STANDIN = """#!{python}
import json, sys
case = json.load(open({case!r}))
with open({log!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if ["scontrol", *sys.argv[1:]] == case["argv"]:
    sys.stdout.write(case["stdout"]); sys.stderr.write(case["stderr"]); sys.exit(case["rc"])
"""


def replay(tmp_path: Path, case: dict) -> tuple[Runner, Path]:
    """A Runner whose ``scontrol`` answers ``case``'s argv as recorded, anything else with 0."""
    (tmp_path / "case.json").write_text(json.dumps(case))
    log = tmp_path / "calls.log"
    cmd = tmp_path / "scontrol"
    cmd.write_text(_STANDIN.format(python=sys.executable, case=str(tmp_path / "case.json"), log=str(log)))
    cmd.chmod(cmd.stat().st_mode | stat.S_IEXEC)
    return Runner(bin_dir=tmp_path, timeout_s=20, retries=0), log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("version,name", CASES)
def test_every_recorded_answer_is_settled_per_job(tmp_path, version, name):
    """The jobs reported failed are exactly those Slurm did not change, unless Slurm refused the
    list as a whole (no per-job line): then each job was tried alone."""
    case = RECORDED[version][name]
    ids = case["argv"][2].removeprefix("JobId=").split(",")
    items = case["argv"][3:]
    runner, log = replay(tmp_path, case)
    failed = batch.update(runner, ids, items)
    lines = batch.per_job_errors(case["stderr"], ids)
    if case["rc"] == 0:
        assert failed == {} and calls(log) == [case["argv"][1:]]
    elif lines or len(ids) == 1:
        assert set(failed) == set(ids) - set(case["changed"])
        assert calls(log) == [case["argv"][1:]]  # no second call: every job is accounted for
    else:  # refused as a whole ("Invalid job ID 1,2" for a node list): one job at a time
        assert calls(log) == [case["argv"][1:]] + [["update", f"JobId={j}", *items] for j in ids]
        assert failed == {}  # the stand-in's single calls succeed
    for job, exc in failed.items():
        gone = any(w in case["jobs"][job] for w in ("running", "finished"))
        assert isinstance(exc, JobGone) == gone, (job, exc)
        assert isinstance(exc, (JobGone, SlurmCommandError))


def test_a_refusal_names_slurms_reason_for_that_job(tmp_path):
    case = RECORDED["24.11"]["tres_mixed"]
    runner, _ = replay(tmp_path, case)
    failed = batch.update(runner, ["10", "11", "12", "13", "14"], case["argv"][3:])
    assert sorted(failed) == ["11", "12"]
    assert all(isinstance(e, SlurmCommandError) and "with and without type identification" in str(e)
               for e in failed.values())


def test_chunks_are_bounded_and_ids_sent_once():
    ids = [str(i) for i in range(1, 1201)] + ["7", "8"]
    got = batch.chunks(ids, 500)
    assert [len(c) for c in got] == [500, 500, 200]
    assert [j for c in got for j in c] == [str(i) for i in range(1, 1201)]


def test_a_long_list_goes_in_bounded_calls(tmp_path):
    case = {"argv": ["none"], "rc": 0, "stdout": "", "stderr": ""}
    runner, log = replay(tmp_path, case)
    ids = [str(i) for i in range(1, batch.BATCH_JOBS * 2 + 2)]
    assert batch.update(runner, ids, ["SiteFactor=-5"]) == {}
    sent = calls(log)
    assert [len(c[1].removeprefix("JobId=").split(",")) for c in sent] == [batch.BATCH_JOBS, batch.BATCH_JOBS, 1]
    assert [c[2] for c in sent] == ["SiteFactor=-5"] * 3


def test_per_job_lines_of_other_jobs_are_ignored():
    text = "Job has already finished for job 5\nJob is no longer pending execution for job 40\n"
    assert batch.per_job_errors(text, ["1", "5", "4"]) == {"5": "Job has already finished"}


def test_slurm_unreachable_propagates(tmp_path):
    """What was sent may have happened: the caller keeps every intent (apply: uncertain)."""
    case = {"argv": ["scontrol", "update", "JobId=1,2", "Partition=v100"], "rc": 1, "stdout": "",
            "stderr": "slurm_update error: Unable to contact slurm controller (connect failure)\n"}
    runner, _ = replay(tmp_path, case)
    with pytest.raises(SlurmUnavailable):
        batch.update(runner, ["1", "2"], ["Partition=v100"])


_SQUEUE = """#!{python}
import json, sys
with open({log!r}, "a") as log:
    log.write(json.dumps(["squeue", *sys.argv[1:]]) + "\\n")
fmt = sys.argv[sys.argv.index("-O") + 1]
ids = sys.argv[sys.argv.index("-j") + 1].split(",")
typed = json.load(open({typed!r}))
for j in ids:
    tres = "cpu=1,mem=1G,node=1,gres/gpu=1" + (",gres/gpu:" + typed[j] + "=1" if typed.get(j) else "")
    print(tres if fmt == "tres-alloc:0" else j + fmt[len("JobID:0"):fmt.index(",tres-alloc")] + tres)
"""


def test_a_rewrite_slurm_takes_otherwise_is_put_back_and_named(tmp_path):
    """>= 23.11: one update for the jobs of one new request, one squeue read-back; a job whose
    read-back shows another type than asked gets its request put back and is reported failed
    (a failed write must leave nothing for revert to undo), the others are done."""
    from slurm_fair.slurm.cli import SlurmCli
    from slurm_fair.slurm.fake import FakeSlurm

    fake = FakeSlurm(slurm_version="24.11")
    jobs = [fake.job(fake.submit("a", "--gres=gpu:1", hold=False)) for _ in range(3)]
    case = {"argv": ["none"], "rc": 0, "stdout": "", "stderr": ""}
    runner, log = replay(tmp_path, case)
    (tmp_path / "typed.json").write_text(json.dumps({jobs[0].job_id: "v100", jobs[1].job_id: "k80",
                                                     jobs[2].job_id: "v100"}))
    squeue = tmp_path / "squeue"
    squeue.write_text(_SQUEUE.format(python=sys.executable, log=str(log), typed=str(tmp_path / "typed.json")))
    squeue.chmod(squeue.stat().st_mode | stat.S_IEXEC)
    cli = SlurmCli(runner=runner, tres_prefix="gres/")
    failed = cli.set_gpu_types([(j, "v100") for j in jobs])
    assert list(failed) == [jobs[1].job_id] and isinstance(failed[jobs[1].job_id], SlurmCommandError)
    assert "put back" in str(failed[jobs[1].job_id])
    ids = ",".join(j.job_id for j in jobs)
    got = calls(log)
    assert got[0] == ["update", f"JobId={ids}", "TresPerNode=gres/gpu:v100:1"]
    assert got[1][:4] == ["squeue", "-h", "-j", ids]
    assert got[2:] == [["update", f"JobId={jobs[1].job_id}", "TresPerNode=gres/gpu:1"]]
    # one job alone (set_gpu_type) is read back and put back the same way
    with pytest.raises(SlurmCommandError, match="put back"):
        cli.set_gpu_type(jobs[1], "v100")
    assert calls(log)[-3:] == [["update", f"JobId={jobs[1].job_id}", "TresPerNode=gres/gpu:v100:1"],
                               ["squeue", "-h", "-j", jobs[1].job_id, "-O", "tres-alloc:0"],
                               ["update", f"JobId={jobs[1].job_id}", "TresPerNode=gres/gpu:1"]]
