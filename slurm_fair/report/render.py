"""A :class:`~.tables.Report` as text: a rich terminal table, CSV, JSON or one HTML page.

The JSON schema (``slurm-fair/report/v2``) and the CSV layout are documented in
``docs/reports.md``; scripts rely on them, so change them only together with the version.
Non-finite numbers (a ratio over zero) become ``null`` in JSON and an empty cell in CSV.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from typing import Any, Callable, Mapping

import jinja2
import pandas as pd

from .. import templating
from ..errors import SlurmFairError
from ..inputs import jsonable
from .tables import Report

SCHEMA = "slurm-fair/report/v2"
FORMATS = ("table", "csv", "json", "html")

TENANT_FIELDS = ["weight", "entitled_share", "received_share", "gpu_hours", "nt_hours",
                 "equal_share_value", "si_ratio", "jobs", "completed", "wait_mean_s", "wait_max_s",
                 "jct_mean_s", "ftf_rho_mean", "ftf_rho_max", "latency_ratio_mean", "latency_ratio_max"]
#: figures over all jobs (the cluster section)
OVERALL_FIELDS = ["nt_hours", "nt_hours_bound", "efficiency", "wait_mean_s", "latency_ratio_mean",
                  "latency_ratio_max"]
TYPE_FIELDS = ["gpu_hours", "nt_hours", "entitled_share", "entitled_gpu_hours", "received_share"]
CLUSTER_FIELDS = ["gpus", "gpu_hours", "capacity_gpu_hours", "utilisation"]
JOB_FIELDS = ["job_id", "tenant", "user", "state", "gpu_type", "gpus", "submit", "start", "end",
              "run_s", "active_s", "gpu_hours", "n", "nt_hours", "speed_source", "class",
              "wait_s", "jct_s", "jct_iso_s", "ftf_rho", "age_s", "latency_ratio"]


def clean(v: Any) -> Any:
    """JSON-safe scalar: NaN/inf -> None, numpy -> Python, timestamps -> ISO text."""
    if v is None:
        return None
    if isinstance(v, (pd.Timestamp,)):
        return None if pd.isna(v) else v.isoformat()
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


# --- JSON -------------------------------------------------------------------------------------


def to_document(r: Report) -> dict[str, Any]:
    """The report as the documented JSON document (a plain dict)."""
    tenants = []
    for row in r.tenants.to_dict("records"):
        u = row["tenant"]
        types = r.tenant_type[r.tenant_type["tenant"] == u]
        envy = {}
        if u in r.envy.index:
            envy = {v: clean(x) for v, x in r.envy.loc[u].items() if v != u}
        tenants.append({
            "tenant": u, **{f: clean(row.get(f)) for f in TENANT_FIELDS},
            "types": [{"gpu_type": t["gpu_type"], **{f: clean(t[f]) for f in TYPE_FIELDS}}
                      for t in types.to_dict("records")],
            "envy": envy,
        })
    return {
        "schema": SCHEMA,
        "generated_at": clean(r.generated_at),
        "window": {"since": clean(r.window.since), "until": clean(r.window.until), "hours": r.window.hours},
        "tenant_filter": r.tenant_filter,
        "cluster": {
            "types": [{"gpu_type": c["gpu_type"], **{f: clean(c[f]) for f in CLUSTER_FIELDS}}
                      for c in r.cluster.to_dict("records")],
            **{f: clean(r.summary.get(f)) for f in OVERALL_FIELDS},
        },
        "tenants": tenants,
        "jobs": [{f: clean(j.get(f)) for f in JOB_FIELDS} for j in r.jobs.to_dict("records")],
        "controller": {k: clean(v) for k, v in r.controller.items()},
        "type_fit": [{f: clean(v) for f, v in row.items()} for row in r.type_fit.to_dict("records")],
        "not_computed": [n.to_dict() for n in r.not_computed],
        "notes": list(r.notes),
    }


def render_json(r: Report) -> str:
    return json.dumps(jsonable(to_document(r)), indent=2, sort_keys=False, allow_nan=False) + "\n"


# --- CSV (long format) ----------------------------------------------------------------------

CSV_COLUMNS = ["section", "tenant", "gpu_type", "other", "metric", "value"]


def csv_rows(r: Report) -> list[list[Any]]:
    """``section,tenant,gpu_type,other,metric,value`` rows: one figure per row, every section."""
    doc = to_document(r)
    rows: list[list[Any]] = []
    rows += [["window", "", "", "", k, doc["window"][k]] for k in ("since", "until", "hours")]
    for c in doc["cluster"]["types"]:
        rows += [["cluster", "", c["gpu_type"], "", f, c[f]] for f in CLUSTER_FIELDS]
    rows += [["cluster", "", "", "", k, doc["cluster"][k]] for k in OVERALL_FIELDS]
    for t in doc["tenants"]:
        rows += [["tenant", t["tenant"], "", "", f, t[f]] for f in TENANT_FIELDS]
        for ty in t["types"]:
            rows += [["tenant_type", t["tenant"], ty["gpu_type"], "", f, ty[f]] for f in TYPE_FIELDS]
        rows += [["envy", t["tenant"], "", v, "envy_ratio", x] for v, x in t["envy"].items()]
    for j in doc["jobs"]:
        rows += [["job", j["tenant"], j["gpu_type"], j["job_id"], f, j[f]]
                 for f in ("gpus", "gpu_hours", "n", "nt_hours", "speed_source", "wait_s", "jct_s", "ftf_rho",
                           "latency_ratio")]
    rows += [["controller", "", "", "", k, v] for k, v in doc["controller"].items()]
    rows += [["not_computed", "", "", n["figure"], "reason", n["reason"]] for n in doc["not_computed"]]
    rows += [["note", "", "", "", "note", n] for n in doc["notes"]]
    return rows


def render_csv(r: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in csv_rows(r):
        w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buf.getvalue()


# --- rich table -------------------------------------------------------------------------------


def _fmt(v: Any, kind: str = "num") -> str:
    v = clean(v)
    if v is None:
        return "-"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "ratio":
        return f"{v:.2f}"
    if kind == "dur":
        return _duration(v)
    if isinstance(v, float):
        # short test jobs give GPU-hours like 0.0042: keep 3 significant digits below 1
        return f"{v:.3g}" if 0 < abs(v) < 1 else f"{v:.2f}"
    return str(v)


def _duration(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def render_table(r: Report, width: int | None = None) -> str:
    """Readable terminal tables (rich), plain text when written to a file."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width or 120, force_terminal=False, color_system=None)
    who = f" - tenant {r.tenant_filter}" if r.tenant_filter else ""
    con.print(f"slurm-fair report {r.window.since:%Y-%m-%d %H:%M} .. {r.window.until:%Y-%m-%d %H:%M}"
              f" ({r.window.hours:.1f} h){who}")
    eff = r.summary.get("efficiency")
    con.print("NT-h = normalised-throughput-hours (GPU-hours x the job's relative speed on that type)")
    con.print(f"Cluster efficiency E/E*: {_fmt(eff, 'pct')}  (normalised-throughput-hours "
              f"{_fmt(r.summary.get('nt_hours'))} of at most {_fmt(r.summary.get('nt_hours_bound'))})")
    con.print(f"All jobs: wait mean {_fmt(r.summary.get('wait_mean_s'), 'dur')}, latency ratio W/A mean/max "
              f"{_fmt(r.summary.get('latency_ratio_mean'), 'ratio')}/{_fmt(r.summary.get('latency_ratio_max'), 'ratio')}")

    t = Table(title="Utilisation per GPU type", title_justify="left")
    for c in ("GPU type", "GPUs", "GPU-hours", "capacity GPU-h", "utilisation"):
        t.add_column(c, justify="right" if c != "GPU type" else "left")
    for c in r.cluster.to_dict("records"):
        t.add_row(c["gpu_type"], str(c["gpus"]), _fmt(c["gpu_hours"]), _fmt(c["capacity_gpu_hours"]),
                  _fmt(c["utilisation"], "pct"))
    con.print(t)

    t = Table(title="Tenants (SI ratio >= 1: at least its equal share's best use)", title_justify="left")
    for c in ["tenant", "weight", "entitled", "received", "GPU-h", "NT-h", "SI ratio", "jobs"]:
        t.add_column(c, justify="left" if c == "tenant" else "right")
    for row in r.tenants.to_dict("records"):
        t.add_row(row["tenant"], _fmt(row["weight"]), _fmt(row["entitled_share"], "pct"),
                  _fmt(row["received_share"], "pct"), _fmt(row["gpu_hours"]), _fmt(row["nt_hours"]),
                  _fmt(row["si_ratio"], "ratio"), f"{row['jobs']} ({row['completed']} done)")
    con.print(t)

    t = Table(title="Tenants' jobs (FTF rho = JCT / JCT alone on its share; LR = wait / age, Hops)",
              title_justify="left")
    for c in ["tenant", "wait mean", "wait max", "JCT mean", "FTF rho mean/max", "LR mean/max"]:
        t.add_column(c, justify="left" if c == "tenant" else "right")
    for row in r.tenants.to_dict("records"):
        t.add_row(row["tenant"], _fmt(row["wait_mean_s"], "dur"), _fmt(row["wait_max_s"], "dur"),
                  _fmt(row["jct_mean_s"], "dur"),
                  f"{_fmt(row['ftf_rho_mean'], 'ratio')}/{_fmt(row['ftf_rho_max'], 'ratio')}",
                  f"{_fmt(row['latency_ratio_mean'], 'ratio')}/{_fmt(row['latency_ratio_max'], 'ratio')}")
    con.print(t)

    t = Table(title="Per tenant and GPU type (received share = of the GPU-hours used on that type)",
              title_justify="left")
    for c in ("tenant", "GPU type", "GPU-h", "norm-tput-h", "entitled", "entitled GPU-h", "received"):
        t.add_column(c, justify="left" if c in ("tenant", "GPU type") else "right")
    for row in r.tenant_type.to_dict("records"):
        t.add_row(row["tenant"], row["gpu_type"], _fmt(row["gpu_hours"]), _fmt(row["nt_hours"]),
                  _fmt(row["entitled_share"], "pct"), _fmt(row["entitled_gpu_hours"]),
                  _fmt(row["received_share"], "pct"))
    con.print(t)

    if len(r.envy.columns) > 1 and len(r.envy.index):
        t = Table(title="Envy matrix", title_justify="left",
                  caption="cell (u, v) = V_u(w_u/w_v * Y_v) / U_u; above 1 (!): u envies v",
                  caption_justify="left")
        t.add_column("u \\ v")
        for v in r.envy.columns:
            t.add_column(str(v), justify="right")
        for u, row in r.envy.iterrows():
            t.add_row(str(u), *[("-" if u == v else _fmt(x, "ratio") + (" !" if (clean(x) or 0) > 1 + 1e-6 else ""))
                                for v, x in row.items()])
        con.print(t)

    _print_type_fit(con, r)
    if r.controller:
        con.print(controller_line(r.controller))
    if r.not_computed:
        con.print("Not computed:")
        for n in r.not_computed:
            con.print(f"  - {n.figure}: {n.reason}", markup=False)
    for note in r.notes:
        con.print(f"Note: {note}", markup=False)
    return buf.getvalue()


