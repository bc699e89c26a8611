"""Accounts and QOS kept across a port's snapshots (``[slurm] accounts_ttl_s``).

Both come from slurmdbd through two ``sacctmgr`` calls, ~0.3 s each whatever the queue's length
and beside every other read of a snapshot: with the job read made in process (the pyslurm
backend), they are the snapshot's bound (docs/performance.md). They change seldom (a site adds
an account, changes a fairshare or a QOS's limits), so a port that reads again and again (the
controller's ``run --loop``) keeps them, and reads them again:

* at its first snapshot (every one-off command: ``snapshot``, ``run --once``, ``revert``, and the
  loop's first cycle read them fresh);
* when they are ``ttl_s`` old (counted from the start of the read that gave them): the bound on a
  change no job reveals (a fairshare, a QOS's limits or priority, an account's default QOS, a
  new account or QOS no job names yet);
* when a job of the snapshot names an account or a QOS they do not hold (a new account or QOS
  shows at the first snapshot where a job carries it; a name the fresh read does not hold
  either, as a job left on a deleted account, asks again only after ``ttl_s``);
* after this port's own sacctmgr writes (QOS made, deleted, attached, detached);
* after a failed read (nothing kept).

``ttl_s`` 0 reads them at every snapshot. Only :meth:`snapshot` reads through this; the port's
``accounts()`` and ``qos()`` read slurmdbd every time.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor, Future
from typing import Callable, Iterable, Sequence

from .model import Account, Qos, SlurmJob


class DbdCache:
    """The accounts and QOS of one port's last read, and when to read them again."""

    def __init__(self, ttl_s: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._kept: tuple[list[Account], list[Qos]] | None = None
        self._read_at = 0.0
        #: names jobs carried that the last fresh read did not hold (they ask again after ttl_s)
        self._unknown: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        #: fresh reads made (what a test or a benchmark counts)
        self.reads = 0

    def current(self) -> tuple[list[Account], list[Qos]] | None:
        """What is kept, while younger than ``ttl_s``; None: read again."""
        if self._kept is None or self.ttl_s <= 0 or self.clock() - self._read_at >= self.ttl_s:
            return None
        return self._kept

    def covers(self, jobs: Iterable[SlurmJob]) -> bool:
        """Whether every account and QOS the jobs name is kept (or was already missing from
        the last fresh read)."""
        if self._kept is None:
            return False
        accounts = {a.name for a in self._kept[0]} | self._unknown[0]
        qos = {q.name for q in self._kept[1]} | self._unknown[1]
        return all((not j.account or j.account in accounts) and (not j.qos or j.qos in qos) for j in jobs)

    def store(self, accounts: list[Account], qos: list[Qos], read_at: float, jobs: Sequence[SlurmJob]) -> None:
        """Keep a fresh read begun at ``read_at`` (:attr:`clock`'s time), and the names of
        ``jobs`` it does not hold."""
        self._kept, self._read_at = (accounts, qos), read_at
        names, qnames = {a.name for a in accounts}, {q.name for q in qos}
        self._unknown = (frozenset(j.account for j in jobs if j.account and j.account not in names),
                         frozenset(j.qos for j in jobs if j.qos and j.qos not in qnames))
        self.reads += 1

    def invalidate(self) -> None:
        """Read again at the next snapshot (this port changed them)."""
        self._kept = None

    def begin(self, pool: Executor, read_accounts: Callable[[], list[Account]],
              read_qos: Callable[[], list[Qos]]) -> "DbdRead":
        """One snapshot's read: started on ``pool`` now when nothing young enough is kept."""
        return DbdRead(self, pool, read_accounts, read_qos)


class DbdRead:
    """The accounts and QOS of one snapshot: what is kept, or a read beside the others."""

    def __init__(self, cache: DbdCache, pool: Executor, read_accounts: Callable[[], list[Account]],
                 read_qos: Callable[[], list[Qos]]) -> None:
        self.cache, self.pool = cache, pool
        self.read_accounts, self.read_qos = read_accounts, read_qos
        self.kept = cache.current()
        self.started: tuple[float, Future[list[Account]], Future[list[Qos]]] | None = None
        if self.kept is None:
            self._start()

    def _start(self) -> None:
        at = self.cache.clock()
        self.started = (at, self.pool.submit(self.read_accounts), self.pool.submit(self.read_qos))

    def result(self, jobs: Sequence[SlurmJob]) -> tuple[list[Account], list[Qos]]:
        """The snapshot's accounts and QOS: kept ones when they name every account and QOS of
        ``jobs``, else a fresh read (kept in turn)."""
        if self.kept is not None and self.cache.covers(jobs):
            return self.kept
        if self.started is None:
            self._start()
        assert self.started is not None
        at, accounts, qos = self.started
        try:
            got = accounts.result(), qos.result()
        except BaseException:
            self.cache.invalidate()
            raise
        self.cache.store(*got, read_at=at, jobs=jobs)
        return got
