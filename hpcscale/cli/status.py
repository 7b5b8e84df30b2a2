"""status: each run's state, from the ledger refreshed from its backend; --watch, --json."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from hpcscale import api
from hpcscale.cli.common import (
    IncludeStaleOpt,
    JsonOpt,
    WorkdirOpt,
    console,
    err_console,
    print_json,
)
from hpcscale.cli.tables import Col, Grid
from hpcscale.state.states import RunState
from hpcscale.util.text import plural

COLOURS = {
    RunState.COMPLETED: "green",
    RunState.RUNNING: "cyan",
    RunState.PENDING: "yellow",
    RunState.SUBMITTED: "yellow",
}


def status_table(st: api.CampaignStatus) -> Grid:
    """One campaign's runs: rich boxes on a terminal when they fit, else plain aligned text
    (run ids and messages whole)."""
    summary = ", ".join(f"{s}: {n}" for s, n in st.counts().items())
    cols = ["run_id", "state", "backend", "job", "nodes", "exit", "elapsed", "message"]
    table = Grid(
        f"{st.name}: {plural(len(st.rows), 'run')} ({summary})",
        [Col(c, key=c == "run_id", right=c in ("exit", "elapsed")) for c in cols],
    )
    for row in st.rows:
        job = row.job_id or ""
        if row.array_job_id is not None:
            job = f"{row.array_job_id}_{row.array_index}"
        elapsed = ""
        if row.started_at:
            elapsed = f"{(row.ended_at or time.time()) - row.started_at:.0f}s"
        color = COLOURS.get(row.state, "red" if row.terminal else "white")
        table.add_row(
            row.run_id,
            str(row.state),
            row.backend or "",
            str(job),
            row.nodelist or "",
            "" if row.exit_code is None else str(row.exit_code),
            elapsed,
            next(iter((row.message or "").strip().splitlines()), ""),
            styles=[None, color, None, None, None, None, None, None],
        )
    return table


def status(
    campaign: Annotated[
        str | None,
        typer.Argument(
            help="campaign name or YAML; default: all in the workdir", show_default=False
        ),
    ] = None,
    json: JsonOpt = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="refresh until every run has ended")
    ] = False,
    interval: Annotated[float, typer.Option(help="seconds between --watch refreshes")] = 2.0,
    include_stale: IncludeStaleOpt = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Each run's state, from the ledger refreshed from the scheduler; works from any shell."""
    if not watch or json or not console.is_terminal:
        found = api.status(campaign, workdir, include_stale=include_stale)
        while watch and not all(st.ended for st in found):  # piped: the tables once all ended
            time.sleep(interval)
            found = api.status(campaign, workdir, include_stale=include_stale)
        for st in found:
            for w in st.warnings:
                err_console.print(f"[yellow]warning:[/yellow] {escape(w)}")
        if json:
            print_json(
                {
                    st.name: [{**row.__dict__, "state": str(row.state)} for row in st.rows]
                    for st in found
                }
            )
        else:
            for st in found:
                status_table(st).show(console)
        return
    with Live(console=console, auto_refresh=False) as live:
        while True:
            found = api.status(campaign, workdir, include_stale=include_stale)
            grid = Table.grid()
            for st in found:
                grid.add_row(status_table(st).rich())
                for w in st.warnings:
                    grid.add_row(f"[yellow]warning:[/yellow] {escape(w)}")
            live.update(grid, refresh=True)
            if all(st.ended for st in found):
                return
            time.sleep(interval)
