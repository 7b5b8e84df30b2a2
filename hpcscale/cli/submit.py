"""submit, status, cancel, resubmit: the commands that talk to a backend and the ledger."""

from __future__ import annotations

import importlib
import shutil
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hpcscale.cli.common import CampaignArg, JsonOpt, WorkdirOpt, console, err_console, print_json
from hpcscale.core.paths import campaign_dir
from hpcscale.core.paths import workdir as resolve_workdir
from hpcscale.errors import HpcscaleError, UsageError
from hpcscale.state.ledger import TERMINAL, Ledger, RunRow


class BackendName(StrEnum):
    slurm = "slurm"
    local = "local"
    dry = "dry"


def _slurm() -> Any:
    """The SLURM backend module (optional until it exists; it needs no import-time SLURM)."""
    try:
        return importlib.import_module("hpcscale.backends.slurm.submit")
    except ModuleNotFoundError as exc:
        if exc.name != "hpcscale.backends.slurm.submit":
            raise
        return None


def _choose_backend(requested: BackendName | None, scheduler: str) -> BackendName:
    if requested is not None:
        return requested
    if scheduler == "local":
        return BackendName.local
    if shutil.which("sbatch"):
        return BackendName.slurm
    raise UsageError(
        "the system profile queues with SLURM but `sbatch` is not on PATH; "
        "use --dry-run to see the scripts, --backend local to run here, "
        "or `hpcscale cluster up` for a local SLURM cluster"
    )


