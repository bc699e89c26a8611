"""A site's accounting history with known truth, for ``simulate --sacct-file`` (issue 42).

What a 2026 site's ``sacct -P -X -D`` shows after its Slurm ran a Philly-like workload:

* GPU types and nodes (default 1,000 GPUs of 4 types on 8-GPU nodes), accounts with users, each
  user running a few recurring job names (a *group*: user + job name + GPUs) whose true relative
  speed per type is the priors' family ratio times a per-group log-normal factor (sigma 0.25);
* GPU counts and durations from Philly's distribution (the summary the simulator's ``--job-mix
  philly`` draws from), durations capped at a week then **scaled** so the offered load is
  ``--load`` of the cluster's GPU-time at its capacity-weighted mean speed (Philly's own load
  would need several times the GPUs); run-to-run work differs by +-10 %;
* a stock, heterogeneity-agnostic Slurm (``_schedule``): ``priority/basic`` (submit order), the
  main scheduler stopping at the first job that does not fit, ``sched/backfill`` with
  reservations planned by time limits every 30 s, each job on the first nodes in name order with
  enough free GPUs (``--gres=gpu:G`` per node, ``-N`` nodes, no type asked);
* what a real history holds besides: array tasks (``123_4``), jobs requeued once after a node
  failure (a REQUEUED run, then the rest; SubmitTime reset), jobs cancelled while pending or
  after running a while, failures, time-outs at the job's limit, CPU-only jobs, job steps, and
  jobs still running or pending when the history was taken.

    python benchmarks/make_site_history.py --seed 1 --jobs 100000 --days 90 --out h.txt --truth t.json

``t.json``: ``{"groups": {"user|name|gpus": {type: true relative speed}}, "work": {job id: work
in seconds on the fastest type}, "nodes": {node: type}, "cluster": {type: GPUs}}``.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import json
import math
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from slurm_fair.estimates.priors import prior_speeds
from slurm_fair.sim.synthetic import _summary

HEADER = ("JobID|JobIDRaw|User|Account|JobName|Partition|AllocTRES|NodeList|NNodes|Submit|Start|End|Elapsed|Timelimit|"
          "State|ExitCode")
TYPES = ("h100", "a100", "l40s", "v100")
#: the history starts here (any date: only differences matter)
EPOCH = datetime(2026, 1, 5)


@dataclass
class Job:
    jid: str
    raw: str
    user: str
    account: str
    name: str
    gpus: int
    nnodes: int
    submit: float
    work: float  # seconds on the fastest type
    limit: float
    speed: dict[str, float]
    fate: str = "COMPLETED"  # or CANCELLED (running / pending), FAILED, REQUEUE
    fate_at: float = 1.0  # fraction of the run after which the fate strikes
    first_submit: float = 0.0
    earlier: list[str] = field(default_factory=list)


@dataclass
class Site:
    nodes: list[tuple[str, str, int]]  # (name, type, GPUs), in Slurm's (name) order
    lines: list[str] = field(default_factory=lambda: [HEADER])
    truth: dict = field(default_factory=dict)


def _ts(t: float) -> str:
    return (EPOCH + timedelta(seconds=round(t))).strftime("%Y-%m-%dT%H:%M:%S")


def _dur(s: float) -> str:
    s = int(round(s))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def _hostlist(names: list[str]) -> str:
    return ",".join(names)


def _layout(gpus: int, n_types: int, per_node: int) -> list[tuple[str, str, int]]:
    shares = (0.2, 0.32, 0.2, 0.28)[:n_types]
    nodes = []
    for k, share in zip(TYPES[:n_types], shares):
        for i in range(max(1, round(gpus * share / sum(shares) / per_node))):
            nodes.append((f"{k}-{i + 1:03d}", k, per_node))
    return sorted(nodes)


def generate(seed: int = 1, n_jobs: int = 100_000, days: float = 90, gpus: int = 1000, n_types: int = 4,
             accounts: int = 50, load: float = 0.8, per_node: int = 8, *,
             families: dict[str, float] | None = None, type_factor: dict[str, float] | None = None) -> Site:
    """``families``: the truth of each group drawn from one family's priors (``{family: share}``;
    default every group ``generic``); ``type_factor``: this site's GPUs of a type at that factor of
    their prior for every job (a power-capped or throttled type). Both change only the truth;
    with neither the history is the one of earlier runs."""
    rng = random.Random(seed)
    site = Site(_layout(gpus, n_types, per_node))
    types = sorted({k for _, k, _ in site.nodes})
    capacity = {k: sum(g for _, t, g in site.nodes if t == k) for k in types}
    prior = {k: v * (type_factor or {}).get(k, 1.0) for k, v in prior_speeds(types).speed.items()}
    top = max(prior.values())
    pick = random.Random(seed + 7919)  # the families' own stream: the history's draws stay as they were
    family_prior = {f: {k: v * (type_factor or {}).get(k, 1.0) for k, v in prior_speeds(types, f).speed.items()}
                    for f in (families or {})}
    summary = _summary()["gpus"]
    counts = sorted(int(g) for g in summary)
    cum = list(itertools.accumulate(summary[str(g)]["probability"] for g in counts))
    users = [(f"u{a:02d}{j}", f"acct{a:02d}") for a in range(accounts) for j in range(rng.randint(1, 5))]
    names = {u: [f"{u}_job{i}" for i in range(rng.randint(1, 6))] for u, _ in users}
    speeds: dict[tuple[str, str, int], dict[str, float]] = {}
    horizon = days * 86400
    raw: list[tuple[str, str, str, int, float]] = []
    base: dict[tuple[str, str, int], float] = {}
    for _ in range(n_jobs):
        g = counts[min(bisect.bisect_left(cum, rng.random() * cum[-1]), len(counts) - 1)]
        q = summary[str(g)]["duration_quantiles_s"]
        u = rng.random() * (len(q) - 1)
        i = min(int(u), len(q) - 2)
        d = math.exp(math.log(q[i]) + (math.log(q[i + 1]) - math.log(q[i])) * (u - i))
        user, account = rng.choice(users)
        name = rng.choice(names[user])
        # a recurring job: the group's runs do about the same work (+-10 % below), as the
        # learner (speeds learn) assumes; the groups' durations follow Philly's
        d = base.setdefault((user, name, g), min(d, 7 * 86400))
        raw.append((user, account, name, g, d))
    mean_speed = sum(capacity[k] * prior[k] / top for k in types) / sum(capacity.values())
    offered = sum(g * d for *_, g, d in raw)
    scale = load * sum(capacity.values()) * horizon * mean_speed / offered
    submits = sorted(rng.uniform(0, horizon) for _ in range(n_jobs))
    jobs: list[Job] = []
    array_next = 0
    for n, ((user, account, name, g, d), t) in enumerate(zip(raw, submits)):
        key = (user, name, g)
        if key not in speeds:
            base_speed = prior
            if families:
                base_speed = family_prior[pick.choices(list(families), weights=list(families.values()))[0]]
            s = {k: base_speed[k] / max(base_speed.values()) * math.exp(rng.gauss(0, 0.25)) for k in types}
            best = max(s.values())
            speeds[key] = {k: v / best for k, v in s.items()}
        work = max(30.0, d * scale) * rng.uniform(0.9, 1.1)
        slowest = work / min(speeds[key].values())
        limit = min(7 * 86400, math.ceil(slowest * rng.uniform(0.8, 3.0) / 3600) * 3600)
        jid = str(100000 + n)
        if rng.random() < 0.1:  # an array task
            array_next += 1
            jid = f"{900000 + array_next // 8}_{array_next % 8}"
        job = Job(jid, str(100000 + n), user, account, name, g, max(1, g // per_node), t, work, limit, speeds[key],
                  first_submit=t)
        r = rng.random()
        if r < 0.04:
            job.fate, job.fate_at = "CANCELLED", rng.random()
        elif r < 0.06:
            job.fate, job.fate_at = "FAILED", rng.uniform(0.01, 0.5)
        elif r < 0.07:
            job.fate, job.fate_at = "REQUEUE", rng.uniform(0.1, 0.9)
        elif r < 0.10:
            job.fate = "CANCELLED_PENDING"
        jobs.append(job)
    _schedule(site, jobs, horizon, rng)
    for i in range(n_jobs // 20):  # CPU-only jobs: rows, no GPU
        t = rng.uniform(0, horizon)
        user, account = rng.choice(users)
        site.lines.append(f"{800000 + i}|{800000 + i}|{user}|{account}|prep|cpu|cpu=8,mem=16G,node=1|c001|1|{_ts(t)}|"
                          f"{_ts(t)}|{_ts(t + 600)}|00:10:00|01:00:00|COMPLETED|0:0")
    site.truth = {"groups": {f"{u}|{nm}|{g}": s for (u, nm, g), s in speeds.items()},
                  "work": {j.jid: j.work for j in jobs}, "nodes": {n: k for n, k, _ in site.nodes},
                  "cluster": capacity, "scale": scale, "tenants": sorted({a for _, a in users})}
    return site


#: Slurm's backfill period (``bf_interval``), window (``bf_window``) and depth (``bf_max_job_test``)
BF_INTERVAL, BF_WINDOW, BF_DEPTH = 30.0, 86400.0, 500


def _schedule(site: Site, jobs: list[Job], horizon: float, rng: random.Random) -> None:
    """A stock Slurm (``priority/basic``, ``sched/backfill``, ``select/cons_tres``) on typeless
    GPUs, nodes in name order; writes every row.

    The main scheduler runs on every submit and end: pending jobs in priority (submit) order,
    each started on the first nodes with enough free GPUs; the first that does not fit ends the
    pass. Every ``BF_INTERVAL`` seconds after a change, backfill plans with time limits: in
    priority order, a job starts if it fits now without delaying an earlier job's reservation,
    else it reserves the earliest time it fits (within ``BF_WINDOW``). A multi-node job spanning
    types runs at its slowest."""
    free = {n: g for n, _, g in site.nodes}
    order = [n for n, _, _ in site.nodes]
    size = {n: g for n, _, g in site.nodes}
    kind = {n: k for n, k, _ in site.nodes}
    pending: list[Job] = []
    ends: list[tuple[float, int, Job, list[str], float, float]] = []
    planned: dict[int, tuple[list[str], int, float]] = {}  # running job -> (nodes, GPUs each, start + limit)
    arrivals = sorted(jobs, key=lambda j: j.submit)
    i = 0
    seq = 0
    now = 0.0
    changed: float | None = None

    def start(job: Job, nodes: list[str]) -> None:
        nonlocal seq
        per = job.gpus // job.nnodes
        for n in nodes:
            free[n] -= per
        rate = min(job.speed[kind[n]] for n in nodes)
        run = job.work / rate
        if job.fate in ("CANCELLED", "FAILED", "REQUEUE"):
            run *= job.fate_at
        run = min(run, job.limit)
        seq += 1
        heapq.heappush(ends, (now + run, seq, job, nodes, now, run))
        planned[id(job)] = (nodes, per, now + job.limit)
        pending.remove(job)

    def first_fit(job: Job) -> list[str] | None:
        per = job.gpus // job.nnodes
        nodes = [n for n in order if free[n] >= per][:job.nnodes]
        return nodes if len(nodes) == job.nnodes else None

    def backfill() -> None:
        busy: dict[str, list[tuple[float, float, int]]] = {n: [] for n in order}
        for nodes, per, until in planned.values():
            for n in nodes:
                busy[n].append((now, max(until, now + 1), per))
        for job in list(pending[:BF_DEPTH]):
            per = job.gpus // job.nnodes
            points = sorted({now, *(b for lst in busy.values() for _, b, _ in lst if b <= now + BF_WINDOW)})
            for t in points:
                nodes = [n for n in order if size[n] - _peak(busy[n], t, t + job.limit) >= per][:job.nnodes]
                if len(nodes) < job.nnodes:
                    continue
                if t == now:
                    start(job, nodes)
                for n in nodes:
                    busy[n].append((t, t + job.limit, per))
                break

    while True:
        t_arr = arrivals[i].submit if i < len(arrivals) else math.inf
        t_end = ends[0][0] if ends else math.inf
        t_bf = (math.floor(changed / BF_INTERVAL) + 1) * BF_INTERVAL if changed is not None and pending else math.inf
        now = min(t_arr, t_end, t_bf)
        if now >= horizon:
            break
        if t_bf < min(t_arr, t_end):
            backfill()
            changed = None
            continue
        if t_end <= t_arr:
            _, _, job, nodes, _start, run = heapq.heappop(ends)
            planned.pop(id(job))
            for n in nodes:
                free[n] += job.gpus // len(nodes)
            _finish(site, job, nodes, _start, run, kind, pending)
        else:
            job = arrivals[i]
            i += 1
            if job.fate == "CANCELLED_PENDING":
                wait = rng.uniform(60, 6 * 3600)
                site.lines.append(_row(job, "CANCELLED by 0", job.submit, None, job.submit + wait, "None assigned", 0.0, 0))
                continue
            if job.gpus // job.nnodes > max(size.values()):
                site.lines.append(_row(job, "PENDING", job.submit, None, None, "None assigned", 0.0, 0))
                continue  # a gang no node holds: Slurm leaves it pending (BadConstraints)
            pending.append(job)
        if changed is None:  # backfill every BF_INTERVAL, whatever comes meanwhile
            changed = now
        for job in list(pending):  # the main scheduler: priority order, stop at the first that waits
            nodes = first_fit(job)
            if nodes is None:
                break
            start(job, nodes)
    for _, _, job, nodes, start_s, _ in ends:  # still running when the history was taken
        site.lines.append(_row(job, "RUNNING", job.submit, start_s, None, _hostlist(nodes), now - start_s, job.gpus,
                               min((kind[n] for n in nodes), key=lambda k: job.speed[k]), kind))
    for job in pending:
        site.lines.append(_row(job, "PENDING", job.submit, None, None, "None assigned", 0.0, 0))
    for job in arrivals[i:]:
        job.fate = "not submitted"


def _peak(held: list[tuple[float, float, int]], a: float, b: float) -> int:
    """GPUs held at once on a node at most during ``[a, b)``."""
    cuts = [a, *(s for s, _, _ in held if a < s < b)]
    return max(sum(g for s, e, g in held if s <= c < e) for c in cuts)


def _finish(site: Site, job: Job, nodes: list[str], start: float, run: float, kind: dict[str, str],
            pending: list[Job]) -> None:
    k = min((kind[n] for n in nodes), key=lambda t: job.speed[t])  # a gang runs at its slowest
    end = start + run
    hosts = _hostlist(nodes)
    if job.fate == "REQUEUE":
        site.lines.append(_row(job, "REQUEUED", job.submit, start, end, hosts, run, job.gpus, k, kind))
        job.work -= run * job.speed[k]
        job.fate, job.submit = "COMPLETED", end  # Slurm resets SubmitTime on a requeue
        job.earlier.append(k)
        pending.insert(0, job)
        return
    timeout = job.fate == "COMPLETED" and run >= job.limit - 1e-6 and job.work / job.speed[k] > job.limit
    state = "TIMEOUT" if timeout else {"CANCELLED": "CANCELLED by 1001"}.get(job.fate, job.fate)
    site.lines.append(_row(job, state, job.submit, start, end, hosts, run, job.gpus, k, kind))
    if len(site.lines) % 2 == 0:
        site.lines.append(f"{job.jid}.batch|{job.raw}.batch|||batch||cpu=4,gres/gpu={job.gpus}|{hosts}|1|"
                          f"{_ts(job.submit)}|{_ts(start)}|{_ts(end)}|{_dur(run)}||{state}|0:0")


def _row(job: Job, state: str, submit: float, start: float | None, end: float | None, hosts: str, run: float,
         gpus: int, k: str | None = None, kinds: dict[str, str] | None = None) -> str:
    typed = gpus and k and int(job.raw) % 5 != 0  # a fifth of the runs untyped: only NodeList tells
    tres = f"billing={gpus},cpu={4 * max(1, gpus)}" + (f",gres/gpu={gpus}" if gpus else "")
    if typed:  # sacct's typed counts: a gang over nodes of two types shows both
        per_type: dict[str, int] = {}
        for n in hosts.split(","):
            t = (kinds or {}).get(n, k)
            per_type[t] = per_type.get(t, 0) + gpus // max(1, job.nnodes)
        tres += "".join(f",gres/gpu:{t}={c}" for t, c in sorted(per_type.items()))
    tres += f",mem=64G,node={job.nnodes if gpus else 0}"
    if not gpus:
        tres = ""
    return "|".join((job.jid, job.raw, job.user, job.account, job.name, "gpu", tres, hosts, str(job.nnodes),
                     _ts(submit), _ts(start) if start is not None else "Unknown",
                     _ts(end) if end is not None else "Unknown", _dur(run), _dur(job.limit), state,
                     "0:0" if state == "COMPLETED" else "1:0"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--days", type=float, default=90)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--types", type=int, default=4)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--out", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--inventory", default=None, help="Also write the cluster as an inventory (TOML) for --inventory.")
    a = ap.parse_args(argv)
    site = generate(a.seed, a.jobs, a.days, a.gpus, a.types, a.accounts, a.load)
    Path(a.out).write_text("\n".join(site.lines) + "\n")
    Path(a.truth).write_text(json.dumps(site.truth))
    if a.inventory:
        Path(a.inventory).write_text(inventory_text(site))


def inventory_text(site: Site) -> str:
    """The site's nodes in the inventory's shape (``[gpu_types.T] nodes, gpus_per_node``): a
    history shows only the nodes its jobs used; the inventory has them all."""
    lines = ['[cluster]', 'name = "site"', '']
    for k in sorted({t for _, t, _ in site.nodes}):
        names = [n for n, t, _ in site.nodes if t == k]
        per = next(g for _, t, g in site.nodes if t == k)
        lines += [f"[gpu_types.{k}]", f'nodes = "{",".join(names)}"', f"gpus_per_node = {per}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
