"""Gavel's heterogeneity-aware max-min LP written the plain way, as the baseline to beat.

One variable per job and GPU type, constraints and objective built term by term in Python
loops, solved with PuLP/CBC: the shape of Gavel's ``max_min_fairness.py`` (which uses cvxpy),
transcribed to PuLP. Usage: ``python benchmarks/gavel_plain_lp.py PROBLEM.json`` prints the
seconds taken (read, build, solve) and the objective as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import pulp


def solve_plain(doc: dict) -> dict:
    """Build and solve the per-job max-min LP; returns timings and the max-min level."""
    t0 = time.perf_counter()
    caps = doc["gpu_types"]
    types = sorted(caps)
    jobs = doc["jobs"]
    weights = {u: float(s.get("weight", 1)) for u, s in doc.get("tenants", {}).items()}
    njobs: dict[str, int] = {}
    for j in jobs:
        njobs[j["tenant"]] = njobs.get(j["tenant"], 0) + 1
    demand = sum(j["gpus"] for j in jobs)
    denom = max(demand, sum(caps.values()))
    model = pulp.LpProblem("gavel_max_min", pulp.LpMaximize)
    t = pulp.LpVariable("t", lowBound=0)
    model += t
    x = {}
    for j in jobs:
        for k in types:
            x[j["id"], k] = pulp.LpVariable(f"x_{j['id']}_{k}", lowBound=0, upBound=1)
    for j in jobs:
        best = max(j["throughput"].values())
        eq = 0.0
        for k in types:
            eq += j["throughput"].get(k, 0.0) / best * caps[k] / denom
        w = weights.get(j["tenant"], 1.0) / njobs[j["tenant"]]
        expr = 0
        for k in types:
            expr += (j["throughput"].get(k, 0.0) / best) * x[j["id"], k]
        model += expr >= w * eq * t
        total = 0
        for k in types:
            total += x[j["id"], k]
        model += total <= 1
        for k in types:
            if j["throughput"].get(k, 0.0) <= 0:
                model += x[j["id"], k] == 0
    for k in types:
        used = 0
        for j in jobs:
            used += j["gpus"] * x[j["id"], k]
        model += used <= caps[k]
    t1 = time.perf_counter()
    status = model.solve(pulp.PULP_CBC_CMD(msg=False))
    t2 = time.perf_counter()
    return {"status": pulp.LpStatus[status], "build_s": t1 - t0, "solve_s": t2 - t1, "t": pulp.value(t)}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        document = json.load(fh)
    print(json.dumps(solve_plain(document)))
