"""Service received: GPU-seconds per tenant and per job and GPU type, and the jobs seen."""

from __future__ import annotations

from typing import Any, Mapping

from .base import Tables


class ServiceTables(Tables):
    """The ``received``, ``received_log``, ``job_service`` and ``job_seen`` tables."""

    # --- received service ---------------------------------------------------------------------
    def add_received(self, cycle_id: str, at: float, service: Mapping[str, Mapping[str, float]]) -> None:
        """Add GPU-seconds per tenant and GPU type (running jobs since the previous cycle)."""
        rows = [(t, k, s) for t, per in service.items() for k, s in per.items() if s > 0]
        with self._db:
            for t, k, s in rows:
                self._db.execute(
                    "INSERT INTO received (tenant, gpu_type, gpu_seconds) VALUES (?, ?, ?)"
                    " ON CONFLICT (tenant, gpu_type) DO UPDATE SET gpu_seconds = gpu_seconds + ?",
                    (t, k, s, s),
                )
                self._db.execute(
                    "INSERT INTO received_log VALUES (?, ?, ?, ?, ?)", (cycle_id, t, k, s, at)
                )

    def received(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for r in self._exec("SELECT * FROM received"):
            out.setdefault(r["tenant"], {})[r["gpu_type"]] = r["gpu_seconds"]
        return out

    def received_between(self, since: float, until: float) -> list[dict[str, Any]]:
        """The per-cycle service log in ``[since, until)`` (``report --shadow``)."""
        return [dict(r) for r in self._exec("SELECT * FROM received_log WHERE at >= ? AND at < ?", (since, until))]

    def add_job_service(self, seconds: Mapping[str, Mapping[str, float]]) -> None:
        rows = [(j, k, s, s) for j, per in seconds.items() for k, s in per.items() if s > 0]
        self._many(
            "INSERT INTO job_service (job_id, gpu_type, seconds) VALUES (?, ?, ?)"
            " ON CONFLICT (job_id, gpu_type) DO UPDATE SET seconds = seconds + ?",
            rows,
        )

    def job_service(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for r in self._exec("SELECT * FROM job_service"):
            out.setdefault(r["job_id"], {})[r["gpu_type"]] = r["seconds"]
        return out

    def see_jobs(self, seen: Mapping[str, str | None], at: float) -> None:
        """Mark jobs seen in this snapshot (first sighting kept) with the type they run on."""
        self._many(
            "INSERT INTO job_seen (job_id, first_seen, last_seen, last_type) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (job_id) DO UPDATE SET last_seen = ?, last_type = ?",
            [(j, at, at, k, at, k) for j, k in seen.items()],
        )

    def jobs_seen(self) -> dict[str, dict[str, Any]]:
        return {r["job_id"]: dict(r) for r in self._exec("SELECT * FROM job_seen")}
