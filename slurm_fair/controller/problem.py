"""Phase 3b: the controller's allocation problem from a snapshot and the estimates.

What the controller knows and a generic Snapshot->Problem conversion does not:

* a typed job keeps its type: typed by the user, or by the submit plugin (``fair:auto``), or by
  an earlier version of ours — Slurm 22.05 cannot change a typed request. Its throughput is
  zeroed on every other type. Only where the request may be rewritten and rewritten back
  (``retype_ok``: ``[controller].pin_gres_type`` on a Slurm that can retype) does a type that
  we or the plugin chose stay ours to change;
* an untyped job submitted to a partition whose nodes have one GPU type only (the user chose
  ``-p v100``) keeps that type; one submitted to several types may only get the types of its
  *original* partition(s) (steering moves it into one of them, :mod:`.steer`);
* a running job that has not opted in to time-sharing cannot move: it is pinned to the type it
  runs on (the policy still counts it, so the tenant's share includes what it already holds);
* a gang runs where some nodes can hold it (:mod:`slurm_fair.gangs`): ``--gres=gpu:8`` needs a
  node with 8 GPUs (and the CPUs and memory it asks for per node), so the problem carries the
  schedulable nodes and every job its shape, and a type whose nodes cannot hold the gang gets
  ``T_jk = 0``; a type where Slurm already refused the job (``BadConstraints`` after we sent it
  there, ``bad_types``) too; a job that fits nowhere is left out (with a warning) rather than
  making the whole problem infeasible;
* tenant weights (:func:`tenant_weights`, the one rule, which the reports use too):
  ``[tenants.NAME].weight`` from the configuration, else the account's Slurm shares when > 0,
  else 1;
* history for the rounding step: ``received[j][k]`` is the share of the job's time in the system
  it spent running on ``k``, from the service the state store accumulated. A job's time in the
  system starts at its first submission: Slurm resets ``SubmitTime`` when a job is requeued, so
  the earlier of it and the controller's first sighting counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Iterable, Mapping

from ..estimates import runtime
from ..estimates.estimate import Estimate, group_key
from ..estimates.tags import plugin_typed, preemptible
from ..model import Job, NodeCapacity, Problem, type_holds
from ..slurm.model import Node, Snapshot, SlurmJob
from .history import History
from ..slurm.parse.fields import expand_hostlist
from ..slurm.parse.gres import gpu_request_of
from .steer import partition_type, reachable_types


def configured_weights(config: Any) -> dict[str, float]:
    """``[tenants.NAME].weight`` of every tenant table of the configuration that sets one."""
    return {name: float(spec["weight"]) for name, spec in config.tenants.items() if spec.get("weight") is not None}


def tenant_weights(tenants: Iterable[str], configured: Mapping[str, float],
                   shares: Mapping[str, float]) -> dict[str, float]:
    """``w_u`` of each tenant: configured, else its Slurm fair-share shares when > 0, else 1.

    The one weight rule: the controller's problem, ``snapshot --json`` and the reports use it,
    so a report judges the controller by the weights it used."""
    out = {}
    for t in tenants:
        w = configured.get(t)
        if w is None:
            s = shares.get(t, 0.0)
            w = s if s and s > 0 else 1.0
        out[t] = float(w)
    return out


def user_typed(
    job: SlurmJob,
    asked: str,
    gres_original: str | None = None,
    ptypes: Mapping[str, frozenset[str]] | None = None,
    retype_ok: bool = False,
) -> str | None:
    """The GPU type this job must keep, or None when the type is ours to choose.

    A typed request keeps its type unless ``retype_ok`` and the type is ours (we pinned it:
    ``gres_original``, the request before our first rewrite, was untyped) or the submit plugin's
    (``fair:auto``). An untyped job keeps the type of the partition it asked for (``asked``)
    when that partition has a single GPU type.
    """
    req_type = job.gpu_request.gpu_type if job.gpu_request else None
    if req_type:
        ours = gres_original is not None and gpu_request_of(gres_original.split("=", 1)[-1])[1] is None
        if retype_ok and (plugin_typed(job) or ours):
            return None
        return req_type
    return partition_type(asked, ptypes or {})


@dataclass(frozen=True)
class Asked:
    """What each job asked for, as the controller knows it (:func:`.asked.request_of`, the
    node list before any pin of ours) and why where it runs is its owner's choice
    (:func:`.steer.user_choice`); ``foreign``: GPUs per node and type that jobs outside the
    pilot hold (never handed out)."""

    partitions: Mapping[str, str] = field(default_factory=dict)
    nodes: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, str] = field(default_factory=dict)
    #: job -> its GPU request before the controller first rewrote it
    gres_original: Mapping[str, str] = field(default_factory=dict)
    foreign: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


#: choices that keep a job out of the problem: the plan cannot see where it may run (a
#: reservation's nodes, features), or it is not ready to run (held, waiting for a dependency)
LEFT_TO_SLURM = {"runs in a reservation", "asks for node features", "held", "waits for a dependency"}


@dataclass(frozen=True)
class BuiltProblem:
    problem: Problem
    #: jobs left out, with the reason (shown by run and explain)
    left_out: Mapping[str, str]
    #: job -> the type the user fixed (never retyped)
    fixed_type: Mapping[str, str]
    received: Mapping[str, Mapping[str, float]]
    prev: Mapping[str, str]
    #: GPUs per node each running job holds now (the rounding keeps a job on its nodes)
    prev_nodes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def _job_order(job: SlurmJob) -> tuple[int, str, str]:
    head, _, rest = job.job_id.partition("_")
    return (int(head) if head.isdigit() else 0, rest, job.job_id)


def _ts(d: datetime | None) -> float | None:
    return d.timestamp() if d is not None else None


def build_problem(
    snapshot: Snapshot,
    estimates: Mapping[str, Estimate],
    history: History,
    weights: Mapping[str, float],
    ptypes: Mapping[str, frozenset[str]] | None = None,
    retype_ok: bool = False,
    asked: Asked | None = None, run_ratios: runtime.Ratios | None = None,
) -> BuiltProblem:
    """The cycle's :class:`Problem` (pure). ``snapshot`` is the pilot's view (its jobs, its
    nodes); ``history`` what the controller remembers with this snapshot already counted
    (:meth:`History.advanced`): the service each job received, first sightings and the types
    Slurm refused a job in; ``weights`` the configured ones (:func:`tenant_weights`); ``asked``
    what each job asked for and what outsiders hold; ``run_ratios`` the use ratios of finished
    runs (:mod:`.learned`). A running job left out of the problem holds its GPUs like an outsider's."""
    asked = asked or Asked()
    up = [n for n in snapshot.nodes if n.schedulable]
    left_out = {sj.job_id: why for sj in snapshot.gpu_jobs() if (why := _left_to_slurm(sj, asked, estimates))}
    held = _charged(snapshot, left_out, up)
    nodes, capacity = _capacity(snapshot, up, asked, {j: w for j, w in left_out.items() if j not in held})
    prev_nodes: dict[str, dict[str, int]] = {}
    now = snapshot.taken_at.timestamp()
    job_service = history.job_service
    jobs: list[Job] = []
    fixed: dict[str, str] = {}
    received: dict[str, dict[str, float]] = {}
    prev: dict[str, str] = {}
    memo: dict[tuple[object, ...], Any] = {}  # thousands of jobs share a few shapes and host sets
    # a stable job order: squeue lists jobs by partition and priority, which our own changes
    # move; a reordered but otherwise equal problem must not get another (tied) answer
    for sj in sorted(snapshot.gpu_jobs(), key=_job_order):
        if sj.job_id in held:  # charged to its tenant, never touched (_charged)
            jobs.append(held[sj.job_id])
            prev[sj.job_id], prev_nodes[sj.job_id] = sj.gpu_type_running or "", sj.gpus_on_nodes()
        if sj.job_id in left_out:
            continue
        est = estimates[sj.job_id]
        g = sj.gpu_request.total if sj.gpu_request else 0
        shape = sj.shape
        hosts = _hosts(sj, up, asked, memo)
        gang = Job(id=sj.job_id, tenant=sj.account, gpus=g, throughput={}, gpus_per_node=shape.per_node,
                   max_nodes=shape.max_nodes, hosts=None if len(hosts) == len(up) else hosts)
        tput = {k: v for k, v in est.throughput.items()
                if k not in history.refused.get(sj.job_id, ()) and _type_holds(gang, k, nodes, capacity, memo)}
        partition = asked.partitions.get(sj.job_id) or sj.partition
        fixed_type = user_typed(sj, partition, asked.gres_original.get(sj.job_id), ptypes, retype_ok)
        if fixed_type:
            fixed[sj.job_id] = fixed_type
            tput = {k: v for k, v in tput.items() if k == fixed_type}
        elif ptypes:
            allowed = reachable_types(partition, ptypes)
            if allowed is not None:
                tput = {k: v for k, v in tput.items() if k in allowed}
        if sj.running and not preemptible(sj):
            tput = {k: v for k, v in tput.items() if k == sj.gpu_type_running}
        tput = {k: v for k, v in tput.items() if v > 0}
        if not tput:
            left_out[sj.job_id] = "fits on no schedulable GPU type"
            continue
        sighting = history.seen.get(sj.job_id)
        seen = [t for t in (_ts(sj.submit_time), sighting.first_seen if sighting else None) if t is not None]
        arrived = min(seen) if seen else now
        age = max(now - arrived, 0.0)
        service = job_service.get(sj.job_id, {})
        if age > 0:
            received[sj.job_id] = {k: min(s / age, 1.0) for k, s in service.items()}
        p = sj.gpu_type_running if sj.running else (sighting.last_type if sighting else None)
        if p:
            prev[sj.job_id] = p
        if sj.running and sj.gpu_type_running:
            prev_nodes[sj.job_id] = sj.gpus_on_nodes()
        jobs.append(replace(
            gang, throughput=tput, age_s=age, attained_s=_attained(sj, service, now), prev_type=p,
            extra=_extra(sj, run_ratios or {}),
        ))
    shares = {a.name: a.shares for a in snapshot.accounts}
    tenants = tenant_weights({j.tenant for j in jobs}, weights, shares)
    problem = Problem(gpu_types={k: c for k, c in capacity.items() if c > 0}, tenants=tenants, jobs=tuple(jobs),
                      nodes=nodes)
    return BuiltProblem(problem, left_out, fixed, received, prev, prev_nodes)


