"""The pilot: which jobs, partitions and GPUs a controller manages (pure).

``[controller] manage_accounts`` and ``manage_partitions`` (both empty: everything) let an admin
run slurm-fair on part of a cluster beside everyone else's jobs. A job is *managed* when its
account is one of the pilot's and every partition it asked for is one of the pilot's; nothing
else is planned, ordered or written, by cycles or by ``job_submit.lua``. Only the pilot's
partitions are steering targets, and only the GPUs of their nodes are planned, minus what
unmanaged jobs running there hold now (``foreign``): the plan never hands out GPUs that
someone outside the pilot is using.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from ..slurm.model import Node, SlurmJob, Snapshot
from .asked import Request, requests
from .ownership import Reading, reconcile
from .problem import Asked
from .state.fields import Owned
from .steer import job_partitions


@dataclass(frozen=True)
class Scope:
    """The pilot (empty sets: every account, every partition)."""

    accounts: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()

    @classmethod
    def of(cls, accounts: Iterable[str] = (), partitions: Iterable[str] = ()) -> "Scope":
        return cls(frozenset(accounts), frozenset(partitions))

    def partition(self, name: str) -> bool:
        return not self.partitions or name in self.partitions

    def manages(self, job: SlurmJob, asked: str) -> bool:
        """The job's account is the pilot's and every partition it asked for is."""
        if self.accounts and job.account not in self.accounts:
            return False
        return all(self.partition(p) for p in job_partitions(asked)) if self.partitions else True


@dataclass(frozen=True)
class PilotView:
    """The snapshot as the pilot sees it (:func:`pilot_view`)."""

    snapshot: Snapshot
    #: node -> GPU type -> GPUs that running unmanaged jobs hold there
    foreign: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: jobs Slurm lists that the pilot does not manage
    outside: tuple[SlurmJob, ...] = ()


def pilot_view(snapshot: Snapshot, scope: Scope, asked: Mapping[str, Request]) -> PilotView:
    """Only the managed jobs (by the partitions each asked for, ``asked``:
    :func:`.asked.requests`), the nodes of the pilot's partitions (each carrying only the
    pilot's partition names, so nothing else is a steering target), and what outsiders hold on
    them."""
    mine: list[SlurmJob] = []
    outside: list[SlurmJob] = []
    for j in snapshot.jobs:
        (mine if scope.manages(j, asked[j.job_id].partition) else outside).append(j)
    if not scope.accounts and not scope.partitions:
        return PilotView(snapshot, {}, tuple(outside))
    nodes: list[Node] = []
    for n in snapshot.nodes:
        parts = tuple(p for p in n.partitions if scope.partition(p))
        if parts:
            nodes.append(replace(n, partitions=parts, tiers={p: t for p, t in n.tiers.items() if p in parts}))
    kept = {n.name for n in nodes}
    foreign: dict[str, dict[str, int]] = {}
    for j in outside:
        if not j.running or not j.gpu_type_running:
            continue
        for node, gpus in j.gpus_on_nodes().items():
            if node in kept:
                per = foreign.setdefault(node, {})
                per[j.gpu_type_running] = per.get(j.gpu_type_running, 0) + gpus
    view = replace(snapshot, jobs=tuple(mine), nodes=tuple(nodes))
    return PilotView(view, foreign, tuple(outside))


@dataclass(frozen=True)
class Pilot:
    """Everything a cycle (or ``revert``) knows about whose is what (:func:`read_pilot`)."""

    view: PilotView
    #: the whole snapshot (every partition's rules, every job)
    whole: Snapshot
    #: the store's rows settled against Slurm (:func:`.ownership.reconcile`)
    reading: Reading
    #: the rows as they stand after the reading (ended jobs gone)
    owned: Mapping[tuple[str, str], Owned]
    #: what each managed job asked for and what outsiders hold (:class:`.problem.Asked`)
    asked: Asked
    #: fields someone else changed after the controller: never written again
    released: frozenset[tuple[str, str]]
    #: what every job Slurm lists asked for (:func:`.asked.request_of`): the cycle's one value
    requests: Mapping[str, Request] = field(default_factory=dict)


def settled(owned: Mapping[tuple[str, str], Owned], reading: Reading) -> dict[tuple[str, str], Owned]:
    """``owned`` with ``reading`` applied: the rows the store holds once it is recorded."""
    out = {}
    for key, row in owned.items():
        if key in reading.ended:
            continue
        out[key] = reading.updates.get(key, row)
    return out


def read_pilot(whole: Snapshot, owned: Mapping[tuple[str, str], Owned], scope: Scope) -> Pilot:
    """Settle the rows against Slurm, then the pilot's view and what each of its jobs asked."""
    reading = reconcile(owned, {j.job_id: j for j in whole.jobs}, whole.taken_at.timestamp())
    rows = settled(owned, reading)
    reqs = requests(whole.jobs, rows)
    view = pilot_view(whole, scope, reqs)
    mine = [reqs[j.job_id] for j in view.snapshot.jobs]
    asked = Asked({r.job_id: r.partition for r in mine}, {r.job_id: r.nodes for r in mine},
                  {r.job_id: r.choice for r in mine if r.choice}, {r.job_id: r.gres for r in mine}, view.foreign)
    released = frozenset(k for k, r in rows.items() if r.released) | \
        {(r.job_id, "partition") for r in reqs.values() if r.moved}
    return Pilot(view, whole, reading, rows, asked, released, reqs)
