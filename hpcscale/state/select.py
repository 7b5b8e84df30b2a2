"""Choosing ledger rows by a `--where` condition over their run fields (run.json) and ledger
fields (state, backend, job_id, ...), evaluated safely by hpcscale.model.where."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hpcscale.formats.run_record import load_run_record
from hpcscale.model.errors import HpcscaleError, UsageError
from hpcscale.model.where import ConditionError, holds
from hpcscale.state.ledger import RunRow


def select_rows(rows: Iterable[RunRow], where: str | None) -> list[RunRow]:
    """Rows whose run fields (run.json) and ledger fields satisfy `where`."""
    rows = list(rows)
    if not where:
        return rows
    chosen = []
    for row in rows:
        names: dict[str, Any] = {}
        # a run whose record is gone can still be chosen by its ledger fields
        with contextlib.suppress(HpcscaleError):
            names.update(load_run_record(Path(row.run_dir) / "run.json").names())
        names.update(row.__dict__)
        names["state"] = str(row.state)
        try:
            keep = holds(where, names)
        except ConditionError as exc:
            raise UsageError(f"--where: {exc}") from None
        if keep:
            chosen.append(row)
    return chosen


MIN_PREFIX = 4  # characters of a run id that may stand for it (as `hpcscale trace` takes them)


class HasRunId(Protocol):
    """A run as a list of candidates holds it: a ledger row, or a run directory found on disk."""

    @property
    def run_id(self) -> str: ...


R = TypeVar("R", bound=HasRunId)


def find_run(run: str, campaigns: Mapping[str, Sequence[R]], where: str) -> tuple[str, R]:
    """The run whose id is `run`, or starts with it (at least MIN_PREFIX characters), among
    each campaign's runs (ledger rows, or run directories): (campaign, run). None or several is
    a usage error saying so; one rule for `logs` and `trace`."""
    hits = [(c, r) for c, rows in campaigns.items() for r in rows if r.run_id == run]
    if not hits and len(run) >= MIN_PREFIX:
        hits = [(c, r) for c, rows in campaigns.items() for r in rows if r.run_id.startswith(run)]
    if not hits:
        short = (
            f" (a prefix needs {MIN_PREFIX} characters or more)" if len(run) < MIN_PREFIX else ""
        )
        raise UsageError(f"{run}: no run with this id or prefix in {where}{short}")
    if len(hits) > 1:
        listed = ", ".join(f"{c}/{r.run_id}" for c, r in hits[:5])
        more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
        raise UsageError(f"{run}: matches several runs ({listed}{more}); give more of the id")
    return hits[0]
