"""Gather every run of a campaign into one tidy table (one row per run).

Reads `runs/<id>/{run.json, metrics.json}` and, with `timeline=True`, `timeline.json` and
`steps.json`; writes `results.parquet` and `results.csv` in the campaign directory. Incremental:
a cache (`.collect-cache.json`) keyed by run id and the files' sizes and mtimes means only new or
changed runs are read again (a run collected with its timeline also serves a later collect
without --timeline, timeline columns included). Column names are the analysis contract
(`hpcscale.analysis`).

Only a run whose last known state is COMPLETED is a measurement (hpcscale.state.run_state: the
ledger, else the run's own exit record): any other run's row is kept in the files with its
`state`, and left out of `Collected.rows`, the frame and every analysis (`not_completed`, with
its state and reason). One bad run never blocks the others: any exception while reading one
run's files (stat, ledger, row, a value Parquet cannot store) makes it unreadable, named with
the reason, and the others are collected.

Timeline columns are per timed epoch: when `steps.json` is there the timeline is clipped to the
window from the first timed step to the last (burn-in and start-up excluded) and divided by the
number of epochs; without it the whole timeline is divided by the epochs the run reports having
run (none known: per-run totals and the span share only). `allreduce_bytes_per_step` divides by
the timed steps likewise. Stale runs (`hpcscale.state.stale`) are left out unless
`include_stale` (a `stale` column).
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import hashlib
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hpcscale.analysis.context import TableContext
from hpcscale.collect import table as table_module
from hpcscale.collect.readers.command_row import NOT_RUN as NOT_RUN_OUTPUT
from hpcscale.collect.readers.command_row import declared_metric
from hpcscale.collect.run_row import RunProblem, planned_row, run_row
from hpcscale.collect.table import (  # noqa: F401  (the table's names, re-exported)
    COLUMNS,
    RESULTS_CSV,
    RESULTS_PARQUET,
    frame_of,
    load_results,
    unstorable,
    unwritable,
    write_table,
)
from hpcscale.formats.atomic import atomic_write
from hpcscale.formats.exit_record import EXIT_NAME
from hpcscale.formats.outputs import output_globs
from hpcscale.model.errors import UsageError
from hpcscale.model.scaling_metric import ScalingMetric
from hpcscale.state.run_state import KnownState, run_states, states_without_ledger
from hpcscale.state.stale import stale_runs
from hpcscale.state.states import RunState

CACHE_FILE = ".collect-cache.json"
# Bump when a row's content changes meaning: every cached row is then read again.
COLLECTOR_VERSION = 17  # 2: model_family, program, run.json typed; 3: campaign_version
# 4: contention columns (start/end times, machines, load); 5: timeline_truncated, _coverage
# 6: train_loss, val_loss, input_images_per_s, params, sample_grids
# 7: every run field of a cell (epochs from run.json, launcher, ...) and args.<name> columns
# 8: images_per_s = images of the timed epochs / their time; waits_in_comm_s
# 9: command workloads (command, cwd; figures read from the job's output)
# 10: figure_kind; a command's `time:` metric fills epoch_time_s
# 11: comm_span_share (communication / timeline span, runs without steps.json)
# 12: `state`; a command's timeline divided by the epochs and steps it ran (none known: NaN);
#     a command's start/end times, host and load from its exit record
# 13: `interpreter` (workload.interpreter: as-written), a cell field
# 14: a command's `strategy` is empty (not run.json's default strategy) unless its launcher
#     implies one (Launcher.implies_strategy)
# 15: `trace_source` (which trace the timeline columns came from); PyTorch profiler traces
# 16: traced_steps and the per-traced-step split (a profiler trace's window)
# 17: a command's figure only under its own name (no copy into images_per_s / epoch_time_s);
#     `framework`; a command's row without framework knobs it left at their defaults
INPUT_FILES = ("run.json", "metrics.json", "timeline.json", "steps.json", EXIT_NAME)
TRACES_DIR = "traces"  # per-rank traces (hpcscale.collect.traces.torch)
NOT_RUN = ("no metrics.json", NOT_RUN_OUTPUT)  # a run with no results yet: unfinished
NAN = float("nan")


@dataclass
class Problem:
    run_id: str
    reason: str
    partial: bool = False  # the row is in the table, without what the reason names


@dataclass
class Collected:
    campaign: str
    directory: Path
    rows: list[dict[str, Any]]  # the measured runs (COMPLETED): what every analysis reads
    new: int = 0
    cached: int = 0
    unfinished: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # runs no longer in the campaign's matrix
    # run fields (run.json) of every run the campaign planned, finished or not: which cell is
    # each group's baseline does not depend on which runs happened to finish
    planned: list[dict[str, Any]] = field(default_factory=list)
    stale_included: bool = False  # stale runs are in `rows` (include_stale)
    # (run id, state, reason) of runs whose last known state is not COMPLETED: not measured
    not_completed: list[tuple[str, str, str]] = field(default_factory=list)
    # their rows (with `state`): kept in results.parquet and .csv, never in `rows`
    unmeasured_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unreadable(self) -> list[Problem]:
        """Runs that finished but whose results cannot be read (left out of the table)."""
        return [p for p in self.problems if not p.partial]

    @cached_property
    def frame(self):  # -> pd.DataFrame
        """The tidy table of the measured `rows` (`frame_of`), built once."""
        return frame_of(self.rows)

    @cached_property
    def metric(self) -> ScalingMetric:
        """What the throughput (or time) column holds: as the rows say, else as the campaign
        file declares (a command whose every run is unparsed still names its own metric)."""
        metric = ScalingMetric.of_rows(self.rows)
        if metric.command:
            return metric
        return declared_metric(self.directory / "campaign.yaml") or metric

    @property
    def context(self) -> TableContext:
        """What travels beside the table (planned, problems, unfinished, stale runs), for the
        report and compare: typed, never in the frame's `attrs` (see analysis.context)."""
        return TableContext.of(
            planned=self.planned,
            problems=[(p.run_id, p.reason) for p in self.problems],
            unreadable=[(p.run_id, p.reason) for p in self.unreadable],
            unfinished=self.unfinished,
            stale=self.stale,
            stale_included=self.stale_included,
            metric=self.metric,
            not_completed=self.not_completed,
        )

    @property
    def parquet(self) -> Path:
        return self.directory / RESULTS_PARQUET

    @property
    def csv(self) -> Path:
        return self.directory / RESULTS_CSV

    def left_out(self) -> str | None:
        """collect's one line on the runs it did not measure, and why (None: none)."""
        if not self.not_completed:
            return None
        by: dict[str, list[str]] = {}
        for rid, state, _why in self.not_completed:
            by.setdefault(state, []).append(rid)
        counts = ", ".join(f"{len(ids)} {state}" for state, ids in sorted(by.items()))
        first = "; ".join(f"{rid} {state}: {why}" for rid, state, why in self.not_completed[:3])
        more = f"; and {len(self.not_completed) - 3} more" if len(self.not_completed) > 3 else ""
        n = len(self.not_completed)
        return (
            f"{n} run{'s' if n != 1 else ''} left out, not completed so not measured "
            f"({counts}): {first}{more}".replace("\n", " ")
        )


