"""Run history in SQLite (``<state_dir>/hts.db``), kept across restarts.

One row per run: a table service scheduled or executed on one table, from the moment it is
queued to its outcome. Runs that a previous process left queued or running are marked
``interrupted`` at start-up: their instants are still on the timeline, so the watcher finds them
again (an abandoned inflight attempt is rolled back once its heartbeat expires).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id TEXT NOT NULL,
    table_path TEXT NOT NULL,
    service TEXT NOT NULL,
    kind TEXT NOT NULL,
    instant TEXT,
    trigger TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    details TEXT,
    idempotency_key TEXT UNIQUE,
    replica TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_table ON runs (table_id, created_at);
CREATE INDEX IF NOT EXISTS runs_by_state ON runs (state);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs (id)
);
CREATE TABLE IF NOT EXISTS service_streaks (
    table_id TEXT NOT NULL,
    service TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_run INTEGER,
    last_failed_at REAL,
    suspended_at REAL,
    PRIMARY KEY (table_id, service)
);
"""
COST_COLUMN = "ALTER TABLE runs ADD COLUMN cost TEXT"
"""Run histories written before runs had a cost get the column on open."""


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        return self not in (RunState.QUEUED, RunState.RUNNING)


class RunKind(StrEnum):
    """What a run does."""

    EXECUTE = "execute"
    """Carry out one pending plan (``instant``)."""
    SCHEDULE = "schedule"
    """A policy check: write a plan when one is due (its execution is a run of its own)."""
    TRIGGER = "trigger"
    """The REST trigger: plan now (or take ``instant``) and execute that plan, as one run."""
    RUN = "run"
    """Services that never put a plan on the timeline (archival, metadata): plan and carry out."""


class RunTrigger(StrEnum):
    """What started a run."""

    WATCH = "watch"
    """A pending instant found on the timeline."""
    POLICY = "policy"
    """A table's self-scheduling policy."""
    API = "api"
    """A REST request."""


@dataclass(frozen=True)
class Run:
    id: int
    table_id: str
    table_path: str
    service: str
    kind: RunKind
    instant: str | None
    trigger: RunTrigger
    state: RunState
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None
    details: dict[str, Any]
    idempotency_key: str | None
    replica: str
    cost: dict[str, Any] | None = None
    """What the run used (:class:`service.cost.RunCost` as JSON); None until it finished."""

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "table": self.table_id,
            "path": self.table_path,
            "service": self.service,
            "kind": self.kind.value,
            "instant": self.instant,
            "trigger": self.trigger.value,
            "state": self.state.value,
            "attempts": self.attempts,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_s": (self.finished_at - self.started_at)
            if self.finished_at is not None and self.started_at is not None
            else None,
            "error": self.error,
            "details": self.details,
            "idempotency_key": self.idempotency_key,
            "replica": self.replica,
            "cost": self.cost,
        }


@dataclass(frozen=True)
class ServiceStreak:
    """A (table, service)'s run of consecutive failed runs, and whether it got it suspended."""

    table_id: str
    service: str
    consecutive_failures: int
    last_error: str | None
    last_run: int | None
    last_failed_at: float | None
    suspended_at: float | None

    @property
    def suspended(self) -> bool:
        return self.suspended_at is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "suspended": self.suspended,
            "suspended_at": self.suspended_at,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "last_run": self.last_run,
            "last_failed_at": self.last_failed_at,
        }


_COLUMNS = (
    "id, table_id, table_path, service, kind, instant, trigger, state, attempts, created_at, "
    "started_at, finished_at, error, details, idempotency_key, replica, cost"
)
_STREAK_COLUMNS = (
    "table_id, service, consecutive_failures, last_error, last_run, last_failed_at, suspended_at"
)


def _run(row: tuple[Any, ...]) -> Run:
    return Run(
        id=row[0],
        table_id=row[1],
        table_path=row[2],
        service=row[3],
        kind=RunKind(row[4]),
        instant=row[5],
        trigger=RunTrigger(row[6]),
        state=RunState(row[7]),
        attempts=row[8],
        created_at=row[9],
        started_at=row[10],
        finished_at=row[11],
        error=row[12],
        details=json.loads(row[13]) if row[13] else {},
        idempotency_key=row[14],
        replica=row[15],
        cost=json.loads(row[16]) if row[16] else None,
    )


