"""A synthetic ``sacct -P -X`` history with known true speeds, for ``speeds learn``'s accuracy.

Shaped like a 2026 site's: modern GPU type names (typed gres for most runs, untyped ones whose
type only NodeList tells), groups of recurring jobs (user + job name + GPUs) with **random**
per-group speed ratios (not the priors'), run-to-run work differing 10-20 %, outliers (runs that
did 2-5x more or less work), slow nodes, array tasks, and junk: job steps, pending, cancelled,
failed, timed-out and node-failed rows, rows without GPUs and unreadable rows.

    python benchmarks/make_sacct_history.py --seed 1 --out history.txt --truth truth.json

``truth.json`` holds ``{"groups": {"user|name|gpus": {type: true relative speed}}, "nodes":
{node: type}}``. The measure (:func:`ratio_errors`) is the issue's: for every group and pair of
types it completed on at least twice each, ``|learned ratio / true ratio - 1|``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

HEADER = "JobID|JobIDRaw|User|Account|JobName|Partition|AllocTRES|NodeList|Elapsed|State|ExitCode"
TYPES = ("h200", "h100", "a100", "a100_80g", "l40s", "l4", "a10", "t4", "v100", "nvidia_a100-sxm4-80gb")
BAD_STATES = ("TIMEOUT", "CANCELLED by 1001", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "RUNNING")


@dataclass
class History:
    lines: list[str] = field(default_factory=list)
    truth: dict[str, dict[str, float]] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)


def _elapsed(seconds: float) -> str:
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def generate(seed: int, groups: int = 80, n_types: int = 5, outliers: float = 0.05, slow_nodes: int = 2,
             spread: float = 0.2) -> History:
    rng = random.Random(seed)
    types = rng.sample(TYPES, n_types)
    out = History()
    by_type: dict[str, list[str]] = {}
    for i, k in enumerate(types):
        names = [f"n{i}{j:02d}" for j in range(rng.randint(2, 5))]
        by_type[k] = names
        out.nodes.update({n: k for n in names})
    slow = {n: rng.uniform(1.3, 1.8) for n in rng.sample(sorted(out.nodes), slow_nodes)}
    job = 1000
    out.lines.append(HEADER)
    for g in range(groups):
        user, name, gpus = f"u{g % 17}", f"train_{g}", rng.choice((1, 1, 1, 2, 4))
        speed = {k: rng.uniform(0.1, 1.0) for k in types}  # random ratios, fastest not 1 yet
        top = max(speed.values())
        out.truth[f"{user}|{name}|{gpus}"] = {k: v / top for k, v in speed.items()}
        work = rng.uniform(600, 40000)
        for k in rng.sample(types, rng.randint(1, min(4, n_types))):
            for _ in range(rng.randint(1, 6)):
                job += 1
                node = rng.choice(by_type[k])
                w = work * rng.uniform(1 - spread, 1 + spread)
                if rng.random() < outliers:
                    w *= rng.choice((rng.uniform(2, 5), rng.uniform(0.2, 0.5)))
                t = w / speed[k] * slow.get(node, 1.0)
                jid = f"{job}_{rng.randint(0, 9)}" if rng.random() < 0.2 else str(job)
                tres = f"billing=4,cpu=4,gres/gpu={gpus}" + (f",gres/gpu:{k}={gpus}" if rng.random() < 0.7 else "")
                tres += ",mem=16G,node=1"
                out.lines.append(f"{jid}|{job}|{user}|acct{g % 5}|{name}|gpu|{tres}|{node}|{_elapsed(t)}|COMPLETED|0:0")
                _junk(rng, out, job, user, name, gpus, k, node, t)
    return out


def _junk(rng: random.Random, out: History, job: int, user: str, name: str, gpus: int, k: str, node: str,
          t: float) -> None:
    """The rows around a run a real history has: its steps, failed reruns, pending ones, noise."""
    if rng.random() < 0.5:
        out.lines.append(f"{job}.batch|{job}.batch|||batch||cpu=4,gres/gpu={gpus}|{node}|{_elapsed(t)}|COMPLETED|0:0")
    if rng.random() < 0.15:
        state = rng.choice(BAD_STATES)
        nodes = "None assigned" if state == "PENDING" else node
        el = "00:00:00" if state == "PENDING" else _elapsed(t * rng.uniform(0.05, 1.5))
        out.lines.append(f"{job}9|{job}9|{user}|acct|{name}|gpu|cpu=4,gres/gpu:{k}={gpus}|{nodes}|{el}|{state}|1:0")
    if rng.random() < 0.03:
        out.lines.append(f"{job}8|{job}8|{user}|acct|cpu_only|cpu|cpu=8,mem=4G,node=1|c01|00:10:00|COMPLETED|0:0")
    if rng.random() < 0.02:
        out.lines.append(rng.choice((f"{job}7|garbage", f"{job}7|{user}|acct|x|gpu|gres/gpu=1|{node}|soon|COMPLETED|0:0|")))


def ratio_errors(learned: Mapping[str, Any], truth: Mapping[str, Mapping[str, float]]) -> list[float]:
    """``|learned ratio / true ratio - 1|`` over groups and type pairs each completed >= 2 times."""
    errors = []
    for g in learned["groups"]:
        key = f"{g['user']}|{g['job_name']}|{g['gpus']}"
        true = truth.get(key)
        if true is None:
            continue
        seen = sorted(k for k, n in g["runs_per_type"].items() if n >= 2)
        for i, a in enumerate(seen):
            for b in seen[i + 1:]:
                errors.append(abs((g["speed"][a] / g["speed"][b]) / (true[a] / true[b]) - 1))
    return errors


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--groups", type=int, default=80)
    ap.add_argument("--out", required=True)
    ap.add_argument("--truth", required=True)
    a = ap.parse_args(argv)
    h = generate(a.seed, a.groups)
    Path(a.out).write_text("\n".join(h.lines) + "\n")
    Path(a.truth).write_text(json.dumps({"groups": h.truth, "nodes": h.nodes}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
