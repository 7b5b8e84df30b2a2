"""The ledger: one SQLite file per campaign, every write one transaction.

It is a cache of the truth (run directories + the scheduler's accounting), so it can always be
rebuilt; WAL mode lets `hpcscale status` read from any shell while a submitter writes.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcscale.state.states import ACTIVE, TERMINAL, RunState

__all__ = ["ACTIVE", "TERMINAL", "Ledger", "RunRow", "RunState", "pid_alive"]

LEDGER_NAME = "ledger.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    run_dir TEXT NOT NULL,
    backend TEXT,
    state TEXT NOT NULL DEFAULT 'RENDERED',
    job_id TEXT,
    array_job_id TEXT,
    array_index INTEGER,
    nodelist TEXT,
    exit_code TEXT,
    submitted_at REAL,
    started_at REAL,
    ended_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    message TEXT,
    runner_pid INTEGER,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    at REAL NOT NULL,
    state TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id);
"""

Change = tuple[str, RunState | str | None, str | None, dict[str, Any]]

COLUMNS = (
    "run_id",
    "run_dir",
    "backend",
    "state",
    "job_id",
    "array_job_id",
    "array_index",
    "nodelist",
    "exit_code",
    "submitted_at",
    "started_at",
    "ended_at",
    "attempts",
    "message",
    "runner_pid",
    "updated_at",
)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    run_dir: str
    backend: str | None
    state: RunState
    job_id: str | None
    array_job_id: str | None
    array_index: int | None
    nodelist: str | None
    exit_code: str | None
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    attempts: int
    message: str | None
    runner_pid: int | None
    updated_at: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RunState.parse(self.state))

    @property
    def terminal(self) -> bool:
        return self.state.terminal


class Ledger:
    def __init__(self, campaign_dir: str | Path) -> None:
        self.path = Path(campaign_dir) / LEDGER_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opening is serialised: two processes switching a new database to WAL at once get
        # "database is locked" at once, without SQLite's busy timeout ever being consulted.
        fd = os.open(
            self.path.with_name(f".{LEDGER_NAME}.open-lock"), os.O_RDWR | os.O_CREAT, 0o644
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
        finally:
            os.close(fd)  # releases the flock

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE: one writer at a time, all or nothing."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")

    def ensure(self, runs: Iterable[tuple[str, str]]) -> int:
        """Register rendered runs (run_id, run_dir); existing rows are left as they are."""
        now = time.time()
        runs = list(runs)
        with self.transaction() as db:
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO runs(run_id, run_dir, state, updated_at) "
                "VALUES (?, ?, 'RENDERED', ?)",
                [(rid, rdir, now) for rid, rdir in runs],
            )
            added = db.total_changes - before
            db.executemany(
                "INSERT INTO events(run_id, at, state, detail) SELECT ?, ?, 'RENDERED', NULL "
                "WHERE NOT EXISTS (SELECT 1 FROM events WHERE run_id = ?)",
                [(rid, now, rid) for rid, _ in runs],
            )
        return added

    def update(
        self,
        run_id: str,
        state: RunState | str | None = None,
        detail: str | None = None,
        **fields: Any,
    ) -> None:
        self.update_many([run_id], state, detail, **fields)

    def update_many(
        self,
        run_ids: Iterable[str],
        state: RunState | str | None = None,
        detail: str | None = None,
        **fields: Any,
    ) -> None:
        """Set the same fields (and state) on several runs, in one transaction."""
        self.apply(((rid, state, detail, fields) for rid in run_ids), missing_ok=False)

    def apply(
        self, changes: Iterable[Change], bump_attempts: bool = False, missing_ok: bool = True
    ) -> None:
        """Per-run updates (run_id, state, detail, fields) in ONE transaction: an array
        submission gives each run its own job id and index, and a refresh of 1,000 runs must
        not be 1,000 transactions. A state change is added to the history."""
        now = time.time()
        with self.transaction() as db:
            for rid, state, detail, fields in changes:
                bad = set(fields) - set(COLUMNS)
                if bad:
                    raise ValueError(f"unknown ledger columns {bad}")
                sets = dict(fields)
                if state is not None:
                    row = db.execute("SELECT state FROM runs WHERE run_id = ?", (rid,)).fetchone()
                    if row is None:
                        if missing_ok:
                            continue
                        raise KeyError(f"run {rid} is not in the ledger")
                    state = RunState(state)  # a typo'd state is an error, never stored
                    if row[0] != state or detail:
                        db.execute(
                            "INSERT INTO events(run_id, at, state, detail) VALUES (?, ?, ?, ?)",
                            (rid, now, str(state), detail),
                        )
                    sets["state"] = str(state)
                sets["updated_at"] = now
                assign = ", ".join(f"{k} = ?" for k in sets)
                if bump_attempts:
                    assign += ", attempts = attempts + 1"
                db.execute(f"UPDATE runs SET {assign} WHERE run_id = ?", (*sets.values(), rid))

    def get(self, run_id: str) -> RunRow | None:
        row = self.db.execute(
            f"SELECT {', '.join(COLUMNS)} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return RunRow(*row) if row else None

    def rows(self) -> list[RunRow]:
        cur = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs ORDER BY rowid")
        return [RunRow(*r) for r in cur.fetchall()]

    def history(self, run_id: str) -> list[tuple[float, str, str | None]]:
        cur = self.db.execute(
            "SELECT at, state, detail FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return list(cur.fetchall())


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
