"""Choosing ledger rows by a `--where` condition over their run fields (run.json) and ledger
fields (state, backend, job_id, ...), evaluated safely by hpcscale.core.where."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcscale.core.where import ConditionError, holds
from hpcscale.errors import HpcscaleError, UsageError
from hpcscale.formats.run_record import load_run_record
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
