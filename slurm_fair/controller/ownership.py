"""Which job fields are the controller's, read from Slurm and the state store (pure).

The rule (docs/controller.md, "What slurm-fair changes in your Slurm"): a field is the site's
until the controller writes it; it stays the controller's while Slurm shows what the controller
wrote; the moment it shows anything else, someone changed it after us (a user's ``scontrol
update``, an administrator, the site's own tooling) and their value wins: the field is
*released*, never written again by the controller, and ``revert`` leaves it as they set it.

Values are compared in a canonical form (:func:`canonical`): a partition list as a sorted set
(Slurm prints ``-p gpu,v100`` as ``v100,gpu``), a node list folded, a GPU request by its GPU type.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from ..slurm.model import SlurmJob
from ..slurm.parse.fields import fold_hostlist
from ..slurm.parse.gres import gpu_request_of
from .state.fields import Owned


def current(job: SlurmJob, name: str) -> str | None:
    """The value of field ``name`` of ``job`` as Slurm shows it now (None: Slurm did not say,
    e.g. the site factor of a job sprio does not list)."""
    if name == "partition":
        return job.partition
    if name == "gres":
        return job.gpu_request.raw if job.gpu_request else ""
    if name == "site_factor":
        return None if job.site_factor is None else str(int(job.site_factor))
    if name == "nodes":
        return fold_hostlist(job.req_nodes)
    if name == "qos":
        return job.qos
    if name == "nice":
        return str(int(job.nice))
    if name == "priority":
        return str(int(job.priority))
    raise ValueError(f"unknown job field {name!r}")


def canonical(name: str, value: str | None) -> str | None:
    """The form two values of field ``name`` are compared in (module docstring)."""
    if value is None:
        return None
    if name == "partition":
        return ",".join(sorted(p for p in value.split(",") if p))
    if name == "gres":
        # compared by GPU type: the controller writes a type (``v100``) into a request Slurm
        # shows whole (``TresPerNode=gres:gpu:v100:1``); the original is kept whole for revert
        if ":" not in value and "=" not in value:
            return value
        return gpu_request_of(value.split("=", 1)[-1])[1] or ""
    if name == "site_factor":
        return str(int(value or 0))
    return value


def same(name: str, a: str | None, b: str | None) -> bool:
    return canonical(name, a) == canonical(name, b)


@dataclass(frozen=True)
class Reading:
    """What a cycle reads from its rows and the snapshot (:func:`reconcile`)."""

    #: key -> the row as it should be stored now
    updates: Mapping[tuple[str, str], Owned] = field(default_factory=dict)
    #: keys of jobs that ended, and of fields that hold their original value again (rows to
    #: forget)
    ended: frozenset[tuple[str, str]] = frozenset()
    #: keys someone else changed after us, this cycle (for the cycle's output)
    newly_released: frozenset[tuple[str, str]] = frozenset()
    #: key -> the value the controller holds now (None: not ours; released)
    ours: Mapping[tuple[str, str], str] = field(default_factory=dict)


def reconcile(owned: Mapping[tuple[str, str], Owned], jobs: Mapping[str, SlurmJob], at: float) -> Reading:
    """Settle every row against what Slurm shows at time ``at`` (``jobs``: every job Slurm
    lists, in or out of the pilot's scope; a row of a job not listed is of a job that ended).

    * an intent Slurm shows was written: confirmed; one Slurm does not show, while the field
      still holds what it held before, was never written: dropped; anything else is a change
      by someone else: released;
    * a write in doubt (it timed out, :mod:`.state.fields`) that Slurm shows landed late: it is
      what the controller wrote; its doubt ends at ``doubt_until``, not before (a late write
      can land after later ones);
    * with no intent in flight, a field that no longer holds what the controller wrote is
      released (a legacy row: ours while it differs from its original);
    * a field of a pending job that holds its original value again (given back, by us or by
      its owner) is no longer the controller's: the row goes, or, while a write is in doubt,
      stays with nothing written;
    * a running job's fields cannot change (Slurm refuses), and a value Slurm did not show
      (``current`` None) proves nothing: such rows are left as they are.
    """
    updates: dict[tuple[str, str], Owned] = {}
    ended: set[tuple[str, str]] = set()
    released: set[tuple[str, str]] = set()
    ours: dict[tuple[str, str], str] = {}
    for key, row in owned.items():
        job = jobs.get(row.job_id)
        if job is None:
            ended.add(key)
            continue
        if row.released:
            continue
        doubt = row.doubt_open(at)
        # past its window a doubted write is kept as *late*: most likely it never lands, but if
        # Slurm ever shows exactly that value it is the controller's late write, not another's
        got = _settle(row, current(job, row.field), job.pending, doubt, row.doubt if doubt is None else None)
        if got is None:
            ended.add(key)
            continue
        new, mine = got
        if new != row:
            updates[key] = new
            if new.released:
                released.add(key)
        if mine is not None:
            ours[key] = mine
    return Reading(updates, frozenset(ended), frozenset(released), ours)


def _settle(row: Owned, now: str | None, pending: bool, doubt: str | None,
            late: str | None = None) -> tuple[Owned, str | None] | None:
    """One row against the value Slurm shows (:func:`reconcile`): the row as it stands now and
    the value the controller holds (None: not its); None when the row goes. ``late``: the value
    of a doubted write whose window is over (it may still land, later than anyone expects:
    seeing exactly it is the controller's write)."""
    f = row.field
    if now is None or not pending:
        if row.written is not None:
            return row, row.written
        if row.legacy and now is not None and not same(f, now, row.original):
            return row, now
        return row, None
    pending_write = doubt if doubt is not None else late
    if same(f, now, row.original) and (row.written is None or same(f, row.written, row.original)
                                       or (row.intent is not None and same(f, row.intent, row.original))
                                       or (pending_write is not None and same(f, pending_write, row.original))):
        # given back (or never written): the field is the site's again, unless a write of
        # another value may still land (in its window, or late)
        if pending_write is not None and not same(f, pending_write, row.original):
            kept = replace(row, written=None, intent=None)
            return (kept, None) if kept != row or late is None else (row, None)
        return None
    if row.intent is not None and same(f, now, row.intent):
        return replace(row, written=row.intent, intent=None), row.intent
    if doubt is not None and same(f, now, doubt):
        return replace(row, written=doubt, intent=None), doubt
    if late is not None and same(f, now, late) and not same(f, now, row.written):
        # the write that timed out landed after its window: the controller's, to give back
        return replace(row, written=late, intent=None, doubt=None, doubt_until=0.0), late
    if row.intent is not None:
        before = row.written if row.written is not None else row.original
        if same(f, now, before):
            return replace(row, intent=None), row.written
        return replace(row, intent=None, released=True), None
    if row.legacy:
        return row, (now if not same(f, now, row.original) else None)
    if same(f, now, row.written):
        return row, now
    return replace(row, released=True), None
