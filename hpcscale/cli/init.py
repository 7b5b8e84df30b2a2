"""init: a starter campaign and a profile to edit, or a shipped example, in the user's directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import console
from hpcscale.cli.complete import example_names, system_names
from hpcscale.cli.tables import Grid

DirectoryArg = Annotated[Path, typer.Argument(help="where to write (created if missing)")]


def init(
    directory: DirectoryArg = Path("."),
    system: Annotated[
        str,
        typer.Option(
            "--system",
            help="the system profile to copy beside the starter (a name or a path)",
            autocompletion=system_names,
        ),
    ] = "local",
    example: Annotated[
        str | None,
        typer.Option(
            "--example",
            help="copy this shipped campaign instead (see --list)",
            show_default=False,
            autocompletion=example_names,
        ),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="list the shipped campaigns and exit")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="overwrite files that exist")] = False,
) -> None:
    """Start a study here: a commented campaign (nodes, layout, batchDEFAULT_KNOB) and a
    copy of a system profile to edit, or one of the shipped campaigns (--example). Never
    overwrites a file unless --force."""
    if list_:
        table = Grid("shipped campaigns (hpcscale init --example NAME)", ["name", "description"])
        for ex in api.examples():
            table.add_row(ex.name, ex.description)
        table.show(console)
        return
    done = api.init(directory, system=system, example=example, force=force)
    for path in done.written:
        console.print(f"wrote {escape(str(path))}", highlight=False)
    console.print("\nnext:", highlight=False)
    width = max(len(cmd) for cmd, _ in done.next_commands)
    for cmd, what in done.next_commands:
        console.print(f"  {escape(cmd.ljust(width))}   # {escape(what)}", highlight=False)


# the knob the starter sweeps, as its framework (the default) names it (Framework.starter)
_knob = api.starter_knob_words()
init.__doc__ = (init.__doc__ or "").replace("DEFAULT_KNOB", f", {_knob}" if _knob else "")
