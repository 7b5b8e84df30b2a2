"""A command workload's run -> the same table row a bundled program's metrics.json gives.

What to read comes from the campaign version that rendered the run (`versions/<id>.yaml`, its
`workload.metrics`), so editing an extractor and collecting again re-reads every run with it.
The output is each rank's own (`ranks/<r>.out`, written by hpcscale.rankwrap, which every rank
of a command runs through), else the job's merged one: `local.out` (local backend) or
`slurm-<job>.out`. Every file read must stay inside the run directory.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from hpcscale.collect.readers.extract import Unparsed, extract, refused
from hpcscale.collect.readers.mllog import read_mllog
from hpcscale.formats.exit_record import read_exit_record
from hpcscale.formats.outputs import job_output, output_names
from hpcscale.formats.run_record import VERSIONS_DIR, RunRecord
from hpcscale.model.command import figure_of, reading_of
from hpcscale.model.extractors import ALL_RANKS, OUTPUT, Extractor
from hpcscale.model.scaling_metric import IMAGES_PER_S, ScalingMetric
from hpcscale.rankwrap import RANKS_DIR
from hpcscale.util.logtail import tail

NAN = float("nan")
NOT_RUN = "no output"  # the collector counts such a run as unfinished, as with no metrics.json
UNPARSED = "unparsed"
LAST_LINES = "last lines"
LINE_INDENT = "    "  # the output's last lines, under the problem that shows them
# Extracted names that fill the table's list columns, and series names MLLOG logs use for them.
LISTS = ("epoch_times_s", "train_accuracy", "val_accuracy", "train_loss", "val_loss")
SERIES_NAMES = {"loss": "train_loss", "accuracy": "train_accuracy", "eval_loss": "val_loss"}
RANK_TOLERANCE = 0.05  # `collect: {rank_tolerance: ...}` unless the campaign says otherwise


class CommandProblem(Exception):
    """The run's figures cannot be read (no output, or a required metric unparsed)."""


def _campaign_file(run_dir: Path, rec: RunRecord) -> Path:
    """The campaign file that rendered this run (its version), else the campaign's copy."""
    cdir = run_dir.parent.parent
    path = cdir / VERSIONS_DIR / f"{rec.campaign_version}.yaml"
    if rec.campaign_version is None or not path.is_file():
        path = cdir / "campaign.yaml"
    return path


@dataclass(frozen=True)
class _Reading:
    """What a campaign file says of reading its runs: the same for every run it rendered."""

    extractors: tuple[Extractor, ...]
    mllog: bool
    figure: str | None
    kind: str
    rank_tolerance: float = RANK_TOLERANCE


def _reading(path: Path) -> _Reading:
    """Parsed once per campaign file and version (a collect of 10,000 runs reads one or two),
    not once per run; keyed by size and mtime so an edited campaign.yaml is read again."""
    try:
        st = path.stat()
    except OSError as exc:
        raise CommandProblem(f"campaign file {path} unreadable: {exc}") from None
    return _reading_cached(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=32)
def _reading_cached(path: Path, size: int, mtime_ns: int) -> _Reading:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CommandProblem(f"campaign file {path} unreadable: {exc}") from None
    workload = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(workload, dict):
        raise CommandProblem(f"campaign file {path} has no workload")
    try:
        extractors, mllog = reading_of(workload.get("metrics"))
    except ValueError as exc:
        raise CommandProblem(f"workload.metrics: {exc}") from None
    figure, kind = figure_of(
        workload.get("metrics"), workload.get("throughput"), workload.get("time")
    )
    return _Reading(tuple(extractors), mllog, figure, kind, _tolerance(data.get("collect")))