def _attained(sj: SlurmJob, service: Mapping[str, float], now: float) -> float:
    """The seconds a job has run: the service the controller counted, but never less than the
    run time of its current start as Slurm reports it (``now - StartTime``). The controller
    counts service only from the cycle it first saw a job, so after a restart (or when it was
    started beside running jobs) a running job would otherwise look younger than it is to the
    size estimate and the aging (``known_remaining`` and the wait ``age - attained``)."""
    counted = float(sum(service.values()))
    started = _ts(sj.start_time) if sj.running else None
    return max(counted, now - started) if started is not None else counted


def _extra(sj: SlurmJob, run_ratios: runtime.Ratios) -> dict[str, Any]:
    """A job's ``extra``: its state, its time limit and the use ratios of its group's finished
    runs (:func:`slurm_fair.estimates.runtime.sample`), all a site knows of its size (docs/oef.md,
    "Only what a site knows"; :func:`slurm_fair.fairness.known_remaining` reads them)."""
    out: dict[str, Any] = {"state": sj.state.upper()}
    if sj.time_limit_min:
        out["time_limit_s"] = 60.0 * sj.time_limit_min
        ratios = runtime.sample(run_ratios, group_key(sj), out["time_limit_s"]) if run_ratios else ()
        if ratios:
            out[runtime.EXTRA_KEY] = ratios
    return out


