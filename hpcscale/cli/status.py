"""status: each run's state, from the ledger refreshed from its backend (a failed run's reason
and output file beside it); --watch, --json. logs: a run's output."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from hpcscale import api
from hpcscale.api import RunState
from hpcscale.cli.common import (
    IncludeStaleOpt,
    JsonOpt,
    WorkdirOpt,
    console,
    err_console,
    print_json,
)
from hpcscale.cli.complete import campaign_names
from hpcscale.cli.tables import Col, Grid
from hpcscale.model.errors import HpcscaleError
from hpcscale.util.logtail import copy_shown
from hpcscale.util.text import plural, printable

COLOURS = {
    RunState.COMPLETED: "green",
    RunState.RUNNING: "cyan",
    RunState.PENDING: "yellow",
    RunState.SUBMITTED: "yellow",
}


def shown_path(path: Path) -> str:
    """A path as short as it is unambiguous: relative to here when it lies below."""
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else rel


def status_table(st: api.CampaignStatus) -> Grid:
    """One campaign's runs: rich boxes on a terminal when they fit, else plain aligned text
    (run ids and messages whole). A run that ended without success shows its reason as its
    message and its output file (`hpcscale logs RUN_ID` prints it)."""
    summary = ", ".join(f"{s}: {n}" for s, n in st.counts().items())
    failed = any(row.state.failed for row in st.rows)
    cols = ["run_id", "state", "backend", "job", "nodes", "exit", "elapsed"]
    cols += ["output", "message"] if failed else ["message"]
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
        out = st.outputs.get(row.run_id)
        message = next(iter((row.message or "").strip().splitlines()), "")
        cells = [
            row.run_id,
            str(row.state),
            row.backend or "",
            str(job),
            row.nodelist or "",
            "" if row.exit_code is None else str(row.exit_code),
            elapsed,
        ]
        if failed:
            shown = out.output if out is not None and row.state.failed else None
            cells.append(shown_path(shown) if shown else "")
        cells.append(printable(out.reason if out is not None and out.reason else message))
        table.add_row(*cells, styles=[None, color, *[None] * (len(cells) - 2)])
    return table


def status_json(st: api.CampaignStatus) -> list[dict[str, object]]:
    """Each run's ledger row, its `output` file (null before it has one) and, for a run that
    ended without success, its `reason` (else null)."""
    out = []
    for row in st.rows:
        o = st.outputs.get(row.run_id)
        output = str(o.output) if o is not None and o.output is not None else None
        reason = o.reason if o is not None else None
        out.append({**row.__dict__, "state": str(row.state), "output": output, "reason": reason})
    return out


def status(
    campaign: Annotated[
        str | None,
        typer.Argument(
            help="campaign name or YAML; default: all in the workdir",
            show_default=False,
            autocompletion=campaign_names,
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
            print_json({st.name: status_json(st) for st in found})
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


def logs(
    run: Annotated[
        str,
        typer.Argument(help="a run id, or its first characters (4 or more)", show_default=False),
    ],
    tail: Annotated[
        int | None,
        typer.Option("--tail", "-n", min=0, help="only the last N lines", show_default=False),
    ] = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Print a run's output: what its job printed (the file `status` names for a failed run).
    An array task's SLURM file, where the scheduler's own words go, follows under a header."""
    log = api.logs(run, workdir)
    if not log.files:
        raise HpcscaleError(
            f"run {log.row.run_id} of {log.campaign} ({log.row.state}) has no output yet"
        )
    out = sys.stdout.buffer
    try:
        for i, path in enumerate(log.files):
            if len(log.files) > 1:
                out.write(f"{chr(10) if i else ''}==> {path} <==\n".encode())
            if tail is not None or sys.stdout.isatty():  # a terminal gets no job's escapes
                copy_shown(path, out, tail, sys.stdout.isatty())
            else:
                with open(path, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        out.flush()
    except BrokenPipeError:  # `hpcscale logs RUN | head`: the reader has seen enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError as exc:
        raise HpcscaleError(f"{exc.filename}: cannot read ({exc.strerror})") from None