def _print_type_fit(con: Any, r: Report) -> None:
    """The type-fit section of the table report."""
    from rich.table import Table

    if not len(r.type_fit):
        con.print("Type fit: no job ran on a type 2x slower for it than a type idle at its start")
        return
    t = Table(title="Type fit: jobs on a type >= 2x slower for them than a type idle at their start",
              title_justify="left", caption="idle = installed GPUs not held by the window's runs (an upper bound)",
              caption_justify="left")
    for c in ("job", "tenant", "ran on", "GPUs", "faster idle type", "speed-up", "idle GPUs", "speed from"):
        t.add_column(c, justify="right" if c in ("GPUs", "speed-up", "idle GPUs") else "left")
    for row in r.type_fit.to_dict("records"):
        t.add_row(str(row["job_id"]), row["tenant"], row["gpu_type"], str(row["gpus"]), row["better_type"],
                  _fmt(row["speedup"], "ratio"), str(row["idle_gpus"]), row["speed_source"])
    con.print(t)


# --- HTML -------------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def charts(r: Report) -> dict[str, str]:
    """Charts as base64 PNG data URIs (the page stays one self-contained file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    if not r.timeline.empty and len(r.timeline.columns):
        fig, ax = plt.subplots(figsize=(9, 3.2))
        # one more point at the window end so the last bin is drawn to its end
        tl = pd.concat([r.timeline, r.timeline.iloc[[-1]].set_axis([pd.Timestamp(r.window.until)])])
        x = pd.DatetimeIndex(tl.index).to_pydatetime()
        ax.stackplot(x, *[tl[c].to_numpy() for c in tl.columns],
                     labels=list(r.timeline.columns), step="post", alpha=0.85)
        ax.set_ylabel("share of cluster GPUs")
        peak = float(r.timeline.sum(axis=1).max())
        ax.set_ylim(0, min(1.0, peak * 1.25) if peak > 0 else 1.0)  # small usage stays visible
        ax.legend(loc="upper left", fontsize=8, ncol=min(6, len(r.timeline.columns)))
        ax.grid(alpha=0.3)
        fig.autofmt_xdate()
        out["timeline"] = _png(fig)
        plt.close(fig)
    tt = r.tenant_type
    if not tt.empty:
        types = sorted(tt["gpu_type"].unique())
        fig, axes = plt.subplots(1, len(types), figsize=(max(4.5, 3.2 * len(types)), 3.2), squeeze=False)
        for ax, k in zip(axes[0], types):
            d = tt[tt["gpu_type"] == k]
            xs = range(len(d))
            ax.bar([i - 0.2 for i in xs], d["entitled_share"], width=0.4, label="entitled", color="#9ab")
            ax.bar([i + 0.2 for i in xs], d["received_share"], width=0.4, label="received", color="#d62")
            ax.set_xticks(list(xs), list(d["tenant"]), rotation=30, fontsize=8)
            ax.set_title(k)
            ax.set_ylim(0, 1)
            ax.grid(axis="y", alpha=0.3)
        axes[0][0].set_ylabel("share")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        out["shares"] = _png(fig)
        plt.close(fig)
    return out


def _environment() -> jinja2.Environment:
    directory = templating.templates_dir("report.html.j2")
    if directory is None:
        raise SlurmFairError("cannot find templates/report.html.j2; looked in "
                             + ", ".join(str(c) for c in templating.candidates()))
    env = templating.environment(directory, autoescape=True)
    env.filters["fmt"] = _fmt
    return env


def render_html(r: Report) -> str:
    doc = to_document(r)
    return _environment().get_template("report.html.j2").render(
        doc=doc, charts=charts(r), envy_tenants=list(r.envy.columns), fmt=_fmt,
    )


RENDERERS: dict[str, Callable[[Report], str]] = {
    "table": render_table, "csv": render_csv, "json": render_json, "html": render_html,
}


def controller_line(c: Mapping[str, Any]) -> str:
    """The controller's cycles in the window as one sentence (the JSON/CSV keep every field)."""
    if not c.get("cycles"):
        return f"Controller: no finished cycle in the window (state store {c.get('store', '-')})."
    phases = c.get("last_cycle_phases") or {}
    slowest = ", ".join(f"{k} {_fmt(v)} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:3])
    return (f"Controller: {c['cycles']} cycles ({c.get('failed_cycles', 0)} failed), "
            f"{_fmt(c.get('cycle_seconds_mean'))} s on average, {_fmt(c.get('cycle_seconds_max'))} s at most; "
            f"last at {c.get('last_cycle_at')} ({c.get('last_policy')}, {c.get('last_cycle_status')}, "
            f"{_fmt(c.get('last_cycle_seconds'))} s" + (f"; slowest phases: {slowest}" if slowest else "") + ").")
