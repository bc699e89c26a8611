"""The default SlurmPort: Slurm's own commands (squeue, sinfo, sacct, sacctmgr, scontrol).

Why the command line and not ``--json`` or pyslurm: in Slurm 22.05 ``squeue --json`` ignores
filters and its schema changes between releases; pyslurm must match Slurm's major version
exactly. Pipe output with chosen columns is fast and stable, and every value is parsed by the
pure functions of :mod:`.parse`.

Free text (job names, comments) is user-controlled. Every read asks Slurm to separate fields
with a random token chosen per call (``|<16 hex>|``), which no user can put into a comment in
advance, so no byte of user text can shift a column or forge a record.
"""

from __future__ import annotations

import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..errors import JobGone, SlurmCommandError, SlurmError
from .model import (
    Account, AccountingRecord, JobOutlook, Node, Partition, PriorityFactors, Qos, SlurmJob, Snapshot,
)
from .parse.gres import gpu_request_of, parse_tres_map, retype_request
from .parse.outlook import OUTLOOK_FIELDS, parse_outlook, parse_sprio, sprio_format
from .parse.records import iter_lines
from .parse.history import HISTORY_FIELDS, History, parse_history
from .parse.sacct import SACCT_FIELDS, parse_sacct
from .parse.sacctmgr import ASSOC_FIELDS, QOS_FIELDS, parse_assoc, parse_qos
from .parse.partitions import parse_partitions
from .parse.sinfo import SINFO_FIELDS, parse_sinfo
from .parse.squeue import SQUEUE_FIELDS, parse_excluded, parse_squeue, with_pending_extras
from . import batch
from .run import Runner
from .dbd_cache import DbdCache
from .sacctmgr import Sacctmgr
from .write_rules import (
    UPDATABLE_FIELDS, batch_items, check_job_id, check_name, check_value, norm_spec, refuse_retype, split_raw,
    with_prefix,
)

if TYPE_CHECKING:  # the configuration is only read here, never imported at run time
    from ..config import Config

_HELD = {"JobHeldUser": "uhold", "JobHeldAdmin": "hold"}

#: a GPU request rewrite to make: (field, spec, the spec it replaces, the GPU type it pins)
_Rewrite = tuple[str, str, str, str | None]


def _new_fs() -> str:
    return f"|{secrets.token_hex(8)}|"


def _long_format(fields: Sequence[str], fs: str) -> str:
    """``-O`` format: width 0 (no padding, no truncation) and ``fs`` as suffix between fields."""
    return ",".join(f"{f}:0{fs}" for f in fields[:-1]) + f",{fields[-1]}:0"


