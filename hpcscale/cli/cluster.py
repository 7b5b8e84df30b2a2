"""`hpcscale cluster up | down | status`: the local SLURM cluster.

Progress goes to stderr; `up` prints only the `export SLURM_CONF=...` line on stdout, so
`eval "$(hpcscale cluster up)"` points the shell's SLURM commands, and hpcscale's SLURM backend,
at the cluster: nothing finds it any other way. `status` says how to do that, too.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hpcscale.devcluster.cluster import LocalCluster
from hpcscale.devcluster.status import ClusterInfo

app = typer.Typer(
    help="A local SLURM cluster on this machine (munge, MariaDB, slurmdbd, slurmctld and N "
    "virtual nodes on 127.0.0.1) for trying campaigns and for the tests.",
    no_args_is_help=True,
)

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="HPCSCALE_CLUSTER_DIR",
        help="Where the cluster keeps config, logs, pids and its database "
        "(default: ~/.local/share/hpcscale/cluster).",
        show_default=False,
    ),
]
# paths and commands to copy: printed verbatim, never wrapped or read as markup
PLAIN: dict[str, Any] = {"soft_wrap": True, "markup": False}


def _err() -> Console:
    return Console(stderr=True, highlight=False)


@app.command()
def up(
    state_dir: StateDir = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", help="Virtual compute nodes (default: 4).")
    ] = None,
    cpus_per_node: Annotated[
        int | None, typer.Option("--cpus-per-node", help="CPUs each node declares (default: 4).")
    ] = None,
    port_base: Annotated[
        int | None,
        typer.Option("--port-base", help="First of 100 ports on 127.0.0.1 (default: 17000)."),
    ] = None,
) -> None:
    """Start the cluster (or the parts that are not running) and wait until nodes are idle."""
    err = _err()
    t0 = time.monotonic()
    cluster = LocalCluster(state_dir)
    with err.status("starting the local SLURM cluster…") as spinner:

        def say(msg: str) -> None:
            spinner.update(msg)
            err.print(f"[green]✓[/] {msg}")

        info = cluster.up(
            progress=say, nodes=nodes, cpus_per_node=cpus_per_node, port_base=port_base
        )
    err.print(
        f"cluster [bold]{info.cluster_name}[/] up: {len(info.nodes)} nodes, partition "
        f"[bold]{info.partition}[/] ({time.monotonic() - t0:.1f} s); state in {info.state_dir}",
        soft_wrap=True,
    )
    if sys.stdout.isatty():  # not eval'd: this shell does not see the cluster yet
        err.print(f"point this shell at it: {info.up_command}", **PLAIN)
    print(info.export_line)


@app.command()
def down(
    state_dir: StateDir = None,
    purge: Annotated[
        bool,
        typer.Option("--purge", help="Also delete all state and the accounting database."),
    ] = False,
) -> None:
    """Cancel running jobs and stop exactly the daemons `up` started (by recorded pid)."""
    err = _err()
    cluster = LocalCluster(state_dir)
    with err.status("stopping the local SLURM cluster…") as spinner:

        def say(msg: str) -> None:
            spinner.update(msg)
            err.print(f"  {msg}")

        cluster.down(purge=purge, progress=say)


@app.command()
def status(
    state_dir: StateDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What runs: each daemon with its pid, the nodes as SLURM sees them."""
    info = LocalCluster(state_dir).status()
    if as_json:
        print(json.dumps(info.to_dict(), indent=1))
        return
    _print_status(info)


def _print_status(info: ClusterInfo) -> None:
    out = Console(highlight=False)
    if not info.daemons:
        out.print(f"no cluster in {info.state_dir}", **PLAIN)
        out.print(f"start one and point this shell at it: {info.up_command}", **PLAIN)
        return
    word = "[green]up[/]" if info.up else "[red]not (fully) up[/]"
    out.print(f"cluster [bold]{info.cluster_name}[/] in {info.state_dir}: {word}")
    daemons = Table("daemon", "pid", "state", "log", box=None)
    for d in info.daemons:
        state = "[green]running[/]" if d.alive else "[red]stopped[/]"
        daemons.add_row(d.name, str(d.pid or "-"), state, d.log)
    out.print(daemons)
    if info.nodes:
        nodes = Table("node", "state", "cpus", "memory MB", box=None)
        for n in info.nodes:
            nodes.add_row(n.name, n.state, str(n.cpus), str(n.memory_mb))
        out.print(nodes)
    if not info.up:
        out.print(f"bring it up and point this shell at it: {info.up_command}", **PLAIN)
        return
    if os.environ.get("SLURM_CONF") == info.slurm_conf:
        out.print("this shell already points at it (SLURM_CONF); for another shell:")
    else:
        out.print("point a shell at it (hpcscale's SLURM backend reads SLURM_CONF):")
    out.print(info.export_line, **PLAIN)
