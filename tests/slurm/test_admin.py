"""SlurmAdmin: the testbed's and the replay's Slurm commands, through the port's runner and parsers."""

from __future__ import annotations

from typing import Sequence

import pytest

from slurm_fair.errors import JobGone, SlurmCommandError, SlurmUnavailable
from slurm_fair.slurm.admin import SlurmAdmin
from slurm_fair.slurm.run import Runner


class Scripted(Runner):
    """Answers each command by a function of its argv; records the calls."""

    def __init__(self, answer) -> None:
        super().__init__()
        self.answer, self.calls = answer, []

    def run(self, argv: Sequence[str], job_id: str | None = None) -> str:
        self.calls.append(list(argv))
        return self.answer(list(argv), job_id)


def _fs(argv: list[str], flag: str, first: str) -> str:
    fmt = argv[argv.index(flag) + 1]
    return fmt[len(first):fmt.index("%", len(first))]


def test_queued_reads_records_on_a_random_separator_whatever_the_reason_holds():
    def answer(argv, _job):
        fs = _fs(argv, "-o", "%i")
        return f"7{fs}PENDING{fs}Reason with | and spaces\n8_1{fs}RUNNING{fs}None\n"

    runner = Scripted(answer)
    got = SlurmAdmin(runner=runner).queued(("PENDING", "RUNNING"))
    assert got == {"7": ("PENDING", "Reason with | and spaces"), "8_1": ("RUNNING", "None")}
    assert runner.calls[0][-2:] == ["-t", "PENDING,RUNNING"]
    # another call, another separator (a user cannot know it)
    SlurmAdmin(runner=runner).queued()
    assert _fs(runner.calls[0], "-o", "%i") != _fs(runner.calls[1], "-o", "%i")


def test_queued_is_none_when_squeue_fails():
    def answer(argv, _job):
        raise SlurmUnavailable("slurmctld down")

    assert SlurmAdmin(runner=Scripted(answer)).queued() is None


def test_job_state_from_squeue_then_sacct_once_the_job_left_the_queue():
    def answer(argv, job_id):
        if argv[0] == "squeue":
            if job_id == "5":
                fs = argv[argv.index("-O") + 1].split(":0")[1].split(",")[0]
                return fs.join(["5", "RUNNING", "None", "100", "N/A"]) + "\n"
            raise JobGone("gone")
        return "COMPLETED\n" if argv[0] == "sacct" else ""

    admin = SlurmAdmin(runner=Scripted(answer))
    assert admin.job_state("5") == "RUNNING"
    assert admin.job_state("6") == "COMPLETED"


def test_submit_cancel_and_health():
    def answer(argv, _job):
        if argv[0] == "sbatch":
            assert argv[1] == "--parsable"
            return "42;fairtb\n"
        if argv[0] == "scancel":
            raise SlurmCommandError(argv, 1, "scancel: error: Kill job error on job id 9: Invalid job id")
        if argv[:2] == ["scontrol", "ping"]:
            return "Slurmctld(primary) at localhost is UP\n"
        fs = _fs(argv, "-o", "%N")
        return f"v100-1{fs}IDLE\nk80-1{fs}down*\n"

    admin = SlurmAdmin(runner=Scripted(answer))
    assert admin.submit(["-A", "physics", "--wrap", "true"]) == "42"
    admin.cancel(["9"])  # a job already gone is not an error
    assert admin.responding() is True
    assert admin.node_states() == {"v100-1": "idle", "k80-1": "down*"}


@pytest.mark.parametrize("method", ["responding", "node_states"])
def test_health_is_false_or_empty_when_slurm_does_not_answer(method):
    def answer(argv, _job):
        raise SlurmUnavailable("no answer")

    assert not getattr(SlurmAdmin(runner=Scripted(answer)), method)()
