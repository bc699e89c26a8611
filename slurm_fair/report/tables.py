"""The report's figures, computed with pandas from :class:`~.data.ReportInputs`: the
:class:`Report` container and :func:`build`, which computes every table with its module's builder
(:mod:`.jobs`: per job, wait, JCT, finish-time fairness; :mod:`.usage`: GPU-hours, shares,
utilisation, timeline; :mod:`.window_fairness`: SI, envy, efficiency; :mod:`.cycles`: the
controller's cycles).

Every definition is written out in ``docs/reports.md``; the short version:

* a job's *run* in the window is ``[start, end)`` clipped to ``[since, until)`` (a running job
  ends at ``min(until, now)``); a job fully inside keeps sacct's own ``Elapsed``, so GPU-hours
  equal ``sacct``'s to the second;
* a job's *active* time is ``[submit, end)`` clipped the same way: the time it wanted GPUs;
* normalised-throughput-hours (NTH) = GPU-hours x ``n_jk`` of the job on the type it ran on;
* window utility ``U_u`` = the tenant's NTH; window bundle value ``V_u(B)`` = docs/fairness.md's
  ``V_u`` with the window as the period: 1-GPU units, demand of a job = ``g_j`` x its active
  hours (the LP is :func:`slurm_fair.fairness.best_use`, unchanged);
* sharing-incentive ratio = ``U_u / V_u((w_u/W) C H)``; envy ``V_u((w_u/w_v) Y_v) / U_u``;
* efficiency = ``E / E*`` with ``E* = V_all(C H)`` (all jobs as one tenant);
* finish-time fairness ``rho = JCT / JCT_iso`` with :func:`slurm_fair.fairness.isolated_jct`
  over the jobs active at the job's submission (the simulator's baseline, frozen then);
* wait = time since first submission not running; Hops' latency ratio ``W / A`` with the age
  :func:`slurm_fair.fairness.age_s` (per tenant and over all jobs, as the simulator's).

Computations never raise for missing data: a figure that cannot be computed is left out and
its reason appended to :attr:`Report.not_computed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from .cycles import controller_summary
from .data import ReportInputs
from .jobs import ftf_frame, jobs_frame, wait_summary
from .missing import NotComputed
from .type_fit import COLUMNS as TYPE_FIT_COLUMNS, type_fit_frame
from .usage import cluster_frame, tenant_frame, tenant_type_frame, timeline_frame
from .window import Window
from .window_fairness import fairness_frames


@dataclass
class Report:
    """All tables of one report (pandas frames) plus what could not be computed."""

    window: Window
    generated_at: datetime
    tenant_filter: str | None
    jobs: pd.DataFrame
    tenant_type: pd.DataFrame
    tenants: pd.DataFrame
    envy: pd.DataFrame
    cluster: pd.DataFrame
    summary: dict[str, Any]
    timeline: pd.DataFrame
    controller: dict[str, Any]
    not_computed: list[NotComputed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: jobs on a type >= 2x slower for them than one idle at their start (:mod:`.type_fit`)
    type_fit: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TYPE_FIT_COLUMNS))


def build(inputs: ReportInputs, tenant: str | None = None) -> Report:
    """Compute every table; fairness is computed over all tenants, then ``tenant`` filters."""
    missing: list[NotComputed] = []
    jobs = jobs_frame(inputs)
    jobs = ftf_frame(jobs, inputs, missing) if not jobs.empty else jobs.assign(
        wait_s=[], jct_s=[], jct_iso_s=[], ftf_rho=[], age_s=[], latency_ratio=[])
    tt = tenant_type_frame(jobs, inputs)
    fit = type_fit_frame(jobs, inputs)
    si, envy, summary = fairness_frames(jobs, tt, inputs, missing)
    summary.update(wait_summary(jobs))
    tenants = tenant_frame(jobs, si, tt, inputs)
    cluster = cluster_frame(jobs, inputs, missing)
    timeline = timeline_frame(jobs, inputs)
    controller = controller_summary(inputs, missing)
    notes = list(inputs.notes)
    if not jobs.empty:
        flat = int((jobs["speed_source"] == "flat").sum())
        if flat:
            notes.append(f"{flat} of {len(jobs)} jobs have no throughput estimate (no fair:class tag, rule "
                         "or controller estimate): counted at the same speed on every GPU type")
        guessed = int(jobs["speed_source"].isin(["prior", "assumed"]).sum())
        if guessed:
            notes.append(f"{guessed} of {len(jobs)} jobs have no throughput estimate of their own (no fair:class "
                         "tag, rule, learned or controller estimate): counted at the GPU type priors' speeds")
    if jobs.empty:
        missing.append(NotComputed("all per-tenant figures", "no GPU jobs in accounting for the window"))
    if tenant is not None:
        jobs = jobs[jobs["tenant"] == tenant]
        tt = tt[tt["tenant"] == tenant]
        tenants = tenants[tenants["tenant"] == tenant]
        envy = envy.loc[[tenant]] if tenant in envy.index else envy.iloc[0:0]
        if tenant in timeline.columns:
            timeline = timeline[[tenant]]
        fit = fit[fit["tenant"] == tenant]
    return Report(
        window=inputs.window, generated_at=inputs.now, tenant_filter=tenant, jobs=jobs,
        tenant_type=tt.reset_index(drop=True), tenants=tenants.reset_index(drop=True), envy=envy,
        cluster=cluster, summary=summary, timeline=timeline, controller=controller,
        not_computed=missing, notes=notes, type_fit=fit.reset_index(drop=True),
    )
