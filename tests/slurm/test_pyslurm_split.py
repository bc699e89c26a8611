"""The pyslurm backend's split job read without pyslurm: ``Jobs.load`` here, the legacy read's
fields from the side process, replayed from a real recording (``recorded_pyslurm.json``).

A stand-in module serves the recorded legacy records as ``Jobs.load`` objects (each field under
the newer read's attribute name) and a stand-in side process serves their side fields: the jobs
built must be exactly the command line's, a job the side read missed is read alone (or dropped
when gone), a job whose fields did not change keeps its conversion, and one that changed (in
either read, or its site factor) is built again. The real reads are compared field by field on
both testbeds by ``test_backends_agree.py``.
"""

from __future__ import annotations

import io
import json
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

from slurm_fair.slurm import pyslurm_port, pyslurm_side
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.pyslurm_port import PyslurmPort

from pyslurm_recording import as_plain

RECORDED = json.loads((Path(__file__).parent / "recorded_pyslurm.json").read_text())
STATES = ("PENDING", "RUNNING")


class _RPCError(Exception):
    pass


class _Module:
    """pyslurm as the port uses it for the split read: ``Jobs.load`` and ``job().find_id``."""

    RPCError = _RPCError
    __version__ = "22.5.3"

    def __init__(self, records: dict[int, dict]) -> None:
        self.records = records
        self.found: list[int] = []
        # libslurm's init and fini: a real pyslurm port of another configuration may have run in
        # this process before (the real arms of the suite), and the port re-initialises for its own
        self.api = SimpleNamespace(slurm_init=lambda conf: None, slurm_fini=lambda: None)
        module = self

        class Jobs:
            @staticmethod
            def load():
                return {i: SimpleNamespace(**{a: r.get(k) for a, k in pyslurm_port._FAST})
                        for i, r in module.records.items()}

        class job:  # noqa: N801 - pyslurm's legacy class name
            def find_id(self, job_id):
                module.found.append(job_id)
                if job_id not in module.records:
                    raise _RPCError("Invalid job id specified")
                return [module.records[job_id]]

        self.Jobs, self.job = Jobs, job


class _Side:
    """The side process's answer: the side fields of ``records`` (those not in ``hide``)."""

    def __init__(self, records: dict[int, dict], hide: set[int] = frozenset()) -> None:
        self.records, self.hide = records, set(hide)

    def read(self) -> Future:
        f: Future = Future()
        f.set_result((True, {i: tuple(r.get(k) for k in pyslurm_side.FIELDS)
                             for i, r in self.records.items() if i not in self.hide}))
        return f


def _port(records):
    users = RECORDED["pyslurm"]["users"]
    port = PyslurmPort(SlurmCli(env={}), module=_Module(records), conf="/nonexistent/slurm.conf")
    port._user = lambda uid: users[str(uid)]  # type: ignore[method-assign]
    return port


def _site(factors):
    f: Future = Future()
    f.set_result(factors)
    return f


def _records():
    return {int(r["job_id"]): dict(r) for r in RECORDED["pyslurm"]["jobs"]}


def test_the_split_read_builds_exactly_the_command_lines_jobs():
    records = _records()
    port = _port(records)
    site = RECORDED["pyslurm"]["site_factors"]
    jobs = port._read_side(_Side(records), STATES, _site(site))
    cli = {j["job_id"]: j for j in RECORDED["cli"]["jobs"]}
    assert {j["job_id"]: j for j in as_plain(jobs)} == cli
    assert port.ps.found == []


def test_a_job_the_side_read_missed_is_read_alone_and_a_gone_one_dropped():
    records = _records()
    port = _port(records)
    running = next(i for i, r in records.items() if r["job_state"] == "RUNNING")
    late = max(records)
    jobs = port._read_side(_Side(records, hide={running, late}), STATES, _site({}))
    assert sorted(port.ps.found) == sorted([running, late])
    assert {j.job_id.split("_")[0] for j in jobs} >= {str(running), str(late)}
    side = _Side(records, hide={late})  # in Jobs.load, then gone before its own read
    module = port.ps
    real_find = module.job.find_id

    def find_gone(self, job_id):
        module.found.append(job_id)
        raise _RPCError("Invalid job id specified")

    module.job.find_id = find_gone
    try:
        jobs = port._read_side(side, STATES, _site({}))
    finally:
        module.job.find_id = real_find
    assert str(late) not in {j.job_id.split("_")[0] for j in jobs}
    assert str(running) in {j.job_id.split("_")[0] for j in jobs}