# ------------------------------------------------------------------ one run


def _fingerprint(run_dir: Path) -> list[list[int]]:
    """Sizes and mtimes of the run's input files (-1 for one missing or unreadable). Stats
    only: a cached report of 1,000 unchanged runs spends its collect here (#28)."""
    out = []
    base = str(run_dir)
    for path in [*(os.path.join(base, name) for name in INPUT_FILES), *_outputs(run_dir)]:
        try:
            st = os.stat(path)
            out.append([st.st_size, st.st_mtime_ns])
        except (OSError, ValueError):  # missing, a dangling link, a name the OS refuses
            out.append([-1, -1])
    for path in _traces(base):  # named too: a .tmp renamed keeps its size and time
        try:
            st = os.stat(path)
            out.append([st.st_size, st.st_mtime_ns, zlib.crc32(os.fsencode(path))])
        except (OSError, ValueError):
            out.append([-1, -1, zlib.crc32(os.fsencode(path))])
    return out


def _traces(base: str) -> list[str]:
    """Per-rank trace files (PyTorch profiler: traces/rank<r>.json[.gz], a .tmp while being
    written): a trace that appears or changes makes the run be read again."""
    where = os.path.join(base, TRACES_DIR)
    try:
        return [os.path.join(where, n) for n in sorted(os.listdir(where))]
    except OSError:  # none (most runs), or unreadable: nothing to watch
        return []


