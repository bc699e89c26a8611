"""The second SlurmPort: Slurm's C library through pyslurm (``[slurm] backend = "pyslurm"``).

pyslurm binds one Slurm release's libslurm (its major.minor is Slurm's: pyslurm 22.5.x for Slurm
22.05, 24.11.x for 24.11), so it is built for the site's Slurm (``scripts/build-pyslurm.sh``,
docs/slurm-adapter.md) and chosen by :func:`choose`: ``auto`` takes it when it imports and its
major.minor is the running Slurm's, else the command line, and says which it took and why.

What goes through pyslurm, and what stays with Slurm's commands (the :class:`~.cli.SlurmCli` this
port wraps) because pyslurm 22.5 cannot do it the way the controller needs:

* **reads from slurmctld** (jobs, nodes, partitions, one job's outlook): pyslurm, one RPC each,
  turned into the model by :mod:`.pyslurm_records` through the same parsers as the command
  line, each job built once. Every job comes from one ``slurm_load_jobs`` whose records are read
  directly at the offsets of the site's ``slurm.h`` (:mod:`.libslurm_jobs`: pyslurm's own values,
  the GPU request strings included) where that header is installed; without it, as follows.
  The legacy ``job().get()`` is, in pyslurm 22.5.3 and 24.11.0 alike,
  the only read of pyslurm carrying the GPU request strings, and nothing of the newer ``Jobs.load()``'s
  record changes when a user changes them: at a small queue the jobs come from the legacy read
  alone; at a big one (a port's second legacy read of :data:`SIDE_AFTER_S` or more: a controller's
  loop, not a one-off command) from ``Jobs.load()`` here
  and, beside it, the legacy read's few fields from a side process (:mod:`.pyslurm_side`), both
  fresh each snapshot, each job's conversion kept while both reads give the same fields. The jobs' *site factor* is
  sprio's (neither release exposes libslurm's ``slurm_load_job_prio``): that RPC called in
  this process at the offsets of the same header (:mod:`.libslurm_prio`), started before the job
  read; without the header, or when it fails, ``sprio`` itself, as is :meth:`job_priority_factors`;
* **slurmdbd** (accounts, QOS, accounting, ``speeds learn``'s history): the commands, beside the
  job read. pyslurm's database API (22.5.3 and 24.11.0) has no account's default QOS and no QOS
  limits in names (the legacy ``qos()`` gives TRES ids), and it keys accounting by job id, so a
  requeued job's earlier runs (``sacct -D``) would be lost;
* **writes to pending jobs**: priority, nice, site factor, hold, release, requeue, partition,
  QOS, node lists and features through pyslurm (``slurm_update_job``, one RPC per job; the same
  change on more than :data:`FEW_JOBS` jobs through scontrol's job list, faster); a field
  *cleared* (``ReqNodeList=""``), a job named by an array task or het component id, and a
  user's hold put back through the command (pyslurm 22.5 sends an empty value as "unchanged",
  updates by numeric id only, and its ``hold(mode="user")`` writes through a NULL pointer);
  GPU request rewrites (which on 22.05 must clear the field first, then hold, set, release and
  read back) through the command line's own code;
* **QOS writes** (sacctmgr): the commands.

A pyslurm call is an RPC bounded by Slurm's own ``MessageTimeout``; its errors map to the same
error tree as the commands' (:func:`_slurm_error`), and one Slurm calls transient (``Socket timed
out``) is retried as a command is (``[slurm] retries``, the same back-off).
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import logging
import os
import pwd
import re
import threading
import time
import pickle
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from datetime import datetime
from functools import partial
from operator import attrgetter
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from ..errors import JobGone, SlurmCommandError, SlurmError, SlurmUnavailable
from .cli import SlurmCli
from .model import (
    Account, AccountingRecord, JobOutlook, Node, Partition, PriorityFactors, Qos, SlurmJob, Snapshot,
)
from .parse.history import History
from .parse.squeue import state_name
from . import pyslurm_side
from .libslurm_jobs import JobFieldReader, LibslurmError, open_reader
from .libslurm_prio import SiteFactorReader, open_prio_reader
from .pyslurm_records import job_records, jobs_from, node_record, partition_record
from .run import JOB_GONE, TRANSIENT
from .write_rules import UPDATABLE_FIELDS, batch_items, check_job_id, check_value

log = logging.getLogger(__name__)

#: the backends ``[slurm] backend`` names
BACKENDS = ("cli", "pyslurm", "auto")
#: a job id pyslurm's update takes (numeric); array tasks and het components go through scontrol
_PLAIN_ID = re.compile(r"^\d+$")
#: the partition, QOS and node attributes :func:`.pyslurm_records.partition_record` reads
_PARTITION_ATTRS = ("name", "nodes", "state", "priority_tier", "allowed_accounts", "denied_accounts",
                    "allowed_qos", "denied_qos", "allowed_groups", "max_time", "max_nodes", "is_default")
#: pyslurm's JobSubmitDescription attribute of each field update_job(s) may set
_DESC_ATTR = {"Partition": "partitions", "QOS": "qos", "ReqNodeList": "required_nodes",
              "ExcNodeList": "excluded_nodes", "Features": "constraints", "Nice": "nice",
              "Priority": "priority", "SiteFactor": "site_factor"}

#: up to this many jobs, update_jobs sends one pyslurm update per job; beyond, scontrol's job list
#: (measured on the 22.05 testbed: SiteFactor on 10,000 jobs took 13.4 s as lists of 500, 29.7 s
#: as one RPC per job; one job alone takes ~1 ms through pyslurm, ~10 ms through scontrol)
FEW_JOBS = 8

#: a legacy job read this slow (seconds: about 2,000 jobs) starts the side process (pyslurm_side)
SIDE_AFTER_S = 0.1
#: ... this many times by one port (2: a loop's second cycle, not a one-off command's only read)
SIDE_AFTER_READS = 2
#: the longest wait for the side process's read before reading every job here instead
SIDE_TIMEOUT_S = 120.0
#: jobs the side read missed (submitted between the two reads) read one by one up to this many
FEW_MISSING = 50
#: the attributes of pyslurm's ``Jobs.load`` records a job is made of, and the legacy record's
#: key each stands for (:func:`.pyslurm_records.job_records` reads legacy records); the rest
#: come from the side process (:data:`.pyslurm_side.FIELDS`)
_FAST = (("id", "job_id"), ("state", "job_state"), ("state_reason", "state_reason"), ("comment", "comment"),
         ("required_nodes", "req_nodes"), ("excluded_nodes", "exc_nodes"), ("allocated_nodes", "nodes"),
         ("name", "name"), ("user_id", "user_id"), ("account", "account"), ("partition", "partition"),
         ("qos", "qos"), ("submit_time", "submit_time"), ("start_time", "start_time"), ("priority", "priority"),
         ("nice", "nice"), ("is_requeueable", "requeue"), ("min_cpus_per_node", "pn_min_cpus"),
         ("max_nodes", "max_nodes"), ("admin_comment", "admin_comment"), ("reservation", "resv_name"),
         ("constraints", "features"), ("ntasks", "num_tasks"), ("array_id", "array_job_id"),
         ("array_tasks_waiting", "array_task_str"), ("array_task_id", "array_task_id"),
         ("heterogeneous_id", "het_job_id"), ("heterogeneous_offset", "het_job_offset"),
         ("num_nodes", "num_nodes"), ("ntasks_per_node", "ntasks_per_node"), ("cpus", "num_cpus"))
_FAST_ATTRS = tuple(a for a, _ in _FAST)
_FAST_KEYS = tuple(k for _, k in _FAST)
_fast_values = attrgetter(*_FAST_ATTRS)

T = TypeVar("T")

_lock = threading.Lock()
_loaded_conf: list[str | None] = []


def major_minor(version: str) -> tuple[int, int] | None:
    """``22.5.3`` (pyslurm) or ``slurm 22.05.8`` (Slurm) -> (22, 5); None when unreadable."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def installed_version() -> str | None:
    """pyslurm's version as installed, without importing it (importing loads libslurm)."""
    try:
        return importlib.metadata.version("pyslurm")
    except importlib.metadata.PackageNotFoundError:
        return None


