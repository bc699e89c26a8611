"""The accounts and QOS kept across a port's snapshots (:mod:`slurm_fair.slurm.dbd_cache`).

With reads of the test's own and a clock of its own: what is kept and when slurmdbd is asked
again (the first snapshot, ``ttl_s`` later, a job naming an account or QOS not kept, a name
slurmdbd does not hold, the port's own QOS writes, a failed read), counted from the calls made;
a property over any order of those events; the command-line port's snapshot through it. The real
slurmdbd, both backends: ``test_dbd_cache_real.py``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_fair.errors import SlurmCommandError
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.dbd_cache import DbdCache
from slurm_fair.slurm.model import Account, Qos, SlurmJob


def _job(job_id: str, account: str, qos: str = "normal") -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j", user="u", account=account, partition="p", state="PENDING",
                    qos=qos)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Reads:
    """accounts() and qos() as a port gives them, each call counted; ``fail`` raises."""

    def __init__(self, accounts=("a", "b"), qos=("normal",)) -> None:
        self.accounts_names, self.qos_names = list(accounts), list(qos)
        self.calls = 0
        self.fail = False

    def accounts(self):
        self.calls += 1
        if self.fail:
            raise SlurmCommandError(["sacctmgr"], 1, "slurmdbd down")
        self.last = frozenset(self.accounts_names)
        return [Account(n) for n in self.accounts_names]

    def qos(self):
        return [Qos(n) for n in self.qos_names]


def _snapshot(cache: DbdCache, reads: _Reads, jobs):
    with ThreadPoolExecutor(2) as pool:
        return cache.begin(pool, reads.accounts, reads.qos).result(jobs)


def test_kept_until_ttl_then_read_again():
    clock, reads = _Clock(), _Reads()
    cache = DbdCache(300, clock)
    jobs = [_job("1", "a")]
    _snapshot(cache, reads, jobs)
    assert reads.calls == 1  # the first snapshot reads
    clock.now += 299
    reads.accounts_names.append("c")  # a site's change no job reveals: not seen before ttl
    accounts, _ = _snapshot(cache, reads, jobs)
    assert reads.calls == 1 and {a.name for a in accounts} == {"a", "b"}
    clock.now += 1  # ttl_s after the read began: read again
    accounts, _ = _snapshot(cache, reads, jobs)
    assert reads.calls == 2 and {a.name for a in accounts} == {"a", "b", "c"}


def test_a_job_naming_a_new_account_or_qos_reads_at_once():
    clock, reads = _Clock(), _Reads()
    cache = DbdCache(300, clock)
    _snapshot(cache, reads, [_job("1", "a")])
    reads.accounts_names.append("new")
    accounts, _ = _snapshot(cache, reads, [_job("1", "a"), _job("2", "new")])
    assert reads.calls == 2 and "new" in {a.name for a in accounts}
    reads.qos_names.append("fast")
    _, qos = _snapshot(cache, reads, [_job("3", "a", "fast")])
    assert reads.calls == 3 and "fast" in {q.name for q in qos}
    _snapshot(cache, reads, [_job("3", "a", "fast"), _job("4", "new")])
    assert reads.calls == 3  # all known: kept


def test_a_name_slurmdbd_does_not_hold_asks_again_only_after_ttl():
    clock, reads = _Clock(), _Reads()
    cache = DbdCache(300, clock)
    orphan = [_job("1", "deleted")]  # a job left on an account deleted since
    _snapshot(cache, reads, orphan)
    _snapshot(cache, reads, orphan)
    assert reads.calls == 1
    clock.now += 300
    _snapshot(cache, reads, orphan)
    assert reads.calls == 2


def test_ttl_0_reads_every_snapshot_and_a_failure_keeps_nothing():
    reads = _Reads()
    cache = DbdCache(0, _Clock())
    for _ in range(3):
        _snapshot(cache, reads, [_job("1", "a")])
    assert reads.calls == 3
    cache = DbdCache(300, _Clock())
    reads.fail = True
    with pytest.raises(SlurmCommandError):
        _snapshot(cache, reads, [])
    reads.fail = False
    _snapshot(cache, reads, [])
    assert reads.calls == 5  # the failed read kept nothing: read again


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["tick", "snap", "write", "site"]), st.sampled_from("abcd"),
                          st.integers(0, 400)), max_size=25))
def test_never_older_than_ttl_and_never_missing_a_name_a_job_carries_that_slurmdbd_holds(steps):
    """Whatever the order of time passing, site changes, the port's writes and snapshots: a
    snapshot's accounts are slurmdbd's answer of less than ttl_s ago, and hold every account a
    job names that slurmdbd holds (but one a job named while slurmdbd did not hold it)."""
    clock, reads = _Clock(), _Reads(accounts=("a",))
    cache = DbdCache(300, clock)
    for kind, name, n in steps:
        if kind == "tick":
            clock.now += n
        elif kind == "site" and name not in reads.accounts_names:
            reads.accounts_names.append(name)
        elif kind == "write":
            cache.invalidate()
        elif kind == "snap":
            calls = reads.calls
            accounts, _ = _snapshot(cache, reads, [_job("1", name)])
            got = frozenset(a.name for a in accounts)
            assert got == reads.last  # slurmdbd's answer to the last read
            assert clock.now - cache._read_at < 300  # ... of less than ttl_s ago
            if name in reads.accounts_names:  # slurmdbd holds it now: the snapshot does too, unless
                # a job named it when slurmdbd did not (it asks again after ttl_s: documented)
                assert name in got or (reads.calls == calls and name in cache._unknown[0])


def test_the_command_line_port_keeps_them_and_its_qos_writes_read_again(monkeypatch):
    cli = SlurmCli(env={}, accounts_ttl_s=300)
    calls: list[str] = []
    accounts = [Account("a"), Account("b")]
    monkeypatch.setattr(cli, "accounts", lambda: calls.append("assoc") or list(accounts))
    monkeypatch.setattr(cli, "qos", lambda: calls.append("qos") or [Qos("normal")])
    monkeypatch.setattr(cli, "partitions", lambda: [])
    monkeypatch.setattr(cli, "nodes", lambda: [])
    monkeypatch.setattr(cli, "jobs", lambda: [_job("1", "a")])
    written: list[tuple] = []
    monkeypatch.setattr(cli.sacctmgr, "ensure_qos", lambda *a: written.append(a))
    cli.snapshot()
    cli.snapshot()
    assert calls == ["assoc", "qos"]
    cli.ensure_qos("fair_a", {"gres/gpu": 2})
    cli.snapshot()
    assert calls == ["assoc", "qos", "assoc", "qos"] and written
    assert SlurmCli(env={}).dbd.ttl_s == 0  # built directly: every snapshot reads, as before