def _streak(row: tuple[Any, ...]) -> ServiceStreak:
    return ServiceStreak(*row)


class RunStore:
    """Thread-safe access to the run history."""

    def __init__(self, state_dir: Path, replica: str) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "hts.db"
        self.replica = replica
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._guard = threading.Lock()
        with self._guard:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(runs)")}
            if "cost" not in columns:
                self._db.execute(COST_COLUMN)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._guard:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._guard:
            self._db.close()

    def writable(self) -> bool:
        try:
            with self._tx() as db:
                db.execute("SELECT 1")
            return True
        except sqlite3.Error:
            return False

    def mark_interrupted(self) -> int:
        """Runs a previous process of this replica left unfinished; returns how many."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE runs SET state = ?, finished_at = ?, error = ? WHERE state IN (?, ?) AND replica = ?",
                (
                    RunState.INTERRUPTED.value,
                    time.time(),
                    "the daemon stopped before this run finished",
                    RunState.QUEUED.value,
                    RunState.RUNNING.value,
                    self.replica,
                ),
            )
            return cur.rowcount

    def create(
        self,
        *,
        table_id: str,
        table_path: str,
        service: str,
        kind: RunKind,
        instant: str | None,
        trigger: RunTrigger,
        idempotency_key: str | None = None,
    ) -> tuple[Run, bool]:
        """A new queued run, or the existing run with the same idempotency key (and False)."""
        with self._tx() as db:
            if idempotency_key is not None:
                row = db.execute(
                    f"SELECT {_COLUMNS} FROM runs WHERE idempotency_key = ?", (idempotency_key,)
                ).fetchone()
                if row is not None:
                    return _run(row), False
            cur = db.execute(
                "INSERT INTO runs (table_id, table_path, service, kind, instant, trigger, state, "
                "created_at, idempotency_key, replica) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    table_id,
                    table_path,
                    service,
                    kind.value,
                    instant,
                    trigger.value,
                    RunState.QUEUED.value,
                    time.time(),
                    idempotency_key,
                    self.replica,
                ),
            )
            row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (cur.lastrowid,)).fetchone()
            return _run(row), True

    def update(self, run_id: int, **fields: Any) -> None:
        allowed = {"state", "attempts", "started_at", "finished_at", "error", "details", "instant", "cost"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown run fields {sorted(unknown)}")
        values = {k: (v.value if isinstance(v, StrEnum) else v) for k, v in fields.items()}
        for column in ("details", "cost"):
            if column in values and values[column] is not None:
                values[column] = json.dumps(values[column], default=str)
        assignments = ", ".join(f"{k} = ?" for k in values)
        with self._tx() as db:
            db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id))

    def by_idempotency_key(self, key: str) -> Run | None:
        """The run a key was first answered with: the run it created, or the run it was sent to."""
        with self._guard:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE idempotency_key = ? "
                "OR id = (SELECT run_id FROM idempotency_keys WHERE key = ?)",
                (key, key),
            ).fetchone()
        return _run(row) if row is not None else None

    def remember_key(self, key: str, run_id: int) -> None:
        """Record that ``key`` was answered with the existing run ``run_id`` (the first answer stays)."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO idempotency_keys (key, run_id) VALUES (?, ?)", (key, run_id))

    def get(self, run_id: int) -> Run | None:
        with self._guard:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row is not None else None

    def list(
        self,
        *,
        table_id: str | None = None,
        state: str | None = None,
        service: str | None = None,
        limit: int = 100,
    ) -> list[Run]:
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("table_id", table_id), ("state", state), ("service", service)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = f"SELECT {_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        with self._guard:
            rows = self._db.execute(sql, (*args, limit)).fetchall()
        return [_run(r) for r in rows]

    def recent_failures(self, since: float) -> dict[str, tuple[int, int, str, float | None, str | None]]:
        """Per table: failed runs created at ``since`` or later, and the latest one's
        ``(count, id, service, finished_at, error)``; one query for every table."""
        sql = (
            "SELECT r.table_id, c.n, r.id, r.service, r.finished_at, r.error FROM runs r JOIN "
            "(SELECT table_id, COUNT(*) AS n, MAX(id) AS last FROM runs WHERE state = ? AND created_at >= ? "
            "GROUP BY table_id) c ON r.id = c.last"
        )
        with self._guard:
            rows = self._db.execute(sql, (RunState.FAILED.value, since)).fetchall()
        return {row[0]: (row[1], row[2], row[3], row[4], row[5]) for row in rows}

    def counts(self) -> Mapping[str, int]:
        with self._guard:
            rows = self._db.execute("SELECT state, COUNT(*) FROM runs GROUP BY state").fetchall()
        return {state: n for state, n in rows}

    # -- consecutive failures and suspensions -------------------------------------------------

    def record_outcome(
        self,
        table_id: str,
        service: str,
        run_id: int | None,
        *,
        failed: bool,
        error: str | None,
        suspend_after: int | None,
    ) -> ServiceStreak:
        """Count a finished run of (table, service): a failure extends the streak (and suspends the
        service at ``suspend_after`` failures in a row), a success ends it."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO service_streaks (table_id, service) VALUES (?, ?)", (table_id, service)
            )
            if failed:
                db.execute(
                    "UPDATE service_streaks SET consecutive_failures = consecutive_failures + 1, "
                    "last_error = ?, last_run = ?, last_failed_at = ? WHERE table_id = ? AND service = ?",
                    (error, run_id, now, table_id, service),
                )
                if suspend_after is not None:
                    db.execute(
                        "UPDATE service_streaks SET suspended_at = ? WHERE table_id = ? AND service = ? "
                        "AND suspended_at IS NULL AND consecutive_failures >= ?",
                        (now, table_id, service, suspend_after),
                    )
            else:
                db.execute(
                    "UPDATE service_streaks SET consecutive_failures = 0 WHERE table_id = ? AND service = ?",
                    (table_id, service),
                )
            row = db.execute(
                f"SELECT {_STREAK_COLUMNS} FROM service_streaks WHERE table_id = ? AND service = ?",
                (table_id, service),
            ).fetchone()
        return _streak(row)

    def resume_service(self, table_id: str, service: str) -> ServiceStreak | None:
        """Lift the suspension of (table, service) and restart its count; None when not suspended."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE service_streaks SET suspended_at = NULL, consecutive_failures = 0 "
                "WHERE table_id = ? AND service = ? AND suspended_at IS NOT NULL",
                (table_id, service),
            )
            if cur.rowcount == 0:
                return None
            row = db.execute(
                f"SELECT {_STREAK_COLUMNS} FROM service_streaks WHERE table_id = ? AND service = ?",
                (table_id, service),
            ).fetchone()
        return _streak(row)

    def streaks(self) -> tuple[ServiceStreak, ...]:
        with self._guard:
            rows = self._db.execute(f"SELECT {_STREAK_COLUMNS} FROM service_streaks").fetchall()
        return tuple(_streak(r) for r in rows)

    def cost_totals(self, table_id: str) -> dict[str, Any]:
        """The costs of ``table_id``'s runs summed (``service.cost``); storage sums are null when no
        run counted them."""
        fields = (
            "core_seconds",
            "bytes_written",
            "files_written",
            "bytes_read",
            "files_read",
            "storage_requests",
        )
        sums = ", ".join(f"SUM(json_extract(cost, '$.{f}'))" for f in fields)
        with self._guard:
            row = self._db.execute(
                f"SELECT COUNT(cost), {sums} FROM runs WHERE table_id = ? AND cost IS NOT NULL", (table_id,)
            ).fetchone()
        totals: dict[str, Any] = {"runs": row[0]}
        for name, value in zip(fields, row[1:], strict=True):
            totals[name] = value
        totals["core_seconds"] = round(totals["core_seconds"] or 0.0, 6)
        for name in ("bytes_written", "files_written"):
            totals[name] = int(totals[name] or 0)
        return totals
