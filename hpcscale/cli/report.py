"""`hpcscale report`: the tables and figures of a campaign (or of every campaign in the workdir)
as index.md + index.html, optionally CSV / Parquet, and `--check` against the references."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import CampaignsArg, IncludeStaleOpt, WorkdirOpt, console, err_console
from hpcscale.cli.tables import Col, Grid
from hpcscale.model.errors import HpcscaleError
from hpcscale.util.reportdir import refuse_foreign
from hpcscale.util.text import plural

if TYPE_CHECKING:
    from hpcscale.report.model import CampaignReport


class ReportFormat(StrEnum):
    md = "md"
    html = "html"
    csv = "csv"
    parquet = "parquet"


def report(
    campaign: CampaignsArg = None,
    format: Annotated[
        list[ReportFormat] | None,
        typer.Option(
            "--format", "-f", help="repeat for several (default: md and html)", show_default=False
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="report directory (default: <campaign dir>/report, "
            "or <workdir>/report for several campaigns)",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="exit 1 if a campaign reference fails (for CI)")
    ] = False,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            help="time-to-target goal, e.g. 'g_loss<=1.2' or 'val_accuracy>=0.8'; repeat for "
            "several (replaces the campaign's targets:)",
            show_default=False,
        ),
    ] = None,
    include_partial_timelines: Annotated[
        bool,
        typer.Option(
            "--include-partial-timelines",
            help="keep the per-epoch timeline figures of truncated timelines (left out by default)",
        ),
    ] = False,
    include_stale: IncludeStaleOpt = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="let --out overwrite a report hpcscale did not write there"),
    ] = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Write the scaling report: tables in the shapes of the published studies the shipped
    campaigns reproduce (see `init --list`), figures, provenance."""
    if out is not None and not force:
        refuse_foreign(out)
    result = api.report(
        campaign,
        workdir,
        out=out,
        formats=[f.value for f in format or []],
        include_stale=include_stale,
        targets=target or [],
        include_partial_timelines=include_partial_timelines,
    )

    for rep in result.reports:
        if rep.name not in result.failed:
            _summary(rep).show(console)
    for rep in result.reports:
        if rep.name in result.failed:  # none measured: its note says why (failed, unparsed)
            said = rep.notes[0] if rep.notes else "no run finished"
            err_console.print(
                f"[red]{escape(rep.name)}: {escape(said)}; the report's Data quality section "
                "lists each run with its state and reason[/red]",
                highlight=False,
            )
    for name in result.empty:
        console.print(f"[yellow]{name}: no finished runs yet, left out[/yellow]")
    failures = [
        (rep.name, r) for rep in result.reports for r in rep.reference_results if not r.passed
    ]
    checked = sum(len(rep.reference_results) for rep in result.reports)
    for name, r in failures:
        err_console.print(f"[red]{escape(name)}:[/red] {escape(r.message)}", highlight=False)
    if checked:
        colour = "red" if failures else "green"
        console.print(
            f"[{colour}]references: {checked - len(failures)} of {checked} passed[/{colour}]"
        )
    elif check:
        console.print("--check: no references defined; nothing to check")
    data = [p for p in result.paths if p.parent.name == "data"]
    if data:
        console.print(
            escape(f"data: {plural(len(data), 'file')} in {data[0].parent}"),
            highlight=False,
            soft_wrap=True,
        )
    for path in result.paths:
        if path.name in ("index.md", "index.html"):
            console.print(escape(f"report: {path}"), highlight=False, soft_wrap=True)
    if result.problems:
        raise HpcscaleError("; ".join(result.problems))
    if check and failures:
        raise HpcscaleError(f"{len(failures)} reference check(s) failed")
    if check and result.failed:
        raise HpcscaleError(f"--check: no run finished in {', '.join(result.failed)}")


def _summary(rep: CampaignReport) -> Grid:
    """Throughput (images/s, or a command's own metric, named), speedup and efficiency per
    matrix cell: the numbers people look at first."""
    cells, metric = rep.cells, rep.metric
    table = Grid(
        f"{rep.name}: {plural(len(rep.runs), 'run')}",
        [
            Col("Run (cell)", key=True),
            *(Col(c, right=True) for c in ("Ranks", metric.heading, "Speedup", "Efficiency")),
        ],
    )
    names = api.cell_labels(cells)
    # the four columns shown, not a Series per row (iterrows): a sweep has 1,000 cells (#28)
    shown = [cells[c].tolist() for c in ("ranks", metric.column, "speedup", "efficiency")]
    for name, ranks, value, speedup, efficiency in zip(names, *shown, strict=True):
        table.add_row(
            name, str(int(ranks)), api.cell(value), api.cell(speedup), api.cell(efficiency)
        )
    return table
