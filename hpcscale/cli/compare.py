"""`hpcscale compare`: campaigns side by side on the scale axis they share (one report), and
`--check`, which fails when a later campaign regressed from the first beyond a tolerance, when a
cell the baseline measured has no value in a later campaign (unless `--allow-missing`), or
when nothing was compared."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import IncludeStaleOpt, WorkdirOpt, console, err_console
from hpcscale.cli.complete import campaign_names
from hpcscale.cli.tables import Col, Grid
from hpcscale.model.errors import HpcscaleError

if TYPE_CHECKING:
    from hpcscale.report.compare import CompareResult


class Axis(StrEnum):
    nodes = "nodes"
    ranks = "ranks"
    gpus = "gpus"


def compare(
    campaigns: Annotated[
        list[str],
        typer.Argument(
            help="two or more campaigns (name in the workdir, YAML file or directory); the "
            "first is the baseline",
            metavar="CAMPAIGN",
            show_default=False,
            autocompletion=campaign_names,
        ),
    ],
    on: Annotated[
        Axis | None,
        typer.Option(
            "--on", help="the shared axis (default: the scale axis every campaign varies)"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="report directory (default: compare/<A>-vs-<B> in the first campaign's workdir)",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="exit 1 if a metric of a later campaign regressed from the first's beyond "
            "--tolerance (and not within noise; higher is better for images/s, speedup and "
            "efficiency, lower for epoch time), if a cell the first measured has no value in a "
            "later one (a failed run), or if nothing was compared",
        ),
    ] = False,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="with --check, pass despite cells the first campaign measured and a later one "
            "lacks (never when nothing was compared)",
        ),
    ] = False,
    tolerance: Annotated[
        float,
        typer.Option("--tolerance", help="relative change allowed in the worse direction"),
    ] = 0.05,
    include_stale: IncludeStaleOpt = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Set campaigns side by side: aligned tables, overlaid figures, differences within noise."""
    result = api.compare(
        campaigns,
        workdir,
        on=on.value if on else None,
        out=out,
        tolerance=tolerance,
        include_stale=include_stale,
        allow_missing=allow_missing,
    )
    _summary(result).show(console)
    for gap in result.missing:
        err_console.print(
            f"[yellow]not compared (no valid result):[/yellow] {escape(gap)}", highlight=False
        )
    for r in result.regressions:
        err_console.print(f"[red]regression:[/red] {escape(r.message)}", highlight=False)
    colour = "green" if result.passed else "red"
    console.print(
        f"[{colour}]{len(result.regressions)} regression(s) beyond {result.tolerance:.1%} in "
        f"{result.compared} comparison(s) against {escape(result.baseline)}"
        + (f", {len(result.missing)} cell(s) missing" if result.missing else "")
        + f"[/{colour}]",
        highlight=False,
    )
    for path in result.paths:
        if path.name in ("index.md", "index.html"):
            console.print(escape(f"report: {path}"), highlight=False, soft_wrap=True)
    if check and not result.passed:
        raise HpcscaleError(_why(result))


def _why(result: CompareResult) -> str:
    """What failed `--check`: regressions, missing cells (each named), or no comparison."""
    said = []
    if result.regressions:
        said.append(
            f"{len(result.regressions)} metric(s) regressed beyond {result.tolerance:.1%} "
            f"against {result.baseline}"
        )
    if result.lost and not result.allow_missing:
        said.append(
            f"{len(result.lost)} cell(s) of {result.baseline} with no value in a later "
            f"campaign, not compared (--allow-missing passes them): {'; '.join(result.lost)}"
        )
    if not result.compared:
        said.append(f"nothing was compared against {result.baseline} (no aligned values)")
    return "; ".join(said)


def _summary(result: CompareResult) -> Grid:
    """Throughput (or a command's own metric) per aligned row and campaign, with each later
    campaign's change."""
    a, metric = result.aligned, result.metric
    base = a[a["campaign"] == result.baseline].set_index("row").sort_index()
    later = result.campaigns[1:]
    table = Grid(
        f"{result.metric_heading} on {result.axis}, against {result.baseline}",
        [
            Col("Cell", key=True),
            *(Col(n, right=True) for n in result.campaigns),
            *(Col(f"{n} vs baseline", right=True) for n in later),
        ],
    )
    # each (row, campaign)'s first value and change, looked up: filtering the tables once per
    # row and campaign took seconds for a sweep's hundreds of rows
    values: dict[tuple[Any, str], float] = {}
    own = {n: result.metrics.get(n, metric).column for n in result.campaigns}  # its own figure
    for r in a[["row", "campaign", *dict.fromkeys(own.values())]].to_dict("records"):
        values.setdefault((r["row"], r["campaign"]), float(r[own[r["campaign"]]]))
    d = result.differences
    hits: dict[tuple[Any, str], dict[str, Any]] = {}
    for r in d.to_dict("records") if len(d) else []:
        if r["metric"] in (own[result.baseline], own[r["campaign"]]):
            hits.setdefault((r["row"], r["campaign"]), r)
    for row, b in base.iterrows():
        shown = [api.cell(values.get((row, n), math.nan)) for n in result.campaigns]
        changes = [_change(hits[(row, n)]) if (row, n) in hits else "–" for n in later]
        table.add_row(str(b["cell"]), *shown, *changes)
    return table


def _change(d: Mapping[str, Any]) -> str:
    change = float(d["change"])
    return "–" if math.isnan(change) else f"{change:+.1%} ({d['noise']})"
