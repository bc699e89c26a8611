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

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import UserError
from ..estimates.gavel import ThroughputTable
from ..estimates.history import failures_from_history, nodes_seen_typed, run_type, runs_from_history
from ..estimates.learn import ANY_USER, Model, learn
from ..estimates.priors import prior_speeds
from ..slurm.parse.history import History, HistoryRow
from .cluster import ClusterSpec
from .metrics import JobRecord
from .workload import TraceJob, Workload, make_workload

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

    def describe(self) -> dict[str, object]:
        """JSON-friendly (goes under ``"history"`` in the results)."""
        return {"jobs_simulated": len(self.workload.jobs), "ended": dict(self.ended), "left_out": dict(self.left_out),
                "speed_sources": dict(self.speed_sources), "counts": dict(self.counts), "notes": list(self.notes)}


def _tenant(row: HistoryRow, tenant_by: str) -> str:
    if tenant_by == "user":
        return row.user
    return row.account or f"(no account: {row.user})"


def _state(row: HistoryRow) -> str:
    return "COMPLETED" if row.state == "COMPLETED" else row.state


def _cluster_from_history(rows: Iterable[HistoryRow], node_types: Mapping[str, str]) -> ClusterSpec:
    """Per node, the most GPUs it held at once; per type, the nodes at the largest size seen."""
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
    return ClusterSpec({k: largest[k] * math.ceil(c / largest[k]) for k, c in capacity.items()},
                       node_gpus=dict(largest))


def _source(model: Model, group: tuple[str, str, int]) -> tuple[str, Mapping[str, float] | None]:
    belief = model.belief(group)
    if belief is None or "learned" not in belief.sources.values():
        return "prior", None
    return ("pooled" if belief.group[0] == ANY_USER else "learned"), belief.speed