def declared_metric(campaign_file: Path) -> ScalingMetric | None:
    """The figure a command campaign's file declares (`workload.throughput` or `time`, its
    extractor's unit): what its tables are headed with when no run gave a row to say it.
    None for a bundled program's campaign or a file that cannot be read."""
    try:
        reading = _reading(campaign_file)
    except CommandProblem:
        return None
    if reading.figure is None:
        return None
    unit = next((e.unit for e in reading.extractors if e.name == reading.figure), None)
    if unit is None:  # a preset's figure (mllog's images_per_s)
        unit = "images/s" if reading.figure == IMAGES_PER_S else ""
    return ScalingMetric(reading.figure, unit, reading.kind, command=True)


def _tolerance(collect: Any) -> float:
    """The campaign's `collect: {rank_tolerance: ...}` (validate checked it), else 5 %."""
    value = collect.get("rank_tolerance") if isinstance(collect, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return RANK_TOLERANCE


def rank_files(run_dir: Path, ranks: int) -> dict[int, Path] | None:
    """Each rank's own output (hpcscale.rankwrap), or None for a run without them (a bundled
    program, or a run rendered before the wrapper): then the job's merged output is read."""
    base = run_dir / RANKS_DIR
    if not base.is_dir():
        return None
    return {r: base / f"{r}.out" for r in range(max(ranks, 1))}


def _unparsed(u: Unparsed) -> str:
    return _with_lines(f"{UNPARSED}: {u.message()}", u.last_lines)


def _with_lines(text: str, last: str | None) -> str:
    """A problem's line, then the output's last lines indented under it: each run's block
    reads as its own (`unparsed_parts` reads them back for the report)."""
    if not last:
        return text
    return f"{text}; {LAST_LINES}:\n" + "\n".join(LINE_INDENT + ln for ln in last.splitlines())


@dataclass(frozen=True)
class UnparsedPart:
    """One required metric a run's output did not give, read back from its reason."""

    metric: str
    why: str
    pattern: str | None  # None: the metric was found, but not the throughput/time it names
    file: str
    last_lines: tuple[str, ...]


_HEAD = re.compile(
    rf"^{UNPARSED}: (?P<metric>[^:\s]+): (?P<why>.+?) \(pattern `(?P<pattern>.*)` in "
    rf"(?P<file>.+)\)(?:; {LAST_LINES}:)?$"
)
_FIGURE = re.compile(
    rf"^{UNPARSED}: (?P<metric>[^:\s]+): (?P<why>the \w+ metric, not given by the output) "
    rf"\((?P<file>.+?)\)(?:; .*)?$"
)


def unparsed_parts(reason: str) -> list[UnparsedPart]:
    """The metrics a run's reason (`read_command_run`'s CommandProblem) names as unparsed, each
    with its pattern and the last lines shown under it; [] for any other reason."""
    parts: list[UnparsedPart] = []
    lines: list[str] = []
    for line in [*reason.splitlines(), ""]:
        if line.startswith(LINE_INDENT) and parts:
            lines.append(line[len(LINE_INDENT) :])
            continue
        if parts and lines:
            parts[-1] = replace(parts[-1], last_lines=tuple(lines))
        lines = []
        if m := _HEAD.match(line):
            parts.append(UnparsedPart(m["metric"], m["why"], m["pattern"], m["file"], ()))
        elif m := _FIGURE.match(line):
            parts.append(UnparsedPart(m["metric"], m["why"], None, m["file"], ()))
    return parts


def read_command_run(run_dir: Path, rec: RunRecord) -> tuple[dict[str, Any], list[str]]:
    """The row's metric columns and notes; CommandProblem when the run cannot be read."""
    out = job_output(run_dir)
    if out is None:
        raise CommandProblem(f"{NOT_RUN}: no {output_names()} (not run yet?)")
    if why := refused(out, run_dir):
        raise CommandProblem(f"{UNPARSED}: job output {out}: {why}")
    reading = _reading(_campaign_file(run_dir, rec))
    extractors, figure, kind = list(reading.extractors), reading.figure, reading.kind
    sources = {OUTPUT: out}
    sources.update({e.source: run_dir / e.source for e in extractors if e.source != OUTPUT})
    got = extract(
        sources,
        extractors,
        rank_files=rank_files(run_dir, rec.ranks),
        root=run_dir,
        tolerance=reading.rank_tolerance,
    )
    if got.unparsed:
        raise CommandProblem("\n".join(_unparsed(u) for u in got.unparsed))
    row: dict[str, Any] = {}
    units: dict[str, str] = {}
    notes: list[str] = list(got.notes)
    if reading.mllog:
        notes += _mllog_columns(out, row, units)
    for ex in extractors:
        if ex.name in got.values:
            _put(row, units, ex, got.values[ex.name], rec.ranks)
    if figure and _missing(row.get(figure)):
        why = f"{UNPARSED}: {figure}: the {kind} metric, not given by the output ({out})"
        why += "".join(f"; {n}" for n in notes)  # the reader's own reason (MLLOG)
        raise CommandProblem(_with_lines(why, tail(out, lines=10)))
    # the figure stays under its own name: analysis keys on it (ScalingMetric), never a copy
    row["figure_metric"] = figure
    # the metric's own unit (a per-rank value's "x ranks" is said by the Command section)
    row["figure_unit"] = next(
        (e.unit for e in extractors if e.name == figure), units.get(figure or "", "")
    )
    row["figure_kind"] = kind
    row["metric_units"] = json.dumps(units, sort_keys=True)
    row["extractors"] = "mllog" if reading.mllog else ""
    row["extractors"] = "; ".join(filter(None, [row["extractors"], *map(_describe, extractors)]))
    return row, notes


def _describe(ex: Extractor) -> str:
    where = "" if ex.source == OUTPUT else f" in {ex.source}"
    scale = " x ranks" if ex.scale == "per_rank" else ""
    if ex.source == OUTPUT:
        where = f", {ex.across} across ranks" if ex.ranks == ALL_RANKS else " of rank 0"
    return f"{ex.name} = {ex.reduce} of /{ex.pattern}/{where}{scale}"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _put(row: dict[str, Any], units: dict[str, str], ex: Extractor, value: Any, ranks: int) -> None:
    """One extracted figure into its column (per-rank values x ranks, series kept as lists)."""
    factor = ranks if ex.scale == "per_rank" else 1
    value = [v * factor for v in value] if isinstance(value, list) else value * factor
    name = SERIES_NAMES.get(ex.name, ex.name) if isinstance(value, list) else ex.name
    if name == "epoch_time_s" and isinstance(value, list):
        name = "epoch_times_s"
    if name in LISTS and not isinstance(value, list):
        value = [value]
    row[name] = value
    units[name] = ex.unit + (" (per rank x ranks)" if ex.scale == "per_rank" else "")
    if name == "epoch_times_s" and "epoch_time_s" not in row:
        row["epoch_time_s"] = math.fsum(value) / len(value) if value else NAN


def _mllog_columns(out: Path, row: dict[str, Any], units: dict[str, str]) -> list[str]:
    with open(out, encoding="utf-8", errors="replace") as fh:
        log = read_mllog(fh)
    row["epoch_times_s"] = list(log.epoch_time_s)
    row["epoch_time_s"] = log.epoch_time_mean_s
    row["images_per_s"] = log.images_per_s
    row["fit_time_s"] = log.fit_time_s
    p50 = [v for v in log.step_p50_ms if not math.isnan(v)]
    if p50:
        row["step_time_p50_ms"] = sorted(p50)[len(p50) // 2]
    units.update(images_per_s="images/s", epoch_time_s="s", fit_time_s="s")
    for name, values in log.series.items():
        row[SERIES_NAMES.get(name, name)] = list(values)
    if log.block_time_s:
        row["block_times_s"] = list(log.block_time_s)
    return [*log.notes, *log.end_notes(read_exit_record(out.parent))]
