"""doctor: can this host run a campaign on a system? One line per check, a fix for each failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import JsonOpt, console, print_json


def doctor(
    campaign: Annotated[
        Path | None,
        typer.Argument(
            help="a campaign file: check what it needs, on its own profile "
            "[default: ./campaign.yaml when there is one]",
            show_default=False,
        ),
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="the system profile (a name or a path): with a campaign, instead of its own; "
            "alone, check that profile [default: local]",
            show_default=False,
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Check what a campaign needs on this machine: its profile's launchers on PATH, SLURM
    answering (SLURM systems), and the jobs' Python: for a bundled TensorFlow program
    TensorFlow, FRAMEWORK_LIBRARIES and mpi4py; for strategy: torch_ddp (or a
    command with `workload.framework: torch`) PyTorch; for your own command
    (`workload.command`) its directory, its interpreter and its program file. Exit 0 when all
    pass, 1 otherwise."""
    found = api.doctor(system, campaign)
    if json:
        print_json(found.as_dict())
    else:
        what = f"campaign {escape(found.campaign)} on " if found.campaign else ""
        console.print(
            f"{what}system {escape(found.system)} ({escape(found.profile)}); jobs run with "
            f"{escape(found.python)}",
            highlight=False,
        )
        for c in found.checks:
            mark = "[green]passed[/green]" if c.passed else "[red]FAILED[/red]"
            fix = f"; fix: {escape(c.fix)}" if c.fix else ""
            console.print(f"{mark}  {escape(c.name)}: {escape(c.detail)}{fix}", highlight=False)
    if not found.ok:
        raise typer.Exit(1)


# what the frameworks check of their own libraries, named by each (Framework.doctor_words)
doctor.__doc__ = (doctor.__doc__ or "").replace(
    "FRAMEWORK_LIBRARIES", ", ".join(api.doctor_words())
)
