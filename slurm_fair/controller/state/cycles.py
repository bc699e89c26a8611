"""Cycles, the decisions of each (what ``explain`` and the reports read) and the last good plans."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from .base import Tables


class CycleTables(Tables):
    """The ``cycles``, ``job_cycle``, ``tenant_cycle`` and ``plans`` tables."""

    # --- cycles -------------------------------------------------------------------------------
    def start_cycle(self, cycle_id: str, started_at: float, policy: str, dry_run: bool,
                    mode: str = "live") -> None:
        """A cycle begins (``mode``: ``live`` applies its plan, ``shadow`` only records it)."""
        self._exec(
            "INSERT INTO cycles (cycle_id, started_at, status, policy, dry_run, mode)"
            " VALUES (?, ?, 'running', ?, ?, ?)",
            (cycle_id, started_at, policy, int(dry_run), mode),
        )

    def finish_cycle(
        self, cycle_id: str, finished_at: float, status: str, counts: Mapping[str, int],
        timings: Mapping[str, float], error: str = "",
    ) -> None:
        self._exec(
            "UPDATE cycles SET finished_at = ?, status = ?, actions = ?, applied = ?, failed = ?,"
            " skipped = ?, timings_json = ?, error = ? WHERE cycle_id = ?",
            (finished_at, status, counts.get("actions", 0), counts.get("applied", 0),
             counts.get("failed", 0), counts.get("skipped", 0), json.dumps(dict(timings)),
             error, cycle_id),
        )

    def interrupt_stale(self, now: float) -> list[str]:
        """Cycles still marked running when a new one starts under the lock were killed
        (SIGKILL, a crash, the host down): they become ``interrupted``; their intents are
        settled by this cycle (:func:`..ownership.reconcile`). Returns their ids."""
        ids = [r["cycle_id"] for r in self._exec("SELECT cycle_id FROM cycles WHERE status = 'running'"
                                                 " AND dry_run = 0")]
        self._many("UPDATE cycles SET status = 'interrupted', finished_at = ?, error = ? WHERE cycle_id = ?",
                   ((now, "the process ended before the cycle finished; settled by the next cycle", c)
                    for c in ids))
        return ids

    def prune(self, before: float) -> dict[str, int]:
        """Forget what is older than ``before`` (``[controller] keep_days``): cycles and their
        decisions, the per-cycle service log, plans, requeues and refusals, and the memory of
        jobs last seen before then. Totals (``received``) and the fields the controller still
        owns are kept. Returns rows deleted per table."""
        stmts = {
            "job_cycle": "DELETE FROM job_cycle WHERE cycle_id IN (SELECT cycle_id FROM cycles WHERE started_at < ?)",
            "tenant_cycle": "DELETE FROM tenant_cycle WHERE cycle_id IN"
                            " (SELECT cycle_id FROM cycles WHERE started_at < ?)",
            "cycles": "DELETE FROM cycles WHERE started_at < ? AND status != 'running'",
            "received_log": "DELETE FROM received_log WHERE at < ?",
            "plans": "DELETE FROM plans WHERE created_at < ? AND cycle_id NOT IN"
                     " (SELECT cycle_id FROM plans ORDER BY created_at DESC LIMIT 1)",
            "requeues": "DELETE FROM requeues WHERE at < ?",
            "refused_types": "DELETE FROM refused_types WHERE at < ?",
            "job_service": "DELETE FROM job_service WHERE job_id IN (SELECT job_id FROM job_seen WHERE last_seen < ?)",
            "tput_seen": "DELETE FROM tput_seen WHERE job_id IN (SELECT job_id FROM job_seen WHERE last_seen < ?)",
            "job_seen": "DELETE FROM job_seen WHERE last_seen < ?",
        }
        out: dict[str, int] = {}
        self._db.execute("BEGIN")
        try:
            for table, sql in stmts.items():
                out[table] = self._db.execute(sql, (before,)).rowcount
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return out

    def cycles(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._exec("SELECT * FROM cycles ORDER BY started_at DESC LIMIT ?", (limit,))
        return [dict(r) for r in rows]

    def cycles_between(self, since: float, until: float) -> list[dict[str, Any]]:
        """Cycles that started in ``[since, until)``, oldest first (reports)."""
        rows = self._exec("SELECT * FROM cycles WHERE started_at >= ? AND started_at < ? ORDER BY started_at",
                          (since, until))
        return [dict(r) for r in rows]

    def last_finished_cycle(self) -> dict[str, Any] | None:
        """The newest real (not dry-run) cycle that finished, whatever its status (live metrics:
        its duration and action counts)."""
        row = self._exec("SELECT * FROM cycles WHERE dry_run = 0 AND finished_at IS NOT NULL"
                         " ORDER BY started_at DESC LIMIT 1").fetchone()
        return dict(row) if row else None

    def last_success_at(self) -> float | None:
        """When the newest cycle that ended ``ok`` finished (Unix time), None if none did."""
        row = self._exec("SELECT MAX(finished_at) AS at FROM cycles WHERE dry_run = 0 AND status = 'ok'").fetchone()
        return float(row["at"]) if row and row["at"] is not None else None

    def last_completed_at(self) -> float | None:
        """When the newest *live* cycle that got as far as deciding finished (``ok``,
        ``partial`` or ``policy-failed``): the failsafe's clock.

        Shadow cycles do not count: they decide but keep nothing in Slurm up to date, so a loop
        switched from live to shadow leaves what the live cycles set with nobody tending it;
        the failsafe gives it back once the last live cycle is ``fail_open_after_s`` old."""
        row = self._exec("SELECT MAX(finished_at) AS at FROM cycles WHERE dry_run = 0 AND mode = 'live'"
                         " AND status IN ('ok', 'partial', 'policy-failed')").fetchone()
        return float(row["at"]) if row and row["at"] is not None else None

    def last_decisions(self) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]] | None:
        """The newest real cycle that recorded its decisions: ``(cycle_id, tenant rows, job
        rows)``, JSON columns decoded (``fair_share``, ``bundle``, ``limits``; ``estimate``). A
        cycle whose policy failed records none, so this is the decision Slurm now follows."""
        row = self._exec(
            "SELECT c.cycle_id FROM cycles c WHERE c.dry_run = 0 AND EXISTS"
            " (SELECT 1 FROM tenant_cycle t WHERE t.cycle_id = c.cycle_id)"
            " ORDER BY c.started_at DESC LIMIT 1").fetchone()
        if row is None:
            return None
        cycle_id = row["cycle_id"]
        tenants = self.tenants_of(cycle_id)
        jobs = []
        for r in self._exec("SELECT job_id, tenant, state, gpus, placed_type, planned_type, estimate_json"
                            " FROM job_cycle WHERE cycle_id = ? ORDER BY job_id", (cycle_id,)):
            d = dict(r)
            try:
                est = json.loads(d.pop("estimate_json") or "{}")
            except json.JSONDecodeError:
                est = {}
            d["estimate"] = est if isinstance(est, dict) else {}
            jobs.append(d)
        return cycle_id, tenants, jobs

    # --- per-cycle decisions (for explain and reports) ----------------------------------------
    def record_jobs(self, cycle_id: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self._many(
            "INSERT OR REPLACE INTO job_cycle (cycle_id, job_id, tenant, state, gpus, class,"
            " estimate_json, sources_json, allocation_json, placed_type, deficit, planned_type,"
            " rank) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (cycle_id, r["job_id"], r["tenant"], r["state"], r["gpus"], r.get("class"),
                 json.dumps(r["estimate"]), json.dumps(r["sources"]),
                 json.dumps(r["allocation"]), r.get("placed_type"), r.get("deficit", 0.0),
                 r.get("planned_type"), r.get("rank"))
                for r in rows
            ],
        )

    def record_tenants(self, cycle_id: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self._many(
            "INSERT OR REPLACE INTO tenant_cycle VALUES (?, ?, ?, ?, ?, ?)",
            [
                (cycle_id, r["tenant"], r["weight"], json.dumps(r["fair_share"]),
                 json.dumps(r["bundle"]), json.dumps(r["limits"]))
                for r in rows
            ],
        )

    def job_history(self, job_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """The latest decisions about ``job_id``, newest first, JSON columns decoded."""
        rows = self._exec(
            "SELECT jc.*, c.started_at, c.policy, c.status AS cycle_status FROM job_cycle jc"
            " JOIN cycles c USING (cycle_id) WHERE jc.job_id = ? AND c.dry_run = 0"
            " ORDER BY c.started_at DESC LIMIT ?",
            (job_id, limit),
        )
        out = []
        for r in rows:
            d = dict(r)
            for col in ("estimate_json", "sources_json", "allocation_json"):
                d[col[:-5]] = json.loads(d.pop(col))
            out.append(d)
        return out

    def job_estimates(self) -> dict[str, tuple[str | None, dict[str, float]]]:
        """Job -> (class, {type: T}) the newest real (not dry-run) cycle used for it (reports)."""
        out: dict[str, tuple[str | None, dict[str, float]]] = {}
        rows = self._exec(
            "SELECT jc.job_id, jc.class, jc.estimate_json FROM job_cycle jc"
            " JOIN cycles c USING (cycle_id) WHERE c.dry_run = 0 ORDER BY c.started_at"
        )
        for r in rows:  # oldest first: the newest estimate of a job wins
            tput = _estimate_throughput(r["estimate_json"])
            if tput:
                out[str(r["job_id"])] = (r["class"], tput)
        return out

    def tenants_of(self, cycle_id: str) -> list[dict[str, Any]]:
        """Every tenant row of one cycle, JSON columns decoded (``report --shadow``)."""
        return [_tenant_row(r) for r in
                self._exec("SELECT * FROM tenant_cycle WHERE cycle_id = ? ORDER BY tenant", (cycle_id,))]

    def tenant_cycle(self, cycle_id: str, tenant: str) -> dict[str, Any] | None:
        row = self._exec(
            "SELECT * FROM tenant_cycle WHERE cycle_id = ? AND tenant = ?", (cycle_id, tenant)
        ).fetchone()
        return None if row is None else _tenant_row(row)

    # --- plans --------------------------------------------------------------------------------
    def save_plan(self, cycle_id: str, at: float, plan: Mapping[str, Any], keep: int = 50) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO plans VALUES (?, ?, ?)", (cycle_id, at, json.dumps(plan))
            )
            self._db.execute(
                "DELETE FROM plans WHERE cycle_id NOT IN"
                " (SELECT cycle_id FROM plans ORDER BY created_at DESC LIMIT ?)",
                (keep,),
            )

    def last_plan(self) -> tuple[str, dict[str, Any]] | None:
        """The newest plan that was applied without failure (saved only for good cycles)."""
        row = self._exec("SELECT * FROM plans ORDER BY created_at DESC LIMIT 1").fetchone()
        return (row["cycle_id"], json.loads(row["plan_json"])) if row else None


def _tenant_row(r: Any) -> dict[str, Any]:
    """A ``tenant_cycle`` row with its JSON columns decoded (``fair_share``, ``bundle``, ``limits``)."""
    d = dict(r)
    for col in ("fair_share_json", "bundle_json", "limits_json"):
        d[col[:-5]] = json.loads(d.pop(col))
    return d


def _estimate_throughput(text: str | None) -> dict[str, float]:
    """``{type: T}`` of a job_cycle ``estimate_json`` (an Estimate.to_dict() or a bare map);
    anything else (a hand-edited or damaged row) reads as no estimate."""
    try:
        doc = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    if isinstance(doc, dict) and isinstance(doc.get("throughput"), dict):
        doc = doc["throughput"]
    if not isinstance(doc, dict):
        return {}
    return {str(k): float(v) for k, v in doc.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0}
