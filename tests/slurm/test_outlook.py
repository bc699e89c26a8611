"""One job's outlook in Slurm: the sprio and squeue parsers, and the adapter's argv."""

from __future__ import annotations

from datetime import datetime

import pytest

from slurm_fair.errors import JobGone, SlurmOutputError
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.parse.outlook import OUTLOOK_FIELDS, SPRIO_FIELDS, parse_outlook, parse_sprio, sprio_format

FS = "|#a1|"


def sprio_line(*fields: str) -> str:
    """A line as sprio prints it for our format: default widths pad with spaces."""
    return FS.join(f"  {f} " for f in fields)


def test_sprio_lines_become_factors_per_partition():
    text = (sprio_line("1042", "gpu", "12345", "100", "5000", "45", "7000", "0", "0", "-200", "gres/gpu:v100=3")
            + "\n" + sprio_line("1042", "v100", "13345", "100", "5000", "45", "8000", "0", "0", "-200", "") + "\n")
    a, b = parse_sprio(text, FS)
    assert (a.job_id, a.partition, a.priority, a.nice, a.tres) == ("1042", "gpu", 12345.0, -200, "gres/gpu:v100=3")
    assert dict(a.factors) == {"age": 100.0, "fairshare": 5000.0, "jobsize": 45.0, "partition": 7000.0,
                               "qos": 0.0, "site": 0.0}
    assert (b.partition, b.factors["partition"], b.tres) == ("v100", 8000.0, "")


def test_sprio_without_an_eligible_pending_job_is_empty_not_an_error():
    assert parse_sprio("Unable to find jobs matching user/id(s) specified\n", FS) == []
    assert parse_sprio("", FS) == []


@pytest.mark.parametrize("bad", ["1042|#a1|gpu\n", sprio_line(*(["1"] * (len(SPRIO_FIELDS) - 1)), "x").replace(
    "  1 ", "  one ", 3)])
def test_sprio_in_another_form_is_an_output_error(bad):
    with pytest.raises(SlurmOutputError):
        parse_sprio(bad, FS)


def test_squeue_outlook_start_is_none_when_slurm_has_no_estimate():
    text = FS.join(["1042", "PENDING", "Priority", "4294", "N/A"]) + "\n"
    text += FS.join(["1043", "PENDING", "Resources", "4000", "2026-01-02T03:04:05"]) + "\n"
    a, b = parse_outlook(text, FS)
    assert (a.job_id, a.state, a.reason, a.priority, a.start) == ("1042", "PENDING", "Priority", 4294, None)
    assert b.start == datetime(2026, 1, 2, 3, 4, 5)


class StubRunner:
    """Answers each command with canned text and keeps the argv lists."""

    def __init__(self, answers: dict[str, str | Exception]) -> None:
        self.answers, self.calls = answers, []

    def run(self, argv, job_id=None):
        self.calls.append((list(argv), job_id))
        a = self.answers[argv[0]]
        if isinstance(a, Exception):
            raise a
        return a


def test_adapter_asks_squeue_and_sprio_for_one_job_with_argv_lists():
    runner = StubRunner({
        "squeue": FS.join(["77", "PENDING", "Resources", "10", "2026-01-02T03:04:05"]) + "\n",
        "sprio": sprio_line("77", "gpu", "10", "1", "2", "3", "4", "0", "0", "0", "") + "\n",
    })
    port = SlurmCli(runner=runner, separator=lambda: FS)
    o = port.job_outlook("77")
    assert (o.reason, o.start) == ("Resources", datetime(2026, 1, 2, 3, 4, 5))
    (f,) = port.job_priority_factors("77")
    assert f.priority == 10 and f.factors["partition"] == 4
    (squeue, squeue_job), (sprio, _) = runner.calls
    assert squeue[:4] == ["squeue", "-h", "-j", "77"] and squeue_job == "77"
    assert squeue[5] == ",".join(f"{c}:0{FS}" for c in OUTLOOK_FIELDS[:-1]) + f",{OUTLOOK_FIELDS[-1]}:0"
    assert sprio == ["sprio", "-h", "-j77", "-o", sprio_format(FS)]
    with pytest.raises(ValueError):
        port.job_outlook("77; rm -rf /")


def test_adapter_outlook_of_a_job_slurm_forgot_is_gone():
    port = SlurmCli(runner=StubRunner({"squeue": ""}), separator=lambda: FS)
    with pytest.raises(JobGone):
        port.job_outlook("77")
    port = SlurmCli(runner=StubRunner({"squeue": JobGone("invalid job id")}), separator=lambda: FS)
    with pytest.raises(JobGone):
        port.job_outlook("77")
