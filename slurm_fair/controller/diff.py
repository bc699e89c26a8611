"""Phase 6a (pure): the actions that take Slurm from what it has to what the plan wants.

Only differences become actions, so a cycle on an unchanged cluster writes nothing, and a
change Slurm lost (a slurmctld restart drops ``scontrol`` partition/job edits that were never
persisted) shows up as a difference again and is re-applied next cycle.

Actions come out in a safe order: QOS limits first, then attaching the QOS to accounts (a job
may only be moved to a QOS its account allows), then per job QOS, partition (the default way a
job is steered to its GPU type), gres type (only with ``pin_gres_type``) and order, and requeues
last (they are the only action on running jobs). A requeued job is pending once its requeue
returns, so its own settings (QOS, partition, type, order) follow the requeue. Slurm then holds
it for its credential lifetime + 1 s (a relaunch on the same node sooner would fail with
"credential revoked"); the controller never shortens that hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model import frozen_map
from ..slurm.model import Snapshot
from ..slurm.parse.fields import fold_hostlist
from .plan.limits import TOTAL_KEY, is_gpu_tres
from .plan.types import Plan

#: execution order of action kinds
KIND_ORDER = ("ensure_qos", "attach_qos", "set_job_qos", "set_partition", "set_gpu_type", "set_nodes",
              "set_nice", "set_priority", "requeue")


@dataclass(frozen=True)
class Action:
    """One write to Slurm. ``before``/``after`` are what the audit log shows."""

    kind: str
    tenant: str
    job: str = ""
    before: Any = None
    after: Any = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", frozen_map(self.params))

    @property
    def target(self) -> str:
        return self.job or str(self.params.get("qos") or self.tenant)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tenant": self.tenant, "job": self.job, "target": self.target,
                "before": _plain(self.before), "after": _plain(self.after)}


def _plain(v: Any) -> Any:
    return dict(v) if isinstance(v, Mapping) else v


def diff(plan: Plan, snapshot: Snapshot) -> list[Action]:
    """Every difference between ``plan`` and ``snapshot``, in execution order."""
    qos_now = {q.name: q for q in snapshot.qos}
    accounts = {a.name: a for a in snapshot.accounts}
    actions: list[Action] = []
    for t, tp in sorted(plan.tenants.items()):
        current = qos_now.get(tp.qos)
        now_limits = {k: v for k, v in (current.grp_tres if current else {}).items() if is_gpu_tres(k)}
        want: dict[str, int | None] = dict(tp.limits)
        if TOTAL_KEY in now_limits and TOTAL_KEY not in want:
            want[TOTAL_KEY] = None  # total_limit was turned off: remove it
        if current is None or any(now_limits.get(k) != v for k, v in want.items()):
            actions.append(Action("ensure_qos", t, before=now_limits if current else None,
                                  after=want, params={"qos": tp.qos}))
        acct = accounts.get(t)
        if acct is None or tp.qos not in acct.qos or acct.default_qos != tp.qos:
            before = {"qos": list(acct.qos), "default": acct.default_qos} if acct else None
            actions.append(Action("attach_qos", t, before=before, after={"default": tp.qos},
                                  params={"qos": tp.qos, "account": t}))
    jobs = {j.job_id: j for j in snapshot.jobs}
    requeued = {j for j in plan.requeue if jobs.get(j) is not None and jobs[j].running}
    for job_id, jp in sorted(plan.jobs.items(), key=lambda kv: kv[1].rank):
        sj = jobs.get(job_id)
        if sj is None or not (sj.pending or (jp.requeued and job_id in requeued)):
            continue
        after = {"after_requeue": True} if sj.running else {}
        if sj.qos != jp.qos:
            actions.append(Action("set_job_qos", jp.tenant, job_id, sj.qos, jp.qos, {"qos": jp.qos, **after}))
        if jp.partition and sj.partition != jp.partition:
            actions.append(Action("set_partition", jp.tenant, job_id, sj.partition, jp.partition,
                                  {"partition": jp.partition, **after}))
        current_type = sj.gpu_request.gpu_type if sj.gpu_request else None
        if jp.gpu_type and current_type != jp.gpu_type:
            raw = sj.gpu_request.raw if sj.gpu_request else ""
            actions.append(Action("set_gpu_type", jp.tenant, job_id, raw or current_type, jp.gpu_type, after))
        if jp.nodes is not None and fold_hostlist(sj.req_nodes) != jp.nodes:
            actions.append(Action("set_nodes", jp.tenant, job_id, fold_hostlist(sj.req_nodes), jp.nodes,
                                  {"nodes": jp.nodes, **after}))
        if jp.nice is not None and sj.nice != jp.nice:
            actions.append(Action("set_nice", jp.tenant, job_id, sj.nice, jp.nice, after))
        if jp.priority is not None and sj.priority != jp.priority:
            actions.append(Action("set_priority", jp.tenant, job_id, sj.priority, jp.priority, after))
    for job_id in plan.requeue:
        sj = jobs.get(job_id)
        if sj is not None and sj.running:
            actions.append(Action("requeue", sj.account, job_id, sj.gpu_type_running, "PENDING"))
    return sorted(actions, key=_order)


def _order(a: Action) -> tuple[int, int]:
    """Execution order: every change to pending jobs and the requeues first, then what a
    requeued job gets once it is pending again (its settings)."""
    late = bool(a.params.get("after_requeue"))
    return (1 if late else 0, KIND_ORDER.index(a.kind))
