"""A site's own accounting as a simulator workload (``simulate --sacct-file``, ``--from-slurm``).

The history is the rows ``speeds learn`` reads (:func:`slurm_fair.slurm.parse.history.parse_history`,
the one sacct parser), with the timing columns ``Submit|Start|End|Timelimit|NNodes``. Each job
that held GPUs becomes a :class:`~.workload.TraceJob`:

* **tenant**: its account (``tenant_by="account"``) or its user (``"user"``);
* **arrival**: its submit time (the earliest of its runs: a requeue resets Slurm's SubmitTime),
  re-based to the history's first;
* **gang**: its GPUs and nodes (``NNodes``; ``gpus / nodes`` per node, as ``sbatch -N``);
* **speeds** ``T_jk``: the relative speed per type (fastest 1) of its group (user + job name +
  GPUs) from the learner (:func:`slurm_fair.estimates.learn.learn` on the same history: its
  own runs, else its name's pool over users), else the type priors; ``speed_sources`` counts the
  jobs on each;
* **work**: the time it ran on each type times its speed there, so a job placed where it ran
  takes exactly the time it took.

Jobs that ran and then failed, timed out, were cancelled or lost their node did the work they did
before they stopped (a replay cannot know what more they would have done); jobs still running do
the work done so far. Jobs that never ran (pending, cancelled before a start), held no GPU, or
whose GPU type cannot be told are not simulated, and counted (``left_out``). Array tasks are jobs
of their own; a requeued job's runs are joined (``sacct -D``).

The cluster is the inventory when given, else the history's: each node's type (typed AllocTRES,
else the inventory or ``--node-type``), its GPUs the most it held at once; per type, the nodes take
the largest size seen (:class:`~.cluster.ClusterSpec` has one size per type).

The history as it happened is kept as :class:`~.metrics.JobRecord` (same ids, same times), so
``metrics.summarize`` scores it with the definitions it scores a simulation with.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..errors import UserError
from ..estimates.gavel import ThroughputTable
from ..estimates.history import failures_from_history, nodes_seen_typed, runs_from_history
from ..estimates.learn import ANY_USER, Model, learn
from ..estimates.priors import prior_speeds
from .cluster import ClusterSpec
from .metrics import JobRecord
from .slurmlike import Node
from .workload import TraceJob, Workload, make_workload

#: :class:`slurm_fair.slurm.parse.history.History` and its rows, the parsed accounting (the
#: simulator reads what the one sacct parser made of it and never imports Slurm's side)
History = Any
HistoryRow = Any

#: a group's speed on a type it never completed a run on: ``drawn`` (:func:`varied`) or the
#: learner's ``mean``
UNSEEN_SPEEDS = ("drawn", "mean")
#: who a tenant is: ``--tenant-by``
TENANT_LEVELS = ("account", "user")
#: end states of jobs that ran and stopped before they completed (their work is what they did)
STOPPED = ("FAILED", "OUT_OF_MEMORY", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED", "DEADLINE", "BOOT_FAIL",
           "REQUEUED", "REVOKED", "SUSPENDED")


@dataclass(frozen=True)
class HistoricJob:
    """What a job of the history was, beyond what the simulator needs."""

    user: str
    job_name: str
    state: str
    time_limit_s: float | None
    #: the job id Slurm gave it (the workload's id is ``tenant/job id``)
    slurm_id: str


@dataclass(frozen=True)
class Replay:
    """A history made ready to simulate, with the history itself as records."""

    workload: Workload
    cluster: ClusterSpec
    table: ThroughputTable
    #: the jobs as they ran (ids and time origin of the workload's)
    history: tuple[JobRecord, ...]
    jobs: Mapping[str, HistoricJob]
    #: simulated jobs by how they ended in the history
    ended: Mapping[str, int]
    #: jobs (or rows) not simulated, by reason
    left_out: Mapping[str, int]
    #: simulated jobs by where their speeds come from: learned (own group), pooled (its job
    #: name's runs over users), prior
    speed_sources: Mapping[str, int]
    #: the history's start (seconds since the epoch): the workload's time 0
    origin_s: float = 0.0
    notes: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    #: the cluster's nodes in Slurm's order (weight, then name), for the modelled Slurm
    #: (:mod:`.slurmlike`)
    nodes: tuple[Node, ...] = ()
    #: the type priors' relative speeds: where the learner says a group fails on a type (speed
    #: 0) its work there was counted at these, and Slurm, which knows nothing of it, runs it so
    prior_rel: Mapping[str, float] = field(default_factory=dict)

    @property
    def limits(self) -> dict[str, float | None]:
        """Each simulated job's time limit (s; None: not in the history)."""
        return {j.id: self.jobs[j.id].time_limit_s for j in self.workload.jobs}

    def describe(self) -> dict[str, object]:
        """JSON-friendly (goes under ``"history"`` in the results)."""
        return {"jobs_simulated": len(self.workload.jobs), "ended": dict(self.ended), "left_out": dict(self.left_out),
                "speed_sources": dict(self.speed_sources), "counts": dict(self.counts), "notes": list(self.notes)}


