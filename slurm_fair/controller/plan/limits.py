"""Tenant QOS: the name of each tenant's QOS and its ``GrpTRES`` limit per GPU type (``N_uk`` of
:mod:`slurm_fair.controller.plan`), and which ``GrpTRES`` keys slurm-fair manages."""

from __future__ import annotations

import math
import re
from typing import Mapping

QOS_PREFIX = "fair_"


def qos_name(account: str) -> str:
    """``fair_<account>``: Slurm QOS names are lower case; anything odd becomes ``_``."""
    return QOS_PREFIX + re.sub(r"[^a-z0-9_-]", "_", account.lower())


#: the untyped total of GPUs in GrpTRES
TOTAL_KEY = "gres/gpu"


def gres_key(gpu_type: str) -> str:
    return f"gres/gpu:{gpu_type}"


def is_gpu_tres(key: str) -> bool:
    """``gres/gpu`` or ``gres/gpu:<type>``: the GrpTRES keys slurm-fair manages."""
    return key == TOTAL_KEY or key.startswith(TOTAL_KEY + ":")


def tenant_limits(
    bundle: Mapping[str, float], placed: Mapping[str, int], capacity: Mapping[str, int], slack: float,
    total: bool = False,
) -> dict[str, int]:
    """``N_uk`` of the package docstring for one tenant, keyed by ``gres/gpu:<type>``; with
    ``total`` also ``gres/gpu`` = their sum (at most the cluster's GPUs)."""
    out = {}
    for k, cap in capacity.items():
        base = max(math.ceil(bundle.get(k, 0.0) - 1e-6), placed.get(k, 0))
        out[gres_key(k)] = int(min(cap, base + math.ceil(slack * cap - 1e-9)))
    if total:
        out[TOTAL_KEY] = int(min(sum(capacity.values()), sum(out.values())))
    return out
