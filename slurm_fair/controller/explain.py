"""``slurm-fair explain JOBID``: why this job got this type and this place in line.

Everything comes from what the controller recorded (state store + audit log), so the answer is
what the controller actually decided, not a recomputation with today's data: the job's
throughput estimate and where each number came from, its tenant's weight, fair share and bundle,
the allocation ``x_jk``, the rounding step's deficit priority and whether this round placed it,
its place in line, each field slurm-fair set on it, every requeue of it (to make room for which
pending jobs, or to move up to which faster type) and every action applied to it.

Beside it, Slurm's own view now (through the port, never a shell): state and pending reason,
the multifactor priority with its weighted factors (``sprio``), and the expected start
(``squeue``; none when the backfill scheduler has no estimate). The controller's order and
Slurm's priority can then be read side by side.

The state store is opened **read-only** (SQLite ``mode=ro``): a tenant who cannot write the
controller's state directory can still ask, and asking never creates, migrates or locks the
store while a cycle runs. A missing store is a clear error naming the path.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import JobGone, SlurmError, UserError
from ..estimates.estimate import label
from ..inputs import fullmatch
from ..slurm.port import SlurmPort
from .audit import AuditLog
from .settings import Settings
from .state import StateStore


#: a job id ``explain`` takes: ASCII digits (``１２`` is not one), or an array task ``12_3``
JOB_ID_RE = re.compile(r"[0-9]{1,20}(_[0-9]{1,10})?")


def explain(config: Config, job_id: str, port: SlurmPort | None = None) -> dict[str, Any]:
    """The record of ``job_id`` (plus Slurm's view under ``"slurm"`` when a ``port`` is given);
    UserError (exit 2) when the job id is malformed, the store is missing or unreadable, or the
    controller never saw the job."""
    s = Settings.from_config(config)
    job_id = str(job_id).strip(" ")
    if not fullmatch(JOB_ID_RE, job_id):
        raise UserError(f"{job_id[:40]!r} is not a Slurm job id (digits, or JOBID_TASK for an array task)")
    path = StateStore.existing(s.state_dir, "explain")
    try:
        out = _recorded(s, path, job_id)
    except sqlite3.Error as e:
        raise UserError(f"cannot read the controller state store {path}: {e}") from None
    if port is not None:
        out["slurm"] = slurm_view(port, job_id)
    return out


def slurm_view(port: SlurmPort, job_id: str) -> dict[str, Any]:
    """Slurm's own view of the job now; a Slurm that cannot answer is reported, not raised
    (the controller's record is still worth showing)."""
    try:
        o = port.job_outlook(job_id)
    except JobGone:
        return {"known": False, "note": "Slurm no longer lists this job (it ended and left slurmctld's memory)"}
    except SlurmError as e:
        return {"known": False, "note": f"Slurm did not answer: {e}"}
    view: dict[str, Any] = {"known": True, "state": o.state, "reason": o.reason, "priority": o.priority,
                            "start": o.start.isoformat() if o.start else None,
                            "start_is_estimate": o.state.upper() == "PENDING"}
    try:
        view["priority_factors"] = [
            {"partition": f.partition, "priority": f.priority, "factors": dict(f.factors), "nice": f.nice,
             "tres": f.tres} for f in port.job_priority_factors(job_id)]
    except SlurmError as e:
        view["priority_factors"] = []
        view["priority_factors_note"] = f"sprio did not answer: {e}"
    return view


def _recorded(s: Settings, path: Path, job_id: str) -> dict[str, Any]:
    """What the controller recorded about the job (module docstring)."""
    with StateStore.read_only(path) as store:
        history = store.job_history(job_id, limit=1)
        actions = _outcomes(AuditLog(s.audit_log).for_job(job_id))
        fields = {f: r for (j, f), r in store.owned().items() if j == job_id}
        if not history and not actions:
            raise UserError(
                f"job {job_id}: no decision recorded in {s.state_dir} (not a GPU job, not seen by "
                "a cycle yet, or another state_dir)"
            )
        out: dict[str, Any] = {"job": job_id, "actions": actions, "requeues": [
            {"cycle": r["cycle_id"], "at": r["at"], "reason": r["reason"], "from_type": r["from_type"],
             "to_type": r["to_type"], "for_jobs": json.loads(r["for_jobs_json"] or "[]")}
            for r in store.requeues_of(job_id)]}
        if fields:
            out["fields"] = {f: {"original": r.original, "written": r.written, "intent": r.intent,
                                 "released": r.released} for f, r in sorted(fields.items())}
        if history:
            h = history[0]
            tenant = store.tenant_cycle(h["cycle_id"], h["tenant"]) or {}
            out.update({
                "cycle": h["cycle_id"], "policy": h["policy"], "tenant": h["tenant"],
                "state": h["state"], "gpus": h["gpus"], "class": h["class"],
                "class_source": h["estimate"].get("class_source"),
                "throughput": h["estimate"].get("throughput", {}), "sources": h["sources"],
                "runs": h["estimate"].get("runs", {}),
                "allocation": h["allocation"], "placed_type": h["placed_type"],
                "deficit_priority": h["deficit"], "planned_type": h["planned_type"],
                "rank": h["rank"], "fixed_type": h["estimate"].get("fixed_type"),
                "partition": h["estimate"].get("partition"),
                "pin_gres": bool(h["estimate"].get("pin_gres")),
                "tenant_weight": tenant.get("weight"), "fair_share": tenant.get("fair_share", {}),
                "bundle": tenant.get("bundle", {}),
            })
    return out


def _outcomes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit log's outcomes of a job's actions; an intent with no outcome (its cycle was
    killed between the two) is shown as such."""
    done = {(e.get("cycle"), e.get("kind")) for e in entries if not e.get("intent")}
    out = []
    for e in entries:
        if not e.get("intent"):
            out.append(e)
        elif (e.get("cycle"), e.get("kind")) not in done:
            out.append({**e, "applied": False, "skipped": False,
                        "error": "intended; no outcome recorded (the cycle was interrupted)"})
    return out


def render(e: dict[str, Any]) -> str:
    """Plain text for people."""
    lines = [f"job {e['job']}"]
    if "cycle" in e:
        tput = ", ".join(f"{k} {e['throughput'].get(k, 0.0):.4g} ({label(e['sources'].get(k, '?'), e.get('runs', {}).get(k))})"
                         for k in sorted(set(e["throughput"]) | set(e["sources"])))
        cls = f"class {e['class']} (from {e['class_source']})" if e["class"] else "no workload class"
        x = ", ".join(f"{k} {v:.3f}" for k, v in sorted(e["allocation"].items()) if v > 1e-9) or "nothing"
        lines += [
            f"  decided in cycle {e['cycle']} by policy {e['policy']}; tenant {e['tenant']}, "
            f"{e['gpus']} GPU(s), {e['state'].lower()}",
            f"  throughput estimate (steps/s): {tput}; {cls}",
            f"  tenant {e['tenant']}: weight {e['tenant_weight']}, fair share "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(e["fair_share"].items()))
            + "; bundle " + (", ".join(f"{k} {v:.2f}" for k, v in sorted(e["bundle"].items())) or "none"),
            f"  allocation x_jk (share of time per type): {x}",
            f"  rounding: deficit priority {e['deficit_priority']:.4g}; "
            + (f"placed on {e['placed_type']} this round" if e["placed_type"] else "not placed this round"),
        ]
        if e["rank"] is not None:
            lines.append(f"  GPU type {e['planned_type'] or '(none)'}: {_how(e)}; "
                         f"place in line among pending GPU jobs: {e['rank']}")
    for name, f in e.get("fields", {}).items():
        if f["released"]:
            lines.append(f"  {name}: changed by someone else after slurm-fair set it to {f['written']}; "
                         f"theirs now (slurm-fair no longer manages it; revert leaves it)")
        else:
            lines.append(f"  {name}: set by slurm-fair to {f['intent'] or f['written'] or '-'} "
                         f"(was {f['original'] or '-'}; revert gives that back)")
    for r in e.get("requeues", []):
        why = (f"to move up to {r['to_type']}" if r["reason"] == "move-up"
               else "to make room for " + (", ".join(r["for_jobs"]) or "a pending job"))
        lines.append(f"  requeued in cycle {r['cycle']} from {r['from_type']} {why}")
    if "slurm" in e:
        lines += _render_slurm(e["slurm"])
    if e["actions"]:
        lines.append("  actions:")
        for a in e["actions"][-20:]:
            state = "applied" if a.get("applied") else ("skipped" if a.get("skipped") else "NOT applied")
            err = f" ({a['error']})" if a.get("error") else ""
            lines.append(f"    {a.get('cycle')}: {a.get('kind')} {_fmt(a.get('before'))} -> {_fmt(a.get('after'))}: "
                         f"{state}{err}")
    return "\n".join(lines)


def _render_slurm(v: dict[str, Any]) -> list[str]:
    """Slurm's view in words: state and reason, expected start, priority and its factors."""
    if not v.get("known"):
        return [f"  Slurm now: {v.get('note', 'unknown')}"]
    state = str(v["state"]).lower()
    reason = f", reason {v['reason']}" if v.get("reason") and v["reason"] != "None" else ""
    if v["start_is_estimate"]:
        start = f"expected start {v['start']}" if v["start"] else "expected start N/A (Slurm has no estimate yet)"
    else:
        start = f"started {v['start']}" if v["start"] else "start N/A"
    lines = [f"  Slurm now: {state}{reason}; {start}"]
    for f in v.get("priority_factors", []):
        parts = ", ".join(f"{k} {x:g}" for k, x in f["factors"].items() if x) or "no weighted factor above 0"
        nice = f", nice {f['nice']}" if f["nice"] else ""
        tres = f", TRES {f['tres']}" if f["tres"] else ""
        lines.append(f"  Slurm priority in partition {f['partition']}: {f['priority']:g} ({parts}{nice}{tres})")
    if v["start_is_estimate"] and not v.get("priority_factors"):
        lines.append("  Slurm priority factors: " + v.get(
            "priority_factors_note", "none (sprio lists only pending jobs that are eligible: not held, begin time reached)"))
    return lines


def _how(e: dict[str, Any]) -> str:
    """How the job's GPU type is enforced, in words."""
    if e.get("fixed_type"):
        return "fixed (the job's own typed request or single-type partition; never changed)"
    if e.get("pin_gres"):
        return "its gres request is rewritten to this type"
    if e.get("partition"):
        return f"steered by moving it to partition {e['partition']} (its request stays untyped)"
    return "no partition holds only this type, so it is not steered"


def _fmt(v: Any) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{'total' if k == 'gres/gpu' else str(k).removeprefix('gres/gpu:')}={x}" for k, x in v.items())
    return str(v)