def submit(
    campaign: CampaignArg,
    backend: Annotated[
        BackendName | None,
        typer.Option(
            help="slurm: sbatch job arrays; local: run here with mpirun, one run at a time; "
            "dry: render and print. Default: local for `scheduler: local` systems, else slurm.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="render and print what would run")
    ] = False,
    force: Annotated[
        bool, typer.Option(help="run again even runs already submitted or done")
    ] = False,
    no_array: Annotated[bool, typer.Option("--no-array", help="slurm: one sbatch per run")] = False,
    max_parallel: Annotated[
        int | None, typer.Option(help="slurm: array throttle (%N)", min=1)
    ] = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Render a campaign and run it: on SLURM (job arrays per resource shape) or locally."""
    from hpcscale.api import render_campaign

    lc, _, rendered = render_campaign(campaign, workdir)
    chosen = BackendName.dry if dry_run else _choose_backend(backend, lc.system.scheduler)
    if chosen == BackendName.dry:
        _print_dry(
            rendered,
            lc.system.scheduler if backend is None else backend.value,
            no_array,
            max_parallel,
        )
        return
    cdir = campaign_dir(lc.campaign.name, workdir)
    with Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
        if chosen == BackendName.local:
            _submit_local(rendered, ledger, cdir, force)
        else:
            slurm = _slurm()
            if slurm is None:
                raise HpcscaleError("the SLURM backend is not available in this installation")
            slurm.submit_runs(
                rendered,
                ledger,
                cdir,
                force=force,
                array=not no_array,
                max_parallel=max_parallel,
                console=console,
            )


def _print_dry(rendered: list[Any], backend: str, no_array: bool, max_parallel: int | None) -> None:
    console.print(f"[bold]dry run[/bold]: {len(rendered)} runs rendered, nothing submitted")
    slurm = _slurm() if backend == "slurm" else None
    if slurm is not None and hasattr(slurm, "describe"):
        for line in slurm.describe(rendered, array=not no_array, max_parallel=max_parallel):
            print(line)
        return
    for r in rendered:
        if backend == "local":
            print(f"# {r.run.run_id}: cd {r.run_dir}")
            print(r.launch)
        else:
            print(f"sbatch {r.run_dir / 'job.sbatch'}")


def _submit_local(rendered: list[Any], ledger: Ledger, cdir: Path, force: bool) -> None:
    from hpcscale.backends import local
    from hpcscale.state.lock import campaign_lock

    with campaign_lock(cdir, "local run", wait=False):
        local.reconcile(ledger)
        done = {row.run_id for row in ledger.rows() if row.state == "COMPLETED"}
        todo = [r for r in rendered if force or r.run.run_id not in done]
        skipped = len(rendered) - len(todo)
        if skipped:
            console.print(f"{skipped} run(s) already completed; skipping them (--force reruns)")
        outcomes = []
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[epoch]}"),
            TimeElapsedColumn(),
        ]
        with Progress(*columns, console=console, transient=False) as progress:
            overall = progress.add_task("campaign", total=len(todo), epoch="")
            for i, r in enumerate(todo, 1):
                desc = (
                    f"run {i}/{len(todo)} {r.run.run_id} ({r.run.model}, {r.run.ranks} rank"
                    f"{'s' if r.run.ranks > 1 else ''})"
                )
                task = progress.add_task(desc, total=r.run.epochs, epoch="starting")

                def on_progress(_rid: str, epoch: int, total: int, task: Any = task) -> None:
                    progress.update(
                        task, completed=epoch, total=total, epoch=f"epoch {epoch}/{total}"
                    )

                out = local.run_one(r, ledger, on_progress)
                mark = "[green]done[/green]" if out.state == "COMPLETED" else "[red]failed[/red]"
                progress.update(
                    task,
                    completed=r.run.epochs if out.state == "COMPLETED" else None,
                    epoch=f"{mark} in {out.seconds:.1f}s",
                )
                progress.advance(overall)
                if out.state != "COMPLETED":
                    err_console.print(
                        f"[red]run {r.run.run_id} failed[/red] (exit {out.exit_code}); "
                        f"last lines of {r.run_dir / local.LOG_NAME}:\n{out.tail}",
                        highlight=False,
                    )
                outcomes.append(out)
    failed = [o for o in outcomes if o.state != "COMPLETED"]
    console.print(
        f"{len(outcomes) - len(failed)} completed, {len(failed)} failed, {skipped} skipped"
    )
    if failed:
        raise HpcscaleError(
            f"{len(failed)} run(s) failed: {', '.join(o.run_id for o in failed)} "
            "(see `hpcscale status`)"
        )


# --- status -------------------------------------------------------------------------------


def _campaign_dirs(campaign: str | None, workdir: Path | None) -> list[Path]:
    """Submitted campaigns only: status and control need a ledger."""
    from hpcscale.core.paths import select_campaigns

    dirs = [d for d in select_campaigns(campaign, workdir) if (d / "ledger.sqlite").exists()]
    if not dirs:
        raise UsageError(
            f"no submitted campaign{' ' + repr(campaign) if campaign else 's'} in "
            f"{resolve_workdir(workdir)} (submit it first)"
        )
    return dirs


def refresh(cdir: Path, ledger: Ledger) -> list[str]:
    """Bring the ledger up to date with each backend; return warnings to show."""
    from hpcscale.backends import local

    warnings: list[str] = []
    lost = local.reconcile(ledger)
    if lost:
        warnings.append(f"{len(lost)} local run(s) lost: their hpcscale process is gone")
    slurm = _slurm()
    if slurm is not None:  # also repairs a crash between sbatch and the ledger write
        warnings += slurm.refresh(ledger, cdir)
    return warnings


def _status_rows(
    campaign: str | None, workdir: Path | None
) -> tuple[dict[str, list[RunRow]], list[str]]:
    out: dict[str, list[RunRow]] = {}
    warnings: list[str] = []
    for cdir in _campaign_dirs(campaign, workdir):
        with Ledger(cdir) as ledger:
            warnings += refresh(cdir, ledger)
            out[cdir.name] = ledger.rows()
    return out, warnings


def _status_table(name: str, rows: list[RunRow]) -> Table:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    summary = ", ".join(f"{s}: {n}" for s, n in sorted(counts.items()))
    table = Table(title=f"{name}: {len(rows)} runs ({summary})", title_justify="left")
    for col in ("run_id", "state", "backend", "job", "nodes", "exit", "elapsed", "message"):
        table.add_column(col)
    colors = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "SUBMITTED": "yellow"}
    for row in rows:
        job = row.job_id or ""
        if row.array_job_id is not None:
            job = f"{row.array_job_id}_{row.array_index}"
        elapsed = ""
        if row.started_at:
            elapsed = f"{(row.ended_at or time.time()) - row.started_at:.0f}s"
        color = colors.get(row.state, "red" if row.state in TERMINAL else "white")
        table.add_row(
            row.run_id,
            f"[{color}]{row.state}[/{color}]",
            row.backend or "",
            job,
            row.nodelist or "",
            row.exit_code or "",
            elapsed,
            (row.message or "").splitlines()[0][:60] if row.message else "",
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
    if json:
        data, warnings = _status_rows(campaign, workdir)
        for w in warnings:
            err_console.print(f"[yellow]warning:[/yellow] {w}")
        print_json({name: [row.__dict__ for row in rows] for name, rows in data.items()})
        return
    if not watch:
        data, warnings = _status_rows(campaign, workdir)
        for w in warnings:
            err_console.print(f"[yellow]warning:[/yellow] {w}")
        for name, rows in data.items():
            console.print(_status_table(name, rows))
        return
    with Live(console=console, auto_refresh=False) as live:
        while True:
            data, warnings = _status_rows(campaign, workdir)
            grid = Table.grid()
            for name, rows in data.items():
                grid.add_row(_status_table(name, rows))
            for w in warnings:
                grid.add_row(f"[yellow]warning:[/yellow] {w}")
            live.update(grid, refresh=True)
            if all(row.terminal for rows in data.values() for row in rows):
                return
            time.sleep(interval)


# --- cancel, resubmit ---------------------------------------------------------------------


def _select(rows: list[RunRow], where: str | None) -> list[RunRow]:
    """Rows whose ledger fields and run.json fields satisfy `where` (simpleeval, no eval)."""
    if not where:
        return rows
    import json as jsonlib

    from simpleeval import EvalWithCompoundTypes, InvalidExpression

    out = []
    for row in rows:
        names: dict[str, Any] = {}
        try:
            record = jsonlib.loads((Path(row.run_dir) / "run.json").read_text())
            names.update(record.pop("args", {}) or {})
            names.update(record)
        except (OSError, ValueError):
            pass
        names.update(row.__dict__)
        try:
            keep = EvalWithCompoundTypes(names=names).eval(where)
        except (InvalidExpression, SyntaxError, TypeError, ValueError, KeyError) as exc:
            raise UsageError(f"cannot evaluate --where {where!r}: {exc}") from None
        if keep:
            out.append(row)
    return out


def cancel(
    campaign: Annotated[str, typer.Argument(help="campaign name or YAML", show_default=False)],
    where: Annotated[
        str | None,
        typer.Option(
            help="only runs matching this condition over run and ledger fields, "
            "e.g. \"nodes == 2 and state == 'PENDING'\"",
            show_default=False,
        ),
    ] = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Cancel a campaign's queued and running SLURM jobs (scancel)."""
    slurm = _slurm()
    if slurm is None:
        raise HpcscaleError("the SLURM backend is not available in this installation")
    for cdir in _campaign_dirs(campaign, workdir):
        with Ledger(cdir) as ledger:
            for w in refresh(cdir, ledger):
                err_console.print(f"[yellow]warning:[/yellow] {w}")
            live = [r for r in ledger.rows() if not r.terminal and r.backend == "slurm"]
            chosen = _select(live, where)
            jobs = slurm.cancel(ledger, [r.run_id for r in chosen])
        console.print(
            f"{cdir.name}: cancel requested for {len(chosen)} run(s) ({len(jobs)} job(s)); "
            "`hpcscale status` shows when they end"
        )


def resubmit(
    campaign: Annotated[str, typer.Argument(help="campaign name or YAML", show_default=False)],
    failed: Annotated[
        bool, typer.Option("--failed", help="resubmit the runs that ended in --state")
    ] = False,
    state: Annotated[
        str, typer.Option(help="comma-separated end states counted as failed")
    ] = "TIMEOUT,NODE_FAIL,FAILED",
    no_array: Annotated[bool, typer.Option("--no-array", help="one sbatch per run")] = False,
    max_parallel: Annotated[int | None, typer.Option(help="array throttle (%N)", min=1)] = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Submit again the SLURM runs of a campaign that failed (same run ids, same directories)."""
    from hpcscale.api import campaign_path_of, render_campaign

    if not failed:
        raise UsageError("say which runs to resubmit: --failed [--state TIMEOUT,NODE_FAIL,...]")
    states = {s.strip().upper() for s in state.split(",") if s.strip()}
    unknown = states - TERMINAL
    if unknown:
        raise UsageError(
            f"--state: {', '.join(sorted(unknown))} not an end state "
            f"(one of {', '.join(sorted(TERMINAL))})"
        )
    slurm = _slurm()
    if slurm is None:
        raise HpcscaleError("the SLURM backend is not available in this installation")
    (cdir,) = _campaign_dirs(campaign, workdir)
    with Ledger(cdir) as ledger:
        for w in refresh(cdir, ledger):
            err_console.print(f"[yellow]warning:[/yellow] {w}")
        wanted = {r.run_id for r in ledger.rows() if r.state in states}
        if not wanted:
            console.print(f"no runs in state {', '.join(sorted(states))}; nothing to resubmit")
            return
        path = campaign_path_of(campaign, workdir)
        _, _, rendered = render_campaign(path, workdir)
        todo = [r for r in rendered if r.run.run_id in wanted]
        if len(todo) != len(wanted):
            raise HpcscaleError(
                f"{len(wanted) - len(todo)} failed run(s) are no longer in {path}; "
                "edit the campaign back or submit it anew"
            )
        console.print(f"resubmitting {len(todo)} run(s) in state {', '.join(sorted(states))}")
        slurm.submit_runs(
            todo,
            ledger,
            cdir,
            force=True,
            array=not no_array,
            max_parallel=max_parallel,
            console=console,
        )
