"""Gather every finished run of a campaign into one tidy table (one row per run).

Reads `runs/<id>/{run.json, metrics.json}` and, with `timeline=True`, `timeline.json` and
`steps.json`; writes `results.parquet` and `results.csv` in the campaign directory. Incremental:
a cache (`.collect-cache.json`) keyed by run id and the files' sizes and mtimes means only new or
changed runs are read again (a run collected with its timeline also serves a later collect
without --timeline, timeline columns included). A run whose files are missing or corrupt is
reported with the reason and the others go on. Column names are the analysis contract
(`hpcscale.analysis`).

Timeline columns are per timed epoch: when `steps.json` is there the timeline is clipped to the
window from the first timed step to the last (burn-in and start-up excluded) and divided by the
number of epochs; without it the whole timeline is divided by the epochs in `metrics.json`
(start-up included). `allreduce_bytes_per_step` divides by the timed steps likewise.
Stale runs (`hpcscale.state.stale`) are left out unless `include_stale` (a `stale` column).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hpcscale.analysis import (
    EXACT_COLUMNS,
    LIST_COLUMNS,
    METRIC_COLUMNS,
    RUN_COLUMNS,
    TIMELINE_COLUMNS,
)
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.metric import ScalingMetric
from hpcscale.collect.readers.command_row import NOT_RUN as NOT_RUN_OUTPUT
from hpcscale.collect.readers.command_row import UNPARSED
from hpcscale.collect.run_row import TIMELINE_EXTRA, RunProblem, planned_row, run_row
from hpcscale.core.paths import campaign_dir
from hpcscale.core.vocab import CONTENTION_COLUMNS, QUALITY_COLUMNS, arg_columns
from hpcscale.errors import UsageError
from hpcscale.formats.atomic import atomic_write
from hpcscale.formats.outputs import LOCAL_OUT, SLURM_OUT_GLOB
from hpcscale.state.stale import stale_runs

RESULTS_PARQUET = "results.parquet"
RESULTS_CSV = "results.csv"
CACHE_FILE = ".collect-cache.json"
# Bump when a row's content changes meaning: every cached row is then read again.
COLLECTOR_VERSION = 11  # 2: model_family, program, run.json typed; 3: campaign_version
# 4: contention columns (start/end times, machines, load); 5: timeline_truncated, _coverage
# 6: train_loss, val_loss, input_images_per_s, params, sample_grids
# 7: every run field of a cell (epochs from run.json, launcher, ...) and args.<name> columns
# 8: images_per_s = images of the timed epochs / their time; waits_in_comm_s
# 9: command workloads (command, cwd; figures read from the job's output)
# 10: figure_kind; a command's `time:` metric fills epoch_time_s
# 11: comm_span_share (communication / timeline span, runs without steps.json)
INPUT_FILES = ("run.json", "metrics.json", "timeline.json", "steps.json", LOCAL_OUT)
NOT_RUN = ("no metrics.json", NOT_RUN_OUTPUT)  # a run with no results yet: unfinished

EXTRA_COLUMNS = (
    "model_family",
    "steps_per_epoch",
    "step_time_p50_ms",
    "run_dir",
    "campaign_version",
    "stale",
)
COLUMNS: tuple[str, ...] = (
    *RUN_COLUMNS,
    *METRIC_COLUMNS,
    *LIST_COLUMNS,
    *TIMELINE_COLUMNS,
    "queue_s",
    "memcpy_s",
    *EXACT_COLUMNS,
    *TIMELINE_EXTRA,
    *QUALITY_COLUMNS,
    *EXTRA_COLUMNS,
    *CONTENTION_COLUMNS,
)
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
    rows: list[dict[str, Any]]
    new: int = 0
    cached: int = 0
    unfinished: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # runs no longer in the campaign's matrix
    # run fields (run.json) of every run the campaign planned, finished or not: which cell is
    # each group's baseline does not depend on which runs happened to finish
    planned: list[dict[str, Any]] = field(default_factory=list)
    stale_included: bool = False  # stale runs are in `rows` (include_stale)

    @property
    def unreadable(self) -> list[Problem]:
        """Runs that finished but whose results cannot be read (left out of the table)."""
        return [p for p in self.problems if not p.partial]

    @cached_property
    def frame(self):  # -> pd.DataFrame
        """The tidy table of `rows` (`frame_of`), built once."""
        return frame_of(self.rows)

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
            metric=ScalingMetric.of_rows(self.rows),
        )

    @property
    def parquet(self) -> Path:
        return self.directory / RESULTS_PARQUET

    @property
    def csv(self) -> Path:
        return self.directory / RESULTS_CSV


# ------------------------------------------------------------------ one run


def _fingerprint(run_dir: Path) -> list[list[int]]:
    out = []
    for name in INPUT_FILES:
        try:
            st = (run_dir / name).stat()
            out.append([st.st_size, st.st_mtime_ns])
        except OSError:
            out.append([-1, -1])
    for path in sorted(run_dir.glob(SLURM_OUT_GLOB)):  # a command run's output (SLURM)
        st = path.stat()
        out.append([st.st_size, st.st_mtime_ns])
    return out


# ------------------------------------------------------------------ the cache


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != COLLECTOR_VERSION:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def _save_cache(path: Path, entries: dict[str, Any]) -> None:
    text = json.dumps({"version": COLLECTOR_VERSION, "entries": entries}, allow_nan=True)
    atomic_write(path, text)


# ------------------------------------------------------------------ a campaign


def run_dirs(campaign_path: Path) -> list[Path]:
    runs = campaign_path / "runs"
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if p.is_dir() and (p / "run.json").exists())


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
    stale = stale_runs(cdir, dirs)
    cache_path = cdir / CACHE_FILE
    cache = _load_cache(cache_path)
    out = Collected(cdir.name, cdir, rows=[], stale=[d.name for d in dirs if d.name in stale])
    out.stale_included = include_stale
    todo: list[tuple[Path, list[list[int]]]] = []
    fresh: dict[str, Any] = {}
    if not include_stale:  # left out, their cache entries kept for when they come back
        dirs = [d for d in dirs if d.name not in stale]
        fresh.update({rid: cache[rid] for rid in out.stale if rid in cache})
    for d in dirs:
        fp = _fingerprint(d)
        entry = cache.get(d.name)
        # Only good rows are reused: a run that failed to read is tried again every time (a
        # newer hpcscale, or a job that was still writing, may read it now).
        reusable = entry and "row" in entry and entry.get("fingerprint") == fp
        if reusable and (entry.get("timeline") or not timeline):
            fresh[d.name] = entry
            out.cached += 1
        else:
            todo.append((d, fp))
    for d, fp in _progress(todo, progress, cdir.name):
        try:
            row, notes = run_row(d, timeline)
            fresh[d.name] = {"fingerprint": fp, "timeline": timeline, "row": row, "notes": notes}
        except RunProblem as exc:
            fresh[d.name] = {"fingerprint": fp, "timeline": timeline, "error": str(exc)}
        out.new += 1
    done = _done_in_ledger(cdir)
    for d in dirs:
        entry = fresh[d.name]
        if (plan := planned_row(d)) is not None:
            out.planned.append({**plan, "run_id": d.name})
        if "row" in entry:
            out.rows.append({**entry["row"], "stale": d.name in stale})
            out.problems.extend(Problem(d.name, n, partial=True) for n in entry.get("notes", []))
        elif str(entry.get("error", "")).startswith(NOT_RUN) and d.name in done:
            why = f"{done[d.name]} in the ledger, but {entry['error'].split(':')[0]}"
            out.problems.append(Problem(d.name, why))
        elif str(entry.get("error", "")).startswith(NOT_RUN) or (
            done.ledger and d.name not in done and _is_unparsed(entry)
        ):  # a command run still running (or failed): its output is not the whole of it
            out.unfinished.append(d.name)
        else:
            out.problems.append(Problem(d.name, entry.get("error", "unknown error")))
    write_results(out)
    _save_cache(cache_path, fresh)
    return out


class _Done(dict):
    """Run id -> state of the runs the ledger says completed; `ledger`: there is one."""

    ledger = False


def _is_unparsed(entry: dict[str, Any]) -> bool:
    return str(entry.get("error", "")).startswith(UNPARSED)


def _done_in_ledger(cdir: Path) -> _Done:
    """Runs the ledger says completed (run id -> state); none when there is no ledger."""
    from hpcscale.state.ledger import LEDGER_NAME, Ledger
    from hpcscale.state.states import RunState

    done = _Done()
    if not (cdir / LEDGER_NAME).exists():
        return done
    with Ledger(cdir) as ledger:
        rows = ledger.rows()
    done.ledger = True
    done.update({r.run_id: str(r.state) for r in rows if r.state == RunState.COMPLETED})
    return done


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


def frame_of(rows: list[dict[str, Any]]):  # -> pd.DataFrame
    """Rows as a DataFrame with the contract's columns first (missing ones as NaN/None), then
    the workload arguments (`args.<name>`, None where a run has no such argument)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    cols = [c for c in COLUMNS if c not in df.columns]
    for c in cols:
        df[c] = None if c in LIST_COLUMNS else NAN
    args = list(arg_columns(df.columns))
    for c in args:
        df[c] = _one_type(df[c])
    rest = [c for c in df.columns if c not in COLUMNS and c not in args]
    return df[[*COLUMNS, *args, *rest]]


