"""What the controller learned about jobs across cycles: its requeues (the hysteresis clock),
the types Slurm refused a job in, and the online throughput estimates (the EWMA itself is
:mod:`slurm_fair.estimates.online`)."""

from __future__ import annotations

import json
from typing import Any, Iterable

from ...estimates.online import OnlineEstimate, OnlineUpdate, values
from .base import Tables


class ObservationTables(Tables):
    """The ``requeues``, ``refused_types``, ``estimates`` and ``tput_seen`` tables."""

    # --- requeues (time-sharing) --------------------------------------------------------------
    def record_requeue(self, job_id: str, cycle_id: str, at: float, from_type: str | None,
                       for_jobs: Iterable[str] = (), reason: str = "make-room", to_type: str | None = None) -> None:
        """A requeue the controller applied: when, from which type, why (``make-room`` for
        ``for_jobs``, or ``move-up`` to ``to_type``)."""
        self._many(
            "INSERT OR REPLACE INTO requeues (job_id, cycle_id, at, from_type, for_jobs_json, reason, to_type)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(job_id, cycle_id, at, from_type, json.dumps(sorted(for_jobs)), reason, to_type)],
        )

    def last_requeues(self) -> dict[str, float]:
        """Job -> when the controller last requeued it (the hysteresis clock)."""
        return {r["job_id"]: float(r["at"]) for r in
                self._exec("SELECT job_id, MAX(at) AS at FROM requeues GROUP BY job_id")}

    def turns(self) -> dict[str, tuple[float, tuple[str, ...]]]:
        """Job -> when its last turn began and the jobs requeued to make room for it (the latest
        ``make-room`` requeue naming it): :mod:`..standing`'s turn protection."""
        out: dict[str, tuple[float, tuple[str, ...]]] = {}
        for r in self._exec("SELECT job_id, at, for_jobs_json FROM requeues WHERE reason = 'make-room' ORDER BY at"):
            try:
                takers = json.loads(r["for_jobs_json"])
            except json.JSONDecodeError:
                continue
            for t in takers if isinstance(takers, list) else ():
                at, victims = out.get(str(t), (-1.0, ()))
                at_r = float(r["at"])
                out[str(t)] = (at_r, (r["job_id"],)) if at_r > at + 1e-6 else (at, victims + (r["job_id"],))
        return out

    def requeues_of(self, job_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._exec("SELECT * FROM requeues WHERE job_id = ? ORDER BY at", (job_id,))]

    # --- types Slurm refused a job in (BadConstraints) ------------------------------------------
    def refuse_type(self, job_id: str, gpu_type: str, partition: str, at: float) -> None:
        """Slurm marked the job ``BadConstraints`` in the partition we sent it to: never again."""
        self._many("INSERT OR IGNORE INTO refused_types (job_id, gpu_type, partition, at) VALUES (?, ?, ?, ?)",
                   [(job_id, gpu_type, partition, at)])

    def refused_types(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for r in self._exec("SELECT job_id, gpu_type FROM refused_types"):
            out.setdefault(r["job_id"], set()).add(r["gpu_type"])
        return out

    # --- throughput estimates (the EWMA itself: slurm_fair.estimates.online) --------------------
    def estimates(self) -> dict[str, dict[str, float]]:
        """Online estimates: key -> {type: steps/s}."""
        return values(self.online_estimates())

    def online_estimates(self) -> dict[str, dict[str, OnlineEstimate]]:
        out: dict[str, dict[str, OnlineEstimate]] = {}
        for r in self._exec("SELECT * FROM estimates"):
            out.setdefault(r["key"], {})[r["gpu_type"]] = OnlineEstimate(
                float(r["value"]), int(r["observations"]), float(r["updated_at"]))
        return out

    def reported_tputs(self) -> dict[tuple[str, str], float]:
        """(job, type) -> the last ``fair:tput`` report counted."""
        return {(r["job_id"], r["gpu_type"]): float(r["value"]) for r in self._exec("SELECT * FROM tput_seen")}

    def save_online(self, update: OnlineUpdate) -> None:
        """Write what one cycle's reports changed, in one transaction."""
        if not update.estimates and not update.reported:
            return
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO tput_seen (job_id, gpu_type, value) VALUES (?, ?, ?)",
                [(j, k, v) for (j, k), v in update.reported.items()],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO estimates (key, gpu_type, value, observations, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [(key, k, e.value, e.observations, e.updated_at) for (key, k), e in update.estimates.items()],
            )