def load_pyslurm(conf: str | None) -> Any:
    """Import pyslurm with libslurm initialised for ``conf`` (the cluster's slurm.conf; None:
    Slurm's own default). pyslurm initialises at import from ``SLURM_CONF``; a later port for
    another cluster re-initialises it (one cluster at a time per process)."""
    with _lock:
        if not _loaded_conf:
            saved = os.environ.get("SLURM_CONF")
            if conf:
                os.environ["SLURM_CONF"] = conf
            try:
                module = importlib.import_module("pyslurm")
            finally:
                if conf:
                    if saved is None:
                        os.environ.pop("SLURM_CONF", None)
                    else:
                        os.environ["SLURM_CONF"] = saved
            _loaded_conf.append(conf)
            return module
        module = importlib.import_module("pyslurm")
        if _loaded_conf[0] != conf:
            module.api.slurm_fini()
            module.api.slurm_init(conf)
            _loaded_conf[0] = conf
        return module


class _SideFailed(Exception):
    """The side process died, timed out or could not start (its read is done here instead)."""


class _Side:
    """The side process (:mod:`.pyslurm_side`) and the thread that talks to it."""

    def __init__(self, conf: str | None) -> None:
        env = dict(os.environ)
        if conf:
            env["SLURM_CONF"] = conf
        home = str(Path(pyslurm_side.__file__).resolve().parents[2])  # where slurm_fair imports from
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (home, env.get("PYTHONPATH"))))
        self.proc = subprocess.Popen([sys.executable, "-m", "slurm_fair.slurm.pyslurm_side"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.talk = ThreadPoolExecutor(1, thread_name_prefix="slurm-fair-side")
        self.started: Future[Any] = self.talk.submit(self._receive)

    def _receive(self) -> Any:
        assert self.proc.stdout is not None
        return pyslurm_side.receive(self.proc.stdout)

    def _ask(self) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"read\n")
        self.proc.stdin.flush()
        return self._receive()

    def ready(self) -> bool | None:
        """True when up, None while starting, False when it failed to start."""
        if not self.started.done():
            return None
        if self.started.exception() is not None:  # it ended before saying so (libslurm exits
            log.warning("pyslurm's side process did not start: %s", self.started.exception())  # on a bad conf)
            return False
        ok, message = self.started.result()
        if not ok:
            log.warning("pyslurm's side process did not start: %s", message)
        return bool(ok)

    def read(self) -> Future[Any]:
        """The side read, running (:func:`.pyslurm_side.legacy_fields`'s answer)."""
        return self.talk.submit(self._ask)

    def stop(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.talk.shutdown(wait=False, cancel_futures=True)


_side_lock = threading.Lock()
_sides: dict[str | None, _Side] = {}


def _side_process(conf: str | None, start: bool) -> _Side | None:
    """The side process of the cluster of ``conf`` (:mod:`.pyslurm_side`) when it is up; with
    ``start``, started when it is not (a process of its own: the legacy read holds the
    interpreter lock while it converts, and libslurm is initialised once per process)."""
    failed = None
    with _side_lock:
        side = _sides.get(conf)
        if side is None and start:
            side = _sides[conf] = _Side(conf)
        state = side.ready() if side is not None else None
        if side is not None and state is False:
            failed = _sides.pop(conf)
    if failed is not None:
        failed.stop()
    return side if state else None


def _stop_side(conf: str | None) -> None:
    with _side_lock:
        side = _sides.pop(conf, None)
    if side is not None:
        side.proc.kill()
        side.stop()


@atexit.register
def _stop_sides() -> None:
    for conf in list(_sides):
        _stop_side(conf)


def _same_site(jobs: Sequence[SlurmJob], factors: Mapping[str, int] | None, pending: bool) -> bool:
    """Whether the jobs of one record carry the site factors sprio gives now (the rule of
    :func:`job_records`: pending jobs only, none when none were read)."""
    if not pending or not factors:
        return all(j.site_factor is None for j in jobs)
    for j in jobs:
        if j.site_factor != factors.get(j.job_id):
            return False
    return True


def _slurm_error(exc: Exception, op: str, job_id: str | None = None) -> SlurmError:
    """A pyslurm error -> the error tree of :mod:`slurm_fair.errors`, by the same rules as a
    command's message (:mod:`.run`): the job gone, Slurm unreachable, or a refusal."""
    message = str(getattr(exc, "msg", "") or exc)
    if job_id is not None and JOB_GONE.search(message):
        return JobGone(f"job {job_id} is gone or no longer pending: {message}")
    if TRANSIENT.search(message):
        return SlurmUnavailable(f"cannot reach Slurm (pyslurm {op}): {message}")
    argv = ["pyslurm", op] + ([f"JobId={job_id}"] if job_id else [])
    return SlurmCommandError(argv, int(getattr(exc, "errno", 1) or 1), message)


class PyslurmPort:
    """SlurmPort through pyslurm, with :class:`SlurmCli` for what pyslurm cannot do (module
    docstring). ``conf`` is the cluster's slurm.conf (``SLURM_CONF`` of the CLI's environment)."""

    backend = "pyslurm"

    def __init__(self, cli: SlurmCli, module: Any | None = None, conf: str | None = None, note: str = "",
                 side_after_s: float | None = None, side_after_reads: int | None = None) -> None:
        self.cli = cli
        #: legacy job reads this slow, this many times, start the side process (None: the module's
        #: :data:`SIDE_AFTER_S`, :data:`SIDE_AFTER_READS` at the time of the read)
        self.side_after_s, self.side_after_reads = side_after_s, side_after_reads
        self._slow_reads = 0
        self.cluster = cli.cluster
        self.conf = conf if conf is not None else cli.runner.env.get("SLURM_CONF")
        self.ps = module if module is not None else load_pyslurm(self.conf)
        #: libslurm is read directly (:mod:`.libslurm_jobs`) only beside the real pyslurm
        self._direct = module is None
        self.version = str(getattr(self.ps, "__version__", "") or installed_version() or "")
        #: why this backend (``auto``'s reason); shown by snapshot, run --json and metrics
        self.backend_note = note or f"pyslurm {self.version}"
        self._users: dict[int, str] = {}
        #: job id -> (what its jobs were built from, the jobs): :meth:`_read_split`'s conversions
        self._job_cache: dict[int, tuple[Any, list[SlurmJob]]] = {}
        #: the reader of the fields pyslurm's fast read lacks (:mod:`.libslurm_jobs`), opened at
        #: the first job read ([None]: none here, the legacy read and side process instead)
        self._reader: list[JobFieldReader | None] = []
        #: the reader of sprio's site factors (:mod:`.libslurm_prio`), opened at the first read
        #: ([None]: none here, sprio instead)
        self._prio: list[SiteFactorReader | None] = []
        #: the direct read's values, (the states asked, the site factors) and the jobs built from
        #: them: given again while slurmctld says no job changed and the factors are the same
        self._last_jobs: tuple[Any, tuple[Any, ...], list[SlurmJob]] | None = None

    # --- the pyslurm calls ------------------------------------------------------------------
    def _call(self, op: str, fn: Callable[[], T], job_id: str | None = None) -> T:
        """One pyslurm (or libslurm) call, its error mapped (:func:`_slurm_error`); one Slurm
        calls transient (``Socket timed out``, slurmctld unreachable) retried up to the
        commands' ``retries`` times with their back-off, as :class:`~.run.Runner` does."""
        attempt = 0
        while True:
            try:
                return self._call_once(op, fn, job_id)
            except SlurmUnavailable:
                runner = self.cli.runner
                if attempt >= int(getattr(runner, "retries", 0)):
                    raise
                attempt += 1
                time.sleep(float(getattr(runner, "backoff_s", 0.5)) * attempt)

    def _call_once(self, op: str, fn: Callable[[], T], job_id: str | None = None) -> T:
        with _lock:
            if _loaded_conf and _loaded_conf[0] != self.conf:
                self.ps.api.slurm_fini()
                self.ps.api.slurm_init(self.conf)
                _loaded_conf[0] = self.conf
            try:
                return fn()
            except (JobGone, SlurmError):
                raise
            except (self.ps.RPCError, ValueError, LibslurmError) as exc:
                raise _slurm_error(exc, op, job_id) from None

    def _user(self, uid: int) -> str:
        """A uid's name as squeue prints it (the number when the host does not know it)."""
        name = self._users.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)
            self._users[uid] = name
        return name

    # --- read ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Jobs, then nodes, then partitions through pyslurm (three RPCs); meanwhile, beside
        them, the site factors (sprio's RPC here, in flight with the job read's: see
        :meth:`_read_direct_with_site`; sprio where it cannot) and accounts and QOS (sacctmgr): processes that wait on
        slurmctld and slurmdbd while this one reads, so the snapshot costs about its longest
        read, not their sum; accounts and QOS kept across snapshots as the command line's
        (:mod:`.dbd_cache`, the same rules). Each job is built once, its site factor in it."""
        taken = datetime.now()
        with ThreadPoolExecutor(3, thread_name_prefix="slurm-fair-read") as pool:
            beside = self._direct_site()
            site = None if beside else pool.submit(self._site_factors)
            dbd = self.cli.dbd.begin(pool, self.accounts, self.qos)
            jobs = self._read_jobs(("PENDING", "RUNNING"), site, beside)
            partitions = self.partitions()
            nodes = self._nodes(partitions)
            accounts, qos = dbd.result(jobs)
            return Snapshot(
                taken_at=taken,
                nodes=tuple(nodes),
                jobs=tuple(jobs),
                accounts=tuple(accounts),
                qos=tuple(qos),
                cluster=self.cluster,
                partitions=tuple(partitions),
            )

    def _records(self) -> Mapping[Any, Mapping[str, Any]]:
        """Every job record of slurmctld (pyslurm's legacy read: the only one carrying the GPU
        request strings, ``tres_per_job``/``_node``/``_task`` and ``tres_alloc_str``)."""
        return self._call("job", lambda: self.ps.job().get())

    def _convert(self, records: Mapping[Any, Mapping[str, Any]], states: Sequence[str],
                 site: Mapping[str, int] | None) -> list[SlurmJob]:
        return list(jobs_from(records, states, self._user, self._exact_reason, site))

    def _read_jobs(self, states: Sequence[str], site: Future[dict[str, int]] | None,
                   with_site: bool = False) -> list[SlurmJob]:
        """Every job in ``states`` (all with none), site factors from ``site`` (sprio, running
        beside), or with ``with_site`` from sprio's RPC in flight with the direct job read's
        (:meth:`_direct_site`). With the side process up (:mod:`.pyslurm_side`): its legacy read of the fields
        only that read has, while this process reads the rest through ``Jobs.load``; else the
        legacy read here, and the side process started when this port's reads were slow (a big
        queue) :data:`SIDE_AFTER_READS` times."""
        reader = self._field_reader()
        if reader is not None:
            if with_site:
                values, extra, site = self._call("job", partial(self._read_direct_with_site, reader))
            else:
                values, extra = self._call("job", partial(reader.read, _FAST_ATTRS))
            key = (tuple(states), site.result() if site is not None else None)
            last = self._last_jobs
            if reader.unchanged and last is not None and last[0] is values and last[1] == key:
                return list(last[2])  # slurmctld: no job changed; the same site factors
            jobs = self._read_split(values, extra, states, site)
            self._last_jobs = (values, key, jobs)
            return list(jobs)
        side = _side_process(self.conf, start=False)
        if side is not None:
            try:
                return self._read_side(side, states, site)
            except _SideFailed as exc:
                log.warning("pyslurm's side process failed (%s); reading every job here", exc)
                _stop_side(self.conf)
        t = time.perf_counter()
        records = self._records()
        if time.perf_counter() - t >= (SIDE_AFTER_S if self.side_after_s is None else self.side_after_s):
            self._slow_reads += 1
            if self._slow_reads >= (SIDE_AFTER_READS if self.side_after_reads is None else self.side_after_reads):
                _side_process(self.conf, start=True)
        return self._convert(records, states, site.result() if site is not None else None)

    def _field_reader(self) -> JobFieldReader | None:
        """:mod:`.libslurm_jobs`'s reader for this Slurm, opened once (None: why is logged)."""
        if not self._reader and not self._direct:
            self._reader.append(None)
        if not self._reader:
            try:
                reader, why = open_reader(self.version, major_minor)
            except (OSError, AttributeError, TypeError, ValueError) as exc:  # a libslurm without a symbol
                reader, why = None, f"{type(exc).__name__}: {exc}"
            if reader is None:
                log.info("pyslurm: reading the GPU request strings through its legacy read (%s)", why)
            self._reader.append(reader)
        return self._reader[0]

    def _read_side(self, side: _Side, states: Sequence[str],
                   site: Future[dict[str, int]] | None) -> list[SlurmJob]:
        """``Jobs.load`` here while the side process does the legacy read of the fields it
        lacks (:mod:`.pyslurm_side`), then :meth:`_read_split`."""
        try:
            extra_future = side.read()
        except RuntimeError as exc:  # its thread shut down meanwhile
            raise _SideFailed(str(exc) or type(exc).__name__) from None
        loaded = self._call("job", self.ps.Jobs.load)
        values = [_fast_values(job) for job in loaded.values()]
        try:
            ok, extra = extra_future.result(timeout=SIDE_TIMEOUT_S)
        except (EOFError, FutureTimeout, OSError, pickle.UnpicklingError) as exc:
            raise _SideFailed(str(exc) or type(exc).__name__) from None
        if not ok:
            raise _slurm_error(RuntimeError(extra), "job")
        return self._read_split(values, extra, states, site)

    def _read_split(self, records: Iterable[tuple[Any, ...]], extra: Mapping[int, tuple[Any, ...]],
                    states: Sequence[str], site: Future[dict[str, int]] | None) -> list[SlurmJob]:
        """Jobs from the values of pyslurm's ``Job`` attributes :data:`_FAST_ATTRS` (``records``)
        and, per job id, the fields they lack (``extra``: :data:`.pyslurm_side.FIELDS`), both
        from one read (:mod:`.libslurm_jobs`) or from ``Jobs.load`` and the side process's
        legacy read; each job converted once and kept while what it is made of (both reads'
        fields and its site factor) stays the same."""
        wanted = {s.upper() for s in states}
        fast = [values for values in records if not wanted or state_name(str(values[1] or "")) in wanted]
        # a job submitted between the two reads, or whose state changed between them (one read
        # saw it pending, the other running): built from a legacy read of its own, one record
        odd = {v[0] for v in fast if v[0] not in extra or extra[v[0]][-1] != v[1]}
        alone = self._legacy_records(sorted(odd)) if odd else {}
        factors = site.result() if site is not None else None
        cache, self._job_cache = self._job_cache, {}
        out: list[SlurmJob] = []
        for values in fast:
            job_id = values[0]
            if job_id in odd:
                record = alone.get(job_id)  # None: gone meanwhile
                if record is not None and (not wanted or state_name(str(record.get("job_state") or "")) in wanted):
                    out.extend(job_records(record, self._user, self._exact_reason, factors))
                continue
            more = extra[job_id]
            key = (values, more)
            pending = values[1] == "PENDING"
            hit = cache.get(job_id)
            if hit is not None and hit[0] == key and _same_site(hit[1], factors, pending):
                jobs = hit[1]
            else:
                raw = dict(zip(_FAST_KEYS, values))
                raw.update(zip(pyslurm_side.FIELDS, more))
                jobs = job_records(raw, self._user, None, factors)
            self._job_cache[job_id] = (key, jobs)
            out.extend(jobs)
        return out

    def _find_id(self, job_id: int) -> list[Mapping[str, Any]]:
        return list(self.ps.job().find_id(job_id))

    def _legacy_records(self, job_ids: Sequence[int]) -> dict[int, Mapping[str, Any]]:
        """The legacy records of jobs the side read missed or saw in another state: one legacy
        read each (a few), or of every job (more than :data:`FEW_MISSING`); a job gone is left out."""
        wanted = set(job_ids)
        if len(job_ids) > FEW_MISSING:
            return {int(i): r for i, r in self._records().items() if int(i) in wanted}
        records: dict[int, Mapping[str, Any]] = {}
        for job_id in job_ids:
            try:
                found = self._call("job", partial(self._find_id, job_id), str(job_id))
            except JobGone:
                continue
            records.update({int(r["job_id"]): r for r in found if int(r["job_id"]) == job_id})
        return records

    def _exact_reason(self, job_id: str) -> str:
        """The reason of one job as Slurm holds it (pyslurm's legacy read turns the spaces of
        a ``state_desc`` into ``_``); its record's when the job is gone meanwhile."""
        base = job_id.split("_", 1)[0].split("+", 1)[0]
        try:
            job = self._call("job", lambda: self.ps.Job.load(int(base)), base)
        except SlurmError:
            return ""
        return str(job.state_reason or "")

    def _site_factors(self) -> dict[str, int]:
        """sprio's site factors: from its own RPC in this process where the site's ``slurm.h``
        gives the layout (:mod:`.libslurm_prio`), else (and when that RPC fails) sprio itself
        (none known where it does not answer, as under ``priority/basic``)."""
        reader = self._prio_reader()
        if reader is not None:
            try:
                return self._call("priority factors", reader.read)
            except SlurmError as exc:
                log.info("pyslurm: the priority factors RPC failed (%s); asking sprio", exc)
        return self.cli._site_factors()

    def _direct_site(self) -> bool:
        """Whether both direct reads are here (the jobs' and the site factors'), so that the
        site factors are read with the jobs, in flight together (:meth:`_read_direct_with_site`)."""
        return self._field_reader() is not None and self._prio_reader() is not None

    def _read_direct_with_site(self, reader: JobFieldReader) -> tuple[Any, Any, Future[dict[str, int]]]:
        """The direct job read and sprio's RPC at once, in one :meth:`_call` (libslurm is
        initialised for this port's cluster for both: its lock is held): slurmctld serves the two
        side by side and the factors' objects are read while the jobs are converted. When the
        RPC fails, sprio (:meth:`_site_factors`' fallback)."""
        prio = self._prio[0]
        assert prio is not None
        with ThreadPoolExecutor(1, thread_name_prefix="slurm-fair-prio") as beside:
            factors = beside.submit(prio.read)
            values, extra = reader.read(_FAST_ATTRS)
            site: Future[dict[str, int]] = Future()
            try:
                site.set_result(factors.result())
            except LibslurmError as exc:
                log.info("pyslurm: the priority factors RPC failed (%s); asking sprio", exc)
                site.set_result(self.cli._site_factors())
        return values, extra, site

    def _prio_reader(self) -> SiteFactorReader | None:
        """:mod:`.libslurm_prio`'s reader for this Slurm, opened once (None: why is logged)."""
        if not self._prio and not self._direct:
            self._prio.append(None)
        if not self._prio:
            try:
                reader, why = open_prio_reader(self.version, major_minor)
            except (OSError, AttributeError, TypeError, ValueError) as exc:  # a libslurm without a symbol
                reader, why = None, f"{type(exc).__name__}: {exc}"
            if reader is None:
                log.info("pyslurm: reading the site factors through sprio (%s)", why)
            self._prio.append(reader)
        return self._prio[0]

    def nodes(self) -> list[Node]:
        """pyslurm's legacy node read (raw gres strings, ``mixed`` computed as sinfo does) with
        the complete state string of its newer one (every flag: drain, not_responding...)."""
        return self._nodes(self.partitions())

    def _nodes(self, partitions: Sequence[Partition]) -> list[Node]:
        legacy = self._call("node", lambda: self.ps.node().get())
        complete = {name: str(n.state or "") for name, n in self._call("node", self.ps.Nodes.load).items()}
        tiers = {p.name: p.priority_tier for p in partitions}
        return [node_record(raw, complete.get(name, ""), tiers) for name, raw in legacy.items()]

    def partitions(self) -> list[Partition]:
        loaded = self._call("partition", self.ps.Partitions.load)
        return [partition_record({a: getattr(p, a) for a in _PARTITION_ATTRS}) for p in loaded.values()]

    def jobs(self, states: Sequence[str] = ("PENDING", "RUNNING")) -> list[SlurmJob]:
        wanted = {s.upper() for s in states}
        pending = not wanted or "PENDING" in wanted
        beside = pending and self._direct_site()
        with ThreadPoolExecutor(1, thread_name_prefix="slurm-fair-read") as pool:
            site = pool.submit(self._site_factors) if pending and not beside else None
            return self._read_jobs(states, site, beside)

    def accounts(self) -> list[Account]:
        return self.cli.accounts()

    def qos(self) -> list[Qos]:
        return self.cli.qos()

    def accounting(self, since: datetime, until: datetime | None = None) -> list[AccountingRecord]:
        return self.cli.accounting(since, until)

    def sacct_history(self, since: datetime) -> tuple[str, str]:
        return self.cli.sacct_history(since)

    def accounting_history(self, since: datetime) -> History:
        return self.cli.accounting_history(since)

    def site_factor_plugin(self) -> str:
        return self.cli.site_factor_plugin()

    def job_outlook(self, job_id: str) -> JobOutlook:
        job_id = check_job_id(job_id)
        if not _PLAIN_ID.match(job_id):
            return self.cli.job_outlook(job_id)
        job = self._call("job", lambda: self.ps.Job.load(int(job_id)), job_id)
        start = job.start_time
        return JobOutlook(job_id=job_id, state=state_name(str(job.state or "")), reason=str(job.state_reason or ""),
                          priority=int(job.priority or 0),
                          start=datetime.fromtimestamp(start) if isinstance(start, int) and start > 0 else None)

    def job_priority_factors(self, job_id: str) -> list[PriorityFactors]:
        return self.cli.job_priority_factors(job_id)

    def can_retype_gpu(self) -> bool:
        return self.cli.can_retype_gpu()

    # --- write (pending jobs) -----------------------------------------------------------------
    def _modify(self, job_id: str, **attrs: Any) -> None:
        desc = self.ps.JobSubmitDescription(**attrs)
        self._call("update", lambda: self.ps.Job(int(job_id)).modify(desc), job_id)

    def set_gpu_type(self, job: SlurmJob, gpu_type: str | None) -> None:
        self.cli.set_gpu_type(job, gpu_type)

    def restore_gpu_request(self, job: SlurmJob, raw: str) -> None:
        self.cli.restore_gpu_request(job, raw)

    def set_gpu_types(self, changes: Sequence[tuple[SlurmJob, str | None]]) -> dict[str, SlurmError | ValueError]:
        return self.cli.set_gpu_types(changes)

    def restore_gpu_requests(self, changes: Sequence[tuple[SlurmJob, str]]) -> dict[str, SlurmError | ValueError]:
        return self.cli.restore_gpu_requests(changes)

    def set_priority(self, job_id: str, priority: int | None) -> None:
        """As :meth:`SlurmCli.set_priority`: a number fixes it; None gives the job back to
        multifactor (hold + release), re-applying a user's or an admin's hold."""
        job_id = check_job_id(job_id)
        if not _PLAIN_ID.match(job_id):
            self.cli.set_priority(job_id, priority)
            return
        if priority is not None:
            self._modify(job_id, priority=int(priority))
            return
        reason = self._exact_reason_or_gone(job_id)
        self.hold(job_id)
        self.release(job_id)
        if reason == "JobHeldUser":  # not pyslurm's hold(mode="user"): 22.5.3 writes it through a
            self.cli._scontrol(job_id, "uhold", job_id)  # NULL pointer and the process crashes
        elif reason == "JobHeldAdmin":
            self.hold(job_id)

    def _exact_reason_or_gone(self, job_id: str) -> str:
        job = self._call("job", lambda: self.ps.Job.load(int(job_id)), job_id)
        return str(job.state_reason or "")

    def set_nice(self, job_id: str, nice: int) -> None:
        self.update_job_fields(job_id, {"Nice": str(int(nice))})

    def hold(self, job_id: str) -> None:
        job_id = check_job_id(job_id)
        if not _PLAIN_ID.match(job_id):
            self.cli.hold(job_id)
            return
        self._call("hold", lambda: self.ps.Job(int(job_id)).hold(), job_id)

    def release(self, job_id: str) -> None:
        job_id = check_job_id(job_id)
        if not _PLAIN_ID.match(job_id):
            self.cli.release(job_id)
            return
        self._call("release", lambda: self.ps.Job(int(job_id)).release(), job_id)

    def requeue(self, job_id: str) -> None:
        job_id = check_job_id(job_id)
        if not _PLAIN_ID.match(job_id):
            self.cli.requeue(job_id)
            return
        self._call("requeue", lambda: self.ps.Job(int(job_id)).requeue(), job_id)

    def update_job(self, job_id: str, fields: Mapping[str, str]) -> None:
        bad = set(fields) - UPDATABLE_FIELDS
        if bad:
            raise ValueError(f"cannot update {', '.join(sorted(bad))} (allowed: {sorted(UPDATABLE_FIELDS)})")
        if fields:
            self.update_job_fields(job_id, fields)

    def update_job_fields(self, job_id: str, fields: Mapping[str, str]) -> None:
        """One job's fields through pyslurm; a cleared field or a non-numeric id through
        scontrol (module docstring). Values are checked as the command line checks them."""
        job_id = check_job_id(job_id)
        for key, value in fields.items():
            check_value(key, value)
        if not _PLAIN_ID.match(job_id) or any(v == "" for v in fields.values()):
            self.cli._update(job_id, **dict(fields))
            return
        self._modify(job_id, **{_DESC_ATTR[k]: _desc_value(k, v) for k, v in fields.items()})

    def update_jobs(self, job_ids: Sequence[str], fields: Mapping[str, str]) -> dict[str, SlurmError]:
        """The same fields on each job (the jobs not changed, each with its error); every value
        is checked first, before anything is sent. A few jobs: one pyslurm update each; more
        than :data:`FEW_JOBS`: scontrol's job list (:meth:`SlurmCli.update_jobs`), one RPC per
        500 jobs, which slurmctld serves faster than one RPC per job (docs/performance.md)."""
        batch_items(fields)
        ids = [check_job_id(j) for j in dict.fromkeys(job_ids)]
        if not fields:
            return {}
        if len(ids) > FEW_JOBS:
            return self.cli.update_jobs(ids, fields)
        failed: dict[str, SlurmError] = {}
        for job_id in ids:
            try:
                self.update_job_fields(job_id, fields)
            except (JobGone, SlurmCommandError) as exc:
                failed[job_id] = exc
        return failed

    # --- QOS (sacctmgr) -------------------------------------------------------------------------
    def ensure_qos(self, name: str, grp_tres: Mapping[str, int | None], exists: bool | None = None) -> None:
        self.cli.ensure_qos(name, grp_tres, exists)

    def delete_qos(self, name: str) -> None:
        self.cli.delete_qos(name)

    def attach_qos(self, account: str, qos: str, default: bool = True) -> None:
        self.cli.attach_qos(account, qos, default)

    def detach_qos(self, account: str, qos: str) -> None:
        self.cli.detach_qos(account, qos)


