"""`hpcscale`: campaign -> runs -> scripts -> jobs -> metrics and timelines -> report.

Every command is a thin wrapper; errors the user can fix print one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from hpcscale.cli import helpfmt
from hpcscale.cli.common import console, err_console
from hpcscale.cli.lazy import LazyGroup
from hpcscale.model.errors import HpcscaleError, InputError
from hpcscale.model.resources import shipped_example
from hpcscale.version import hpcscale_version

# Every command, in the order `hpcscale --help` lists them: name -> (module, attribute: the
# command's function, or a Typer app of subcommands). A module is imported only when its command
# is run, completed or shown in help (hpcscale.cli.lazy): `hpcscale report` does not pay for
# submit's backends or the dev cluster.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("hpcscale.cli.init", "init"),
    "doctor": ("hpcscale.cli.doctor", "doctor"),
    "validate": ("hpcscale.cli.campaign", "validate"),
    "plan": ("hpcscale.cli.campaign", "plan"),
    "render": ("hpcscale.cli.campaign", "render"),
    "models": ("hpcscale.cli.models", "models"),
    "submit": ("hpcscale.cli.submit", "submit"),
    "status": ("hpcscale.cli.status", "status"),
    "logs": ("hpcscale.cli.status", "logs"),
    "cancel": ("hpcscale.cli.submit", "cancel"),
    "resubmit": ("hpcscale.cli.submit", "resubmit"),
    "collect": ("hpcscale.cli.collect", "collect"),
    "timeline": ("hpcscale.cli.collect", "timeline"),
    "trace": ("hpcscale.cli.collect", "trace"),
    "report": ("hpcscale.cli.report", "report"),
    "compare": ("hpcscale.cli.compare", "compare"),
    "cluster": ("hpcscale.cli.cluster", "app"),
}

app = typer.Typer(
    name="hpcscale",
    help=(
        "Distributed deep-learning scaling studies from one campaign YAML.\n\n"
        "Typical session:\n\n"
        "\b\n"
        "  hpcscale init                    # a starter campaign + profile here\n"
        "  hpcscale doctor                  # can this machine run it?\n"
        "  hpcscale validate campaign.yaml  # every key checked, nothing written\n"
        "  hpcscale plan campaign.yaml      # what will run\n"
        "  hpcscale submit campaign.yaml    # render + submit (slurm or local)\n"
        "  hpcscale status first_study      # where each run is\n"
        "  hpcscale collect --timeline      # metrics + traces -> table\n"
        "  hpcscale report                  # tables and plots\n\n"
        "A shipped example instead: hpcscale init --list, then hpcscale init --example "
        "quickstart. Shell completion of commands, campaign, example and system names: "
        "hpcscale --install-completion (bash, zsh, fish), then open a new shell."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=LazyGroup.of(COMMANDS),
)

_state = {"debug": False}


def _print_version(value: bool) -> None:
    if value:
        console.print(f"hpcscale {hpcscale_version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks for errors")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    _state["debug"] = debug


helpfmt.install()


def _hint(exc: HpcscaleError) -> str:
    """What to do about a missing campaign file that names a shipped example."""
    missing = isinstance(exc, InputError) and exc.message == "no such file"
    if missing and (example := shipped_example(Path(exc.file))) is not None:
        return f"; `hpcscale init --example {example}` copies the shipped campaign here"
    return ""


def run() -> None:
    """Console entry point: user errors -> one line on stderr and their exit code."""
    debug = "--debug" in sys.argv[1:]
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code instead of exiting
    except HpcscaleError as exc:
        if debug:
            raise
        err_console.print(f"[red]error:[/red] {escape(str(exc) + _hint(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; state on disk is consistent, re-run the command to resume")
        sys.exit(130)
    except Exception as exc:  # the CLI library's own usage errors and aborts
        code = getattr(exc, "exit_code", None)
        if callable(getattr(exc, "show", None)) and isinstance(code, int):  # usage error
            exc.show()  # type: ignore[attr-defined]
            sys.exit(code)
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        if debug:
            raise
        err_console.print(
            f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))} "
            "(run with --debug for the traceback)"
        )
        sys.exit(1)
    if code == 130:
        err_console.print("interrupted; state on disk is consistent, re-run the command to resume")
    if isinstance(code, int) and code:
        sys.exit(code)
