"""submit, cancel, resubmit: options in, `hpcscale.api` calls, results out. No backend logic."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from hpcscale import api
from hpcscale.backends.base import BackendOptions, Submission
from hpcscale.backends.slurm.backend import SlurmOptions
from hpcscale.cli.common import CampaignArg, SystemOpt, WorkdirOpt, console
from hpcscale.cli.reporting import RichReporter
from hpcscale.model.errors import UsageError


class BackendName(StrEnum):
    slurm = "slurm"
    local = "local"
    dry = "dry"


NoArrayOpt = Annotated[
    bool, typer.Option("--no-array", help="slurm: one sbatch per run instead of job arrays")
]
_MAX_PARALLEL = (
    "slurm: at most N runs at once, over every sbatch of this {what}: each array's %N, arrays "
    "one after another; with --no-array, N chains of jobs"
)
MaxParallelOpt = Annotated[
    int | None,
    typer.Option(help=_MAX_PARALLEL.format(what="submit (--follow's rounds too)"), min=1),
]
ResubmitMaxParallelOpt = Annotated[
    int | None, typer.Option(help=_MAX_PARALLEL.format(what="resubmit"), min=1)
]


def backend_options(
    force: bool,
    no_array: bool,
    max_parallel: int | None,
    follow: bool = False,
    max_failures: int = BackendOptions.max_failures,
) -> BackendOptions:
    """Typed options: SLURM's when a SLURM flag is given (another backend then refuses them),
    else the common ones, which every backend completes with its own defaults."""
    if no_array or max_parallel is not None or follow:
        return SlurmOptions(
            force=force, array=not no_array, max_parallel=max_parallel, follow=follow,
            max_failures=max_failures,
        )  # fmt: skip
    return BackendOptions(force=force, max_failures=max_failures)


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
    no_array: NoArrayOpt = False,
    max_parallel: MaxParallelOpt = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="slurm: when the queue's limits leave runs waiting, keep submitting them as "
            "the queue drains (Ctrl-C stops; the rest stay RENDERED)",
        ),
    ] = False,
    max_failures: Annotated[
        int,
        typer.Option(
            help="after N runs failed the same way (the same error line, paths and numbers "
            "aside) stop: local stops running, slurm cancels the runs not yet started (seen "
            "by the next status or collect); submit after the fix resumes them; 0 never stops",
            min=0,
        ),
    ] = BackendOptions.max_failures,
    system: SystemOpt = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Render a campaign and run it: on SLURM (job arrays per resource shape) or locally."""
    options = backend_options(force, no_array, max_parallel, follow, max_failures)
    with RichReporter() as reporter:
        out = api.submit(
            campaign,
            workdir,
            backend=backend.value if backend else None,
            system=system,
            options=options,
            dry_run=dry_run,
            reporter=reporter,
            check=False,
        )
    _summarise(out)
    api.raise_for(out)


def _summarise(out: Submission) -> None:
    if out.backend == "dry":
        console.print(f"[bold]dry run[/bold]: {len(out.skipped)} runs rendered, nothing submitted")
        for line in out.described:
            print(line)
    elif out.backend == "local":
        done = len(out.submitted) - len(out.failed)
        rest = f", {len(out.not_started)} not started" if out.stopped else ""
        console.print(
            f"{done} completed, {len(out.failed)} failed, {len(out.skipped)} skipped{rest}"
        )


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
    """Cancel a campaign's queued and running runs (scancel on SLURM; local runs are stopped)."""
    with RichReporter() as reporter:
        results = api.cancel(campaign, where, workdir, reporter=reporter)
    for res in results:
        for w in res.warnings:
            reporter.warn(w)
        console.print(
            f"{res.campaign}: cancel requested for {len(res.run_ids)} run(s) "
            f"({len(res.jobs)} job(s)); `hpcscale status` shows when they end"
        )


def resubmit(
    campaign: Annotated[str, typer.Argument(help="campaign name or YAML", show_default=False)],
    failed: Annotated[
        bool, typer.Option("--failed", help="resubmit the runs that ended in --state")
    ] = False,
    state: Annotated[
        str, typer.Option(help="comma-separated end states counted as failed")
    ] = "TIMEOUT,NODE_FAIL,FAILED",
    no_array: NoArrayOpt = False,
    max_parallel: ResubmitMaxParallelOpt = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Submit again the runs of a campaign that failed (same run ids, same directories, the
    scripts as rendered), each through the backend that ran it."""
    if not failed:
        raise UsageError("say which runs to resubmit: --failed [--state TIMEOUT,NODE_FAIL,...]")
    states = [s.strip().upper() for s in state.split(",") if s.strip()]
    options = backend_options(True, no_array, max_parallel)
    with RichReporter() as reporter:
        subs = api.resubmit(
            campaign, workdir, states=states, options=options, reporter=reporter, check=False
        )
    if not subs:
        console.print(f"no runs in state {', '.join(sorted(set(states)))}; nothing to resubmit")
    for sub in subs:
        _summarise(sub)
        api.raise_for(sub)
