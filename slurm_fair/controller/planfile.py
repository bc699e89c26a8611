"""The plan file: what ``job_submit.lua`` needs to send a new job where the plan wants it.

Between two cycles Slurm starts a new untyped job within seconds wherever its partition has
room (by node ``Weight``, else by name: ``k80-1`` before ``v100-1``), before the controller ever
sees it. The plugin closes that gap at submission: for an untyped GPU job submitted to a
partition of several GPU types it sets the job's partitions to the single-type partitions the
plan prefers for the job's tenant and class, and records what the job asked for and what it
gave it in its admin comment (``slurm-fair:partition=gpu slurm-fair:routed=v100``) so the
controller may still use every type of it and ``revert`` can put it back, until its user moves
it (:mod:`.asked`). The file must be trivial to parse from Lua without a JSON library:
one flat JSON object, one ``"key": value`` pair per line, keys and values free of quotes,
commas and backslashes::

    {
    "format": 2,
    "generated_at": 1732190000,
    "expires_at": 1732190180,
    "cycle": "20261121T133200Z-1a2b",
    "spans/gpu": "k80 p100 v100",
    "partition/v100": "v100",
    "shapes/v100": "4x16x64000x2",
    "tier/v100": "3",
    "speeds/resnet-50-bs32": "k80=0.1588 p100=0.6277 v100=1",
    "speeds/*": "k80=0.2455 p100=0.7905 v100=1",
    "room/physics": "v100 p100",
    "room/*": "k80"
    }

* ``spans/<P>``: a partition of several GPU types and its types: only jobs submitted to such
  partitions (all of them; the default partition when none is named) are changed;
* ``partition/<type>``: the single-type partition a job of that type is sent to, ``tier/<type>``
  its ``PriorityTier`` (Slurm tries a job's partitions highest tier first);
* ``shapes/<type>``: that partition's schedulable nodes, ``GPUSxCPUSxMEM_MBxCOUNT`` per distinct
  node size, so the plugin only lists partitions some node of which can hold the job (GPUs per
  node, node count, CPUs, memory): Slurm refuses a job none of whose partitions can;
* ``speeds/<C>`` (class ``C`` from ``fair:class=C``, else ``speeds/*``: the type priors, what the
  controller assumes of a job it knows nothing of, :func:`~slurm_fair.estimates.priors.prior_speeds`;
  flat when no type is a known model): ``n_jk`` per type;
  ``speeds/<C>@<G>``: the same measured on a gang of ``G`` GPUs (a job of ``g`` GPUs reads the
  largest ``G <= g`` there is, :func:`speed_key`; a type missing from the list cannot run it);
* ``room/<A>`` (else ``room/*``): the types where tenant ``A`` has room (below).

The plugin only steers by partition, also where the controller types requests itself
(``[controller].pin_gres_type`` on Slurm >= 23.11): a request typed at submission would have no
recorded original for ``revert``; the controller types the job at its next cycle instead.

``generated_at``/``expires_at`` are integer Unix seconds; the plugin leaves a job untouched when
``now > expires_at`` (the controller stopped: a stale plan is worse than none) or the file is
missing. A Lua line pattern that reads it: ``'^"([^"]+)": "?([^",]*)"?,?$'``.

The plugin's choice is :func:`prefer` (the Lua mirrors it; a test runs both on the same random
inputs), over the types of the asked partitions whose nodes can hold the job and where its
class runs: if the tenant has room somewhere (the larger of its limit and its fair share,
minus the GPUs its running and pending jobs hold there; ``room/*``: types with free GPUs), only
those types, and of them only the ones within :data:`SLOWER` of the best; else every type (a
free GPU is better than none). A tenant below its fair share of the fast GPUs is thus sent there
even while other tenants hold them (the controller makes room for a new job at its next cycle)
rather than started at once on a type twice as slow. Fastest first; and since Slurm tries the
partitions by tier, not in the order given, a type is dropped when Slurm could try it before a
listed type more than 10 % faster: a job never starts more than 10 % slower than the best type
it was offered.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from ..inputs import fullmatch
from .. import atomic
from ..estimates.classes import ClassTable
from ..estimates.priors import prior_speeds
from ..slurm.model import Node, Partition, Snapshot
from .steer import current_type, partition_types, type_partition_lists

if TYPE_CHECKING:  # the plan's package loads the policy stack (settings, so revert, import this module)
    from .plan.types import Plan

PLAN_FILE = "plan.json"
FORMAT = 2
#: a listed type Slurm may try first must be at least this fraction of the best listed speed
SLOWER = 0.9
#: the largest gang size whose own ``speeds/<C>@<G>`` the plugin looks for
MAX_GANG_LOOKUP = 1024
_SAFE = re.compile(r"^[A-Za-z0-9._+*/-]+$")


def prefer(types: Sequence[str], speed: Mapping[str, float], room: Mapping[str, float] | None,
           tiers: Mapping[str, int]) -> list[str]:
    """The types to offer a job, best first (module docstring): the rule ``job_submit.lua``
    applies to the plan, written here once as the reference it is tested against. ``types``: the
    ones the job may get and whose nodes can hold it; ``room[k] > 0``: the tenant has room."""
    runnable = [k for k in types if speed.get(k, 0.0) > 0]
    roomy = [k for k in runnable if room is None or room.get(k, 0) > 0]
    if roomy:  # entitled somewhere: only types close to the best of those (wait for it rather
        best = max(speed[k] for k in roomy)  # than start at once on a much slower type)
        roomy = [k for k in roomy if speed[k] >= SLOWER * best]
    else:  # over its share everywhere: any free GPU will do (work-conserving)
        roomy = runnable
    out: list[str] = []
    for k in sorted(roomy, key=lambda k: (-speed[k], -tiers.get(k, 0), k)):
        if any(tiers.get(k, 0) >= tiers.get(u, 0) and speed[k] < SLOWER * speed[u] for u in out):
            continue  # Slurm could start it here although a much faster listed type is free
        out.append(k)
    return out


def speed_key(entries: Mapping[str, object], klass: str, gpus: int) -> str:
    """The ``speeds/`` entry for a job of class ``klass`` and ``gpus`` GPUs (the plugin's lookup,
    mirrored in Lua): ``speeds/<C>@<G>`` for the largest ``G <= gpus`` present (up to
    :data:`MAX_GANG_LOOKUP`), else ``speeds/<C>``, else ``speeds/*``: with the entries
    :func:`plan_entries` writes, the row :meth:`ClassTable.row` gives."""
    for g in range(min(gpus, MAX_GANG_LOOKUP), 1, -1):
        if f"speeds/{klass}@{g}" in entries:
            return f"speeds/{klass}@{g}"
    return f"speeds/{klass}" if f"speeds/{klass}" in entries else "speeds/*"


def _shapes(nodes: Sequence[Node], partition: str, gpu_type: str) -> str:
    """``GPUSxCPUSxMEMxCOUNT`` per distinct node size of the partition's schedulable nodes."""
    sizes: dict[tuple[int, int, int], int] = {}
    for n in nodes:
        if partition in n.partitions and n.schedulable and n.gpus_total.get(gpu_type, 0) > 0:
            key = (int(n.gpus_total[gpu_type]), int(n.cpus), int(n.memory_mb))
            sizes[key] = sizes.get(key, 0) + 1
    return " ".join(f"{g}x{c}x{m}x{count}" for (g, c, m), count in sorted(sizes.items()))


def open_to_all(rules: Partition | None, accounts: Sequence[str]) -> bool:
    """Whether a partition admits any job of the pilot as far as the plugin cannot check itself
    (accounts, QOS, groups; ``accounts`` empty: every account, so only a partition without an
    account list does): the plugin only steers into such partitions (its time and node limits
    it checks per job, ``maxtime/`` and ``maxnodes/``)."""
    if rules is None:
        return True
    if rules.state != "UP" or rules.allow_qos is not None or rules.deny_qos or rules.allow_groups is not None:
        return False
    if rules.allow_accounts is not None and (not accounts or not set(accounts) <= rules.allow_accounts):
        return False
    return not (rules.deny_accounts & set(accounts)) and not (not accounts and rules.deny_accounts)


def plan_entries(plan: Plan, snapshot: Snapshot, table: ClassTable,
                 partitions: Mapping[str, Partition] | None = None, accounts: Sequence[str] = ()) -> dict[str, str]:
    """Every entry of the file but the header (pure). ``snapshot``: the pilot's view (only its
    partitions); ``partitions``: every partition's rules; ``accounts``: the pilot's (empty:
    all), written as ``scope/accounts`` so the plugin leaves every other account's jobs alone."""
    rules = partitions or {}
    types = list(plan.gpu_types)
    capacity = snapshot.capacity()
    ptypes = partition_types(snapshot.nodes)
    steer_to = {k: next((p for p in ps if open_to_all(rules.get(p), accounts)), None)
                for k, ps in type_partition_lists(snapshot.nodes).items()}
    free = dict(capacity)
    for node in snapshot.nodes:
        if node.schedulable:
            for k, n in node.gpus_used.items():
                free[k] = free.get(k, 0) - int(n)
    used: dict[str, dict[str, int]] = {}
    for j in snapshot.gpu_jobs():
        # a pending job counts on the type it will get: the one this plan sends it to, else its
        # typed request or its partition's
        planned = plan.jobs[j.job_id].planned_type if j.job_id in plan.jobs else None
        on = j.gpu_type_running if j.running else (planned or current_type(j, ptypes))
        if on and j.gpu_request is not None:
            used.setdefault(j.account, {})
            used[j.account][on] = used[j.account].get(on, 0) + j.gpu_request.total

    out: dict[str, str] = {}
    if accounts and all(fullmatch(_SAFE, a) for a in accounts):
        out["scope/accounts"] = " ".join(sorted(a.lower() for a in accounts))
    for p, ts in sorted(ptypes.items()):
        real = sorted(t for t in ts if t)
        if len(real) > 1 and fullmatch(_SAFE, p) and all(steer_to.get(t) for t in real):
            out[f"spans/{p}"] = " ".join(real)
            out[f"spantier/{p}"] = str(_tier(rules, snapshot.nodes, p))
    for k in types:
        part = steer_to.get(k)
        if part and fullmatch(_SAFE, part) and fullmatch(_SAFE, k):
            out[f"partition/{k}"] = part
            out[f"tier/{k}"] = str(_tier(rules, snapshot.nodes, part))
            r = rules.get(part)
            if r is not None and r.max_time_min is not None:
                out[f"maxtime/{k}"] = str(int(r.max_time_min))
            if r is not None and r.max_nodes is not None:
                out[f"maxnodes/{k}"] = str(int(r.max_nodes))
            shapes = _shapes(snapshot.nodes, part, k)
            if shapes:
                out[f"shapes/{k}"] = shapes
    # a job of no known class: the type priors, as the controller's own estimate of such a job
    # (flat, the plugin would list the types by name: k80 first, where Slurm starts it at once)
    out["speeds/*"] = _speeds(prior_speeds(types).speed)
    for c, row in table.rows.items():
        if fullmatch(_SAFE, c):
            out[f"speeds/{c}"] = _speeds({k: row.get(k, 0.0) for k in types})
    for c, by in table.sizes.items():
        if fullmatch(_SAFE, c):
            for g, row in by.items():
                out[f"speeds/{c}@{g}"] = _speeds({k: row.get(k, 0.0) for k in types})
            if c not in table.rows:  # measured on gangs only: smaller jobs read the smallest size
                out[f"speeds/{c}"] = _speeds({k: table.row(c, 1).get(k, 0.0) for k in types})
    out["room/*"] = " ".join(k for k in types if free.get(k, 0) > 0)
    for t, tp in plan.tenants.items():
        if not fullmatch(_SAFE, t):
            continue
        # the larger of its bundle and its fair share: a tenant below its share is offered the
        # type even when others hold it now (its bundle only follows its current allocation)
        room = {k: max(math.ceil(tp.bundle.get(k, 0.0) - 1e-6), math.ceil(tp.fair_share.get(k, 0.0) - 1e-6))
                - used.get(t, {}).get(k, 0) for k in types}
        out[f"room/{t}"] = " ".join(k for k in types if room[k] > 0)
    return {k: v for k, v in out.items() if v != ""}


def _speeds(tput: Mapping[str, float]) -> str:
    """``k=n_k`` of the types a class runs on (normalised by its best, 4 significant digits)."""
    best = max(tput.values(), default=0.0)
    return " ".join(f"{k}={v / best:.4g}" for k, v in sorted(tput.items()) if v > 0 and best > 0)


def _tier(rules: Mapping[str, Partition], nodes: Sequence[Node], partition: str) -> int:
    r = rules.get(partition)
    return int(r.priority_tier) if r is not None else partition_tier(nodes, partition)


def partition_tier(nodes: Sequence[Node], partition: str) -> int:
    """The ``PriorityTier`` of ``partition`` (as its nodes report it; 0 when unknown)."""
    return max((int(n.tiers[partition]) for n in nodes if partition in n.tiers), default=0)


def render(entries: Mapping[str, str], generated_at: float, valid_s: float, cycle_id: str) -> str:
    """The file text: one pair per line (see the module docstring)."""
    head = {"format": FORMAT, "generated_at": int(generated_at),
            "expires_at": int(generated_at + valid_s), "cycle": cycle_id}
    pairs = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    pairs += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(entries.items())]
    return "{\n" + ",\n".join(pairs) + "\n}\n"


def write(path: str | Path, text: str) -> None:
    """Atomic replace: the plugin never reads a half-written file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(p, text)


def read(path: str | Path) -> dict[str, object]:
    """Parse a plan file (the controller's own reader, for explain and the tests)."""
    doc: dict[str, object] = json.loads(Path(path).read_text())
    return doc
