"""What the Data quality section says of runs whose required metric the output did not give
(`unparsed`, collect.readers.command_row): one sentence per metric and pattern naming every run
it failed in, and each run's last output lines as a block of its own, labelled with the run.
A reason's last lines were one multi-line table cell before, and two runs' lines ran together."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from hpcscale.collect.readers.command_row import (
    LAST_LINES,
    LINE_INDENT,
    UnparsedPart,
    unparsed_parts,
)
from hpcscale.report.model import Table

NO_MATCH = "no line matches"


def reason_line(reason: str) -> str:
    """A reason without the output lines shown under it (they get their own block)."""
    kept = [ln.removesuffix(f"; {LAST_LINES}:") for ln in reason.splitlines()]
    kept = [ln for ln, raw in zip(kept, reason.splitlines(), strict=True) if not _indented(raw)]
    return "\n".join(kept)


def _indented(line: str) -> bool:
    return line.startswith(LINE_INDENT)


def unparsed_text(reasons: Iterable[tuple[str, str]]) -> tuple[list[str], list[Table]]:
    """(paragraphs, tables) for the runs (run id, reason) whose reason names unparsed metrics:
    a sentence per (metric, pattern, why) naming its runs, and one table per run and file of
    the output's last lines. ([], []) when no reason is such."""
    by_run = [(rid, unparsed_parts(why)) for rid, why in reasons]
    by_run = [(rid, parts) for rid, parts in by_run if parts]
    groups: dict[tuple[str, str | None, str], list[str]] = {}
    for rid, parts in by_run:
        for p in parts:
            runs = groups.setdefault((p.metric, p.pattern, p.why), [])
            if rid not in runs:
                runs.append(rid)
    text = [_sentence(*key, runs) for key, runs in groups.items()]
    tables = [t for rid, parts in by_run for t in _line_tables(rid, parts)]
    if tables:
        text.append(
            "Below, each run's last output lines, where the pattern was searched (`hpcscale logs "
            "RUN` prints the whole output)."
        )
    return text, tables


def _sentence(metric: str, pattern: str | None, why: str, runs: Sequence[str]) -> str:
    where = f"{'runs' if len(runs) > 1 else 'run'} {_and(runs)}"
    if pattern is None:
        return f"The metric `{metric}` ({why}) in {where}: no table can stand on it."
    what = f"The metric `{metric}` (pattern `{pattern}`)"
    left = "these runs are" if len(runs) > 1 else "the run is"
    if why == NO_MATCH:
        return (
            f"{what} matched nothing in {where}: no line of the output it searched matches "
            f"the pattern, so {left} left out of the tables."
        )
    return f"{what} gave no value in {where} ({why}), so {left} left out of the tables."


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _line_tables(rid: str, parts: Sequence[UnparsedPart]) -> list[Table]:
    """One table per file whose last lines the run's reason shows (a file shown once)."""
    out: list[Table] = []
    seen: set[str] = set()
    for p in parts:
        if not p.last_lines or p.file in seen:
            continue
        seen.add(p.file)
        key = f"last-lines-{rid}" + (f"-{len(seen)}" if len(seen) > 1 else "")
        frame = pd.DataFrame({"Line": list(p.last_lines)})
        out.append(Table(key, f"Run {rid}: last lines of {p.file}", frame))
    return out
