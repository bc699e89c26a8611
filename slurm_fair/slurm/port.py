"""The port: everything slurm-fair reads from or writes to Slurm goes through this Protocol.

There is one real adapter (``cli.py``: Slurm's own commands, argv lists, timeouts, bounded
retries) and one fake (``fake.py``: loaded from recorded real output, shared by unit tests and
the simulator's dry runs). A contract suite (``tests/slurm/test_contract.py``) runs against both.
Nothing outside ``slurm_fair/slurm/`` runs a Slurm command.

Write methods act on *pending* jobs only (Slurm refuses most changes to running jobs). A job
that ended or vanished between read and write raises :class:`slurm_fair.errors.JobGone`, which
callers treat as "skip", never as a failure of the cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Mapping, Protocol, Sequence, runtime_checkable

from ..errors import SlurmError
from .parse.history import History
from .model import (
    Account, AccountingRecord, JobOutlook, Node, Partition, PriorityFactors, Qos, SlurmJob, Snapshot,
)


@runtime_checkable
class SlurmPort(Protocol):
    # --- read ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Nodes, pending+running jobs, accounts and QOS, read as one consistent view."""
        ...

    def nodes(self) -> list[Node]: ...

    def partitions(self) -> list[Partition]:
        """Every partition with the rules steering must respect (who may use it, its limits,
        its tier, its state and nodes)."""
        ...

    def jobs(self, states: Sequence[str] = ("PENDING", "RUNNING")) -> list[SlurmJob]: ...

    def accounts(self) -> list[Account]: ...

    def qos(self) -> list[Qos]: ...

    def accounting(self, since: datetime, until: datetime | None = None) -> list[AccountingRecord]:
        """Jobs that ran in ``[since, until)`` with their GPU type, count and elapsed time: one
        record per run, in the order they ran (a requeued job has several, all but the last in
        state ``REQUEUED``, each with its own Submit, Start, End and GPUs)."""
        ...

    def accounting_history(self, since: datetime) -> History:
        """Every job run since ``since`` as the speed learner reads it (``speeds learn
        --from-slurm``, the controller's learned table): ``sacct -a -X -D -P`` with its header
        over :data:`.parse.history.HISTORY_FIELDS`, parsed by :func:`.parse.history.parse_history`
        (completed GPU runs, FAILED/OUT_OF_MEMORY ones, the earlier runs of a requeued job;
        rows it cannot read are counted in ``junk``, not errors)."""
        ...

    def job_outlook(self, job_id: str) -> JobOutlook:
        """Slurm's view of one job now: state, pending reason, priority and start time (the
        scheduler's estimate while pending, None when it has none). :class:`JobGone` when
        Slurm no longer knows the job."""
        ...

    def job_priority_factors(self, job_id: str) -> list[PriorityFactors]:
        """The multifactor priority of a pending job and the weighted factors behind it, one
        entry per partition it may run in (``sprio``); [] when the job is not pending or not
        yet eligible (held, begin time ahead), which is Slurm's answer, not an error."""
        ...

    def can_retype_gpu(self) -> bool:
        """Whether this Slurm can change a GPU request that is already typed, and so undo a
        type we pin (>= 23.11). The controller pins gres types only where it can; raises
        :class:`SlurmError` when the version cannot be read."""
        ...

    def site_factor_plugin(self) -> str:
        """The plugin that sets jobs' site factors (slurm.conf ``PrioritySiteFactorPlugin``), ""
        for none (``site_factor/none`` or unset). Such a plugin overwrites every site factor the
        controller pushes, so the controller pushes none. Raises :class:`SlurmError` when the
        configuration cannot be read."""
        ...

    # --- write (pending jobs) -----------------------------------------------------------------
    def set_gpu_type(self, job: SlurmJob, gpu_type: str | None) -> None:
        """Pin (or with None: unpin) the GPU type of a pending job, keeping its GPU count and
        the form of its request (TresPerNode for --gres/--gpus-per-node, TresPerJob for --gpus)."""
        ...

    def restore_gpu_request(self, job: SlurmJob, raw: str) -> None:
        """Put back a GPU request exactly as recorded before the first rewrite (revert)."""
        ...

    def set_gpu_types(self, changes: Sequence[tuple[SlurmJob, str | None]]) -> dict[str, SlurmError | ValueError]:
        """:meth:`set_gpu_type` for many jobs, in as few Slurm calls as this Slurm allows (one
        per new request and chunk where it replaces a request in one update, >= 23.11); returns
        the jobs *not* changed, each with its error (:class:`JobGone` for one that ended)."""
        ...

    def restore_gpu_requests(self, changes: Sequence[tuple[SlurmJob, str]]) -> dict[str, SlurmError | ValueError]:
        """:meth:`restore_gpu_request` for many jobs, as :meth:`set_gpu_types`."""
        ...

    def set_priority(self, job_id: str, priority: int | None) -> None:
        """Fix a job's priority, or with None give it back to priority/multifactor."""
        ...

    def set_nice(self, job_id: str, nice: int) -> None: ...

    def hold(self, job_id: str) -> None: ...

    def release(self, job_id: str) -> None: ...

    def requeue(self, job_id: str) -> None:
        """Requeue a running job that opted in (``--requeue`` + ``fair:preemptible``)."""
        ...

    def update_job(self, job_id: str, fields: Mapping[str, str]) -> None:
        """Other pending-job fields: Partition, QOS, ReqNodeList, Features."""
        ...

    def update_jobs(self, job_ids: Sequence[str], fields: Mapping[str, str]) -> dict[str, SlurmError]:
        """The same ``fields`` (those of :meth:`update_job`, or ``Nice``/``Priority`` as
        integers) on many pending jobs, in as few Slurm calls as the backend allows; returns
        the jobs that were *not* changed, each with its error (:class:`JobGone` for one that
        ended). A controller cycle over thousands of jobs is paced by these calls."""
        ...

    # --- QOS ----------------------------------------------------------------------------------
    def ensure_qos(self, name: str, grp_tres: Mapping[str, int | None], exists: bool | None = None) -> None:
        """Create the QOS when missing and set its GrpTRES (``{"gres/gpu:v100": 8}``; a value
        of None removes that limit). ``exists`` is what the caller already knows (from a
        snapshot), so the backend need not ask; None: ask."""
        ...

    def delete_qos(self, name: str) -> None: ...

    def attach_qos(self, account: str, qos: str, default: bool = True) -> None:
        """Allow ``qos`` on ``account`` (and make it the default QOS when ``default``)."""
        ...

    def detach_qos(self, account: str, qos: str) -> None: ...