def _one_type(values):  # pd.Series -> pd.Series
    """An argument column Parquet can store: numbers (bools apart) or text as they are, a mix
    of kinds as text (`1` and `'auto'` -> '1', 'auto'); missing values stay None."""

    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    kinds = {
        "bool" if isinstance(v, bool) else "number" if isinstance(v, int | float) else "text"
        for v in values
        if not missing(v)
    }
    if len(kinds) <= 1:
        return values
    return values.map(lambda v: None if missing(v) else str(v)).astype(object)


def write_results(out: Collected) -> None:
    """`results.parquet` (native list/dict columns) and `results.csv` (those as JSON text)."""
    import io

    df = out.frame
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    atomic_write(out.parquet, buf.getvalue())
    flat = df.copy()
    for c in LIST_COLUMNS:
        flat[c] = [None if v is None else json.dumps(v) for v in flat[c]]
    atomic_write(out.csv, flat.to_csv(index=False))


def collect(campaign_dir: str | os.PathLike[str], timeline: bool, **options: bool):
    """Collect one campaign directory (`options`: collect_campaign's progress, include_stale)
    and return its tidy table. Problems, planned, unfinished and stale runs are in the
    `Collected` that `collect_campaign` returns (`.context`), not in the frame's `attrs`."""
    return collect_campaign(campaign_dir, timeline=timeline, **options).frame


def load_results(campaign: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None):
    """The table `hpcscale collect` saved for a campaign, named as the CLI takes it (a name in
    the workdir, its campaign YAML file, or a directory), with list and dict columns as plain
    Python lists and dicts."""
    import pandas as pd

    from hpcscale.core.paths import select_campaigns

    p = Path(campaign)
    if (p / RESULTS_PARQUET).exists():
        cdir = p
    elif p.suffix in (".yaml", ".yml") or p.is_file() or p.is_dir():
        (cdir,) = select_campaigns(str(campaign), workdir)
    else:
        cdir = campaign_dir(str(campaign), workdir)
    path = cdir / RESULTS_PARQUET
    if not path.exists():
        raise UsageError(f"{path}: no results yet; run `hpcscale collect {campaign}` first")
    df = pd.read_parquet(path)
    for c in LIST_COLUMNS:
        if c in df.columns:
            df[c] = [_plain(v) for v in df[c]]
    return df


def _plain(value: Any) -> Any:
    """pyarrow hands back numpy arrays and structs padded with None keys: undo both."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
