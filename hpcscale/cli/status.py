"""status: each run's state, from the ledger refreshed from its backend; --watch, --json."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from hpcscale import api
from hpcscale.cli.common import JsonOpt, WorkdirOpt, console, err_console, print_json
from hpcscale.state.states import RunState

COLOURS = {
    RunState.COMPLETED: "green",
    RunState.RUNNING: "cyan",
    RunState.PENDING: "yellow",
    RunState.SUBMITTED: "yellow",
}


def status_table(st: api.CampaignStatus) -> Table:
    summary = ", ".join(f"{s}: {n}" for s, n in st.counts().items())
    table = Table(title=f"{st.name}: {len(st.rows)} runs ({summary})", title_justify="left")
    for col in ("run_id", "state", "backend", "job", "nodes", "exit", "elapsed", "message"):
        table.add_column(col)
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
            f"[{color}]{row.state}[/{color}]",
            row.backend or "",
            job,
            row.nodelist or "",
            row.exit_code or "",
            elapsed,
            escape((row.message or "").splitlines()[0][:60]) if row.message else "",
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
    workdir: WorkdirOpt = None,
) -> None:
    """Each run's state, from the ledger refreshed from the scheduler; works from any shell."""
    if not watch or json:
        found = api.status(campaign, workdir)
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
                console.print(status_table(st))
        return
    with Live(console=console, auto_refresh=False) as live:
        while True:
            found = api.status(campaign, workdir)
            grid = Table.grid()
            for st in found:
                grid.add_row(status_table(st))
                for w in st.warnings:
                    grid.add_row(f"[yellow]warning:[/yellow] {escape(w)}")
            live.update(grid, refresh=True)
            if all(st.ended for st in found):
                return
            time.sleep(interval)
