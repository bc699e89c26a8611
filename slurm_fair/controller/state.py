"""The controller's memory: one SQLite file in ``state_dir``.

Why SQLite: the controller runs from cron as a fresh process each cycle, so everything it must
remember between cycles (what a job looked like before we first touched it, what each tenant
received, the online throughput estimates, the last plan that worked) has to live on disk, be
written atomically and be readable by the reports and ``explain`` while a cycle runs. The
standard library's ``sqlite3`` does all of that without a server.

The schema is documented in ``docs/controller.md`` (the reports read it); keep both in step and
bump :data:`SCHEMA_VERSION` on any change.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..estimates.online import OnlineEstimate, OnlineUpdate, values

SCHEMA_VERSION = 2
DB_NAME = "state.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS original_requests (
    job_id TEXT PRIMARY KEY, account TEXT NOT NULL, gres_raw TEXT NOT NULL,
    gpu_type TEXT, gpu_count INTEGER NOT NULL, gpu_per TEXT NOT NULL,
    priority INTEGER NOT NULL, nice INTEGER NOT NULL, partition TEXT NOT NULL, qos TEXT NOT NULL,
    recorded_at REAL NOT NULL, cycle_id TEXT NOT NULL, reverted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS cycles (
    cycle_id TEXT PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL,
    status TEXT NOT NULL, policy TEXT NOT NULL, dry_run INTEGER NOT NULL,
    actions INTEGER NOT NULL DEFAULT 0, applied INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0, skipped INTEGER NOT NULL DEFAULT 0,
    timings_json TEXT NOT NULL DEFAULT '{}', error TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS received (
    tenant TEXT NOT NULL, gpu_type TEXT NOT NULL, gpu_seconds REAL NOT NULL,
    PRIMARY KEY (tenant, gpu_type));
CREATE TABLE IF NOT EXISTS received_log (
    cycle_id TEXT NOT NULL, tenant TEXT NOT NULL, gpu_type TEXT NOT NULL,
    gpu_seconds REAL NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS job_service (
    job_id TEXT NOT NULL, gpu_type TEXT NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (job_id, gpu_type));
CREATE TABLE IF NOT EXISTS job_seen (
    job_id TEXT PRIMARY KEY, first_seen REAL NOT NULL, last_seen REAL NOT NULL,
    last_type TEXT);
CREATE TABLE IF NOT EXISTS estimates (
    key TEXT NOT NULL, gpu_type TEXT NOT NULL, value REAL NOT NULL,
    observations INTEGER NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (key, gpu_type));
CREATE TABLE IF NOT EXISTS tput_seen (
    job_id TEXT NOT NULL, gpu_type TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (job_id, gpu_type));
CREATE TABLE IF NOT EXISTS job_cycle (
    cycle_id TEXT NOT NULL, job_id TEXT NOT NULL, tenant TEXT NOT NULL, state TEXT NOT NULL,
    gpus INTEGER NOT NULL, class TEXT, estimate_json TEXT NOT NULL, sources_json TEXT NOT NULL,
    allocation_json TEXT NOT NULL, placed_type TEXT, deficit REAL NOT NULL,
    planned_type TEXT, rank INTEGER, PRIMARY KEY (cycle_id, job_id));
CREATE TABLE IF NOT EXISTS tenant_cycle (
    cycle_id TEXT NOT NULL, tenant TEXT NOT NULL, weight REAL NOT NULL,
    fair_share_json TEXT NOT NULL, bundle_json TEXT NOT NULL, limits_json TEXT NOT NULL,
    PRIMARY KEY (cycle_id, tenant));
CREATE TABLE IF NOT EXISTS plans (
    cycle_id TEXT PRIMARY KEY, created_at REAL NOT NULL, plan_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS managed_qos (
    name TEXT PRIMARY KEY, account TEXT NOT NULL, created_at REAL NOT NULL,
    existed_before INTEGER NOT NULL, account_had_qos INTEGER NOT NULL,
    prev_default_qos TEXT NOT NULL, prev_grp_tres_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requeues (
    job_id TEXT NOT NULL, cycle_id TEXT NOT NULL, at REAL NOT NULL, from_type TEXT,
    for_jobs_json TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT 'make-room',
    to_type TEXT, PRIMARY KEY (job_id, cycle_id));
CREATE TABLE IF NOT EXISTS refused_types (
    job_id TEXT NOT NULL, gpu_type TEXT NOT NULL, partition TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (job_id, gpu_type));
CREATE INDEX IF NOT EXISTS job_cycle_job ON job_cycle (job_id);
"""


