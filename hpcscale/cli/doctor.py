"""doctor: can this host run a campaign on a system? One line per check, a fix for each failure."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import JsonOpt, console, print_json


def doctor(
    system: Annotated[
        str, typer.Option("--system", help="the system profile to check for (a name or a path)")
    ] = "local",
    json: JsonOpt = False,
) -> None:
    """Check what a campaign on a system needs here: its launchers on PATH, SLURM answering
    (SLURM systems), the profile's Python with TensorFlow, Horovod (built with MPI, Gloo,
    NCCL) and mpi4py, and the compiled timeline scanner. Exit 0 when all pass, 1 otherwise."""
    found = api.doctor(system)
    if json:
        print_json(found.as_dict())
    else:
        console.print(
            f"system {escape(found.system)} ({escape(found.profile)}); jobs run with "
            f"{escape(found.python)}",
            highlight=False,
        )
        for c in found.checks:
            mark = "[green]passed[/green]" if c.passed else "[red]FAILED[/red]"
            fix = f"; fix: {escape(c.fix)}" if c.fix else ""
            console.print(f"{mark}  {escape(c.name)}: {escape(c.detail)}{fix}", highlight=False)
    if not found.ok:
        raise typer.Exit(1)