def _desc_value(key: str, value: str) -> Any:
    """A field's value as pyslurm's JobSubmitDescription takes it. Nice and the site factor stay
    strings: pyslurm skips a value that is false, and ``"0"`` is not (0 is a real nice)."""
    return int(value) if key == "Priority" else value


def _last_line(exc: Exception) -> str:
    """The last line of an error (scontrol's ``fatal:`` line comes after its ``error:`` lines)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:200]


def choose(cli: SlurmCli, backend: str, log_warning: Callable[[str], None] | None = None) -> Any:
    """The port of ``[slurm] backend``: ``cli``; ``pyslurm`` or ``auto``: pyslurm when it is
    installed, imports, and its major.minor is the running Slurm's (``scontrol --version``),
    else the command line with a warning saying why (never an error: the controller keeps
    working). The port's ``backend`` and ``backend_note`` say which it took."""
    warn = log_warning or log.warning
    if backend == "cli":
        return cli
    version = installed_version()
    reason = ""
    if version is None:
        reason = "pyslurm is not installed (scripts/build-pyslurm.sh builds it for this Slurm)"
    else:
        try:
            slurm = cli.runner.run(["scontrol", "--version"]).strip()
        except SlurmError as exc:
            slurm, reason = "", f"cannot read Slurm's version ({_last_line(exc)})"
        if not reason and major_minor(version) != major_minor(slurm):
            reason = (f"pyslurm {version} does not match {slurm or 'this Slurm'} (its major.minor must be "
                      "Slurm's: rebuild it with scripts/build-pyslurm.sh)")
        if not reason:  # libslurm exits the process on a configuration it cannot load: ask a command
            try:        # first (scontrol loads it the same way, and fails alone)
                cli.runner.run(["scontrol", "show", "hostnames", "probe"])
            except SlurmError as exc:
                reason = f"Slurm's configuration does not load ({_last_line(exc)})"
    if not reason:
        try:
            return PyslurmPort(cli, note=f"{backend}: pyslurm {version} matches {slurm}")
        except Exception as exc:  # noqa: BLE001 - an ImportError, a missing libslurm, a failed init
            reason = f"pyslurm {version} does not load: {type(exc).__name__}: {exc}"
    message = f"[slurm] backend = \"{backend}\": {reason}; using Slurm's commands (cli)"
    if backend == "pyslurm" or version is not None:  # asked for, or there but unusable: say so
        warn(message)
    else:
        log.info(message)
    cli.backend_note = f"{backend}: {reason}"
    return cli
