"""A Gavel-format throughput table for modern GPU types (h100, a100, l40s), from the type priors.

The testbed's second inventory (``conf/testbed-modern.toml``) and ``simulate --cluster
h100=8,a100=8,l40s=8`` need true per-job speeds on types Gavel never measured. Each Gavel job type
``j`` keeps its measured V100 throughput as its H100 throughput; another modern type ``m`` gets

    T(j, m) = T(j, h100) * prior(m, family(j)) / prior(h100, family(j)) * dev(j, analog(m)) ** 0.5

where ``analog`` ranks the types alike (a100 ~ p100, l40s ~ k80) and ``dev`` is how much Gavel's
measured ratio of ``j`` on the analog differs from its family's mean: the priors set the level, and
jobs keep Gavel's job-to-job spread (damped by the square root: the modern types are closer to
each other than a K80 is to a V100). Families: ResNet/CycleGAN = cnn, Transformer/LM = transformer,
Recommendation/A3C = generic. Every GPU count Gavel measured is kept.

    python benchmarks/make_modern_throughputs.py > conf/throughputs-modern.json
"""

from __future__ import annotations

import json
import math
import sys

from slurm_fair.estimates import gavel
from slurm_fair.estimates.priors import prior

ANALOG = {"h100": "v100", "a100": "p100", "l40s": "k80"}


def family(job_type: str) -> str:
    if job_type.startswith(("ResNet", "CycleGAN")):
        return "cnn"
    if job_type.startswith(("Transformer", "LM")):
        return "transformer"
    return "generic"


def main() -> None:
    t = gavel.load(None)
    ones = [jt for jt in t.job_types if t.is_measured(jt, 1, "v100")]
    mean: dict[tuple[str, str], float] = {}
    for fam in ("cnn", "transformer", "generic"):
        for a in ("p100", "k80"):
            rs = [t.lookup(jt, 1, a) / t.lookup(jt, 1, "v100") for jt in ones if family(jt) == fam]
            mean[(fam, a)] = math.exp(sum(math.log(r) for r in rs if r > 0) / len(rs))
    out: dict[str, dict[str, dict[str, float]]] = {m: {} for m in ANALOG}
    for (jt, g), v100 in sorted(t.data["v100"].items()):
        fam = family(jt)
        base = (prior("h100", fam) or 1.0)
        for m, a in ANALOG.items():
            if m == "h100":
                value = v100
            else:
                ratio = t.lookup(jt, 1, a) / max(t.lookup(jt, 1, "v100"), 1e-9)
                dev = ratio / mean[(fam, a)] if ratio > 0 else 1.0
                value = v100 * (prior(m, fam) or 1.0) / base * math.sqrt(dev)
            out[m][gavel.format_key(jt, g)] = {"null": round(value, 6)}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
