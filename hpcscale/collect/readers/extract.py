"""Figures of merit from a program's output: regular expressions over its lines, streamed.

A long job's log reaches gigabytes, so a file is read once, in large blocks, for every extractor
that reads it, and only reductions of the matches are kept (hpcscale.collect.readers.reducers).
Patterns run on RE2 (google-re2), whose time is linear in the text whatever the pattern: no
pattern can hang collect (`^(a+)+$` against "a"*40 + "!" is as quick as any). A pattern RE2
cannot run (backreferences, lookaround) is refused by `validate` (pattern_error). A match never
spans lines, and only a line's first match counts.

The job's output is read one rank at a time where the ranks' own files exist
(hpcscale.rankwrap's `ranks/<r>.out`): rank 0's by default, every rank's with `ranks: all`.
Files are confined to the run directory: a source that is a link leading out is refused.

Nothing is silent: an extractor that matched nothing, or matched text that is not a finite
number, comes back as a problem naming the metric, the pattern and the file, with the file's
last lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hpcscale.collect.readers.reducers import Acc, combine, spread
from hpcscale.model.extractors import OUTPUT, Extractor, compiled, group_of
from hpcscale.util.logtail import tail

Reduce = Literal["last", "first", "mean", "median", "min", "max", "sum", "series"]
REDUCES: tuple[str, ...] = ("last", "first", "mean", "median", "min", "max", "sum", "series")
CHUNK = 16 << 20  # bytes read at a time
MAX_LINE = 64 << 20  # a line longer than this (no newline in 64 MiB) is read in pieces
_SKIP = "count"  # what another rank's accumulator does for a rank-0 series: count only


@dataclass(frozen=True)
class Unparsed:
    """A required figure the run's output does not give: what the Data quality section shows."""

    metric: str
    pattern: str
    file: str
    reason: str
    last_lines: str | None

    def message(self) -> str:
        # the pattern as the campaign wrote it (a repr doubled its backslashes: `[\\d.]`)
        return f"{self.metric}: {self.reason} (pattern `{self.pattern}` in {self.file})"