def _tenant(row: HistoryRow, tenant_by: str) -> str:
    if tenant_by == "user":
        return row.user
    return row.account or f"(no account: {row.user})"


def _cluster_from_history(rows: Iterable[HistoryRow], node_types: Mapping[str, str]) -> tuple[ClusterSpec, list[Node]]:
    """Per node, the most GPUs it held at once; per type, the nodes at the largest size seen
    (and those nodes by name, Slurm's order when no weight says otherwise)."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in rows:
        if not r.nodes or r.start_s is None:
            continue
        per_node = math.ceil(r.gpus / len(r.nodes))
        end = r.end_s if r.end_s is not None and r.state != "RUNNING" else math.inf
        for n in r.nodes:
            events[n].append((r.start_s, per_node))
            events[n].append((end, -per_node))
    held: dict[str, int] = {}
    for n, ev in events.items():
        ev.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same second
        now = most = 0
        for _, d in ev:
            now += d
            most = max(most, now)
        held[n] = most
    capacity: dict[str, int] = defaultdict(int)
    largest: dict[str, int] = defaultdict(int)
    for n, gpus in held.items():
        k = node_types.get(n)
        if k is None or gpus <= 0:
            continue
        capacity[k] += gpus
        largest[k] = max(largest[k], gpus)
    if not capacity:
        raise UserError("the history names no node of a known GPU type: give --inventory FILE or --node-type HOSTLIST=TYPE")
    # whole nodes of the largest size: a site's nodes of one type are usually alike
    nodes = [Node(n, node_types[n], largest[node_types[n]]) for n in sorted(held)
             if held[n] > 0 and node_types.get(n) in largest]
    return (ClusterSpec({k: largest[k] * math.ceil(c / largest[k]) for k, c in capacity.items()},
                        node_gpus=dict(largest)), nodes)


def _source(model: Model, group: tuple[str, str, int]) -> tuple[str, Mapping[str, float] | None]:
    """Where a group's speeds come from, and them: its own runs, its name's pool, else the
    site's priors (moved by the site's type offsets, over its family mix: :attr:`Model.site`)."""
    belief = model.belief(group)
    if belief is None or "learned" not in belief.sources.values():
        return "prior", (model.site.speed if model.site is not None else None)
    return ("pooled" if belief.group[0] == ANY_USER else "learned"), belief.speed


def _draw(group: tuple[str, str, int], gpu_type: str, seed: int = 0) -> float:
    """A standard normal fixed by the group, type and ``seed`` (the same replay every run, any
    process; seed 0 is the draw of earlier releases)."""
    parts = (group[0], group[1], str(group[2]), gpu_type) + ((str(seed),) if seed else ())
    key = "\0".join(parts).encode()
    return random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")).gauss(0.0, 1.0)


def varied(speed: Mapping[str, float], group: tuple[str, str, int], completed_on: Iterable[str],
           spread: float, seed: int = 0) -> dict[str, float]:
    """A group's speeds with its own deviation drawn on the types it never completed a run on.

    The learner's answer there is the posterior mean: every group of a family gets the same
    ratio, so a replay built on it has less comparative advantage between groups than the site
    has, and a policy that places groups where they are comparatively fast (oef) shows less
    gain than it would have had. A replay wants a site *like* this one, not each group's best
    guess: each such type gets ``exp(spread * z)`` (``spread``: :attr:`Model.group_spread`, the
    site's between-group spread measured on the groups that ran on two types; ``z`` fixed by
    group, type and ``seed``: ``simulate --seed``, another site like it), fastest 1.0 again;
    types it completed on, and types marked failing (0), keep what was learned. The site's
    total gain is then right in distribution; which job gains is not known from a type nobody
    of the group ran on."""
    done = {k for k in completed_on if speed.get(k, 0.0) > 0}
    # the group's level is known only through its own deviations on the types it completed on
    # (their mean, m of them): every type it never ran on shares that error, N(0, spread^2 / m)
    common = spread * _draw(group, "", seed) / math.sqrt(len(done)) if done else 0.0
    logs = {k: math.log(v) + (0.0 if k in done else common + spread * _draw(group, k, seed))
            for k, v in speed.items() if v > 0}
    if not logs or spread <= 0:
        return dict(speed)
    top = max(logs.values())
    return {k: math.exp(logs[k] - top) if k in logs else 0.0 for k in speed}


def _ran(history: History) -> tuple[list[HistoryRow], Counter]:
    """The rows of jobs that ran on GPUs (one per job id), and why the others are left out."""
    left_out: Counter = Counter()
    ran: list[HistoryRow] = []
    seen: set[str] = set()
    for r in [*history.rows, *history.failed, *history.ended]:
        if r.job_id in seen:
            left_out["duplicate job id"] += 1
        elif not r.nodes or r.start_s is None or not r.elapsed_s > 0:
            left_out[f"never ran ({r.state})"] += 1
        elif r.gpus <= 0:
            left_out[f"no GPU ({r.state})"] += 1
        elif r.submit_s is None:
            left_out["no submit time"] += 1
        else:
            seen.add(r.job_id)
            ran.append(r)
    rows_out = ("job step", "junk", "no GPU", "no elapsed time")
    left_out.update({f"rows: {k}": v for k, v in history.skipped.items() if k in rows_out})
    if history.ended_junk:
        left_out["unreadable rows"] += len(history.ended_junk)
    return ran, left_out


def _model(history: History, types_of: Mapping[str, str], cluster: ClusterSpec) -> Model:
    """The learner (``speeds learn``'s) on the history's completed and failed runs."""
    runs, _ = runs_from_history(history.rows, types_of)
    failures = failures_from_history(history.failed, types_of)
    return learn([r for r in runs if r.gpu_type in cluster.capacity], sorted(cluster.capacity),
                 [f for f in failures if f.gpu_type in cluster.capacity])


@dataclass
class _Built:
    """What :func:`build_replay` gathers job by job."""

    jobs: list[TraceJob] = field(default_factory=list)
    meta: dict[str, HistoricJob] = field(default_factory=dict)
    records: list[JobRecord] = field(default_factory=list)
    data: dict[str, dict[tuple[str, int], float]] = field(default_factory=dict)
    ended: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)


def build_replay(history: History, source: str, node_types: Mapping[str, str] | None = None,
                 cluster: ClusterSpec | None = None, tenant_by: str = "account",
                 nodes: Iterable[Node] | None = None, vary_unseen: bool = True, draw_seed: int = 0) -> Replay:
    """The history's jobs, cluster and speeds (see the module docstring); a UserError naming
    ``source`` when it cannot be replayed (no timing columns, nothing that ran). ``nodes``: the
    inventory's, in Slurm's order (given with ``cluster``). ``vary_unseen``: each group's speeds
    on the types it never completed on carry a drawn deviation of the site's between-group
    spread (:func:`varied`, drawn with ``draw_seed``); False: the learner's posterior mean there."""
    if tenant_by not in TENANT_LEVELS:
        raise UserError(f"--tenant-by {tenant_by!r}: expected one of {', '.join(TENANT_LEVELS)}")
    if not history.timed:
        raise UserError(f"{source}: a replay needs the columns Submit, Start and End (sacct -P -X -D -o "
                        "JobID,User,Account,JobName,Partition,AllocTRES,NodeList,Elapsed,State,Submit,Start,End,"
                        "Timelimit,NNodes)")
    types_of = {**nodes_seen_typed([*history.rows, *history.failed, *history.ended]), **(node_types or {})}
    ran, left_out = _ran(history)
    node_list = list(nodes or ())
    if cluster is None:
        cluster, seen = _cluster_from_history(ran, types_of)
        node_list = node_list or seen
    if not node_list:  # a cluster without node names: nodes of each type, types in name order
        node_list = ([Node(n.name, n.gpu_type, n.gpus) for n in cluster.nodes()] if cluster.has_nodes
                     else [Node(k, k, c) for k, c in sorted(cluster.capacity.items())])
    model = _model(history, types_of, cluster)
    priors = prior_speeds(sorted(cluster.capacity)).speed
    prior_rel = {k: v / max(priors.values()) for k, v in priors.items()}
    built = _Built(data={k: {} for k in cluster.capacity})
    arrivals = {r.job_id: history.first_submit.get(r.job_id, r.submit_s) for r in ran}
    origin = min((a for a in arrivals.values() if a is not None), default=0.0)
    for r in ran:
        runs = job_runs(r, types_of)
        if runs is None:
            left_out["GPU type unknown"] += 1
        elif {k for shares, _ in runs for k in shares} - set(cluster.capacity):
            left_out["GPU type not in the inventory"] += 1
        else:
            _add(built, r, runs, float(arrivals[r.job_id] or 0.0) - origin, origin, model, prior_rel, source,
                 tenant_by, vary_unseen, draw_seed)
    if not built.jobs:
        raise UserError(f"{source}: no job that ran on GPUs of a known type (left out: {dict(left_out) or 'nothing'})")
    table = ThroughputTable(built.data, source=f"speeds of {source}: learned from its completed runs, else the type priors")
    return Replay(make_workload(built.jobs, {}, [f"history({source})"]), cluster, table, tuple(built.records),
                  built.meta, dict(built.ended), dict(left_out), dict(built.sources), origin, tuple(model.warnings),
                  dict(built.counts), tuple(node_list), prior_rel)


def job_runs(r: HistoryRow, types_of: Mapping[str, str]) -> list[tuple[dict[str, float], float]] | None:
    """Each run of a job, a requeued job's earlier runs first: the share of its nodes of each GPU
    type (one type, or a gang over nodes of several: ``--gres=gpu:G`` names no type, sacct's
    AllocTRES shows both) and the seconds it ran; None when the type of one run cannot be told."""
    runs: list[tuple[dict[str, float], float]] = []
    for typed, nodes, seconds in [*r.earlier, (r.gpu_type, r.nodes, r.elapsed_s)]:
        if typed:
            runs.append(({typed: 1.0}, seconds))
            continue
        if not nodes or any(n not in types_of for n in nodes):
            return None
        counts = Counter(types_of[n] for n in nodes)
        runs.append(({k: c / len(nodes) for k, c in counts.items()}, seconds))
    return runs


def _add(built: _Built, r: HistoryRow, runs: list[tuple[dict[str, float], float]], arrival: float, origin: float,
         model: Model, prior_rel: Mapping[str, float], source: str, tenant_by: str, vary: bool = True,
         draw_seed: int = 0) -> None:
    """One job of the history (``runs``: :func:`job_runs`): its trace job, its speeds in the
    table, its record as it ran. A run of a gang over several types went at the pace of its
    slowest (Slurm's ranks wait for each other), in the replay's speeds."""
    group = (r.user, r.job_name, r.gpus)
    how, speed = _source(model, group)
    rel = dict(speed) if speed is not None else dict(prior_rel)
    if vary and model.group_spread > 0:
        own = model.groups.get(group)
        completed = [k for k, n in own.runs.items() if n > 0] if own is not None else []
        rel = varied(rel, group, completed, model.group_spread, draw_seed)
        built.counts["speeds drawn on a type the group never completed on"] += len(completed) < len(rel)
    # a type the learner marks failing keeps 0 (never placed there); the work done on it
    # before the job failed there is counted at the prior's ratio
    pace = {k: (rel[k] if rel[k] > 0 else prior_rel[k]) for k in rel}
    seconds: dict[str, float] = {}
    gpu_seconds: dict[str, float] = {}
    last_type = ""
    for shares, run_s in runs:
        last_type = min(shares, key=lambda k: (pace[k], k))
        seconds[last_type] = seconds.get(last_type, 0.0) + run_s
        for k, f in shares.items():
            gpu_seconds[k] = gpu_seconds.get(k, 0.0) + run_s * r.gpus * f
    if any(len(shares) > 1 for shares, _ in runs):
        built.counts["gangs over several types (at their slowest)"] += 1
    work = sum(e * pace[k] for k, e in seconds.items())
    tenant = _tenant(r, tenant_by)
    job_type = f"{r.user}|{r.job_name}"
    for k in built.data:
        built.data[k][(job_type, r.gpus)] = rel[k]
    nodes = r.nnodes or len(r.nodes)
    jid = f"{tenant}/{r.job_id}"
    built.jobs.append(TraceJob(jid, tenant, job_type, r.gpus, work, arrival,
                               nodes if nodes and r.gpus % nodes == 0 else None, where=f"{source} line {r.line}"))
    built.meta[jid] = HistoricJob(r.user, r.job_name, r.state, r.time_limit_s, r.job_id)
    running = r.state == "RUNNING" or r.end_s is None
    built.records.append(JobRecord(
        job_id=jid, tenant=tenant, arrival_s=arrival, start_s=float(r.start_s or 0.0) - origin,
        end_s=None if running else float(r.end_s or 0.0) - origin, gpu_type=last_type, gpus=r.gpus,
        work=work, throughput=rel, gpu_seconds=gpu_seconds, run_s=sum(seconds.values())))
    built.ended["RUNNING (work so far)" if running else r.state] += 1
    built.sources[how] += 1
    built.counts["array tasks"] += "_" in r.job_id
    built.counts["requeued (runs joined)"] += bool(r.earlier)
    built.counts["time limit known"] += r.time_limit_s is not None


@dataclass(frozen=True)
class HistorySource:
    """``simulate``'s history options: a file or Slurm, and how to read it."""

    sacct_file: str | None = None
    from_slurm: bool = False
    days: float | None = None
    inventory: str | None = None
    node_types: Mapping[str, str] = field(default_factory=dict)
    tenant_by: str = "account"
    strict: bool = False
    #: ``agnostic`` in a replay: ``slurm`` (:mod:`.slurmlike`, the site's scheduler) or ``policy``
    agnostic_as: str = "slurm"
    slurm_priority: str = "fifo"
    #: the fair-share factor of ``fairshare`` (:data:`.fairtree.FAIRSHARE_ALGORITHMS`)
    slurm_fairshare: str = "fair-tree"
    slurm_bf_interval_s: float = 30.0
    #: slurm.conf's node Weight (``--node-weight``; default equal: name order)
    node_weights: Mapping[str, float] = field(default_factory=dict)
    #: a group's speed on a type it never completed on (``--unseen-speeds``, :data:`UNSEEN_SPEEDS`)
    unseen_speeds: str = "drawn"
    #: the partition's ``TRESBillingWeights`` per GPU type (``--slurm-billing``; default: a GPU-second
    #: charges 1 whatever its type)
    slurm_billing: Mapping[str, float] = field(default_factory=dict)

    @property
    def given(self) -> bool:
        return bool(self.sacct_file) or self.from_slurm
