"""How efficient can an SI+EF allocation be at all? The exact ``max E s.t. SI, EF`` against oef.

The efficiency goal of ``oef`` is stated against ``E_SI`` (the best sharing-incentive
allocation, envy ignored). Envy-freeness is not a convex constraint (``U_u >= V_u(s y_v)`` with
``V_u`` concave in ``v``'s bundle), so oef's climbs find local optima, and the best SI+EF
allocation may itself lie below ``E_SI``. This benchmark computes it exactly on the small random
problems of ``bench_fairness_price.py``, as a mixed-integer program:

* ``V_u(b) = min over the dual vertices (p, q) of p.b + sum_c q_c`` (the LP's dual; ``q`` is
  determined by ``p``: ``q_c = max(0, max_k n_ck - g_c p_k)``); the vertices are the points
  where ``K`` of the planes ``p_k = 0``, ``p_k = n_ck / g_c`` and ``n_ck - g_c p_k = n_cl -
  g_c p_l`` meet (enumerated, dominated ones dropped);
* ``U_u >= V_u(s y_v)`` is then "``U_u >= p.(s y_v) + q`` for at least one vertex": one binary per
  pair and vertex, big-M rows, ``max E`` with the SI floors and capacities, HiGHS' MIP solver.

A run prints, per problem, oef's ``E / E_SI`` (its tenant level), the exact SI+EF optimum over
``E_SI`` (or the MIP's upper bound when it stops at the time limit) and the solve time. Slow from
about 20 jobs (thousands of binaries); ``--max-jobs`` skips bigger problems.

    .venv/bin/python benchmarks/bench_sief_exact.py --seed 1 --problems 60 --time-limit 20
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import highspy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fairness_price import problems  # noqa: E402
from slurm_fair import fairness, policies  # noqa: E402
from slurm_fair.estimates.gavel import load  # noqa: E402
from slurm_fair.model import Job, Problem  # noqa: E402
from slurm_fair.policies import PolicyOptions  # noqa: E402


def dual_vertices(jobs: list[Job], types: list[str]) -> list[tuple[np.ndarray, float]]:
    """The undominated dual points ``(p, sum_c q_c)`` whose minimum over ``p.b + sum q`` is
    ``V(b)`` for every bundle ``b`` (module docstring)."""
    K = len(types)
    planes: list[tuple[np.ndarray, float]] = []
    for k in range(K):
        planes.append((np.eye(K)[k], 0.0))
    for j in jobs:
        n = [j.normalised(k) for k in types]
        for k in range(K):
            if n[k] > 0:
                planes.append((np.eye(K)[k], n[k] / j.gpus))
        for k, m in itertools.combinations(range(K), 2):
            if n[k] > 0 or n[m] > 0:
                planes.append((np.eye(K)[m] - np.eye(K)[k], (n[m] - n[k]) / j.gpus))
    points = set()
    for sub in itertools.combinations(planes, K):
        A = np.array([a for a, _ in sub])
        if abs(np.linalg.det(A)) < 1e-12:
            continue
        p = np.linalg.solve(A, np.array([c for _, c in sub]))
        if (p >= -1e-12).all():
            points.add(tuple(np.round(np.maximum(p, 0.0), 12)))
    out = [(np.array(p), sum(max(0.0, max(j.normalised(k) - j.gpus * p[i] for i, k in enumerate(types)))
                               for j in jobs)) for p in points]
    return [(p, q) for p, q in out
            if not any((p2 <= p + 1e-12).all() and q2 <= q + 1e-12 and ((p2 < p - 1e-12).any() or q2 < q - 1e-12)
                       for p2, q2 in out)]


def exact_si_ef(problem: Problem, time_limit: float) -> tuple[float | None, float, str]:
    """``(best E found or None, upper bound on E, status)`` of ``max E s.t. SI, EF``."""
    types = [k for k in problem.types if problem.gpu_types.get(k, 0) > 0]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 1e-7)
    inf = highspy.kHighsInf
    col: dict[tuple[str, str], int] = {}
    for j in problem.jobs:
        for k in types:
            if j.normalised(k) > 0:
                col[j.id, k] = h.getNumCol()
                h.addVar(0, 1)

    def add(terms: dict[int, float], lo: float, hi: float) -> None:
        idx = list(terms)
        h.addRow(lo, hi, len(idx), np.array(idx, dtype=np.int32), np.array([terms[i] for i in idx]))

    def utility(u: str) -> dict[int, float]:
        return {col[j.id, k]: j.normalised(k) for j in problem.jobs_of(u) for k in types if (j.id, k) in col}

    for k in types:
        add({col[j.id, k]: float(j.gpus) for j in problem.jobs if (j.id, k) in col}, -inf, float(problem.gpu_types[k]))
    for j in problem.jobs:
        if any((j.id, k) in col for k in types):
            add({col[j.id, k]: 1.0 for k in types if (j.id, k) in col}, -inf, 1.0)
    tenants = problem.active_tenants
    for u in tenants:
        add(utility(u), fairness.bundle_value(problem, u, fairness.equal_share(problem, u)) - 1e-9, inf)
    for u in tenants:
        vertices = dual_vertices(list(problem.jobs_of(u)), types)
        for v in tenants:
            if v == u:
                continue
            s = problem.weight(u) / problem.weight(v)
            chosen = []
            for p, q in vertices:
                z = h.getNumCol()
                h.addVar(0, 1)
                h.changeColIntegrality(z, highspy.HighsVarType.kInteger)
                chosen.append(z)
                big = s * float(sum(p[i] * problem.gpu_types[k] for i, k in enumerate(types))) + q + 1.0
                terms = dict(utility(u))
                for i, k in enumerate(types):
                    for j in problem.jobs_of(v):
                        if (j.id, k) in col:
                            terms[col[j.id, k]] = terms.get(col[j.id, k], 0.0) - s * p[i] * j.gpus
                terms[z] = -big
                add(terms, q - big, inf)  # z = 1: U_u >= s p.y_v + q
            add({z: 1.0 for z in chosen}, 1.0, 1.0)
    by_id = {j.id: j for j in problem.jobs}
    for (jid, k), c in col.items():
        h.changeColCost(c, -by_id[jid].normalised(k))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    found = -info.objective_function_value if info.primal_solution_status == 2 else None
    return found, -info.mip_dual_bound, status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--problems", type=int, default=40)
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per MIP")
    ap.add_argument("--max-jobs", type=int, default=30, help="skip problems with more jobs")
    args = ap.parse_args()
    options = PolicyOptions()
    print("| problem | jobs | tenants | oef E/E_SI | exact SI+EF E/E_SI | bound | MIP status | s |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|")
    oef_r: list[float] = []
    ceiling: list[float] = []
    for done, problem in problems(args.seed, args.problems, load()):
        if len(problem.jobs) > args.max_jobs:
            continue
        e_si = fairness.si_bound(problem)
        alloc = policies.allocate("oef", problem, options)
        r = fairness.efficiency(problem, alloc.tenant_x or alloc.x) / e_si
        started = time.perf_counter()
        found, bound, status = exact_si_ef(problem, args.time_limit)
        secs = time.perf_counter() - started
        b = min(1.0, bound / e_si)
        oef_r.append(r)
        ceiling.append(b)
        exact = "" if found is None else f"{found / e_si:.4f}"
        print(f"| {done} | {len(problem.jobs)} | {len(problem.active_tenants)} | {r:.4f} | {exact} | {b:.4f} | {status} |"
              f" {secs:.1f} |", flush=True)
    print(f"\n{len(oef_r)} problems: oef mean E/E_SI {statistics.mean(oef_r):.4f}; the SI+EF optimum's upper "
          f"bound, mean {statistics.mean(ceiling):.4f} (1.0 where the MIP did not prove less)")


if __name__ == "__main__":
    main()
