"""What the round loop decides besides the policy's plan: who is overdue (the rounding step
serves them first and reserves their nodes, docs/simulator.md "Reservation"), and the in-round
re-plan of a policy that re-plans when GPUs free up (Hops, ``PolicyInfo.replans``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping

from .. import fairness
from ..gangs import choose_nodes
from ..model import Job, NodeCapacity, Problem
from ..policies import PolicyOptions
from .holdings import FreeGpus
from .playout import JobState, Replan

if TYPE_CHECKING:  # the engine imports this module
    from .engine import SimConfig, Simulator


def overdue(active: list[JobState], now: float, config: "SimConfig", capacity: Mapping[str, int],
            seen: Callable[[JobState, float], Job]) -> dict[str, float]:
    """Waiting gangs (more than one GPU, holding none) whose latency ratio so far passes
    ``reserve_after_lr`` and that waited at least a round (:func:`..fairness.overdue_ratio`),
    with that ratio. A single GPU is never kept from a job by fragmentation: who runs among
    those is the policy's order alone. The age is taken from the job as ``seen`` shows it
    (:func:`..fairness.known_age`: its believed speeds and, when its size is hidden, its time
    limit), as the controller's reservation takes it from Slurm (issue 39), never from the
    simulator's true remaining work; a job with no known size is never overdue."""
    if config.reserve_after_lr is None:
        return {}
    out: dict[str, float] = {}
    for s in active:
        if s.seat.spot is not None or s.trace.gpus <= 1:
            continue
        waited = fairness.wait_s(now - s.trace.arrival_s, s.attained_s)
        age = fairness.known_age(seen(s, now), capacity)
        ratio = fairness.overdue_ratio(waited, age, config.round_s, config.reserve_after_lr)
        if ratio is not None:
            out[s.trace.id] = ratio
    return out


def replanner(sim: "Simulator", options: PolicyOptions) -> Replan:
    """The in-round plan of a policy that re-plans (Hops): a problem of the eligible waiting
    jobs on the GPUs free now (per node), solved with a copy of the policy state (the round's
    own plan keeps its memory); the jobs it gives a whole type start, on its nodes when it
    names them."""
    def replan(now: float, waiting: list[JobState], free: FreeGpus) -> list[tuple[JobState, str, Mapping[str, int]]]:
        capacity = {k: v for k, v in free.by_type.items() if v > 0}
        # only jobs that can run on a type with GPUs free now (a problem of jobs that can run
        # nowhere has nothing to plan)
        waiting = [s for s in waiting if any(s.throughput.get(k, 0.0) > 0 and v >= s.trace.gpus
                                             for k, v in capacity.items())]
        if not capacity or not waiting:
            return []
        nodes = tuple(NodeCapacity(n.name, n.gpu_type, free.by_node.get(n.gpu_type, {}).get(n.name, 0), n.speed)
                      for n in sim.nodes if free.by_node.get(n.gpu_type, {}).get(n.name, 0) > 0)
        whole = sim._problem(waiting, now)
        alloc = sim.policy.allocate(Problem(capacity, whole.tenants, whole.jobs, nodes),
                                    replace(options, state=dict(options.state)))
        by_id = {s.trace.id: s for s in waiting}
        out: list[tuple[JobState, str, Mapping[str, int]]] = []
        for jid, row in alloc.x.items():
            k = max(row, key=lambda t: row[t], default=None)
            if k is not None and row[k] >= 1.0 - 1e-6 and jid in by_id:
                out.append((by_id[jid], k, _cut(by_id[jid], k, alloc.nodes.get(jid, ()), free)))
        return out

    return replan


def _cut(st: JobState, gpu_type: str, names: tuple[str, ...], free: FreeGpus) -> dict[str, int]:
    """The policy's nodes as ``{node: gpus}`` when they hold the gang now ({}: any fit)."""
    if not names:
        return {}
    return choose_nodes(st.shape, {n: free.by_node.get(gpu_type, {}).get(n, 0) for n in names}) or {}
