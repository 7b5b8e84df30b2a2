"""A run's last known state, for the collector: what decides whether its figures are a
measurement. Only a COMPLETED run is measured; any other state (FAILED, CANCELLED, TIMEOUT,
still RUNNING, ...) keeps its row out of every table, figure and fit, and says why.

Two witnesses: the ledger (what the backend saw) and the run's own exit record (exit.json,
written by its job script as it ended). An ended state in the ledger wins (the scheduler knows a
time limit or an OOM kill the script may not live to record); else the newer of the exit record
(a ledger not refreshed since the job ended, a run directory copied without its ledger, a
rebuilt ledger) and the ledger's own state (queued again, running); a run known to neither is
of UNKNOWN state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcscale.formats.exit_record import EXIT_NAME, ExitRecord, read_exit_record
from hpcscale.formats.outputs import job_output
from hpcscale.state.ledger import LEDGER_NAME, Ledger, RunRow
from hpcscale.state.reason import explain, read_outputs
from hpcscale.state.states import RunState

NEITHER = f"no ledger row and no exit record ({EXIT_NAME}): its state is unknown"


@dataclass(frozen=True)
class KnownState:
    """A run's state, its reason (empty for COMPLETED) and which witness gave it."""

    state: RunState
    reason: str = ""
    source: str = "ledger"  # "ledger", "exit record" or "none"

    @property
    def measured(self) -> bool:
        return self.state is RunState.COMPLETED


def of_exit_record(run_dir: Path, rec: ExitRecord) -> KnownState:
    """The state an exit record gives: COMPLETED on exit 0, else FAILED (CANCELLED when a
    signal ended it) with the reason its output gives."""
    if rec.succeeded:
        return KnownState(RunState.COMPLETED, "", "exit record")
    state = RunState.CANCELLED if rec.signal else RunState.FAILED
    why = _reason(run_dir, state, rec.describe(), str(rec.exit_code))
    return KnownState(state, why, "exit record")


def _reason(run_dir: Path, state: RunState, detail: str | None, code: str | None) -> str:
    """Why the run ended without success, in its output's own words (hpcscale.state.reason)."""
    try:
        out = job_output(run_dir)
        text = read_outputs([out]) if out is not None else None
    except OSError:
        text = None
    return explain(state, text, detail, code) or detail or str(state)


def _ledger_detail(ledger: Ledger, row: RunRow) -> str | None:
    """What the ledger recorded when the run entered its present state, if anything."""
    for _at, state, detail in reversed(ledger.history(row.run_id)):
        if state != str(row.state):
            break
        if detail:
            return detail
    return row.message.splitlines()[0] if row.message else None


def run_states(cdir: Path, dirs: Iterable[Path]) -> dict[str, KnownState]:
    """Run id -> its last known state, for each of these run directories (see the module)."""
    dirs = list(dirs)
    rows: dict[str, RunRow] = {}
    out: dict[str, KnownState] = {}
    ledger = Ledger(cdir) if (cdir / LEDGER_NAME).exists() else None
    try:
        if ledger is not None:
            rows = {r.run_id: r for r in ledger.rows()}
        for d in dirs:
            try:
                out[d.name] = _known(ledger, rows.get(d.name), d)
            except Exception as exc:  # one run's damage is that run's alone
                why = f"state unreadable ({type(exc).__name__}: {str(exc)[:200]})"
                out[d.name] = KnownState(RunState.UNKNOWN, why, "none")
    finally:
        if ledger is not None:
            ledger.close()
    return out


def states_without_ledger(dirs: Iterable[Path]) -> dict[str, KnownState]:
    """Each run's state from its exit record alone (a ledger that cannot be read at all)."""
    out = {}
    for d in dirs:
        try:
            out[d.name] = _known(None, None, d)
        except Exception as exc:
            out[d.name] = KnownState(RunState.UNKNOWN, f"state unreadable ({exc})", "none")
    return out


def _known(ledger: Ledger | None, row: RunRow | None, d: Path) -> KnownState:
    if row is not None and row.state.terminal and ledger is not None:
        return _from_row(ledger, row, d)
    rec = read_exit_record(d)
    # the newer witness: a ledger not refreshed since the job ended is older than its record;
    # a run queued again after it (resubmitted, its new job not started) is newer
    if rec is not None and (row is None or not row.updated_at > rec.ended_unix_s):
        return of_exit_record(d, rec)
    if row is not None:
        return KnownState(row.state, f"{row.state} in the ledger, no exit record")
    return KnownState(RunState.UNKNOWN, NEITHER, "none")


def _from_row(ledger: Ledger, row: RunRow, run_dir: Path) -> KnownState:
    if row.state is RunState.COMPLETED:
        return KnownState(RunState.COMPLETED)
    detail = _ledger_detail(ledger, row)
    return KnownState(row.state, _reason(run_dir, row.state, detail, row.exit_code))
