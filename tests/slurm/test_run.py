"""The command runner against stand-in executables: timeouts, retries, error mapping."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from slurm_fair.errors import JobGone, SlurmCommandError, SlurmUnavailable
from slurm_fair.slurm.run import Runner


def make_cmd(bin_dir: Path, name: str, body: str) -> Path:
    """A stand-in for a Slurm command: a small shell script (argv lists still; no shell=True)."""
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_stdout_and_env_passed(tmp_path):
    make_cmd(tmp_path, "squeue", 'echo "conf=$SLURM_CONF args=$*"')
    r = Runner(env={"SLURM_CONF": "/x/slurm.conf"}, bin_dir=tmp_path, timeout_s=5, retries=0)
    assert r.run(["squeue", "-h", "a b"]) == "conf=/x/slurm.conf args=-h a b\n"
    assert r.stats.calls == 1 and r.stats.seconds > 0


def test_argv_is_never_a_shell(tmp_path):
    make_cmd(tmp_path, "scontrol", 'printf "%s\\n" "$@"')
    marker = tmp_path / "pwned"
    r = Runner(bin_dir=tmp_path, timeout_s=5, retries=0)
    out = r.run(["scontrol", f"$(touch {marker})", "`touch " + str(marker) + "`; echo"])
    assert not marker.exists()
    assert f"$(touch {marker})" in out


def test_missing_command_is_unavailable(tmp_path):
    with pytest.raises(SlurmUnavailable, match="not found"):
        Runner(bin_dir=tmp_path, retries=0).run(["sinfo"])


def test_timeout_is_unavailable_after_retries(tmp_path):
    make_cmd(tmp_path, "sinfo", f'echo x >> {tmp_path}/count; sleep 5')
    r = Runner(bin_dir=tmp_path, timeout_s=0.3, retries=1, backoff_s=0.01)
    with pytest.raises(SlurmUnavailable, match="did not answer"):
        r.run(["sinfo"])
    assert (tmp_path / "count").read_text().count("x") == 2


def test_transient_failure_is_retried_then_succeeds(tmp_path):
    counter = tmp_path / "n"
    make_cmd(
        tmp_path,
        "squeue",
        f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n'
        f'if [ $n -lt 2 ]; then echo "squeue: error: Socket timed out on send/recv operation" >&2; exit 1; fi\n'
        "echo ok",
    )
    r = Runner(bin_dir=tmp_path, retries=2, backoff_s=0.01)
    assert r.run(["squeue"]) == "ok\n"
    assert counter.read_text().strip() == "3"


def test_transient_failure_exhausts_retries(tmp_path):
    make_cmd(tmp_path, "sinfo", 'echo "sinfo: error: Unable to contact slurm controller (connect failure)" >&2; exit 1')
    with pytest.raises(SlurmUnavailable, match="cannot reach Slurm"):
        Runner(bin_dir=tmp_path, retries=1, backoff_s=0.01).run(["sinfo"])


@pytest.mark.parametrize(
    "message",
    [
        "slurm_update error: Invalid job id specified",
        "slurm_update error: Job has already finished",
        "scontrol: error: Job is no longer pending execution for job 12",
    ],
)
def test_job_gone_messages(tmp_path, message):
    make_cmd(tmp_path, "scontrol", f'echo "{message}" >&2; exit 1')
    r = Runner(bin_dir=tmp_path, retries=0)
    with pytest.raises(JobGone):
        r.run(["scontrol", "update", "JobId=12", "Nice=1"], job_id="12")
    # without a job id the same failure is a plain command error
    with pytest.raises(SlurmCommandError):
        r.run(["scontrol", "show", "config"])


def test_other_failure_is_command_error_with_stderr(tmp_path):
    make_cmd(tmp_path, "scontrol", 'echo "Access/permission denied" >&2; exit 1')
    with pytest.raises(SlurmCommandError) as info:
        Runner(bin_dir=tmp_path, retries=3).run(["scontrol", "update", "JobId=1"], job_id="1")
    assert info.value.returncode == 1 and "permission denied" in info.value.stderr


def test_sacctmgr_error_on_exit_zero(tmp_path):
    make_cmd(tmp_path, "sacctmgr", 'echo " Error: Unknown option: bogus" >&2; exit 0')
    with pytest.raises(SlurmCommandError):
        Runner(bin_dir=tmp_path, retries=0).run(["sacctmgr", "-i", "bogus"])


def test_env_none_removes_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", "/from/process")
    make_cmd(tmp_path, "sinfo", 'echo "[${SLURM_CONF:-unset}]"')
    assert Runner(env={"SLURM_CONF": None}, bin_dir=tmp_path).run(["sinfo"]) == "[unset]\n"
    assert os.environ["SLURM_CONF"] == "/from/process"


def test_time_format_forced_whatever_the_shell_says(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    make_cmd(tmp_path, "squeue", 'echo "$SLURM_TIME_FORMAT $LC_ALL"')
    assert Runner(bin_dir=tmp_path).run(["squeue"]) == "standard C\n"


@pytest.mark.parametrize("recording", ["testbed-22.05", "testbed-24.11"])
def test_a_job_read_asks_sprio_once_whatever_the_number_of_pending_jobs(recording, tmp_path, monkeypatch):
    """The site factors of every pending job come from one sprio call per read (it lists them
    all): a call per job made a 10,000-job snapshot take half an hour."""
    from slurm_fair.slurm.cli import SlurmCli
    from slurm_fair.slurm.fake import recordings_dir

    repo = Path(__file__).resolve().parents[2]
    for cmd in ("sinfo", "squeue", "sprio", "sacctmgr", "scontrol"):
        (tmp_path / cmd).symlink_to(repo / "scripts" / "recorded-slurm")
    monkeypatch.setenv("SLURM_FAIR_RECORDING", str(recordings_dir() / recording))
    cli = SlurmCli(bin_dir=str(tmp_path), timeout_s=10, retries=0)
    calls: list[str] = []
    run = cli.runner.run
    monkeypatch.setattr(cli.runner, "run", lambda argv, *a, **k: calls.append(argv[0]) or run(argv, *a, **k))
    jobs = cli.jobs()
    assert sum(j.pending for j in jobs) >= 2
    assert calls.count("sprio") == 1
    calls.clear()
    cli.snapshot()
    assert calls.count("sprio") == 1
