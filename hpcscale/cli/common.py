"""Options and output helpers shared by the CLI modules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from hpcscale.cli.complete import campaign_files, campaign_names, system_names

# no emoji codes: `:x:` in a job's output or a path is text, never ❌
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)
# piped or redirected: one line per message, never wrapped at a guessed width (a path or a run id
# cut in two is no use to a script)
console.soft_wrap = not console.is_terminal
err_console.soft_wrap = not err_console.is_terminal

LARGE_CAMPAIGN = 10_000  # runs: more is allowed, with a warning


def warn_if_large(name: str, runs: int) -> None:
    """Say so when a campaign is large: most often an axis longer than meant."""
    if runs > LARGE_CAMPAIGN:
        err_console.print(
            f"[yellow]warning:[/yellow] campaign {escape(name)} has {runs:,} runs (more than "
            f"{LARGE_CAMPAIGN:,}): check its matrix axes; `hpcscale plan --json` lists them "
            "for scripts",
            highlight=False,
        )


WorkdirOpt = Annotated[
    Path | None,
    typer.Option(
        "--workdir",
        "-w",
        envvar="HPCSCALE_WORKDIR",
        show_envvar=True,
        help="where campaigns' run directories live (default: ./hpcscale-runs)",
    ),
]
CampaignArg = Annotated[
    str,
    typer.Argument(
        help="campaign YAML file (e.g. campaign.yaml, as `hpcscale init` writes it)",
        show_default=False,
        autocompletion=campaign_files,
    ),
]
CampaignsArg = Annotated[
    str | None,
    typer.Argument(
        help="campaign name in the workdir, or its YAML file; default: every campaign",
        show_default=False,
        autocompletion=campaign_names,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]


def print_json(obj: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(obj), indent=2) + b"\n")
    sys.stdout.flush()


SystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="system profile NAME or PATH to use instead of the campaign's `system:` "
        "(the same campaign on this machine, the local cluster, a real cluster)",
        show_default=False,
        autocompletion=system_names,
    ),
]
IncludeStaleOpt = Annotated[
    bool,
    typer.Option("--include-stale", help="also runs no longer in the campaign's matrix"),
]
