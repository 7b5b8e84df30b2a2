"""The ledger: one SQLite file per campaign, every write one transaction.

It is a cache of the truth (run directories + the scheduler's accounting), so it can always be
rebuilt; WAL mode lets `hpcscale status` read from any shell while a submitter writes. Run
directories are stored relative to the campaign directory, so a copied or moved workdir keeps
working; `stale` marks runs the campaign's matrix no longer has (an edited campaign).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcscale.state.rebuild import rebuild
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
    updated_at REAL NOT NULL,
    stale INTEGER NOT NULL DEFAULT 0
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
    "stale",
)
# 1: run_dir relative to the campaign directory (absolute before), the `stale` column
SCHEMA_VERSION = 1


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
    stale: bool = False  # no longer in the campaign's matrix (the campaign was edited)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RunState.parse(self.state))
        object.__setattr__(self, "stale", bool(self.stale))

    @property
    def terminal(self) -> bool:
        return self.state.terminal


class Ledger:
    def __init__(self, campaign_dir: str | Path) -> None:
        self.dir = Path(campaign_dir).absolute()  # stored run directories are relative to it
        self.path = self.dir / LEDGER_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opening is serialised: two processes switching a new database to WAL at once get
        # "database is locked" at once, without SQLite's busy timeout ever being consulted.
        fd = os.open(
            self.path.with_name(f".{LEDGER_NAME}.open-lock"), os.O_RDWR | os.O_CREAT, 0o644
        )
        self.set_aside: Path | None = None  # where a damaged ledger went (then rebuilt)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                self._open()
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):  # locked, busy, unreadable: the file may be fine
                    raise
                self._set_aside(exc)
                self._open()
                n = rebuild(self)
                sys.stderr.write(
                    f"hpcscale: warning: {self.path} was damaged ({exc}); set aside as "
                    f"{self.set_aside.name if self.set_aside else '?'} and rebuilt from the run "
                    f"directories ({n} run(s); `hpcscale status` asks SLURM for the rest)\n"
                )
        finally:
            os.close(fd)  # releases the flock

    def _open(self) -> None:
        """Connect, switch to WAL, create the schema, migrate and check the file: a file that is
        not a database, or a damaged one, raises sqlite3.DatabaseError here, not later."""
        if self.path.exists() and self.path.stat().st_size == 0:  # cut to nothing: damaged
            raise sqlite3.DatabaseError("an empty file")
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            self._migrate()
            check = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check}")
            self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs LIMIT 0").fetchall()
        except BaseException:
            self.db.close()
            raise

    def _set_aside(self, exc: Exception) -> None:
        """Move the damaged file (and its WAL and shared-memory files) out of the way:
        ledger.sqlite.corrupt-<time>, kept for whoever wants to look at it."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{LEDGER_NAME}.corrupt-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{LEDGER_NAME}.corrupt-{stamp}-{n}")
        if self.path.exists():
            os.replace(self.path, target)
            self.set_aside = target
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(LEDGER_NAME + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))

    def _migrate(self) -> None:
        """Bring a ledger written by an earlier hpcscale to SCHEMA_VERSION (under the open
        lock, in one transaction): absolute run directories become relative when they are
        `<somewhere>/runs/<run id>` (a ledger copied with its workdir then points into the
        copy); any other absolute path is kept and still read as it is."""
        if self.db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        with self.transaction() as db:
            have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
            if "stale" not in have:
                db.execute("ALTER TABLE runs ADD COLUMN stale INTEGER NOT NULL DEFAULT 0")
            rows = db.execute("SELECT run_id, run_dir FROM runs WHERE run_dir LIKE '/%'")
            moved = [
                (f"runs/{rid}", rid)
                for rid, rdir in rows.fetchall()
                if Path(rdir).name == rid and Path(rdir).parent.name == "runs"
            ]
            db.executemany("UPDATE runs SET run_dir = ? WHERE run_id = ?", moved)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def stored_dir(self, run_dir: str | os.PathLike[str]) -> str:
        """How a run directory is stored: relative to the campaign directory when inside it."""
        p = Path(run_dir)
        if not p.is_absolute():
            return p.as_posix()
        try:
            return p.relative_to(self.dir).as_posix()
        except ValueError:
            return str(p)

    def _row(self, values: tuple[Any, ...]) -> RunRow:
        """A row with its run directory usable from here (absolute, under this campaign)."""
        row = list(values)
        row[1] = str(self.dir / row[1])  # an absolute stored path stays as it is
        return RunRow(*row)

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
        runs = [(rid, self.stored_dir(rdir)) for rid, rdir in runs]
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
                if "run_dir" in sets:
                    sets["run_dir"] = self.stored_dir(sets["run_dir"])
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
        return self._row(row) if row else None

    def rows(self, include_stale: bool = True) -> list[RunRow]:
        """Every run, in the order registered; without `include_stale`, the campaign's
        current matrix only."""
        where = "" if include_stale else " WHERE stale = 0"
        cur = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs{where} ORDER BY rowid")
        return [self._row(r) for r in cur.fetchall()]

    def mark_stale(self, current: Iterable[str], why: str = "") -> tuple[list[str], list[str]]:
        """The campaign now expands to the runs `current`: every other run is marked stale and
        a stale run that is back is un-marked, in one transaction (each change goes into the
        run's history). Returns (newly stale, back) run ids."""
        now = time.time()
        with self.transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS plan_ids(run_id TEXT PRIMARY KEY)")
            db.execute("DELETE FROM plan_ids")
            db.executemany("INSERT OR IGNORE INTO plan_ids VALUES (?)", ((r,) for r in current))
            found: dict[int, list[tuple[str, str]]] = {}
            for flag, test in ((1, "NOT IN"), (0, "IN")):
                found[flag] = db.execute(
                    f"SELECT run_id, state FROM runs WHERE stale = {1 - flag} "
                    f"AND run_id {test} (SELECT run_id FROM plan_ids) ORDER BY rowid"
                ).fetchall()
            db.execute("DELETE FROM plan_ids")
            for flag, rows in found.items():
                detail = (
                    f"stale: no longer in the campaign's matrix{why}"
                    if flag
                    else f"back in the campaign's matrix{why}"
                )
                db.executemany(
                    "UPDATE runs SET stale = ?, updated_at = ? WHERE run_id = ?",
                    [(flag, now, rid) for rid, _ in rows],
                )
                db.executemany(
                    "INSERT INTO events(run_id, at, state, detail) VALUES (?, ?, ?, ?)",
                    [(rid, now, state, detail) for rid, state in rows],
                )
        return [r for r, _ in found[1]], [r for r, _ in found[0]]

    def history(self, run_id: str) -> list[tuple[float, str, str | None]]:
        cur = self.db.execute(
            "SELECT at, state, detail FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return list(cur.fetchall())


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's error says the file is not a (whole) database, rather than that it
    cannot be reached now (locked, busy, no permission, a full disk): only then is it set
    aside and rebuilt."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return True
    if not isinstance(exc, sqlite3.OperationalError):
        return not name  # our own checks (an empty file, quick_check) carry no name
    return "no such table" in str(exc) or "no such column" in str(exc)


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
