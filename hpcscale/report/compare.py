"""`compare`: two or more campaigns in one report, aligned on the scale axis they share.

The campaigns are loaded as `report` loads them (collecting new runs first), aligned and compared
by `hpcscale.analysis.compare`, laid out here as report sections (campaigns, aligned cells with
the overlay figure, differences from the first campaign, data quality) and written by
`report.build.write`: the same index.md, self-contained index.html and data/*.csv as `report`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpcscale.analysis import compare as cmp
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.intervals import note as interval_note
from hpcscale.analysis.overlap import SOURCE, sources_phrase
from hpcscale.analysis.quality import quality_flags, without_partial_timelines
from hpcscale.analysis.tables import AXIS_LABELS
from hpcscale.model.errors import UsageError
from hpcscale.model.scaling_metric import ScalingMetric
from hpcscale.model.vocab import arg_columns, term
from hpcscale.report.build import write
from hpcscale.report.data import (
    CampaignSource,
    campaign_source,
    collected_runs,
    report_inputs,
    table_and_context,
)
from hpcscale.report.figures.compare import headings, overlay
from hpcscale.report.model import CampaignReport, Section, Table, plot_if
from hpcscale.report.sections.noise import method_text
from hpcscale.report.sections.quality import NONE_TEXT, quality_section
from hpcscale.state.paths import workdir as resolve_workdir

COMM_SHARE = "Comm. share of epoch (%)"
COMM_FROM = "Comm. from"
DESCRIBED = (*cmp.MATCH_FIELDS, *cmp.WORKLOAD_FIELDS)  # named when they tell campaigns apart


@dataclass
class CompareResult:
    """What `compare` found and wrote; `passed` decides `--check`."""

    axis: str  # the shared scale axis: nodes, ranks or gpus
    campaigns: list[str]  # as named in the report, the baseline first
    directories: list[Path]
    aligned: pd.DataFrame  # analysis.compare.align: one row per (aligned row, campaign)
    differences: pd.DataFrame  # analysis.compare.differences
    regressions: list[cmp.Regression]
    tolerance: float
    report: CampaignReport
    paths: list[Path] = field(default_factory=list)
    allow_missing: bool = False  # lost cells do not fail `passed` (zero comparisons still do)
    metric: ScalingMetric = field(default_factory=ScalingMetric)  # what the throughput holds
    metrics: dict[str, ScalingMetric] = field(default_factory=dict)  # each campaign's own

    @property
    def metric_heading(self) -> str:
        """The scaling metric's heading, or each campaign's when they differ."""
        if len(set(self.metrics.values())) > 1:
            said = ", ".join(f"{n}: {m.heading}" for n, m in self.metrics.items())
            return f"Scaling metric ({said})"
        return self.metric.heading

    @property
    def baseline(self) -> str:
        return self.campaigns[0]

    @property
    def compared(self) -> int:  # metric comparisons with a verdict (not missing, not incomparable)
        return cmp.compared(self.differences)

    @property
    def passed(self) -> bool:
        """No regression, something compared, and no lost cell unless `allow_missing`."""
        gaps = bool(self.lost) and not self.allow_missing
        return not (self.regressions or gaps) and self.compared > 0

    @property
    def missing(self) -> list[str]:
        """Cells with a value on one side only (analysis.compare.missing_cells)."""
        return cmp.missing_cells(self.differences, self.baseline)

    @property
    def lost(self) -> list[str]:
        """Baseline cells a later campaign lacks (a failed run is no "no regression")."""
        return cmp.missing_cells(self.differences, self.baseline, lost_only=True)


def compare_campaigns(
    campaigns: Sequence[str],
    workdir: str | Path | None = None,
    *,
    on: str | None = None,
    out: str | Path | None = None,
    tolerance: float = cmp.DEFAULT_TOLERANCE,
    include_stale: bool = False,
    allow_missing: bool = False,
) -> CompareResult:
    """Load, align, compare and write (see `hpcscale.api.compare`). UsageError (exit 2) for
    fewer than two campaigns, an unknown one, one without finished runs, no shared axis or a
    negative tolerance; nothing is written then."""
    if not (isinstance(tolerance, int | float) and math.isfinite(tolerance) and tolerance >= 0):
        raise UsageError(f"--tolerance must be a relative drop >= 0 (0.05: 5 %), not {tolerance}")
    if len(campaigns) < 2:
        raise UsageError("compare needs two or more campaigns (the first is the baseline)")
    wd = resolve_workdir(workdir)
    sources = [_source(c, wd) for c in campaigns]
    dirs = [s.dir.resolve() for s in sources]
    if len(set(dirs)) < len(dirs):
        twice = next(d for d in dirs if dirs.count(d) > 1)
        raise UsageError(f"campaign directory {twice} named twice")
    names = labels(dirs)
    loaded = {
        n: _runs(s, c, include_stale) for n, s, c in zip(names, sources, campaigns, strict=True)
    }
    runs = {n: r for n, (r, _) in loaded.items()}
    ctxs = {n: ctx for n, (_, ctx) in loaded.items()}
    axis = cmp.shared_axis(runs, on, ctxs)
    flags = {n: quality_flags(r, ctxs[n]) for n, r in runs.items()}  # once: cells and quality
    cells = {n: cmp.campaign_cells(r, axis, ctxs[n], flags[n]) for n, r in runs.items()}
    own = {n: ctx.metric for n, ctx in ctxs.items()}  # each campaign's scaling metric
    measures = cmp.measures(own.values())
    aligned, keys = cmp.align(cells, axis, measures)
    diffs = cmp.differences(aligned, names[0], tolerance, measures, own)
    found = cmp.regressions(diffs, names[0], tolerance, measures)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-vs-".join(names))[:120]
    metric, apart = shared_metric(own)
    heads = headings(own.values())
    sections = [
        campaigns_section(names, sources, runs, cells, axis, keys),
        aligned_section(aligned, names, axis, keys, own),
        differences_section(
            diffs,
            names[0],
            tolerance,
            found,
            interval_note(aligned, tuple(measures), scaling_metric=metric),
            measures,
            heads,
        ),
        _quality(runs, ctxs, flags),
    ]
    if apart:
        sections[0].text.append(apart)
    description = (
        f"{', '.join(names[1:])} against {names[0]} (the baseline), aligned on "
        f"{AXIS_LABELS.get(axis, axis).lower()}."
    )
    both = pd.concat([r.assign(compared_as=n) for n, r in runs.items()], ignore_index=True)
    rep = CampaignReport(name, description, sections, both, aligned, metric=metric)
    for n, ctx in ctxs.items():
        if unfinished := ctx.unfinished:
            rep.notes.append(f"{n}: {len(unfinished)} run(s) not finished yet, shown as missing")
        rep.notes += [f"{n}: run {rid}: {why}" for rid, why in ctx.problems]
    out_dir = Path(out).absolute() if out else dirs[0].parent / "compare" / name
    written = write([rep], out_dir, ("md", "html", "csv"))
    return CompareResult(
        axis,
        names,
        dirs,
        aligned,
        diffs,
        found,
        tolerance,
        rep,
        written.paths,
        allow_missing,
        metric,
        own,
    )


def shared_metric(own: Mapping[str, ScalingMetric]) -> tuple[ScalingMetric, str]:
    """The scaling metric every campaign's tables hold, and a warning when they hold different
    ones (then images/s is the shared default, and each campaign's own column is shown apart)."""
    if len(set(own.values())) == 1:
        return next(iter(own.values())), ""
    said = "; ".join(f"{n}: {m.heading}" for n, m in own.items())
    return ScalingMetric(), (
        f"The campaigns' scaling metrics differ ({said}): each one's own figure is a column of "
        "its own, and its differences are left out (not comparable)."
    )


def _source(campaign: str, wd: Path) -> CampaignSource:
    dirs, _, sources, _ = report_inputs(campaign, wd)
    return sources.get(dirs[0]) or campaign_source(dirs[0])


def _runs(
    src: CampaignSource, named: str, include_stale: bool
) -> tuple[pd.DataFrame, TableContext]:
    """A campaign's run table (truncated timelines' figures left out) and what travels
    beside it."""
    runs, ctx = table_and_context(collected_runs(src, include_stale=include_stale))
    if runs.empty:
        raise UsageError(
            f"campaign {named!r} ({src.dir}) has no finished runs to compare; "
            f"see `hpcscale status {src.name}`"
        )
    return without_partial_timelines(runs, False), ctx


def labels(dirs: Sequence[Path]) -> list[str]:
    """Each campaign's name in the report: its directory name, with as many parent directories
    as it takes to tell apart campaigns of the same name (this month's run vs last month's)."""
    depth = 1
    while True:
        names = ["/".join(d.parts[-depth:]) for d in dirs]
        if len(set(names)) == len(names) or depth >= max(len(d.parts) for d in dirs):
            return names
        depth += 1


def campaigns_section(
    names: Sequence[str],
    sources: Sequence[CampaignSource],
    runs: dict[str, pd.DataFrame],
    cells: dict[str, pd.DataFrame],
    axis: str,
    keys: Sequence[str],
) -> Section:
    """Who is compared: each campaign's directory, system, sizes and the settings that tell the
    campaigns apart (fixed within each, different between them)."""
    rows = []
    for i, (n, src) in enumerate(zip(names, sources, strict=True)):
        c = cells[n]
        sizes = sorted({int(v) for v in c["axis_value"].dropna()})
        rows.append(
            {
                "Campaign": n,
                "Role": "baseline" if i == 0 else "compared",
                "System": src.system or "",
                "Runs": len(runs[n]),
                "Cells": int((c["repeats"] > 0).sum()),
                AXIS_LABELS.get(axis, axis): ", ".join(map(str, sizes)),
                "Description": src.description,
                "Directory": str(src.dir),
            }
        )
    args = arg_columns(c for n in names for c in cells[n].columns)
    described = tuple(dict.fromkeys((*DESCRIBED, *args)))  # epochs is in both lists
    differ = []
    for f in described:
        if f == axis or f in keys:
            continue
        values = [{cmp.plain(v) for v in cells[n][f]} for n in names if f in cells[n].columns]
        if all(len(v) == 1 for v in values) and len({next(iter(v)) for v in values}) > 1:
            differ.append(f)
    frame = pd.DataFrame(rows)
    for f in differ:
        frame.insert(3, field_label(f), [cmp.first_value(cells[n][f]) for n in names])
    axis_name = AXIS_LABELS.get(axis, axis).lower()
    text = [
        f"{len(names)} campaigns aligned on {axis_name} (`--on` names the axis). The first, "
        f"{names[0]}, is the baseline: every later campaign is compared with it.",
        "Rows are matched on the axis value"
        + (f" and on {', '.join(keys)} (swept within a campaign)" if keys else "")
        + ". Settings fixed within each campaign but different between them are what is "
        "compared: "
        + (", ".join(field_label(f) for f in differ) or "none among the run and workload fields")
        + ".",
    ]
    systems = {src.system for src in sources}
    if len(systems) > 1:
        text.append("The campaigns ran on different system profiles (System column).")
    rest = [f for f in described if f != axis and f not in keys and f not in differ]
    per_row = cmp.differing_at_rows(cells, axis, keys, rest)
    if per_row:
        text.append(
            "At the same "
            + axis_name
            + " the campaigns also differ in: "
            + "; ".join(f"{field_label(f)} ({', '.join(rows)})" for f, rows in per_row.items())
            + "."
        )
    return Section(
        "campaigns", "Campaigns compared", text, [Table("campaigns", "Campaigns", frame)]
    )


def aligned_section(
    aligned: pd.DataFrame,
    names: Sequence[str],
    axis: str,
    keys: Sequence[str],
    own: Mapping[str, ScalingMetric] | None = None,
) -> Section:
    """The aligned table (one row per axis value and knob combination, columns per campaign)
    and the overlay figure (one line per campaign); `own`: each campaign's scaling metric."""
    own = own or {n: ScalingMetric() for n in names}
    measures = cmp.measures(own.values())
    metric, _ = shared_metric(own)
    frame = aligned_table(aligned, names, axis, keys, own)
    note = (
        "–: no valid result in that campaign (not planned there, not finished, unreadable, or "
        "no baseline: see its Flags column and the Data quality section)."
    )
    return Section(
        "aligned",
        "Aligned cells",
        [
            "One row per value of the shared axis and combination of the knobs matched; per "
            "campaign its median over repeats (speedup and efficiency against its own baseline).",
            *filter(None, [method_text(aligned, metric)]),
            *comm_text(aligned),
        ],
        [Table("aligned", "Campaigns side by side", frame, note)],
        plot_if(
            "overlay",
            "Campaigns overlaid",
            overlay(aligned, names, axis, keys, measures, headings(own.values())),
            "One line per campaign; a cell with no value leaves a gap in its line; error bars: "
            + (
                interval_note(aligned, tuple(measures), scaling_metric=metric)
                or "none (no repeats, no interval)."
            ),
        ),
    )


def aligned_table(
    aligned: pd.DataFrame,
    names: Sequence[str],
    axis: str,
    keys: Sequence[str],
    own: Mapping[str, ScalingMetric] | None = None,
) -> pd.DataFrame:
    """Per campaign its own measures (`analysis.compare.measures` of its scaling metric in
    `own`; images/s by default), headed by that metric."""
    own = own or {}
    out = pd.DataFrame()
    first = aligned[aligned["campaign"] == names[0]].set_index("row").sort_index()
    for k in keys:
        out[term(k).label] = first[k].to_numpy()
    out[AXIS_LABELS.get(axis, axis)] = first["axis_value"].to_numpy()
    for n in names:
        mine = aligned[aligned["campaign"] == n].set_index("row").sort_index()
        metric = own.get(n, ScalingMetric())
        heads = headings([metric])
        for m in cmp.measures([metric]):
            out[f"{n}: {heads[m]}"] = mine[m].to_numpy()
        if "comm_share" in mine.columns and mine["comm_share"].notna().any():
            out[f"{n}: {COMM_SHARE}"] = 100.0 * mine["comm_share"].to_numpy(float)
            out[f"{n}: {COMM_FROM}"] = mine[SOURCE].to_numpy()
        if mine["flags"].astype(bool).any():
            out[f"{n}: Flags"] = mine["flags"].to_numpy()
    return out


def comm_text(aligned: pd.DataFrame) -> list[str]:
    """What the communication columns are and where each campaign's came from (none without a
    measured communication figure)."""
    if "comm_share" not in aligned.columns or not aligned["comm_share"].notna().any():
        return []
    said = "; ".join(
        f"{n}: {sources_phrase(list(rows[SOURCE]), COMM_FROM, 'row')}"
        for n, rows in aligned[aligned["comm_share"].notna()].groupby("campaign", sort=False)
    )
    return [
        f"{COMM_SHARE}: communication per epoch / epoch time, measured from each campaign's "
        f"trace, named in its {COMM_FROM} column ({said}). Every trace format measures "
        "communication with the same meaning (the union in time of the collectives), so "
        "campaigns traced in different formats can be read side by side; a campaign without "
        "a trace has no such column (`collect: {timeline: true}`, then `collect --timeline`)."
    ]


def differences_section(
    diffs: pd.DataFrame,
    baseline: str,
    tolerance: float,
    found: Sequence[cmp.Regression],
    intervals: str = "",
    measures: Mapping[str, bool] = cmp.HIGHER_IS_BETTER,
    heads: Mapping[str, str] | None = None,
) -> Section:
    """The differences table and what it means; `intervals` names the intervals' methods and
    levels (`analysis.intervals.note` of the aligned cells); `measures` the columns compared
    (`analysis.compare.measures`), headed by `heads`."""
    heads = heads or headings()
    better = ", ".join(f"{heads[m]} {'higher' if hi else 'lower'}" for m, hi in measures.items())
    text = [
        f"Each later campaign against {baseline}. Better is: {better}. Two values are called "
        "different only when their intervals do not overlap ('within noise' otherwise; 'no "
        "interval' without repeats). Speedup and efficiency are against each campaign's own "
        "smallest size: where the two differ they are not compared ('different baseline'), nor "
        "are epoch times of a different data set size or steps per epoch ('not comparable').",
        f"A regression is a metric worse than the baseline's by more than {tolerance:.1%} "
        "(the tolerance, `--tolerance`) and not within noise; `--check` fails on any, on a cell "
        "of the baseline a later campaign lacks (unless `--allow-missing`) and when nothing was "
        "compared.",
        f"{len(found)} regression(s): " + "; ".join(r.message for r in found)
        if found
        else f"No metric regressed beyond {tolerance:.1%}.",
    ]
    apart = diffs[~diffs["noise"].isin([*cmp.COMPARED, "missing"])] if len(diffs) else diffs
    if len(apart):
        said = [f"{d.campaign} {d.metric} at {d.cell}: {d.noise}" for d in apart.itertuples()]
        text.append("Not compared: " + "; ".join(said) + ".")
    tabs = []
    if not diffs.empty:
        frame = pd.DataFrame(
            {
                "Cell": diffs["cell"],
                "Campaign": diffs["campaign"],
                "Metric": diffs["metric"].map(heads),
                "Better": diffs["metric"].map(lambda m: "higher" if measures[m] else "lower"),
                "Baseline": diffs["baseline"],
                "Value": diffs["value"],
                "Change (%)": 100.0 * diffs["change"],
                "Verdict": [_verdict(d) for _, d in diffs.iterrows()],
                "Regression": diffs["regressed"].map(lambda r: "REGRESSED" if r else ""),
                "Flags": diffs["flags"],
            }
        )
        said = intervals or "No interval: no cell was repeated."
        tabs.append(Table("differences", f"Differences from {baseline}", frame, said))
    return Section("differences", f"Differences from {baseline}", text, tabs)


def _verdict(d: pd.Series) -> str:
    if d["noise"] == "missing":
        return "missing in baseline" if math.isnan(d["baseline"]) else "missing"
    if d["better"] is True:
        return "better (beyond noise)"
    if d["better"] is False:
        return "worse (beyond noise)"
    return str(d["noise"])


def _quality(runs: dict[str, pd.DataFrame], ctxs: dict[str, TableContext], flags: dict) -> Section:
    """Every campaign's Data quality rows, with the campaign named (`flags`: each one's)."""
    frames = []
    for n, r in runs.items():
        sec = quality_section(r, flags[n], ctxs[n])
        for t in sec.tables:
            frames.append(t.frame.assign(Campaign=n)[["Campaign", *t.frame.columns]])
    if not frames:
        return Section("quality", "Data quality", [NONE_TEXT])
    text = [
        "Every run left out of the tables and figures (excluded), or kept but marked in them "
        "(flagged), per campaign, and why; the aligned table shows such cells as missing or "
        "names their flags."
    ]
    table = Table("quality", "Runs left out or flagged", pd.concat(frames, ignore_index=True))
    return Section("quality", "Data quality", text, [table])


def field_label(name: str) -> str:
    """A run or workload field as the report names it (steps_per_epoch has no vocabulary term)."""
    try:
        return term(name).label
    except KeyError:
        return name.replace("_", " ").capitalize()
