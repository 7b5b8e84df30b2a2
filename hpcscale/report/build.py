"""Campaign directories in, report files out: index.md (+ figures/), index.html (figures
embedded), and the tidy tables as CSV / Parquet under data/.

Everything is computed and rendered in memory first; files are then written atomically, so a
failure part-way leaves the previous report intact rather than half of a new one."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcscale.analysis.quality import without_partial_timelines
from hpcscale.formats.atomic import atomic_write
from hpcscale.formats.run_record import VERSIONS_DIR
from hpcscale.model.errors import HpcscaleError, UsageError
from hpcscale.report import html, markdown, provenance
from hpcscale.report.data import (
    CampaignSource,
    campaign_source,
    collected_runs,
    table_and_context,
)
from hpcscale.report.export import ParquetUnavailable, csv_bytes, parquet_bytes
from hpcscale.report.failures import any_failed, failures_report, unfinished_runs
from hpcscale.report.figures.render import figure_pngs
from hpcscale.report.figures.reuse import reusing
from hpcscale.report.fmt import shared_display
from hpcscale.report.model import CampaignReport, Section, Table
from hpcscale.report.sections import campaign_report
from hpcscale.report.sections.scaling import system_max_nodes
from hpcscale.report.sections.unparsed import reason_line
from hpcscale.util.reportdir import MARKER_TEXT, REPORT_MARKER

if TYPE_CHECKING:
    from hpcscale.collect.collector import Collected

FORMATS: tuple[str, ...] = ("md", "html", "csv", "parquet")
DEFAULT_FORMATS: tuple[str, ...] = ("md", "html")


@dataclass
class BuildResult:
    paths: list[Path]
    reports: list[CampaignReport]
    problems: list[str] = field(default_factory=list)  # formats that could not be written
    empty: list[str] = field(default_factory=list)  # campaigns with no finished run
    failed: list[str] = field(default_factory=list)  # none finished, some failed: why, reported


def build_report(
    campaign_dirs: Sequence[Path], out_dir: Path, formats: Sequence[str] = DEFAULT_FORMATS
) -> list[Path]:
    """Write the report; the paths written. Raises HpcscaleError naming any format that could
    not be written (the others are written first)."""
    result = build(campaign_dirs, out_dir, formats)
    if result.problems:
        raise HpcscaleError("; ".join(result.problems))
    return result.paths


def build(
    campaign_dirs: Sequence[Path],
    out_dir: Path,
    formats: Sequence[str] = DEFAULT_FORMATS,
    sources: Mapping[Path, CampaignSource] | None = None,
    load: Callable[[CampaignSource], Collected | pd.DataFrame] | None = None,
    include_stale: bool = False,
    targets: Sequence[Any] = (),
    include_partial_timelines: bool = False,
) -> BuildResult:
    """`sources` overrides the campaign file read from a directory (a YAML the user named);
    `targets` (analysis.targets.TargetSpec, from `report --target`) replace its `targets:`;
    `load` gives a campaign's runs: a collector result (its table and what travels beside it,
    default: the collector, collecting new runs first, runs no longer in the campaign's matrix
    left out unless `include_stale`) or a plain run table. Truncated
    timelines' per-epoch figures are left out unless `include_partial_timelines`."""
    load = load or partial(collected_runs, include_stale=include_stale)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise UsageError(f"unknown report format(s) {', '.join(unknown)}; use {', '.join(FORMATS)}")
    formats = list(dict.fromkeys(formats or DEFAULT_FORMATS))
    reports, empty, failed = [], [], []
    kept: list[Any] = []  # the figures' reuse (reuse._Previous): saved once files are written
    for cdir in campaign_dirs:
        src = (sources or {}).get(cdir) or campaign_source(cdir)
        runs, ctx = table_and_context(load(src))
        if runs.empty:
            ended = unfinished_runs(src.dir, include_stale)
            if any_failed(ended) or ctx.unreadable:  # say why instead (failed, or unparsed)
                prov = provenance_section(src)
                reports.append(failures_report(src.name, src.description, ended, prov,
                                               ctx.unreadable, src.dir))  # fmt: skip
                failed.append(src.name)
            else:
                empty.append(src.name)
            continue
        runs = without_partial_timelines(runs, include_partial_timelines)
        ctx = replace(ctx, include_partial=include_partial_timelines)
        stale = list(ctx.stale)
        with reusing(out_dir / "figures") as previous:  # a figure drawn before from its inputs
            rep = campaign_report(
                runs,
                src.name,
                src.description,
                src.references,
                provenance_section(src, set() if ctx.stale_included else set(stale)),
                targets=list(targets) or src.targets,
                max_nodes=system_max_nodes(src.system, src.dir),
                context=ctx,
            )
        if stale:
            rep.notes.append(stale_note(stale, ctx.stale_included))
        unfinished = list(ctx.unfinished)
        if unfinished:
            rep.notes.append(f"{len(unfinished)} run(s) not finished yet: {', '.join(unfinished)}")
        rep.notes += [f"run {rid}: {reason_line(reason)}" for rid, reason in ctx.problems]
        reports.append(rep)
        kept.append(previous)
    if not reports:
        names = ", ".join(empty) or "none"
        raise HpcscaleError(
            f"no finished runs to report on (campaigns: {names}); see `hpcscale status`"
        )
    result = write(reports, out_dir, formats, empty)
    result.failed = failed
    for previous in kept:  # the first report's figures directory is there now
        previous.save()
    return result


