"""``slurm-fair explain JOBID``: why this job got this type and this place in line.

Everything comes from what the controller recorded (state store + audit log), so the answer is
what the controller actually decided, not a recomputation with today's data: the job's
throughput estimate and where each number came from, its tenant's weight, fair share and bundle,
the allocation ``x_jk``, the rounding step's deficit priority and whether this round placed it,
its place in line, the QOS limits of its tenant, every requeue of it (to make room for which
pending jobs, or to move up to which faster type) and every action applied to it.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import Config
from ..errors import UserError
from .audit import AuditLog
from .settings import Settings
from .state import StateStore


def explain(config: Config, job_id: str) -> dict[str, Any]:
    """The record of ``job_id``; UserError (exit 2) when the controller never saw it."""
    s = Settings.from_config(config)
    job_id = str(job_id).strip()
    if not job_id or not job_id.replace("_", "").isdigit():
        raise UserError(f"{job_id!r} is not a Slurm job id")
    with StateStore.in_dir(s.state_dir) as store:
        history = store.job_history(job_id, limit=1)
        actions = AuditLog(s.audit_log).for_job(job_id)
        original = store.original(job_id)
        if not history and not actions:
            raise UserError(
                f"job {job_id}: no decision recorded in {s.state_dir} (not a GPU job, not seen by "
                "a cycle yet, or another state_dir)"
            )
        out: dict[str, Any] = {"job": job_id, "actions": actions, "requeues": [
            {"cycle": r["cycle_id"], "at": r["at"], "reason": r["reason"], "from_type": r["from_type"],
             "to_type": r["to_type"], "for_jobs": json.loads(r["for_jobs_json"] or "[]")}
            for r in store.requeues_of(job_id)]}
        if original is not None:
            out["original"] = {"gres": original.gres_raw, "partition": original.partition,
                               "qos": original.qos, "nice": original.nice,
                               "priority": original.priority}
        if history:
            h = history[0]
            tenant = store.tenant_cycle(h["cycle_id"], h["tenant"]) or {}
            out.update({
                "cycle": h["cycle_id"], "policy": h["policy"], "tenant": h["tenant"],
                "state": h["state"], "gpus": h["gpus"], "class": h["class"],
                "class_source": h["estimate"].get("class_source"),
                "throughput": h["estimate"].get("throughput", {}), "sources": h["sources"],
                "allocation": h["allocation"], "placed_type": h["placed_type"],
                "deficit_priority": h["deficit"], "planned_type": h["planned_type"],
                "rank": h["rank"], "fixed_type": h["estimate"].get("fixed_type"),
                "partition": h["estimate"].get("partition"),
                "pin_gres": bool(h["estimate"].get("pin_gres")),
                "tenant_weight": tenant.get("weight"), "fair_share": tenant.get("fair_share", {}),
                "bundle": tenant.get("bundle", {}), "qos_limits": tenant.get("limits", {}),
            })
    return out


def render(e: dict[str, Any]) -> str:
    """Plain text for people."""
    lines = [f"job {e['job']}"]
    if "cycle" in e:
        tput = ", ".join(f"{k} {v:.4g} ({e['sources'].get(k, '?')})" for k, v in sorted(e["throughput"].items()))
        cls = f"class {e['class']} (from {e['class_source']})" if e["class"] else "no workload class"
        x = ", ".join(f"{k} {v:.3f}" for k, v in sorted(e["allocation"].items()) if v > 1e-9) or "nothing"
        lines += [
            f"  decided in cycle {e['cycle']} by policy {e['policy']}; tenant {e['tenant']}, "
            f"{e['gpus']} GPU(s), {e['state'].lower()}",
            f"  throughput estimate (steps/s): {tput}; {cls}",
            f"  tenant {e['tenant']}: weight {e['tenant_weight']}, fair share "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(e["fair_share"].items()))
            + "; bundle " + (", ".join(f"{k} {v:.2f}" for k, v in sorted(e["bundle"].items())) or "none")
            + "; QOS limits " + ", ".join(f"{k.split(':')[-1]}={v}" for k, v in sorted(e["qos_limits"].items())),
            f"  allocation x_jk (share of time per type): {x}",
            f"  rounding: deficit priority {e['deficit_priority']:.4g}; "
            + (f"placed on {e['placed_type']} this round" if e["placed_type"] else "not placed this round"),
        ]
        if e["rank"] is not None:
            lines.append(f"  GPU type {e['planned_type'] or '(none)'}: {_how(e)}; "
                         f"place in line among pending GPU jobs: {e['rank']}")
    if "original" in e:
        o = e["original"]
        lines.append(f"  original request: {o['gres']} partition={o['partition']} qos={o['qos']} "
                     f"nice={o['nice']} (restored by slurm-fair revert)")
    for r in e.get("requeues", []):
        why = (f"to move up to {r['to_type']}" if r["reason"] == "move-up"
               else "to make room for " + (", ".join(r["for_jobs"]) or "a pending job"))
        lines.append(f"  requeued in cycle {r['cycle']} from {r['from_type']} {why}")
    if e["actions"]:
        lines.append("  actions:")
        for a in e["actions"][-20:]:
            state = "applied" if a.get("applied") else ("skipped" if a.get("skipped") else "NOT applied")
            err = f" ({a['error']})" if a.get("error") else ""
            lines.append(f"    {a.get('cycle')}: {a.get('kind')} {_fmt(a.get('before'))} -> {_fmt(a.get('after'))}: "
                         f"{state}{err}")
    return "\n".join(lines)


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