def build_replay(history: History, source: str, node_types: Mapping[str, str] | None = None,
                 cluster: ClusterSpec | None = None, tenant_by: str = "account") -> Replay:
    """The history's jobs, cluster and speeds (see the module docstring); a UserError naming
    ``source`` when it cannot be replayed (no timing columns, nothing that ran)."""
    if tenant_by not in TENANT_LEVELS:
        raise UserError(f"--tenant-by {tenant_by!r}: expected one of {', '.join(TENANT_LEVELS)}")
    if not history.timed:
        raise UserError(f"{source}: a replay needs the columns Submit, Start and End (sacct -P -X -D -o "
                        "JobID,User,Account,JobName,Partition,AllocTRES,NodeList,Elapsed,State,Submit,Start,End,"
                        "Timelimit,NNodes)")
    everything = [*history.rows, *history.failed, *history.ended]
    types_of = {**nodes_seen_typed(everything), **(node_types or {})}
    left_out: Counter = Counter()
    ran: list[HistoryRow] = []
    seen: set[str] = set()
    for r in everything:
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
    if cluster is None:
        cluster = _cluster_from_history(ran, types_of)
    types = sorted(cluster.capacity)
    runs, _ = runs_from_history(history.rows, types_of)
    model = learn([r for r in runs if r.gpu_type in cluster.capacity], types,
                  [f for f in failures_from_history(history.failed, types_of) if f.gpu_type in cluster.capacity])
    priors = prior_speeds(types).speed
    top = max(priors.values())
    prior_rel = {k: v / top for k, v in priors.items()}
    data: dict[str, dict[tuple[str, int], float]] = {k: {} for k in types}
    jobs: list[TraceJob] = []
    meta: dict[str, HistoricJob] = {}
    records: list[JobRecord] = []
    ended: Counter = Counter()
    sources: Counter = Counter()
    counts: Counter = Counter()
    arrivals = {r.job_id: history.first_submit.get(r.job_id, r.submit_s) for r in ran}
    origin = min((a for a in arrivals.values() if a is not None), default=0.0)
    for r in ran:
        parts = [(run_type(r, types_of), r.elapsed_s)] + [
            (t or run_type(HistoryRow(0, "", "", "", "", 0, None, n, 0.0), types_of), e) for t, n, e in r.earlier]
        if any(k is None for k, _ in parts):
            left_out["GPU type unknown"] += 1
            continue
        if any(k not in cluster.capacity for k, _ in parts):
            left_out["GPU type not in the inventory"] += 1
            continue
        group = (r.user, r.job_name, r.gpus)
        how, speed = _source(model, group)
        rel = dict(speed) if speed is not None else dict(prior_rel)
        # a type the learner marks failing keeps 0 (never placed there); the work done on it
        # before the job failed there is counted at the prior's ratio
        work = sum(e * (rel[str(k)] if rel[str(k)] > 0 else prior_rel[str(k)]) for k, e in parts)
        tenant = _tenant(r, tenant_by)
        job_type = f"{r.user}|{r.job_name}"
        for k in types:
            data[k][(job_type, r.gpus)] = rel[k]
        nodes = r.nnodes or len(r.nodes)
        arrival = float(arrivals[r.job_id] or 0.0) - origin
        jid = f"{tenant}/{r.job_id}"
        jobs.append(TraceJob(jid, tenant, job_type, r.gpus, work, arrival,
                             nodes if nodes and r.gpus % nodes == 0 else None, where=f"{source} line {r.line}"))
        meta[jid] = HistoricJob(r.user, r.job_name, r.state, r.time_limit_s, r.job_id)
        seconds: dict[str, float] = defaultdict(float)
        for t, e in parts:
            seconds[str(t)] += e
        running = r.state == "RUNNING" or r.end_s is None
        records.append(JobRecord(
            job_id=jid, tenant=tenant, arrival_s=arrival, start_s=float(r.start_s or 0.0) - origin,
            end_s=None if running else float(r.end_s or 0.0) - origin, gpu_type=str(parts[0][0]), gpus=r.gpus,
            work=work, throughput={k: rel[k] for k in types},
            gpu_seconds={k: s * r.gpus for k, s in seconds.items()}, run_s=sum(seconds.values())))
        ended["RUNNING (work so far)" if running else _state(r)] += 1
        sources[how] += 1
        counts["array tasks"] += "_" in r.job_id
        counts["requeued (runs joined)"] += bool(r.earlier)
        counts["time limit known"] += r.time_limit_s is not None
    if not jobs:
        raise UserError(f"{source}: no job that ran on GPUs of a known type (left out: {dict(left_out) or 'nothing'})")
    rows_out = ("job step", "junk", "no GPU", "no elapsed time")
    left_out.update({f"rows: {k}": v for k, v in history.skipped.items() if k in rows_out})
    left_out.update({"unreadable rows": len(history.ended_junk)} if history.ended_junk else {})
    notes = tuple(model.warnings)
    table = ThroughputTable(data, source=f"speeds of {source}: learned from its completed runs, else the type priors")
    return Replay(make_workload(jobs, {}, [f"history({source})"]), cluster, table, tuple(records), meta,
                  dict(ended), dict(left_out), dict(sources), origin, notes, dict(counts))


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

    @property
    def given(self) -> bool:
        return bool(self.sacct_file) or self.from_slurm


def inventory_cluster(path: str) -> tuple[ClusterSpec, dict[str, str]]:
    """The cluster of an inventory file (the shape of conf/testbed.toml) and its node types."""
    from ..deploy.inventory import load

    inv = load(path)
    largest: dict[str, int] = defaultdict(int)
    for n in inv.nodes:
        largest[n.gpu_type] = max(largest[n.gpu_type], n.gpus)
    capacity = inv.capacity()
    return (ClusterSpec({k: largest[k] * math.ceil(c / largest[k]) for k, c in capacity.items() if c > 0},
                        node_gpus=dict(largest)),
            {n.name: n.gpu_type for n in inv.nodes})