def _outputs(run_dir: Path) -> list[str]:
    """`formats.outputs.all_outputs` as strings, from one listing of the directory instead of
    a pathlib glob per scheduler: the same names in the same order (a literal pattern counts
    when it exists, links followed; a wildcard matches every entry, as pathlib's glob does)."""
    names: list[str] | None = None
    found: list[str] = []
    for literal, match in _output_patterns():
        if match is None:
            if os.path.exists(os.path.join(run_dir, literal)):
                found.append(literal)
            continue
        if names is None:
            try:
                names = os.listdir(run_dir)
            except OSError:  # unlistable, gone: pathlib's glob yields nothing then
                names = []
        found.extend(n for n in names if match(n))
    # all_outputs sorts Paths: by their parts, which for names in one directory is by name
    return [os.path.join(run_dir, n) for n in sorted(found)]


@functools.cache
def _output_patterns() -> tuple[tuple[str, Callable[[str], Any] | None], ...]:
    """Each scheduler's output pattern: (the literal name, None) or (the pattern, its match)."""
    out = []
    for pattern in output_globs().values():
        if glob.has_magic(pattern):
            out.append((pattern, re.compile(fnmatch.translate(pattern)).fullmatch))
        else:
            out.append((pattern, None))
    return tuple(out)


def _read_one(d: Path, timeline: bool, fp: list[list[int]]) -> dict[str, Any]:
    """One run's cache entry: its row, notes and planned fields (when they survive the cache's
    JSON as they are), or the error that stops it (any exception: one bad run never stops the
    others)."""
    try:
        row, notes = run_row(d, timeline)
        if (why := unstorable(row)) is not None:
            return {"fingerprint": fp, "timeline": timeline, "error": why}
        entry = {"fingerprint": fp, "timeline": timeline, "row": row, "notes": notes}
        if _json_exact(plan := _planned(d)):
            entry["planned"] = plan
        return entry
    except RunProblem as exc:
        return {"fingerprint": fp, "timeline": timeline, "error": str(exc)}
    except Exception as exc:  # whatever a damaged file raised
        return {"fingerprint": fp, "timeline": timeline, "error": _crash(exc)}


def _crash(exc: BaseException) -> str:
    text = str(exc)[:200] or "no message"
    return f"unreadable: {type(exc).__name__} while reading its files: {text}"


def _planned(d: Path) -> dict[str, Any] | None:
    try:
        plan = planned_row(d)
    except Exception:  # its row, or its error, says what is wrong
        return None
    return plan if plan is None or unstorable(plan) is None else None


def _json_exact(value: Any) -> bool:
    """Whether `value` reads back from JSON as it is: the same types (no tuple, enum or int
    key turned into another), the same values (NaN apart: it is not cached)."""
    try:
        back = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return False
    return _same(value, back)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# ------------------------------------------------------------------ the cache