#: the ``extra`` key of a job the problem counts but the controller never touches (issue 39)
UNTOUCHED = "untouched"


def _charged(snapshot: Snapshot, left_out: Mapping[str, str], up: list[Node]) -> dict[str, Job]:
    """The running jobs left out of the planning (features, a reservation, no estimate: the
    plan cannot see where they may run) as the problem's jobs that charge their tenant: every
    GPU a tenant holds counts in its share, or a tenant could take more than its share by
    asking for a feature every node has. Each is pinned to the type it runs on, at the rate
    of a job that runs there (``n_jk = 1``: what it holds is what it uses), marked
    ``extra[UNTOUCHED]`` with the reason it is left out: the rounding keeps it where it runs
    and the plan never writes to it or requeues it (:func:`untouched`). A job on a node that
    is not schedulable holds GPUs the plan does not count at all, and stays out."""
    names = {n.name for n in up}
    out: dict[str, Job] = {}
    for sj in snapshot.gpu_jobs():
        why = left_out.get(sj.job_id)
        if not why or not sj.running or not sj.gpu_type_running or not sj.gpu_request:
            continue
        on = sj.gpus_on_nodes()
        if not on or not set(on) <= names:
            continue
        g = sum(on.values())
        out[sj.job_id] = Job(id=sj.job_id, tenant=sj.account, gpus=g, throughput={sj.gpu_type_running: 1.0},
                             age_s=0.0, prev_type=sj.gpu_type_running,
                             extra={"state": sj.state.upper(), UNTOUCHED: why})
    return out


