"""What a job asked for: one value per job per cycle, made by one function (pure).

Every phase that needs to know where a job asked to run (the pilot's scope, the problem's
types, the plan's steering targets, the diff's and ``revert``'s give-backs, ``failsafe``)
reads the :class:`Request` :func:`request_of` makes; none re-derives it. The rules, one per
field, each deciding between what the job shows now, what the controller recorded before it
first wrote the field (:mod:`.ownership`), and what the submit plugin recorded:

* **partition**
  - a row of the controller's that Slurm still shows (the controller moved the job): what the
    job held before that move, or, when that was where the submit plugin had put it, what the
    job was submitted to (the plugin's mark);
  - a *released* row (someone moved the job after the controller): the job's partition now.
    A user's later move always wins, also over the plugin's record;
  - no row: the submit plugin's record while the job is still where the plugin put it
    (:attr:`Request.routed`); once anyone else moved it, its partition now, and the field is
    theirs (:attr:`Request.moved`): the plugin's write was slurm-fair's, so a change after it
    releases the field as a change after the controller's own does (:mod:`.ownership`), and
    it is never written again. A job back in the partition it was submitted to reads as
    submitted there (a give-back puts it there too);
* **node list** and **GPU request**: the value before the controller's first write while the
  controller's row holds (not released); otherwise the job's value now;
* **exclusions, reservation, features, hold, dependency**: the controller never writes them,
  so always the job's now; they only decide :attr:`Request.choice`
  (:func:`.steer.user_choice`).

The submit plugin's record (``job_submit.lua``) lives in the admin comment, which users cannot
set: ``slurm-fair:partition=<asked> slurm-fair:routed=<set>``. ``routed`` says which partitions
the plugin gave the job, so a later move by its user (``scontrol update Partition=...``, to one
partition or several) is told apart from the plugin's own. A mark without ``routed`` (written
before this record existed) is trusted while the job is anywhere but its asked partition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..slurm.model import SlurmJob
from ..slurm.parse.fields import fold_hostlist
from .ownership import same
from .state.fields import Owned
from .steer import user_choice

#: what the submit plugin writes into a job's admin comment when it chooses the partitions:
#: the partition(s) the job asked for, and the partition(s) it gave the job
SUBMITTED_MARK = "slurm-fair:partition="
ROUTED_MARK = "slurm-fair:routed="
_LIST = r"([A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*)(?:\s|$)"
_ASKED = re.compile(r"(?:^|\s)" + re.escape(SUBMITTED_MARK) + _LIST)
_ROUTED = re.compile(r"(?:^|\s)" + re.escape(ROUTED_MARK) + _LIST)


@dataclass(frozen=True)
class Mark:
    """The submit plugin's record in a job's admin comment."""

    asked: str
    #: the partition(s) the plugin gave the job (None: a mark from before this was recorded)
    routed: str | None


def plugin_mark(job: SlurmJob) -> Mark | None:
    """The submit plugin's record of ``job`` (None: the plugin did not choose its partition)."""
    note = job.admin_comment or ""
    m = _ASKED.search(note)
    if m is None:
        return None
    r = _ROUTED.search(note)
    return Mark(m.group(1), r.group(1) if r else None)


def still_routed(job: SlurmJob, mark: Mark | None) -> bool:
    """Whether ``job`` is where the submit plugin put it (nobody moved it since)."""
    if mark is None:
        return False
    if mark.routed is None:
        return not same("partition", job.partition, mark.asked)
    return same("partition", job.partition, mark.routed)


@dataclass(frozen=True)
class Request:
    """What one job asked for (module docstring)."""

    job_id: str
    #: the partition(s) it asked for
    partition: str
    #: the node list it asked for (folded hostlist; "" for none)
    nodes: str
    #: its GPU request as it asked (raw; "" for none)
    gres: str
    #: the submit plugin chose its partition, nobody moved it since, and the controller holds no
    #: partition row of it: a give-back puts ``partition`` back
    routed: bool = False
    #: why where it runs is its owner's to decide (None: the controller may steer it)
    choice: str | None = None
    #: someone moved the job after the submit plugin routed it: its partition is theirs, never
    #: written again (a release without a row)
    moved: bool = False


def _held(owned: Mapping[tuple[str, str], Owned], job_id: str, name: str) -> Owned | None:
    """The controller's row of a field it still holds (not released by someone's change)."""
    row = owned.get((job_id, name))
    return row if row is not None and not row.released else None


def request_of(job: SlurmJob, owned: Mapping[tuple[str, str], Owned]) -> Request:
    """What ``job`` asked for, from the job as Slurm shows it and the controller's rows
    (settled against that same snapshot: :func:`.scope.settled`); the rules of the module
    docstring."""
    mark = plugin_mark(job)
    row = owned.get((job.job_id, "partition"))
    routed = moved = False
    if row is not None and not row.released:
        before = row.original
        plugin_had = mark is not None and (same("partition", before, mark.routed) if mark.routed is not None
                                           else not same("partition", before, mark.asked))
        partition = mark.asked if plugin_had and mark is not None else before
    elif row is None and still_routed(job, mark) and mark is not None:
        partition, routed = mark.asked, True
    else:
        partition = job.partition
        # back where it was submitted reads as submitted there: a give-back (revert's, a
        # cycle's) puts it there too, and must not freeze the job out of steering
        moved = row is None and mark is not None and mark.routed is not None and \
            not same("partition", job.partition, mark.asked)
    pin = _held(owned, job.job_id, "nodes")
    nodes = pin.original if pin is not None else fold_hostlist(job.req_nodes)
    gres_row = _held(owned, job.job_id, "gres")
    gres = gres_row.original if gres_row is not None else (job.gpu_request.raw if job.gpu_request else "")
    return Request(job.job_id, partition, nodes, gres, routed, user_choice(job, partition, nodes), moved)


def requests(jobs: Iterable[SlurmJob], owned: Mapping[tuple[str, str], Owned]) -> dict[str, Request]:
    """:func:`request_of` of every job: the cycle's (or ``revert``'s) one value per job."""
    return {j.job_id: request_of(j, owned) for j in jobs}