class SlurmCli:
    """SlurmPort over Slurm's commands.

    ``env`` (e.g. ``{"SLURM_CONF": ...}``), ``bin_dir``, ``timeout_s`` and ``retries`` are
    constructor arguments so a process can talk to any cluster, not only the one its own
    environment points at. ``cluster`` restricts accounting queries to one cluster.
    """

    #: which backend this is, and why it was taken (``[slurm] backend = "auto"``: see
    #: :func:`.pyslurm_port.choose`); shown by ``snapshot``, ``run --json`` and ``metrics``
    backend = "cli"
    backend_note = "cli"

    def __init__(
        self,
        env: Mapping[str, str | None] | None = None,
        bin_dir: str = "",
        timeout_s: float = 30.0,
        retries: int = 2,
        cluster: str = "",
        runner: Runner | None = None,
        separator: Callable[[], str] = _new_fs,
        tres_prefix: str | None = None,
        accounts_ttl_s: float = 0.0,
    ) -> None:
        self.runner = runner or Runner(env=env, bin_dir=bin_dir, timeout_s=timeout_s, retries=retries)
        self.cluster = cluster
        self.sacctmgr = Sacctmgr(self.runner, cluster)
        #: the accounts and QOS kept across snapshots (:mod:`.dbd_cache`; 0 s: read every time)
        self.dbd = DbdCache(accounts_ttl_s)
        self._separator = separator
        #: ``gres:`` or ``gres/`` (:meth:`tres_prefix`); None until asked
        self._prefix: str | None = tres_prefix

    @classmethod
    def from_config(cls, config: "Config", env: Mapping[str, str | None] | None = None) -> "SlurmCli":
        """Build from a validated :class:`slurm_fair.config.Config` ([slurm] and [cluster])."""
        s = config["slurm"]
        return cls(
            env=env,
            bin_dir=s["bin_dir"],
            timeout_s=s["command_timeout_s"],
            retries=s["retries"],
            cluster=config["cluster"]["name"],
            accounts_ttl_s=s["accounts_ttl_s"],
        )

    # --- read ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Jobs first, then nodes (each read is atomic on Slurm's side; a job that starts
        between the two reads shows as running on a node still counted free, which the next
        cycle corrects). Accounts, QOS and partitions are read meanwhile, beside them: the two
        sacctmgr calls wait on slurmdbd round trips (~0.3 s each whatever the queue's length),
        not on slurmctld, so three reads in flight at most, never more. Accounts and QOS come
        from :attr:`dbd` while young enough and naming every job's (:mod:`.dbd_cache`)."""
        taken = datetime.now()
        with ThreadPoolExecutor(3, thread_name_prefix="slurm-fair-read") as pool:
            dbd = self.dbd.begin(pool, self.accounts, self.qos)
            partitions = pool.submit(self.partitions)
            jobs = self.jobs()
            nodes = self.nodes()
            accounts, qos = dbd.result(jobs)
            return Snapshot(
                taken_at=taken,
                nodes=tuple(nodes),
                jobs=tuple(jobs),
                accounts=tuple(accounts),
                qos=tuple(qos),
                cluster=self.cluster,
                partitions=tuple(partitions.result()),
            )

    def nodes(self) -> list[Node]:
        fs = self._separator()
        out = self.runner.run(
            ["sinfo", "-a", "-N", "--noheader", "-O", _long_format(SINFO_FIELDS, fs)]
        )
        return parse_sinfo(out, fs)

    def partitions(self) -> list[Partition]:
        return parse_partitions(self.runner.run(["scontrol", "show", "partition", "-o"]))

    def jobs(self, states: Sequence[str] = ("PENDING", "RUNNING")) -> list[SlurmJob]:
        """squeue's records, and for pending jobs what ``-O`` cannot print on every version:
        the excluded nodes (``-o %x``; ``ExcNodes`` is a ``-O`` field only from 23.02) and the
        site factor (``sprio``, which lists pending jobs eligible to start)."""
        fs = self._separator()
        argv = ["squeue", "-a", "-r", "--noheader", "-O", _long_format(SQUEUE_FIELDS, fs)]
        if states:
            argv += ["-t", ",".join(s.upper() for s in states)]
        jobs = parse_squeue(self.runner.run(argv), fs)
        if not any(j.pending for j in jobs):
            return jobs
        fs = self._separator()
        excluded = parse_excluded(
            self.runner.run(["squeue", "-a", "-r", "--noheader", "-t", "PENDING", "-o", f"%i{fs}%x"]), fs)
        site = self._site_factors()  # once per read: sprio lists every eligible pending job
        return [with_pending_extras(j, excluded, site) for j in jobs]

    def _site_factors(self) -> dict[str, int]:
        """Pending jobs' site factors (``sprio``); {} when sprio does not answer: under
        ``PriorityType=priority/basic`` there is no sprio (it exits 1, "not running a supported
        priority plugin"), and a failing sprio must not stop the snapshot, so revert and the
        failsafe still give back. No site factor shown means none known (``site_factor`` None):
        the controller pushes nothing it cannot see, and gives back what it recorded."""
        fs = self._separator()
        try:
            out = self.runner.run(["sprio", "-h", "-o", sprio_format(fs)])
        except SlurmError:
            return {}
        return {f.job_id: int(f.factors.get("site", 0.0)) for f in parse_sprio(out, fs)}

    def accounts(self) -> list[Account]:
        return parse_assoc(self.sacctmgr.show("assoc", ASSOC_FIELDS))

    def qos(self) -> list[Qos]:
        return parse_qos(self.sacctmgr.show("qos", QOS_FIELDS))

    def accounting(self, since: datetime, until: datetime | None = None) -> list[AccountingRecord]:
        fs = self._separator()
        # -D: every run of a requeued job (its own start, end and GPUs), not only the last
        argv = [
            "sacct", "-a", "-X", "-D", "-n", "-P", f"--delimiter={fs}",
            "-S", since.strftime("%Y-%m-%dT%H:%M:%S"),
            "-E", (until or datetime.now()).strftime("%Y-%m-%dT%H:%M:%S"),
            "-o", ",".join(SACCT_FIELDS),
        ]
        if self.cluster:
            argv += ["-M", self.cluster]
        return parse_sacct(self.runner.run(argv), fs)

    def sacct_history(self, since: datetime) -> tuple[str, str]:
        """``sacct -a -X -P`` with its header over the history fields
        (:data:`~.parse.history.HISTORY_FIELDS`) since ``since``: (text, delimiter) for
        :func:`~.parse.history.parse_history` (``speeds learn --from-slurm``)."""
        fs = self._separator()
        # -D: a requeued job's earlier runs too, so its partial last run is known as such
        argv = ["sacct", "-a", "-X", "-D", "-P", f"--delimiter={fs}", "-S", since.strftime("%Y-%m-%dT%H:%M:%S"),
                "-E", datetime.now().strftime("%Y-%m-%dT%H:%M:%S"), "-o", ",".join(HISTORY_FIELDS)]
        if self.cluster:
            argv += ["-M", self.cluster]
        return self.runner.run(argv), fs

    def accounting_history(self, since: datetime) -> History:
        text, fs = self.sacct_history(since)
        return parse_history(text, "sacct", fs)

    def job_outlook(self, job_id: str) -> JobOutlook:
        """``squeue -j`` (all states while slurmctld remembers the job); for an array's parent
        id, its first task."""
        job_id = check_job_id(job_id)
        fs = self._separator()
        out = self.runner.run(["squeue", "-h", "-j", job_id, "-O", _long_format(OUTLOOK_FIELDS, fs)], job_id=job_id)
        found = parse_outlook(out, fs)
        if not found:
            raise JobGone(f"job {job_id} is gone")
        return next((o for o in found if o.job_id == job_id), found[0])

    def job_priority_factors(self, job_id: str) -> list[PriorityFactors]:
        job_id = check_job_id(job_id)
        fs = self._separator()
        # -jID without a space: sprio's -j takes an optional argument
        out = self.runner.run(["sprio", "-h", f"-j{job_id}", "-o", sprio_format(fs)])
        return parse_sprio(out, fs)

    # --- write (pending jobs) -----------------------------------------------------------------
    def _scontrol(self, job_id: str, *args: str) -> None:
        self.runner.run(["scontrol", *args], job_id=job_id)

    def _update(self, job_id: str, **fields: str) -> None:
        job_id = check_job_id(job_id)
        for key, value in fields.items():
            check_value(key, value)
        self._scontrol(job_id, "update", f"JobId={job_id}", *(f"{k}={v}" for k, v in fields.items()))

    def set_gpu_type(self, job: SlurmJob, gpu_type: str | None) -> None:
        """Pin an untyped pending request to ``gpu_type`` (count and form kept).

        Slurm before 23.11 can type a request once and never change it again: re-typing or
        un-typing a typed request is refused ("with and without type identification") or,
        worse, accepted as a request for *both* types (the job then waits forever with
        BadConstraints). So on those versions a typed request is refused here, before anything
        is sent, with :class:`SlurmCommandError` (see docs/slurm-adapter.md).
        """
        rewrite = self._retyped(job, gpu_type)
        if rewrite is not None:
            self._rewrite_request(job.job_id, *rewrite)

    def _retyped(self, job: SlurmJob, gpu_type: str | None) -> _Rewrite | None:
        """The rewrite that pins ``job`` to ``gpu_type`` (None: it asks for it already)."""
        req = job.gpu_request
        if req is None:
            raise ValueError(f"job {job.job_id} has no GPU request")
        if gpu_type is not None:
            check_name("GPU type", gpu_type)
        if req.gpu_type == gpu_type:
            return None
        field, spec = split_raw(req.raw, req.per)
        self._refuse_retype(job, req.gpu_type, gpu_type)
        return field, retype_request(spec, gpu_type), spec, gpu_type

    def restore_gpu_request(self, job: SlurmJob, raw: str) -> None:
        rewrite = self._restored(job, raw)
        if rewrite is not None:
            self._rewrite_request(job.job_id, *rewrite)

    def _restored(self, job: SlurmJob, raw: str) -> _Rewrite | None:
        """The rewrite that puts ``raw`` back (None: the job asks for it already)."""
        per = job.gpu_request.per if job.gpu_request else "node"
        field, spec = split_raw(raw, per)
        _, want_type = gpu_request_of(spec)
        current = job.gpu_request.raw.split("=", 1)[-1] if job.gpu_request else spec
        if job.gpu_request is not None and job.gpu_request.gpu_type == want_type:
            if norm_spec(current) == norm_spec(spec):
                return None
        self._refuse_retype(job, job.gpu_request.gpu_type if job.gpu_request else None, want_type)
        return field, spec, current, want_type

    def set_gpu_types(self, changes: Sequence[tuple[SlurmJob, str | None]]) -> dict[str, SlurmError | ValueError]:
        return self._rewrite_many([(job, partial(self._retyped, job, t)) for job, t in changes])

    def restore_gpu_requests(self, changes: Sequence[tuple[SlurmJob, str]]) -> dict[str, SlurmError | ValueError]:
        return self._rewrite_many([(job, partial(self._restored, job, raw)) for job, raw in changes])

    def _rewrite_many(
        self, planned: Sequence[tuple[SlurmJob, Callable[[], _Rewrite | None]]],
    ) -> dict[str, SlurmError | ValueError]:
        """GPU request rewrites of many jobs. Where Slurm replaces a request in one update
        (>= 23.11) the jobs of one new request share one ``scontrol update`` per chunk and one
        ``squeue`` read-back; before, each job takes the hold, clear, set, release of
        :meth:`_rewrite_request`. Returns the jobs not changed, with their errors."""
        failed: dict[str, SlurmError | ValueError] = {}
        groups: dict[tuple[str, str, str | None], dict[str, str]] = {}
        for job, plan in planned:
            try:
                rewrite = plan()
                if rewrite is not None and not self.can_retype_gpu():
                    self._rewrite_request(job.job_id, *rewrite)
                elif rewrite is not None:
                    field, spec, previous, want = rewrite
                    spec = with_prefix(spec, self.tres_prefix())
                    check_value(field, spec)
                    groups.setdefault((field, spec, want), {})[check_job_id(job.job_id)] = previous
            except (JobGone, SlurmCommandError, ValueError) as exc:
                failed[job.job_id] = exc
        for (field, spec, want), before in groups.items():
            failed.update(batch.update(self.runner, list(before), [f"{field}={spec}"]))
            done = [j for j in before if j not in failed]
            seen = batch.typed_gpus(self.runner, done, self._separator())
            for job_id in done:
                if job_id not in seen:
                    failed[job_id] = JobGone(f"job {job_id} is gone")
                elif seen[job_id] != ({want} if want else frozenset()):
                    failed[job_id] = self._put_back(
                        job_id, field, before[job_id],
                        f"job {job_id}: Slurm now schedules it by {sorted(seen[job_id]) or 'untyped GPUs'}, "
                        f"not {want or 'untyped GPUs'}")
        return failed

    def _put_back(self, job_id: str, field: str, previous: str, message: str) -> SlurmCommandError:
        """A rewrite Slurm took otherwise than asked (>= 23.11; ``message`` says how): the
        job's request as it was before, put back (so the failed write leaves nothing behind
        for ``revert`` to undo); the error to report."""
        try:
            self._update(job_id, **{field: with_prefix(previous, self.tres_prefix())})
            message += f"; its request {previous} is put back"
        except (SlurmError, ValueError) as exc:
            message += f"; putting back its request {previous} failed too: {exc}"
        return SlurmCommandError(["scontrol", "update", f"JobId={job_id}"], 1, message)

    def can_retype_gpu(self) -> bool:
        """Whether this Slurm can change a request that is already typed (>= 23.11; the
        contract suite checks it on 24.11, and the adapter reads the result back after every
        rewrite)."""
        return self.tres_prefix() == "gres/"

    def site_factor_plugin(self) -> str:
        """``scontrol show config``'s ``PrioritySiteFactorPlugin`` ("" for ``(null)`` or
        ``site_factor/none``)."""
        name = self._config_value("PrioritySiteFactorPlugin")
        return "" if name in ("", "(null)", "site_factor/none") else name

    def fairshare_algorithm(self) -> str:
        """The fair-share factor this Slurm computes: ``classic`` with ``PriorityFlags`` holding
        ``NO_FAIR_TREE``, else ``fair-tree`` (the default since 19.05); the modelled Slurm of a
        replay takes it (:mod:`slurm_fair.sim.fairtree`)."""
        flags = {f.strip().upper() for f in self._config_value("PriorityFlags").split(",")}
        return "classic" if "NO_FAIR_TREE" in flags else "fair-tree"

    def _config_value(self, key: str) -> str:
        """``key``'s value in ``scontrol show config`` ("" when it is not listed)."""
        out = self.runner.run(["scontrol", "show", "config"])
        m = re.search(rf"^{re.escape(key)}\s*=\s*(.*?)\s*$", out, re.MULTILINE)
        return m.group(1) if m else ""

    def _refuse_retype(self, job: SlurmJob, have: str | None, want: str | None) -> None:
        refuse_retype(job, have, want, self.can_retype_gpu(), "this Slurm (before 23.11)")

    def tres_prefix(self) -> str:
        """How this Slurm wants a GPU request written: ``gres:`` before 23.11, ``gres/`` after.

        Slurm 22.05 accepts ``TresPerNode=gres/gpu:v100:2`` but only stores the string: the
        job keeps its old request and runs anywhere (checked on the testbed).
        """
        if self._prefix is None:
            out = self.runner.run(["scontrol", "--version"])
            m = re.search(r"(\d+)\.(\d+)", out)
            major_minor = (int(m.group(1)), int(m.group(2))) if m else (22, 5)
            self._prefix = "gres:" if major_minor < (23, 11) else "gres/"
        return self._prefix

    def _rewrite_request(
        self, job_id: str, field: str, spec: str, previous: str, want_type: str | None
    ) -> None:
        """Replace a pending job's GPU request, safely, the way Slurm 22.05 accepts it.

        Setting ``TresPerNode`` directly *merges* the new request into the old one (a typed
        request over an untyped one is refused: "Invalid GRES specification (with and without
        type identification)"; typed over typed asks for both types). So the field is cleared
        first and set second. Between the two the job asks for no GPU, so it is held during the
        change (unless it already was) and released after; the release returns its priority to
        multifactor. If setting fails, the previous request is put back before the release.
        """
        job_id = check_job_id(job_id)
        spec = with_prefix(spec, self.tres_prefix())
        previous = with_prefix(previous, self.tres_prefix())
        if self.can_retype_gpu():  # >= 23.11 replaces the request in one update (24.11, checked)
            self._update(job_id, **{field: spec})
            try:
                self._verify_request(job_id, want_type)
            except SlurmCommandError as exc:
                raise self._put_back(job_id, field, previous, exc.stderr) from None
            return
        held = self._reason(job_id) in _HELD
        if not held:
            self._scontrol(job_id, "hold", job_id)
        try:
            self._update(job_id, **{field: ""})
            try:
                self._update(job_id, **{field: spec})
            except Exception:
                self._update(job_id, **{field: previous})
                raise
        finally:
            if not held:
                self._scontrol(job_id, "release", job_id)
        self._verify_request(job_id, want_type)

    def _verify_request(self, job_id: str, want_type: str | None) -> None:
        """Read back the TRES Slurm will schedule by (``tres-alloc`` of a pending job is its
        request): exactly ``want_type``, or no typed GPU at all for an untyped request."""
        out = self.runner.run(["squeue", "-h", "-j", job_id, "-O", "tres-alloc:0"], job_id=job_id)
        tres = parse_tres_map(out.strip())
        typed = {k.split(":", 1)[1] for k, v in tres.items() if k.startswith("gres/gpu:") and v != "0"}
        if typed != ({want_type} if want_type else set()):
            raise SlurmCommandError(
                ["scontrol", "update", f"JobId={job_id}"], 1,
                f"job {job_id}: Slurm now schedules it by {sorted(typed) or 'untyped GPUs'}, "
                f"not {want_type or 'untyped GPUs'} ({out.strip()})",
            )

    def set_priority(self, job_id: str, priority: int | None) -> None:
        """A number fixes the priority (multifactor stops updating it); None gives the job
        back to priority/multifactor with hold+release, re-applying a hold it had before."""
        job_id = check_job_id(job_id)
        if priority is not None:
            self._update(job_id, Priority=str(int(priority)))
            return
        reason = self._reason(job_id)
        self._scontrol(job_id, "hold", job_id)
        self._scontrol(job_id, "release", job_id)
        if reason in _HELD:
            self._scontrol(job_id, _HELD[reason], job_id)

    def _reason(self, job_id: str) -> str:
        out = self.runner.run(["squeue", "-h", "-j", job_id, "-O", "Reason:0"], job_id=job_id)
        lines = list(iter_lines(out))
        if not lines:
            raise JobGone(f"job {job_id} is gone")
        return lines[0].strip()

    def set_nice(self, job_id: str, nice: int) -> None:
        self._update(job_id, Nice=str(int(nice)))

    def hold(self, job_id: str) -> None:
        self._scontrol(job_id, "hold", check_job_id(job_id))

    def release(self, job_id: str) -> None:
        self._scontrol(job_id, "release", check_job_id(job_id))

    def requeue(self, job_id: str) -> None:
        self._scontrol(job_id, "requeue", check_job_id(job_id))

    def update_job(self, job_id: str, fields: Mapping[str, str]) -> None:
        bad = set(fields) - UPDATABLE_FIELDS
        if bad:
            raise ValueError(f"cannot update {', '.join(sorted(bad))} (allowed: {sorted(UPDATABLE_FIELDS)})")
        if fields:
            self._update(job_id, **dict(fields))

    def update_jobs(self, job_ids: Sequence[str], fields: Mapping[str, str]) -> dict[str, SlurmError]:
        """One ``scontrol update JobId=a,b,c F=V`` per chunk of ``batch.BATCH_JOBS`` jobs; the
        jobs not changed, each with its error, read from scontrol's per-job lines (22.05 and
        24.11 alike, see :mod:`.batch`)."""
        items = batch_items(fields)
        ids = [check_job_id(j) for j in job_ids]
        return batch.update(self.runner, ids, items) if items else {}

    # --- QOS (sacctmgr: :class:`.sacctmgr.Sacctmgr`) ------------------------------------------
    def ensure_qos(self, name: str, grp_tres: Mapping[str, int | None], exists: bool | None = None) -> None:
        self.dbd.invalidate()
        self.sacctmgr.ensure_qos(name, grp_tres, exists)

    def delete_qos(self, name: str) -> None:
        self.dbd.invalidate()
        self.sacctmgr.delete_qos(name)

    def attach_qos(self, account: str, qos: str, default: bool = True) -> None:
        self.dbd.invalidate()
        self.sacctmgr.attach_qos(account, qos, default)

    def detach_qos(self, account: str, qos: str) -> None:
        self.dbd.invalidate()
        self.sacctmgr.detach_qos(account, qos)
