"""Figures of a comparison: JCT CDFs per policy and per-tenant GPU shares over time.

Matplotlib with the Agg backend (no display needed on a head node).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .. import atomic  # noqa: E402
from .engine import SimResult  # noqa: E402


def plot(results: Mapping[str, SimResult], path: str) -> None:
    """:func:`picture` written to ``path`` (its format by the extension), atomically."""
    atomic.write_bytes(path, picture(results, path_format(path)))


def path_format(path: str) -> str:
    """The picture format ``path``'s extension names (none: PNG)."""
    return Path(path).suffix.lstrip(".").lower() or "png"


def picture(results: Mapping[str, SimResult], fmt: str = "png") -> bytes:
    """The figure in ``fmt``, in memory. Top: JCT CDF of every policy (log time axis). Below: one panel per policy with each
    tenant's share of the busy GPUs over time (stacked, smoothed over 10 rounds)."""
    names = list(results)
    fig, axes = plt.subplots(
        1 + len(names), 1, figsize=(10, 3.2 + 2.2 * len(names)),
        gridspec_kw={"height_ratios": [1.6] + [1] * len(names)},
    )
    axes = np.atleast_1d(axes)
    ax = axes[0]
    # distinct colour per policy (tab10 repeats after 10), dashed lines for every second one
    policy_colours = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    for i, name in enumerate(names):
        jcts = np.sort([r.jct_s for r in results[name].records if r.jct_s is not None]) / 3600.0
        if len(jcts):
            ax.step(jcts, np.arange(1, len(jcts) + 1) / len(jcts), where="post", label=name, linewidth=1.6,
                    color=policy_colours(i), linestyle="-" if i % 2 == 0 or len(names) <= 5 else "--")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, ncol=2)

    tenants = sorted({t for r in results.values() for s in r.samples for t in s.tenant_gpus})
    colours = plt.get_cmap("tab10" if len(tenants) <= 10 else "tab20")
    for ax, name in zip(axes[1:], names):
        samples = results[name].samples
        if not samples:
            ax.set_visible(False)
            continue
        t = np.array([s.start_s for s in samples]) / 3600.0
        total = np.array([max(1, sum(s.busy.values())) for s in samples], dtype=float)
        window = 10
        kernel = np.ones(window) / window
        series = []
        for tenant in tenants:
            raw = np.array([s.tenant_gpus.get(tenant, 0) for s in samples], dtype=float) / total
            series.append(np.convolve(raw, kernel, mode="same") if len(raw) >= window else raw)
        ax.stackplot(t, series, labels=tenants, colors=[colours(i) for i in range(len(tenants))], alpha=0.85)
        ax.set_xlim(t[0], t[-1] if t[-1] > t[0] else t[0] + 1)
        ax.set_ylim(0, 1)
        ax.set_ylabel("GPU share")
        ax.set_title(f"{name}: share of busy GPUs per tenant", fontsize=10)
        ax.grid(True, alpha=0.3)
    if len(axes) > 1:
        axes[-1].set_xlabel("simulated time (hours)")
        axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="tenant")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()