@dataclass
class Extracted:
    """Reduced figures (`series` ones as lists), the problems met on the way, and notes for Data
    quality (a capped series, ranks that disagree, an optional figure left out)."""

    values: dict[str, float | list[float]] = field(default_factory=dict)
    unparsed: list[Unparsed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _scan(buf: bytes, plan: list[tuple[Acc, Any, int]], start: int, end: int) -> None:
    """Each extractor's first match on each line of `buf[start:end]` (whole lines), searched
    in place: a block is never copied."""
    find = buf.find
    for acc, search, grp in plan:
        add, pos = acc.add, start
        while pos < end:
            m = search(buf, pos, end)
            if m is None:
                break
            add(m.group(grp))
            nl = find(b"\n", m.end(), end)
            if nl < 0:
                break
            pos = nl + 1


def _lines(block: bytes) -> bytes:
    """`\r` ends a line too, as progress bars write it (`\r\n` is one end)."""
    if b"\r" in block:
        return block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return block


def scan_file(path: Path, extractors: Sequence[Extractor], reduces: Sequence[str]) -> list[Acc]:
    """One pass over `path` for all `extractors`, in blocks of whole lines; a line cut by a
    block's end is joined to its rest, alone. OSError propagates."""
    accs = [Acc(r) for r in reduces]
    plan = []
    for acc, ex in zip(accs, extractors, strict=True):
        rx = compiled(ex.pattern)
        plan.append((acc, rx.search, group_of(rx)))
    with open(path, "rb") as fh:
        carry = b""  # the start of a line the previous block cut
        while block := _lines(fh.read(CHUNK)):
            first = block.find(b"\n") + 1
            if first == 0:  # no line ends in this block
                carry += block
                if len(carry) >= MAX_LINE:  # a line this long is read in pieces
                    _scan(carry, plan, 0, len(carry))
                    carry = b""
                continue
            if carry:
                line = carry + block[:first]
                _scan(line, plan, 0, len(line))
            else:
                first = 0
            last = block.rfind(b"\n") + 1
            if last > first:
                _scan(block, plan, first, last)
            carry = block[last:]
        if carry:
            _scan(carry, plan, 0, len(carry))
    return accs


def refused(path: Path, root: Path | None) -> str | None:
    """Why `path` may not be read: a link (or `..`) leading outside `root`, the run directory."""
    if root is None:
        return None
    try:
        real, base = path.resolve(), root.resolve()
    except (OSError, RuntimeError) as exc:
        return f"cannot be resolved: {exc}"
    if not real.is_relative_to(base):
        return f"refused: a link leading outside the run directory (to {real})"
    return None


def _read(
    path: Path | None, exs: Sequence[Extractor], reduces: Sequence[str], root: Path | None
) -> tuple[list[Acc] | None, str | None]:
    """The file's accumulators, or why it cannot be read."""
    if path is None:
        return None, "file missing"
    if why := refused(path, root):
        return None, why
    if not path.is_file():
        return None, "file missing"
    try:
        return scan_file(path, exs, reduces), None
    except OSError as exc:
        return None, f"unreadable: {exc}"


def _problem(out: Extracted, ex: Extractor, file: Path | str, why: str, lines: bool) -> None:
    """A required figure's problem (the run is unparsed), an optional one's note."""
    if ex.required:
        last = tail(file, lines=10) if lines else None
        out.unparsed.append(Unparsed(ex.name, ex.pattern, str(file), why, last))
    else:
        out.notes.append(f"{ex.name} (optional): {why} in {file}")


def _outcome(acc: Acc) -> tuple[Any, str | None, str | None]:
    """(value, why none, note) of one file's matches."""
    if acc.bad is not None:
        return None, acc.bad, None
    value, why, note = acc.result()
    if value is None and why is None:
        why = "no line matches"
    return value, why, note


def _finish(out: Extracted, ex: Extractor, acc: Acc, path: Path) -> None:
    value, why, note = _outcome(acc)
    if why is not None:
        _problem(out, ex, path, why, lines=True)
        return
    out.values[ex.name] = value
    if note:
        out.notes.append(f"{ex.name}: {note}")


def extract(
    sources: dict[str, Path],
    extractors: Sequence[Extractor],
    *,
    rank_files: dict[int, Path] | None = None,
    root: Path | None = None,
    tolerance: float | None = None,
) -> Extracted:
    """Read each source file once for all the extractors that name it. `sources` maps a
    source name (`output`, or a path relative to the run directory) to its file; `rank_files`
    are the ranks' own outputs (rank -> file), read for `output` when given; every file must
    stay inside `root`. Ranks whose values differ by more than `tolerance` are noted."""
    out = Extracted()
    by_source: dict[str, list[Extractor]] = {}
    for ex in extractors:
        by_source.setdefault(ex.source, []).append(ex)
    for source, exs in by_source.items():
        if source == OUTPUT and rank_files:
            _extract_ranks(out, rank_files, exs, root, tolerance)
            continue
        path = sources.get(source)
        accs, why = _read(path, exs, [e.reduce for e in exs], root)
        if accs is None:
            for ex in exs:
                _problem(out, ex, path or source, why or "file missing", lines=False)
            continue
        assert path is not None
        for ex, acc in zip(exs, accs, strict=True):
            _finish(out, ex, acc, path)
        if source == OUTPUT and any(e.all_ranks for e in exs):
            out.notes.append(
                "no per-rank output (ranks/): `ranks: all` read every rank's lines together"
            )
    return out


def _extract_ranks(
    out: Extracted,
    files: dict[int, Path],
    exs: Sequence[Extractor],
    root: Path | None,
    tolerance: float | None,
) -> None:
    """`output` extractors over the ranks' own files: each file read once."""
    every = tolerance is not None or any(e.all_ranks for e in exs)
    read: dict[int, tuple[list[Acc] | None, str | None]] = {}
    for rank in sorted({*files, 0}) if every else [0]:
        reduces = [e.reduce if rank == 0 or e.all_ranks or e.reduce != "series" else _SKIP
                   for e in exs]  # fmt: skip
        read[rank] = _read(files.get(rank), exs, reduces, root)
    for i, ex in enumerate(exs):
        per: dict[int, Any] = {}
        failed: dict[int, str] = {}
        for rank, (accs, why) in read.items():
            if accs is None:
                failed[rank] = why or "file missing"
                continue
            value, why, note = _outcome(accs[i])
            if why is not None:
                failed[rank] = why
            else:
                per[rank] = value
                if note and (rank == 0 or ex.all_ranks):
                    out.notes.append(f"{ex.name} (rank {rank}): {note}")
        if not ex.all_ranks:
            if 0 in failed:
                _problem(out, ex, _file(files, 0), failed[0], lines=read[0][0] is not None)
            else:
                out.values[ex.name] = per[0]
        elif failed:
            first = min(failed)
            where = ", ".join(map(str, sorted(failed)[:5])) + (" ..." if len(failed) > 5 else "")
            why = f"rank{'s' if len(failed) > 1 else ''} {where}: {failed[first]}"
            _problem(out, ex, _file(files, first), why, lines=read[first][0] is not None)
        else:
            out.values[ex.name] = combine([per[r] for r in sorted(per)], ex.across)
        if tolerance is not None and ex.reduce != "series":
            _disagree(out, ex, {r: float(v) for r, v in per.items()}, tolerance)


def _file(files: dict[int, Path], rank: int) -> Path:
    return files.get(rank, Path("ranks") / f"{rank}.out")


def _disagree(out: Extracted, ex: Extractor, per: dict[int, float], tolerance: float) -> None:
    if len(per) < 2 or (gap := spread(list(per.values()))) <= tolerance:
        return
    lo = min(per, key=per.__getitem__)
    hi = max(per, key=per.__getitem__)
    out.notes.append(
        f"{ex.name}: ranks disagree by {gap:.1%} (rank {lo}: {per[lo]:g}, rank {hi}: "
        f"{per[hi]:g}; rank_tolerance {tolerance:.0%})"
    )
