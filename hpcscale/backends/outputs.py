"""A run's output files and, for a run that ended without success, the reason they give: one
place for `status`, `logs` and the report's Data quality section. Each backend says where its
runs' output goes (`Backend.outputs`); the reason is read by hpcscale.state.reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcscale.backends import REGISTRY, backend_class
from hpcscale.backends.base import Backend
from hpcscale.state.ledger import Ledger, RunRow
from hpcscale.state.reason import explain, read_outputs
from hpcscale.state.select import find_run
from hpcscale.state.states import RunState


@dataclass(frozen=True)
class RunOutput:
    """Where a run's output is (None before it has any) and, for a run that ended without
    success, why: its own words (hpcscale.state.reason), else what the ledger recorded."""

    output: Path | None
    reason: str | None = None


@dataclass(frozen=True)
class RunLog:
    """One run's output files (its own first; an array task's SLURM file after it)."""

    campaign: str
    row: RunRow
    files: list[Path]


# states in which a run has printed nothing yet
NOT_STARTED = frozenset({RunState.RENDERED, RunState.SUBMITTED, RunState.PENDING})


def output_files(cdir: Path, row: RunRow, cache: dict[str, Backend] | None = None) -> list[Path]:
    """The run's output files that exist, its own first (none for a run never submitted)."""
    if row.backend is None or row.backend not in REGISTRY:
        return []
    cache = {} if cache is None else cache
    if row.backend not in cache:
        cache[row.backend] = backend_class(row.backend)(cdir)
    return cache[row.backend].outputs(row)


def failure_detail(ledger: Ledger, row: RunRow) -> str | None:
    """What the ledger recorded when the run entered its present state ("cancelled by the
    user", "exit code 2", ...), if anything."""
    for _at, state, detail in reversed(ledger.history(row.run_id)):
        if state == str(row.state):
            if detail:
                return detail
        else:
            break
    return None


def run_log(run: str, campaign_dirs: Sequence[Path], where: str) -> RunLog:
    """The output files of the run whose id is `run` or starts with it, in these campaigns'
    ledgers (`where` names them in an error)."""
    dirs = {cdir.name: cdir for cdir in campaign_dirs}
    ledgers = {}
    for name, cdir in dirs.items():
        with Ledger(cdir) as ledger:
            ledgers[name] = ledger.rows()
    name, row = find_run(run, ledgers, where)
    return RunLog(name, row, output_files(dirs[name], row))


def run_outputs(cdir: Path, ledger: Ledger, rows: Sequence[RunRow]) -> dict[str, RunOutput]:
    """Run id -> output file and (ended without success) reason, for every run that has
    started."""
    cache: dict[str, Backend] = {}
    out = {}
    for row in rows:
        if row.backend is None or row.state in NOT_STARTED:
            continue
        files = output_files(cdir, row, cache)
        reason = None
        if row.state.failed:
            text = read_outputs(files)
            reason = explain(row.state, text, failure_detail(ledger, row), row.exit_code)
        out[row.run_id] = RunOutput(files[0] if files else None, reason)
    return out
