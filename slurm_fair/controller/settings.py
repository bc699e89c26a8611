"""The configuration keys a controller cycle uses, read once (``run``, ``revert``, ``explain``,
``snapshot --json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..config import Config
from ..policies import parse_params
from . import planfile
from .problem import configured_weights


@dataclass(frozen=True)
class Settings:
    """The configuration keys a cycle uses, read once."""

    policy: str
    solver: str
    time_limit_s: float
    round_s: float
    interval_s: float
    order: str
    ewma_alpha: float
    state_dir: Path
    audit_log: Path
    class_table: str
    #: ``[tenants.NAME].weight`` (:func:`.problem.tenant_weights` is the whole rule)
    weights: dict[str, float]
    #: the pilot's accounts (empty: all)
    accounts: tuple[str, ...] = ()
    pin_gres_type: bool | str = "auto"  # True, False or "auto" (where Slurm can undo it)
    min_run_s: float = 0.0
    requeue_cost_s: float = 150.0
    move_up_gain: float = 0.25
    plan_file: Path | None = None
    #: ``[controller] policy_options``, parsed (``{"hops.lambda": 2.0}``)
    policy_params: Mapping[str, float] = field(default_factory=dict)
    #: the pilot's partitions (empty: all)
    partitions: tuple[str, ...] = ()
    #: ``live`` or ``shadow`` (decide and record, change nothing)
    mode: str = "live"
    fail_open_after_s: float = 600.0
    keep_days: float = 7.0
    #: the site's own job_submit.lua the rendered one calls first ("" for none)
    site_job_submit: str = ""
    #: a pending gang whose wait passes this many times its time limit gets its nodes kept (0: off)
    reserve_after_lr: float = 2.0
    #: ... or after this many hours, whichever comes first (0: the time limit alone)
    reserve_after_h: float = 4.0
    #: a tenant below its share may displace jobs of tenants above theirs (:mod:`.standing`)
    displace: bool = True

    @property
    def plan_path(self) -> Path:
        return self.plan_file or self.state_dir / planfile.PLAN_FILE

    @classmethod
    def from_config(cls, config: Config, *, policies: bool = True) -> "Settings":
        """``policies`` False (revert, failsafe: they run no policy): ``policy_options`` is not
        parsed, which would load the policy registry."""
        c, t = config["controller"], config["throughput"]
        return cls(
            c["policy"], c["solver"], float(c["time_limit_s"]), float(c["round_s"]),
            float(c["interval_s"]), c["order"], float(t["ewma_alpha"]),
            Path(c["state_dir"]), Path(c["audit_log"]), t["class_table"],
            configured_weights(config),
            tuple(str(a) for a in (c["manage_accounts"] or c["accounts"])), c["pin_gres_type"],
            float(c["min_run_s"]), float(c["requeue_cost_s"]), float(c["move_up_gain"]),
            Path(c["plan_file"]) if c["plan_file"] else None,
            parse_params(c["policy_options"]) if policies else {},
            tuple(str(p) for p in c["manage_partitions"]), c["mode"], float(c["fail_open_after_s"]),
            float(c["keep_days"]), c["site_job_submit"], float(c["reserve_after_lr"]),
            float(c["reserve_after_h"]), bool(c["displace"]),
        )