def _load_cache(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cache's entries by run id, and what it says of the results files last written
    (their key and stats: `_results_current`)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, {}
    if not isinstance(data, dict) or data.get("version") != COLLECTOR_VERSION:
        return {}, {}
    entries = data.get("entries")
    results = data.get("results")
    return (
        entries if isinstance(entries, dict) else {},
        results if isinstance(results, dict) else {},
    )


def _save_cache(path: Path, entries: dict[str, Any], results: dict[str, Any]) -> None:
    data = {"version": COLLECTOR_VERSION, "entries": entries, "results": results}
    atomic_write(path, json.dumps(data, allow_nan=True))


def _results_key(placed: list[list[Any]]) -> str:
    """What the results files are a function of: each row's run, the files it was read from
    (its entry's fingerprint and timeline), its stale flag and state, in the order written,
    and the code that writes them (COLLECTOR_VERSION, collect/table.py and the columns it
    writes: a column added rewrites them)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{COLLECTOR_VERSION}\0".encode())
    h.update(Path(table_module.__file__).read_bytes())
    h.update(json.dumps([table_module.COLUMNS, table_module.LIST_COLUMNS]).encode())
    h.update(json.dumps(placed).encode())
    return h.hexdigest()


def _file_stats(*paths: Path) -> list[list[int]] | None:
    """Size, mtime and inode of each file (None when one is missing)."""
    try:
        return [[(st := os.stat(p)).st_size, st.st_mtime_ns, st.st_ino] for p in paths]
    except (OSError, ValueError):
        return None


def _results_current(out: Collected, key: str, last: dict[str, Any]) -> bool:
    """Whether results.parquet and .csv are the ones written last from the same `key`,
    untouched since (a cached collect of unchanged runs need not write them again)."""
    stats = _file_stats(out.parquet, out.csv)
    return stats is not None and last.get("key") == key and last.get("files") == stats


# ------------------------------------------------------------------ a campaign


def run_dirs(campaign_path: Path) -> list[Path]:
    runs = campaign_path / "runs"
    if not runs.is_dir():
        return []
    with os.scandir(runs) as it:  # Path.iterdir's entries, without a Path made for each
        names = [
            e.name for e in it if e.is_dir() and os.path.exists(os.path.join(e.path, "run.json"))
        ]
    return [runs / name for name in sorted(names)]


def _states(cdir: Path, dirs: list[Path]) -> tuple[dict[str, KnownState], str | None]:
    """Each run's last known state; a ledger that cannot be read at all leaves every run to its
    exit record (and says why)."""
    try:
        return run_states(cdir, dirs), None
    except Exception as exc:  # a ledger the rebuild could not save either
        return states_without_ledger(dirs), f"ledger unreadable ({type(exc).__name__}: {exc})"


def collect_campaign(
    campaign_path: str | os.PathLike[str],
    timeline: bool = False,
    progress: bool = True,
    include_stale: bool = False,
) -> Collected:
    """Collect one campaign directory into its results files (atomically); see the module."""
    cdir = Path(campaign_path)
    if not cdir.is_dir():
        raise UsageError(f"{cdir}: no such campaign directory")
    dirs = run_dirs(cdir)
    try:
        stale = stale_runs(cdir, dirs)
    except Exception:  # no ledger to tell: the run.json versions only
        stale = set()
    cache_path = cdir / CACHE_FILE
    cache, last_results = _load_cache(cache_path)
    out = Collected(cdir.name, cdir, rows=[], stale=[d.name for d in dirs if d.name in stale])
    out.stale_included = include_stale
    todo: list[tuple[Path, list[list[int]]]] = []
    fresh: dict[str, Any] = {}
    if not include_stale:  # left out, their cache entries kept for when they come back
        dirs = [d for d in dirs if d.name not in stale]
        fresh.update({rid: cache[rid] for rid in out.stale if rid in cache})
    for d in dirs:
        try:
            fp = _fingerprint(d)
        except Exception as exc:  # a directory that cannot even be listed
            fresh[d.name] = {"fingerprint": None, "timeline": timeline, "error": _crash(exc)}
            continue
        entry = cache.get(d.name)
        # Only good rows are reused: a run that failed to read is tried again every time (a
        # newer hpcscale, or a job that was still writing, may read it now).
        reusable = isinstance(entry, dict) and "row" in entry and entry.get("fingerprint") == fp
        if reusable and (entry.get("timeline") or not timeline):
            fresh[d.name] = entry
            out.cached += 1
        else:
            todo.append((d, fp))
    for d, fp in _progress(todo, progress, cdir.name):
        fresh[d.name] = _read_one(d, timeline, fp)
        out.new += 1
    states, ledger_problem = _states(cdir, dirs)
    measured: list[list[Any]] = []
    unmeasured: list[list[Any]] = []
    for d in dirs:
        entry, known = fresh[d.name], states[d.name]
        if "row" in entry and "planned" not in entry and _json_exact(plan := _planned(d)):
            fresh[d.name] = entry = {**entry, "planned": plan}  # an older entry: saved with it
        if _place(out, d, entry, known, d.name in stale):
            # what the run's row in the results is made of (`_results_key`)
            part = [d.name, entry.get("fingerprint"), bool(entry.get("timeline"))]
            (measured if known.measured else unmeasured).append(
                [*part, d.name in stale, str(known.state)]
            )
    if ledger_problem:
        out.problems.append(Problem("(ledger)", ledger_problem, partial=True))
    key = _results_key([*measured, *unmeasured])
    results = last_results
    if not _results_current(out, key, last_results):
        # a table written whole records its key: one that dropped rows Parquet refused does not
        whole = write_results(out)
        files = _file_stats(out.parquet, out.csv)
        results = {"key": key, "files": files} if whole and files is not None else {}
    if fresh != cache or results != last_results:
        _save_cache(cache_path, fresh, results)
    return out


def _place(out: Collected, d: Path, entry: dict[str, Any], known: KnownState, stale: bool) -> bool:
    """One run into `out`: a measured row, a row kept but not measured, unfinished, or a
    problem; whether it has a row. Its planned fields come from its entry when it holds them
    (read from the same run.json: the entry's fingerprint says so)."""
    rid = d.name
    plan = entry["planned"] if "row" in entry and "planned" in entry else _planned(d)
    if plan is not None:
        out.planned.append({**plan, "run_id": rid})
    state = known.state
    ended_badly = state.terminal and not known.measured
    if "row" in entry:
        row = {**entry["row"], "stale": stale, "state": str(state)}
        if known.measured:
            out.rows.append(row)
            out.problems.extend(Problem(rid, n, partial=True) for n in entry.get("notes", []))
        else:
            out.unmeasured_rows.append(row)
            out.not_completed.append((rid, str(state), known.reason))
        return True
    error = str(entry.get("error", "unknown error"))
    if ended_badly:  # a failed run's results are not there, or not whole: its failure says why
        out.not_completed.append((rid, str(state), known.reason))
    elif error.startswith(NOT_RUN) and known.measured:
        by = "in the ledger" if known.source == "ledger" else f"by its {known.source}"
        why = f"{state} {by}, but {error.split(':')[0]}"
        out.problems.append(Problem(rid, why))
    elif (
        state.active
        or state is RunState.RENDERED
        or (error.startswith(NOT_RUN) and state is RunState.UNKNOWN)
    ):  # still to run or running: its output is not the whole of it
        out.unfinished.append(rid)
    else:
        out.problems.append(Problem(rid, error))
    return False


def _progress(items: list[Any], enabled: bool, label: str) -> Iterable[Any]:
    if not enabled or not items:
        yield from items
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(f"collecting {label}", total=len(items))
        for item in items:
            yield item
            bar.advance(task)


def write_results(out: Collected) -> bool:
    """`results.parquet` and `results.csv`: every run read, measured or not (its `state`). A
    row Parquet refuses makes its run unreadable; the others are written. Whether every row
    was written."""
    rows = [*out.rows, *out.unmeasured_rows]
    try:
        df = frame_of(rows)
        write_table(df, out.parquet, out.csv)
        return True
    except Exception:  # find the rows that stop it, write the rest
        bad = unwritable(rows)
    ids = {str(rows[i].get("run_id")): why for i, why in bad.items()}
    out.rows = [r for r in out.rows if str(r.get("run_id")) not in ids]
    out.unmeasured_rows = [r for r in out.unmeasured_rows if str(r.get("run_id")) not in ids]
    out.not_completed = [t for t in out.not_completed if t[0] not in ids]
    out.problems = [p for p in out.problems if p.run_id not in ids]
    out.problems += [Problem(rid, why) for rid, why in ids.items()]
    out.__dict__.pop("frame", None)
    write_table(frame_of([*out.rows, *out.unmeasured_rows]), out.parquet, out.csv)
    return False


def collect(campaign_dir: str | os.PathLike[str], timeline: bool, **options: bool):
    """Collect one campaign directory (`options`: collect_campaign's progress, include_stale)
    and return its tidy table of measured runs. Problems, planned, unfinished, not completed
    and stale runs are in the `Collected` that `collect_campaign` returns (`.context`), not in
    the frame's `attrs`."""
    return collect_campaign(campaign_dir, timeline=timeline, **options).frame
