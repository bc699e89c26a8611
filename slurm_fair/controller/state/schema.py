"""The tables of the state store, their version, and the migration of an older store.

The schema is documented in ``docs/controller.md`` (the reports read it); keep both in step and
bump :data:`SCHEMA_VERSION` on any change.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 6

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS original_requests (
    job_id TEXT PRIMARY KEY, account TEXT NOT NULL, gres_raw TEXT NOT NULL,
    gpu_type TEXT, gpu_count INTEGER NOT NULL, gpu_per TEXT NOT NULL,
    priority INTEGER NOT NULL, nice INTEGER NOT NULL, partition TEXT NOT NULL, qos TEXT NOT NULL,
    recorded_at REAL NOT NULL, cycle_id TEXT NOT NULL, reverted INTEGER NOT NULL DEFAULT 0,
    req_nodes TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS cycles (
    cycle_id TEXT PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL,
    status TEXT NOT NULL, policy TEXT NOT NULL, dry_run INTEGER NOT NULL,
    actions INTEGER NOT NULL DEFAULT 0, applied INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0, skipped INTEGER NOT NULL DEFAULT 0,
    timings_json TEXT NOT NULL DEFAULT '{}', error TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL DEFAULT 'live');
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
CREATE TABLE IF NOT EXISTS job_fields (
    job_id TEXT NOT NULL, field TEXT NOT NULL, account TEXT NOT NULL, original TEXT NOT NULL,
    written TEXT, intent TEXT, released INTEGER NOT NULL DEFAULT 0, legacy INTEGER NOT NULL DEFAULT 0,
    cycle_id TEXT NOT NULL DEFAULT '', updated_at REAL NOT NULL DEFAULT 0,
    doubt TEXT, doubt_until REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, field));
CREATE INDEX IF NOT EXISTS job_cycle_job ON job_cycle (job_id);
"""


def migrate(db: sqlite3.Connection) -> None:
    """Bring a store written by an earlier version up to this schema (columns only added)."""
    added = {
        "requeues": (("reason", "TEXT NOT NULL DEFAULT 'make-room'"), ("to_type", "TEXT")),
        "original_requests": (("req_nodes", "TEXT NOT NULL DEFAULT ''"),),
        "cycles": (("mode", "TEXT NOT NULL DEFAULT 'live'"),),
        "job_fields": (("doubt", "TEXT"), ("doubt_until", "REAL NOT NULL DEFAULT 0")),
    }
    for table, columns in added.items():
        cols = {r["name"] for r in db.execute(f"PRAGMA table_info({table})")}
        for name, decl in columns:
            if name not in cols:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
    _legacy_originals(db)


#: original_requests column -> job_fields field (what versions before 0.2 wrote)
_LEGACY = (("partition", "partition"), ("gres_raw", "gres"), ("qos", "qos"), ("nice", "nice"),
           ("req_nodes", "nodes"))


def _legacy_originals(db: sqlite3.Connection) -> None:
    """An older store's original requests become legacy ``job_fields`` rows (once): one per
    field those versions may have written, so revert and the next cycle give them back."""
    rows = db.execute("SELECT * FROM original_requests WHERE reverted = 0").fetchall()
    if not rows:
        return
    db.execute("BEGIN")
    try:
        for r in rows:
            for column, field in _LEGACY:
                if column == "gres_raw" and not r["gres_raw"]:
                    continue
                db.execute(
                    "INSERT OR IGNORE INTO job_fields (job_id, field, account, original, legacy, cycle_id,"
                    " updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
                    (r["job_id"], field, r["account"], str(r[column]), r["cycle_id"], r["recorded_at"]))
        db.execute("DELETE FROM original_requests")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