def untouched(problem: Problem) -> frozenset[str]:
    """The jobs the problem counts and the controller never touches (:func:`_charged`)."""
    return frozenset(j.id for j in problem.jobs if j.extra.get(UNTOUCHED))


def _capacity(snapshot: Snapshot, up: list[Node], asked: Asked, left_out: Mapping[str, str]
              ) -> tuple[tuple[NodeCapacity, ...], dict[str, int]]:
    """The GPUs the plan may hand out, per node and per type: the schedulable nodes' GPUs minus
    what outsiders hold (``asked.foreign``) and what running jobs left out of the problem hold."""
    foreign = {n: dict(per) for n, per in asked.foreign.items()}
    for sj in snapshot.gpu_jobs():
        if sj.job_id in left_out and sj.running and sj.gpu_type_running:
            for node, gpus in sj.gpus_on_nodes().items():
                per = foreign.setdefault(node, {})
                per[sj.gpu_type_running] = per.get(sj.gpu_type_running, 0) + gpus
    nodes = tuple(
        NodeCapacity(n.name, k, free) for n in up for k, c in sorted(n.gpus_total.items())
        if (free := int(c) - foreign.get(n.name, {}).get(k, 0)) > 0
    )
    capacity: dict[str, int] = {}
    for nc in nodes:
        capacity[nc.gpu_type] = capacity.get(nc.gpu_type, 0) + nc.gpus
    return nodes, capacity


def _left_to_slurm(sj: SlurmJob, asked: Asked, estimates: Mapping[str, Estimate]) -> str:
    """Why a job is not part of the problem ("" when it is)."""
    if sj.job_id not in estimates:
        return "no throughput estimate"
    why = asked.choices.get(sj.job_id, "")
    return f"left to Slurm: {why}" if why in LEFT_TO_SLURM else ""


def _hosts(sj: SlurmJob, up: list[Node], asked: Asked, memo: dict[tuple[object, ...], Any]) -> frozenset[str]:
    """The schedulable nodes whose CPUs and memory hold one node's part of the job, within the
    node list it asked for and outside the nodes it excludes (``memo``: by everything read of
    the job, over one :func:`build_problem`)."""
    wanted = asked.nodes.get(sj.job_id)
    key = ("hosts", sj.min_cpus, sj.min_memory_mb, wanted, sj.exc_nodes)
    if key not in memo:
        names = {n.name for n in up if n.can_host(sj)}
        if wanted:
            names &= set(expand_hostlist(wanted))
        memo[key] = frozenset(names - set(sj.exc_nodes))
    found: frozenset[str] = memo[key]
    return found


def _type_holds(gang: Job, k: str, nodes: tuple[NodeCapacity, ...], capacity: Mapping[str, int],
                memo: dict[tuple[object, ...], Any]) -> bool:
    """:func:`~slurm_fair.model.type_holds`, by the gang's shape and hosts (``memo``)."""
    key = ("holds", k, gang.gpus, gang.gpus_per_node, gang.max_nodes, gang.hosts)
    if key not in memo:
        memo[key] = type_holds(gang, k, nodes, capacity.get(k, 0))
    held: bool = memo[key]
    return held
