"""Phase 6a (pure): the actions that take Slurm from what it has to what the plan wants.

Only differences become actions, so a cycle on an unchanged cluster writes nothing, and a
change Slurm lost (a slurmctld restart drops ``scontrol`` partition/job edits that were never
persisted) shows up as a difference again and is re-applied next cycle.

Every job action names the field it writes (``params["field"]``), so :mod:`.apply` records the
intent in the state store before the write and what was written after it (:mod:`.ownership`).
An action that puts back the value a field held before the controller first wrote it is a
*give-back* (``params["give_back"]``): once it is applied the field is the site's again. A field
someone else changed after the controller is never in an action (the plan leaves it).

Actions come out in a safe order: give-backs of what older versions changed (:mod:`.legacy`:
an account's default QOS first, then jobs out of those QOS, then the QOS themselves), then per
job partition (the default way a job is steered to its GPU type), gres type (only with
``pin_gres_type``), node list and site factor, and requeues last (they are the only action on
running jobs). A requeued job is pending once its requeue returns, so its own settings follow
the requeue. Slurm then holds it for its credential lifetime + 1 s (a relaunch on the same node
sooner would fail with "credential revoked"); the controller never shortens that hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

from ..model import frozen_map
from ..slurm.model import Snapshot, SlurmJob
from .asked import Request, request_of, requests
from .ownership import current, same
from .state.fields import LEGACY_FIELDS, Owned

if TYPE_CHECKING:  # the plan's package loads the policy stack; revert and the failsafe need none of it
    from .plan.types import JobPlan, Plan

#: execution order of action kinds (the legacy ones: :mod:`.legacy`)
KIND_ORDER = ("restore_default_qos", "set_job_qos", "set_nice", "set_priority", "detach_qos", "clear_qos_limits",
              "delete_qos", "set_partition", "set_gpu_type", "set_nodes", "set_site_factor", "requeue")
#: the job fields a plan names, in the order of their actions
PLAN_FIELDS = ("partition", "gres", "nodes", "site_factor")
#: job field -> the action kind that writes it
FIELD_KIND = {"partition": "set_partition", "gres": "set_gpu_type", "nodes": "set_nodes",
              "site_factor": "set_site_factor", "qos": "set_job_qos", "nice": "set_nice", "priority": "set_priority"}


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

    @property
    def field(self) -> str | None:
        """The job field it writes (None: not a job field)."""
        return self.params.get("field")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tenant": self.tenant, "job": self.job, "target": self.target,
                "before": _plain(self.before), "after": _plain(self.after)}


def _plain(v: Any) -> Any:
    return dict(v) if isinstance(v, Mapping) else v


def field_action(sj: SlurmJob, name: str, want: str, owned: Mapping[tuple[str, str], Owned],
                 **extra: Any) -> Action:
    """The action that writes ``want`` into field ``name`` of ``sj`` (a give-back when ``want``
    is what the field held before the controller first wrote it)."""
    row = owned.get((sj.job_id, name))
    give_back = row is not None and same(name, want, row.original)
    after: Any = int(want) if name in ("site_factor", "nice") else want
    return Action(FIELD_KIND[name], sj.account, sj.job_id, current(sj, name), after,
                  {"field": name, "value": want, "give_back": give_back, **extra})


def planned(jp: JobPlan, name: str) -> str | None:
    """What the plan wants in field ``name`` of its job (None: the plan names no value)."""
    if name == "partition":
        return jp.partition or None
    if name == "gres":
        return jp.gpu_type or None
    if name == "nodes":
        return jp.nodes
    if name == "site_factor":
        return None if jp.site_factor is None else str(int(jp.site_factor))
    raise ValueError(f"the plan has no field {name!r}")


def _differs(sj: SlurmJob, name: str, want: str) -> bool:
    """Whether Slurm shows something else than ``want`` in field ``name`` (a value Slurm did not
    show, a site factor sprio does not list, is no difference)."""
    if name == "gres":
        return (sj.gpu_request.gpu_type if sj.gpu_request else None) != want
    now = current(sj, name)
    return now is not None and not same(name, now, want)


#: field -> the parameter :mod:`.apply` reads the value from (besides ``value``)
_PARAM = {"partition": "partition", "gres": "gpu_type", "nodes": "nodes"}


def diff(plan: Plan, snapshot: Snapshot, owned: Mapping[tuple[str, str], Owned] | None = None,
         ours: Mapping[tuple[str, str], str] | None = None,
         asked: Mapping[str, Request] | None = None) -> list[Action]:
    """Every difference between ``plan`` and ``snapshot``, in execution order. ``owned``: the
    fields the controller wrote; ``ours``: those it still holds (:func:`.ownership.reconcile`);
    ``asked``: what each job asked for (:func:`.asked.requests`, made from the same rows when
    not given).

    One rule for every field of the plan (partition, GPU request, node list, site factor): a
    value is written where Slurm shows another; no value (None) means the controller's value
    is given back, wherever it still holds one. A pending job the plan does not mention gets
    every field back."""
    owned, ours = owned or {}, ours or {}
    if asked is None:
        asked = requests(snapshot.jobs, owned)
    jobs = {j.job_id: j for j in snapshot.jobs}
    requeued = {j for j in plan.requeue if jobs.get(j) is not None and jobs[j].running}
    actions: list[Action] = []
    for job_id, jp in sorted(plan.jobs.items(), key=lambda kv: kv[1].rank):
        sj = jobs.get(job_id)
        if sj is None or not (sj.pending or (jp.requeued and job_id in requeued)):
            continue
        late = {"after_requeue": True} if sj.running else {}
        for name in PLAN_FIELDS:
            want = planned(jp, name)
            if want is None:
                if (job_id, name) in ours and (job_id, name) in owned:
                    actions.append(_give_back(sj, owned[(job_id, name)], late, asked.get(job_id)))
                elif name == "partition" and sj.pending and _routed(asked.get(job_id)):
                    actions.append(routed_back(sj, asked[job_id]))
            elif _differs(sj, name, want):
                extra = {_PARAM[name]: want} if name in _PARAM else {}
                actions.append(field_action(sj, name, want, owned, **extra, **late))
    for (job_id, name), _value in sorted(ours.items()):
        sj = jobs.get(job_id)
        if sj is not None and sj.pending and (job_id not in plan.jobs or name in LEGACY_FIELDS) and \
                name in FIELD_KIND and (job_id, name) in owned:
            actions.append(_give_back(sj, owned[(job_id, name)], {}, asked.get(job_id)))
    for job_id, req in sorted(asked.items()):
        sj = jobs.get(job_id)
        if sj is not None and sj.pending and job_id not in plan.jobs and _routed(req):
            actions.append(routed_back(sj, req))
    for job_id in plan.requeue:
        sj = jobs.get(job_id)
        if sj is not None and sj.running:
            actions.append(Action("requeue", sj.account, job_id, sj.gpu_type_running, "PENDING",
                                  {"for": tuple(plan.requeue_for.get(job_id, ())),
                                   "to_type": plan.move_up.get(job_id)}))
    return sorted(actions, key=order)


def _routed(req: Request | None) -> bool:
    """The submit plugin's routing still holds the job's partition (slurm-fair's value, with no
    row: :attr:`.asked.Request.routed`)."""
    return req is not None and req.routed


def routed_back(sj: SlurmJob, req: Request) -> Action:
    """Give back the partition the submit plugin chose: back to what the job was submitted to
    (an adopted give-back: no row of the controller's to settle)."""
    a = field_action(sj, "partition", req.partition, {}, partition=req.partition, adopted=True)
    return Action(a.kind, a.tenant, a.job, a.before, a.after, {**a.params, "give_back": True})


def _give_back(sj: SlurmJob, row: Owned, late: Mapping[str, Any], asked: Request | None) -> Action:
    """Put ``row``'s field back to what the job asked for (``asked``: :func:`.asked.request_of`;
    for a field other than the partition, what it held before the controller first wrote it)."""
    extra: dict[str, Any] = dict(late)
    if row.field == "partition":
        # what the job asked for (the submit plugin's record beats what it held when we came)
        row = replace(row, original=(asked or request_of(sj, {(sj.job_id, "partition"): row})).partition)
        extra["partition"] = row.original
    elif row.field == "gres":
        extra["raw"] = row.original
    elif row.field == "nodes":
        extra["nodes"] = row.original
    elif row.field == "qos":
        extra["qos"] = row.original
    return field_action(sj, row.field, row.original, {(sj.job_id, row.field): row}, **extra)


def give_backs(snapshot: Snapshot, owned: Mapping[tuple[str, str], Owned],
               ours: Mapping[tuple[str, str], str], asked: Mapping[str, Request] | None = None) -> list[Action]:
    """Every field the controller still holds on a pending job, put back (``revert``,
    ``failsafe``), in execution order (``asked``: as in :func:`diff`)."""
    if asked is None:
        asked = requests(snapshot.jobs, owned)
    jobs = {j.job_id: j for j in snapshot.jobs}
    out = []
    for key in sorted(ours):
        sj = jobs.get(key[0])
        row = owned.get(key)
        if sj is None or row is None or not sj.pending:
            continue
        if row.field == "priority":  # older versions fixed it: back to multifactor
            out.append(Action("set_priority", sj.account, sj.job_id, sj.priority, "multifactor",
                              {"field": "priority", "value": None, "give_back": True}))
            continue
        out.append(_give_back(sj, row, {}, asked.get(sj.job_id)))
    return sorted(out, key=order)


def order(a: Action) -> tuple[int, int]:
    """Execution order: every change to pending jobs and the requeues first, then what a
    requeued job gets once it is pending again (its settings)."""
    late = bool(a.params.get("after_requeue"))
    return (1 if late else 0, KIND_ORDER.index(a.kind))