def write(
    reports: Sequence[CampaignReport],
    out_dir: Path,
    formats: Sequence[str],
    empty: Sequence[str] = (),
    stamp: str | None = None,
) -> BuildResult:
    stamp = stamp or dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    title = (
        f"Scaling report: {reports[0].name}"
        if len(reports) == 1
        else f"Scaling report: {len(reports)} campaigns"
    )
    plots = []
    for rep in reports:
        if empty:
            rep.notes.append("campaigns with no finished run: " + ", ".join(empty))
        for sec in rep.sections:
            for plot in sec.plots:
                plot.file = f"figures/{rep.name}-{plot.key}.png"
                plots.append(plot)
    if {"md", "html"} & set(formats):  # only they show figures
        # a figure drawn from the same content as the file it replaces is not drawn again
        pngs = figure_pngs([p.figure for p in plots], [out_dir / p.file for p in plots])
        for plot, png in zip(plots, pngs, strict=True):
            plot.png = png
    files: dict[Path, bytes] = {}
    problems: list[str] = []
    with shared_display():  # Markdown and HTML show the same tables: formatted once
        files.update(_documents(reports, out_dir, formats, title, stamp))
    for rep in reports:
        frames = data_frames(rep)
        if "csv" in formats:
            for key, frame in frames.items():
                files[out_dir / "data" / f"{rep.name}-{key}.csv"] = csv_bytes(frame)
        if "parquet" in formats:
            try:
                for key in ("runs", "cells"):
                    files[out_dir / "data" / f"{rep.name}-{key}.parquet"] = parquet_bytes(
                        frames[key]
                    )
            except ParquetUnavailable as exc:
                problems.append(f"parquet not written: {exc}")
    for path, data in files.items():
        atomic_write(path, data)
    atomic_write(out_dir / REPORT_MARKER, MARKER_TEXT)  # `report --out` may overwrite it again
    return BuildResult(list(files), list(reports), problems, list(empty))


def _documents(
    reports: Sequence[CampaignReport], out_dir: Path, formats: Sequence[str], title: str, stamp: str
) -> dict[Path, bytes]:
    """index.md with its figures' files, and index.html, as `formats` ask."""
    files: dict[Path, bytes] = {}
    if "md" in formats:
        files[out_dir / "index.md"] = markdown.render(reports, title, stamp).encode("utf-8")
        for rep in reports:
            for sec in rep.sections:
                for plot in sec.plots:
                    files[out_dir / plot.file] = plot.png
    if "html" in formats:
        files[out_dir / "index.html"] = html.render(reports, title, stamp).encode("utf-8")
    return files


def data_frames(rep: CampaignReport) -> dict[str, pd.DataFrame]:
    """The tidy run table, the derived cells, and every table shown, by file key."""
    frames = {"runs": rep.runs, "cells": rep.cells}
    for sec in rep.sections:
        for tab in sec.tables:
            frames.setdefault(tab.key, tab.frame)
    return frames


def stale_note(stale: Sequence[str], included: bool, shown: int = 10) -> str:
    """What the report says of runs no longer in the campaign's matrix."""
    more = len(stale) - shown
    ids = ", ".join(stale[:shown]) + (f", … ({more} more)" if more > 0 else "")
    what = f"{len(stale)} stale run(s), no longer in the campaign's matrix (an earlier version"
    if included:
        return f"{what} of the campaign file), included (--include-stale): {ids}"
    return f"{what} of the campaign file), left out (--include-stale includes them): {ids}"


def provenance_section(src: CampaignSource, left_out: set[str] | None = None) -> Section | None:
    """Software, environment and system of the runs reported on (`left_out`: stale runs), and
    the versions of the campaign file that rendered them."""
    runs = [r for r in provenance.read_runs(src.dir) if r[0].get("run_id") not in (left_out or ())]
    system = src.system or next((r.get("system") for r, _ in runs if r.get("system")), None)
    tabs = [
        Table("software", "Software and MPI", provenance.software_table(runs)),
        Table(
            "environment", "Environment knobs (as the jobs saw them)", provenance.knobs_table(runs)
        ),
    ]
    sys_table, note = provenance.system_table(system, src.dir)
    tabs.append(Table("system", f"System profile: {system or 'unknown'}", sys_table, note))
    tabs = [t for t in tabs if not t.frame.empty]
    if not tabs:
        return None
    text = [
        f"Campaign directory: {src.dir}. Values that differ between runs are all listed, "
        "with the number of runs that had each."
    ]
    versions = Counter(r.get("campaign_version") for r, _ in runs if r.get("campaign_version"))
    if versions:
        text.append(
            f"Campaign file versions that rendered these runs (in {src.dir / VERSIONS_DIR}): "
            + ", ".join(f"{v}.yaml ({n} run(s))" for v, n in sorted(versions.items()))
            + "."
        )
    return Section("provenance", "Provenance", text, tabs)