@dataclass(frozen=True)
class OriginalRequest:
    """A job as it was before slurm-fair first rewrote it: what ``revert`` puts back."""

    job_id: str
    account: str
    gres_raw: str
    gpu_type: str | None
    gpu_count: int
    gpu_per: str
    priority: int
    nice: int
    partition: str
    qos: str


@dataclass(frozen=True)
class ManagedQos:
    """A QOS slurm-fair created or changed, and the account state before it did."""

    name: str
    account: str
    existed_before: bool
    account_had_qos: bool
    prev_default_qos: str
    prev_grp_tres: Mapping[str, int]


_INSERT_ORIGINAL = (
    "INSERT OR IGNORE INTO original_requests (job_id, account, gres_raw, gpu_type,"
    " gpu_count, gpu_per, priority, nice, partition, qos, recorded_at, cycle_id)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _original_row(o: OriginalRequest, cycle_id: str, at: float) -> tuple[Any, ...]:
    return (o.job_id, o.account, o.gres_raw, o.gpu_type, o.gpu_count, o.gpu_per, o.priority,
            o.nice, o.partition, o.qos, at, cycle_id)


class StateStore:
    """Thin typed access to the SQLite file; one short transaction per call.

    Every write commits at once: a cycle that dies half-way leaves a consistent store (the
    original requests recorded before a write are never lost).
    """

    def __init__(self, path: str | Path, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            # SQLite's mode=ro: never creates, migrates, or writes the file (the controller may
            # be running a cycle on it)
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._migrate()
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )

    @classmethod
    def read_only(cls, path: str | Path) -> "StateStore":
        """Open an existing store for reading only (reports, ``snapshot --json``); raises
        sqlite3.Error when it cannot be read."""
        return cls(path, read_only=True)

    def _migrate(self) -> None:
        """Bring a store written by an earlier version up to this schema (columns only added)."""
        cols = {r["name"] for r in self._db.execute("PRAGMA table_info(requeues)")}
        for name, decl in (("reason", "TEXT NOT NULL DEFAULT 'make-room'"), ("to_type", "TEXT")):
            if name not in cols:
                self._db.execute(f"ALTER TABLE requeues ADD COLUMN {name} {decl}")

    @classmethod
    def in_dir(cls, state_dir: str | Path) -> "StateStore":
        return cls(Path(state_dir) / DB_NAME)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "StateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, tuple(args))

    def _many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        """``sql`` for every row, in one transaction: one commit, and all rows or none. (The
        connection is in autocommit mode, where ``with connection`` opens no transaction and
        each row would be committed, and synced, alone.)"""
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        self._db.execute("BEGIN")
        try:
            self._db.executemany(sql, rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._exec("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row["value"] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # --- original requests --------------------------------------------------------------------
    def record_original(self, orig: OriginalRequest, cycle_id: str, at: float) -> bool:
        """Remember ``orig`` unless this job already has a record; True when newly recorded.

        Only the first record counts: it is the job as the user submitted it.
        """
        cur = self._exec(_INSERT_ORIGINAL, _original_row(orig, cycle_id, at))
        return cur.rowcount == 1

    def record_originals(self, origs: Iterable[OriginalRequest], cycle_id: str, at: float) -> None:
        """:meth:`record_original` for many jobs in one transaction (before a batched write)."""
        self._many(_INSERT_ORIGINAL, (_original_row(o, cycle_id, at) for o in origs))

    def originals(self, include_reverted: bool = False) -> dict[str, OriginalRequest]:
        sql = "SELECT * FROM original_requests"
        if not include_reverted:
            sql += " WHERE reverted = 0"
        return {r["job_id"]: _orig(r) for r in self._exec(sql)}

    def original(self, job_id: str) -> OriginalRequest | None:
        row = self._exec("SELECT * FROM original_requests WHERE job_id = ?", (job_id,)).fetchone()
        return _orig(row) if row else None

    def forget_original(self, job_id: str) -> None:
        """After a revert (or when the job ended), the record is no longer needed."""
        self._exec("DELETE FROM original_requests WHERE job_id = ?", (job_id,))

    def forget_originals(self, job_ids: Iterable[str]) -> None:
        """:meth:`forget_original` for many jobs in one transaction."""
        self._many("DELETE FROM original_requests WHERE job_id = ?", ((j,) for j in job_ids))

    # --- cycles -------------------------------------------------------------------------------
    def start_cycle(self, cycle_id: str, started_at: float, policy: str, dry_run: bool) -> None:
        self._exec(
            "INSERT INTO cycles (cycle_id, started_at, status, policy, dry_run)"
            " VALUES (?, ?, 'running', ?, ?)",
            (cycle_id, started_at, policy, int(dry_run)),
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

    def cycles(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._exec("SELECT * FROM cycles ORDER BY started_at DESC LIMIT ?", (limit,))
        return [dict(r) for r in rows]

    def cycles_between(self, since: float, until: float) -> list[dict[str, Any]]:
        """Cycles that started in ``[since, until)``, oldest first (reports)."""
        rows = self._exec("SELECT * FROM cycles WHERE started_at >= ? AND started_at < ? ORDER BY started_at",
                          (since, until))
        return [dict(r) for r in rows]

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

    def last_requeues(self) -> dict[str, float]:
        """Job -> when the controller last requeued it (the hysteresis clock)."""
        return {r["job_id"]: float(r["at"]) for r in
                self._exec("SELECT job_id, MAX(at) AS at FROM requeues GROUP BY job_id")}

    def requeues_of(self, job_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._exec("SELECT * FROM requeues WHERE job_id = ? ORDER BY at", (job_id,))]

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

    def tenant_cycle(self, cycle_id: str, tenant: str) -> dict[str, Any] | None:
        row = self._exec(
            "SELECT * FROM tenant_cycle WHERE cycle_id = ? AND tenant = ?", (cycle_id, tenant)
        ).fetchone()
        if row is None:
            return None
        d = dict(row)
        for col in ("fair_share_json", "bundle_json", "limits_json"):
            d[col[:-5]] = json.loads(d.pop(col))
        return d

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

    # --- QOS slurm-fair manages ---------------------------------------------------------------
    def record_qos(self, q: ManagedQos, at: float) -> None:
        """Remember a QOS before its first change (later calls keep the first record)."""
        self._exec(
            "INSERT OR IGNORE INTO managed_qos VALUES (?, ?, ?, ?, ?, ?, ?)",
            (q.name, q.account, at, int(q.existed_before), int(q.account_had_qos),
             q.prev_default_qos, json.dumps(dict(q.prev_grp_tres))),
        )

    def managed_qos(self) -> dict[str, ManagedQos]:
        return {
            r["name"]: ManagedQos(
                r["name"], r["account"], bool(r["existed_before"]), bool(r["account_had_qos"]),
                r["prev_default_qos"], json.loads(r["prev_grp_tres_json"]),
            )
            for r in self._exec("SELECT * FROM managed_qos")
        }

    def forget_qos(self, name: str) -> None:
        self._exec("DELETE FROM managed_qos WHERE name = ?", (name,))

    def table(self, name: str) -> list[dict[str, Any]]:
        """All rows of one table (reports, tests); ``name`` must be a known table."""
        known = {r["name"] for r in self._exec("SELECT name FROM sqlite_master WHERE type='table'")}
        if name not in known:
            raise KeyError(name)
        with closing(self._db.execute(f"SELECT * FROM {name}")) as cur:  # noqa: S608 (checked)
            return [dict(r) for r in cur]


def _orig(r: sqlite3.Row) -> OriginalRequest:
    return OriginalRequest(
        r["job_id"], r["account"], r["gres_raw"], r["gpu_type"], r["gpu_count"], r["gpu_per"],
        r["priority"], r["nice"], r["partition"], r["qos"],
    )


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
