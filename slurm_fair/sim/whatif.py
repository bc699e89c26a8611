"""The what-if of a replayed history (``simulate --sacct-file ... --what-if FILE``): per tenant,
what it got under the history as it ran and under each policy, and the jobs that would have
gained most.

Every figure is read from the results document (:mod:`.results`), whose per-tenant numbers are
``metrics.tenant_breakdown``'s (the definitions ``report`` and ``testbed replay`` score with):
average JCT and wait, finish-time fairness (mean ``rho``, ``fairness.rhos_at_arrival``), GPU-hours
by type, and utility (GPU-hours weighted by ``n_jk``: 1.0 is every hour on the job's best type).
and the report's windowed sharing-incentive ratio ``U_u / V_u`` (``si_ratio``: the run's records
as the accounting Slurm would have kept, scored by ``report/window_fairness.py`` itself,
:mod:`slurm_fair.report.simulated`).
"""

from __future__ import annotations

from typing import Any, Mapping

from .. import templating
from ..errors import SlurmFairError

#: the jobs listed per policy
TOP_JOBS = 15
HISTORY = "history (Slurm)"


def what_if(doc: Mapping[str, Any], jcts: Mapping[str, Mapping[str, float]], history_jcts: Mapping[str, float],
            jobs: Mapping[str, Any]) -> dict[str, Any]:
    """The what-if document: ``tenants[tenant][column]`` figures, ``gains[policy]`` the jobs
    whose JCT would have dropped most against the history (``jcts[policy][job]``)."""
    columns = {HISTORY: doc["history"], **doc["policies"]}
    tenants: dict[str, dict[str, Any]] = {}
    for name, m in columns.items():
        for t, row in m.get("tenants", {}).items():
            tenants.setdefault(t, {})[name] = {
                "avg_jct_s": row.get("avg_jct_s"), "avg_wait_s": row.get("avg_wait_s"),
                "ftf_rho_mean": row.get("ftf_rho_mean"), "utility": row.get("utility"),
                "si_ratio": row.get("si_ratio"),
                "gpu_hours": {k: s / 3600 for k, s in row.get("gpu_seconds", {}).items()},
                "jobs_completed": row.get("jobs_completed"),
            }
    gains: dict[str, list[dict[str, Any]]] = {}
    for policy, by_job in jcts.items():
        rows = [(history_jcts[j] - v, j) for j, v in by_job.items() if j in history_jcts]
        rows.sort(key=lambda r: (-r[0], r[1]))
        gains[policy] = [{"job": j, "tenant": j.split("/", 1)[0], "user": jobs[j].user, "job_name": jobs[j].job_name,
                          "history_jct_s": history_jcts[j], "jct_s": by_job[j], "gain_s": g}
                         for g, j in rows[:TOP_JOBS] if g > 0]
    return {"columns": list(columns), "tenants": dict(sorted(tenants.items())), "gains": gains,
            "types": sorted(doc["cluster"]["capacity"]), "history": {k: doc["history"][k] for k in
                                                                     ("ended", "left_out", "speed_sources", "counts")},
            "agnostic": doc.get("agnostic_as"),
            "spread": doc.get("spread"),
            "not_computed": [f"si_ratio of {name}: no tenant had a valued equal share" for name, m in columns.items()
                             if not any(r.get("si_ratio") is not None for r in m.get("tenants", {}).values())]}


def render_html(doc: Mapping[str, Any]) -> str:
    """The what-if as one HTML page (templates/whatif.html.j2)."""
    directory = templating.templates_dir("whatif.html.j2")
    if directory is None:
        raise SlurmFairError(templating.not_found("whatif.html.j2"))
    return templating.environment(directory, autoescape=True).get_template("whatif.html.j2").render(
        doc=doc, hours=_hours)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"