def test_an_unchanged_job_keeps_its_conversion_and_a_changed_one_is_built_again():
    records = _records()
    port = _port(records)
    site = dict(RECORDED["pyslurm"]["site_factors"])
    first = {j.job_id: j for j in port._read_side(_Side(records), STATES, _site(site))}
    pending = [i for i, r in records.items() if r["job_state"] == "PENDING" and r.get("tres_per_job")
               and not r.get("array_task_str")]
    eligible = next(k for k in site if "_" not in k and int(k) in records)
    changed_gpus, changed_nice = pending[0], next(i for i in records if str(i) != eligible and i != pending[0]
                                                  and records[i]["job_state"] == "PENDING"
                                                  and not records[i].get("array_task_str"))
    records[changed_gpus] = {**records[changed_gpus], "tres_per_job": "gres:gpu:7"}  # the side read's field
    records[changed_nice] = {**records[changed_nice], "nice": 77}  # a Jobs.load field
    site[eligible] = site[eligible] - 5
    second = {j.job_id: j for j in port._read_side(_Side(records), STATES, _site(site))}
    assert second.keys() == first.keys()
    rebuilt = {k for k in second if second[k] is not first[k]}
    assert rebuilt == {str(changed_gpus), str(changed_nice), eligible}
    assert second[str(changed_gpus)].gpu_request.count == 7
    assert second[str(changed_nice)].nice == 77
    assert second[eligible].site_factor == site[eligible]


def test_a_failed_side_read_is_a_slurm_error_and_a_dead_side_falls_back(monkeypatch):
    records = _records()
    port = _port(records)

    class Failing:
        def read(self):
            f: Future = Future()
            f.set_result((False, "Unable to contact slurm controller (connect failure)"))
            return f

    from slurm_fair.errors import SlurmUnavailable

    with pytest.raises(SlurmUnavailable):
        port._read_side(Failing(), STATES, None)

    class Dead:
        def read(self):
            f: Future = Future()
            f.set_exception(EOFError("pyslurm's side process ended"))
            return f

    with pytest.raises(pyslurm_port._SideFailed):
        port._read_side(Dead(), STATES, None)


def test_side_messages_round_trip_and_a_cut_stream_is_an_end():
    buf = io.BytesIO()
    pyslurm_side.send(buf, (True, {1: ("gres:gpu:2", None)}))
    pyslurm_side.send(buf, (False, "no"))
    data = buf.getvalue()
    inp = io.BytesIO(data)
    assert pyslurm_side.receive(inp) == (True, {1: ("gres:gpu:2", None)})
    assert pyslurm_side.receive(inp) == (False, "no")
    with pytest.raises(EOFError):
        pyslurm_side.receive(inp)
    cut = io.BytesIO(data[:-3])
    assert pyslurm_side.receive(cut) == (True, {1: ("gres:gpu:2", None)})
    with pytest.raises(EOFError):
        pyslurm_side.receive(cut)


def test_a_side_process_that_cannot_start_is_dropped_with_a_warning(caplog, tmp_path):
    """A real side process for a slurm.conf libslurm refuses: it ends the process (or pyslurm is
    missing); the port is told it is not there, and reads every job itself."""
    import time

    conf = str(tmp_path / "slurm.conf")
    Path(conf).write_text("NotAKey=1\n")
    assert pyslurm_port._side_process(conf, start=True) is None  # starting
    deadline = time.monotonic() + 60
    while conf in pyslurm_port._sides:
        assert time.monotonic() < deadline, "the side process neither started nor ended"
        assert pyslurm_port._side_process(conf, start=False) is None
        time.sleep(0.1)
    assert "side process did not start" in caplog.text


def test_a_job_that_changed_state_between_the_reads_is_built_from_a_read_of_its_own():
    """The side read saw a job pending, ``Jobs.load`` running (it started between them): its
    running GPU type would be lost by mixing them, so it is read again alone, one record."""
    records = _records()
    port = _port(records)
    running = next(i for i, r in records.items() if r["job_state"] == "RUNNING" and r.get("tres_alloc_str"))
    seen_pending = {**records, running: {**records[running], "job_state": "PENDING", "tres_alloc_str": None}}
    jobs = port._read_side(_Side(seen_pending), STATES, _site(RECORDED["pyslurm"]["site_factors"]))
    assert port.ps.found == [running]
    cli = {j["job_id"]: j for j in RECORDED["cli"]["jobs"]}
    assert {j["job_id"]: j for j in as_plain(jobs)} == cli
    assert cli[str(running)]["gpu_type_running"]


def test_a_socket_timeout_is_retried_as_a_command_is_then_slurm_unavailable():
    """pyslurm's ``Socket timed out`` (slurmctld busy) is retried ``retries`` times, as the
    commands' runner retries it; a refusal is not retried."""
    from slurm_fair.errors import SlurmCommandError, SlurmUnavailable

    port = _port(_records())
    port.cli.runner.backoff_s = 0.0
    calls = []

    def flaky(fails: int, message: str):
        def call():
            calls.append(1)
            if len(calls) <= fails:
                raise _RPCError(message)
            return "read"
        return call

    assert port.cli.runner.retries == 2
    assert port._call("job", flaky(2, "Socket timed out on send/recv operation")) == "read"
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(SlurmUnavailable):
        port._call("job", flaky(3, "Socket timed out on send/recv operation"))
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(SlurmCommandError):
        port._call("update", flaky(1, "Access/permission denied"), "12")
    assert len(calls) == 1
