"""Giving back what slurm-fair versions before 0.2 changed in accounting (pure).

Those versions made a QOS ``fair_<account>`` per tenant, made it the default QOS of the account
and of its users, moved pending jobs into it and set their nice. 0.2 changes no QOS, so a cycle
and ``revert`` on a store they left give it all back, in an order that never strands a job (the
revert of 0.1 deleted the QOS while pending jobs still carried it: they waited for ever with
``InvalidQOS``):

1. the account's (and its users') default QOS back to what it was (:class:`ManagedQos`), so
   jobs submitted from now on no longer get ``fair_<account>``;
2. every pending job carrying the QOS back to its own QOS: its recorded original, or, for a
   job submitted while the controller ran (it got the QOS as its default), the account's
   restored default;
3. only then the QOS detached from the account where it was not there before, its limits
   removed, and deleted when slurm-fair created it and no job (running ones included) carries
   it any more; a QOS still carried by a running job is kept, without limits, until a later
   cycle or revert finds it unused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from ..slurm.model import Snapshot
from .diff import Action, order
from .state.fields import Owned
from .state.originals import ManagedQos

if TYPE_CHECKING:
    from .apply import ActionResult


def is_gpu_tres(key: str) -> bool:
    """``gres/gpu`` or ``gres/gpu:<type>``: the GrpTRES keys those versions set."""
    return key == "gres/gpu" or key.startswith("gres/gpu:")


def legacy_actions(snapshot: Snapshot, managed: Mapping[str, ManagedQos],
                   owned: Mapping[tuple[str, str], Owned]) -> list[Action]:
    """The steps of the module docstring for every QOS an older version managed (the jobs'
    own recorded QOS are given back with the other owned fields: :func:`.diff.give_backs`)."""
    accounts = {a.name: a for a in snapshot.accounts}
    qos_now = {q.name: q for q in snapshot.qos}
    out: list[Action] = []
    for name, m in sorted(managed.items()):
        acct = accounts.get(m.account)
        default = m.prev_default_qos or (acct.default_qos if acct and acct.default_qos != name else "") or "normal"
        if acct is not None and acct.default_qos == name:
            out.append(Action("restore_default_qos", m.account, before=name, after=default,
                              params={"qos": default, "account": m.account, "from_qos": name}))
        carriers = [j for j in snapshot.jobs if j.qos == name]
        for j in carriers:
            if j.pending and (j.job_id, "qos") not in owned:
                out.append(Action("set_job_qos", j.account, j.job_id, name, default,
                                  {"field": "qos", "value": default, "give_back": True, "qos": default,
                                   "adopted": True}))
        if acct is not None and name in acct.qos and not m.account_had_qos:
            out.append(Action("detach_qos", m.account, before=name, params={"qos": name, "account": m.account}))
        current = qos_now.get(name)
        if current is None:
            continue
        ours = {k for k in current.grp_tres if is_gpu_tres(k)}
        want = {k: m.prev_grp_tres.get(k) for k in ours} if m.existed_before else {k: None for k in ours}
        if any(current.grp_tres.get(k) != v for k, v in want.items()):
            out.append(Action("clear_qos_limits", m.account, before=dict(current.grp_tres), after=want,
                              params={"qos": name, "limits": want}))
        if not m.existed_before:
            out.append(Action("delete_qos", m.account, before=name,
                              params={"qos": name, "running": sorted(j.job_id for j in carriers if j.running)}))
    return sorted(out, key=order)


def finished_qos(managed: Mapping[str, ManagedQos], results: Iterable["ActionResult"],
                 present: Iterable[str] = ()) -> list[str]:
    """The older versions' QOS nothing more needs to be done for after ``results``: every
    action about them applied, and the QOS deleted (or gone: not in ``present``) or one that
    existed before slurm-fair (their records can go). A QOS kept for running jobs, or one whose
    step failed, keeps its record."""
    results = list(results)
    present = set(present)
    out = []
    for name, m in managed.items():
        mine = [r for r in results if _about(r.action, name)]
        if any(not r.applied for r in mine):
            continue
        deleted = any(r.action.kind == "delete_qos" and r.applied for r in mine)
        if deleted or m.existed_before or name not in present:
            out.append(name)
    return out


def _about(a: Action, name: str) -> bool:
    if a.kind == "set_job_qos":
        return bool(a.before == name)
    if a.kind == "restore_default_qos":
        return a.params.get("from_qos") == name
    return a.kind in ("detach_qos", "clear_qos_limits", "delete_qos") and a.params.get("qos") == name
