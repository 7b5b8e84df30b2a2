"""This machine's part of a job script: no scheduler header (the local backend runs the script
with bash) and every rank on localhost. See hpcscale.backends.slurm.script for SLURM's."""

from __future__ import annotations

from hpcscale.model.run import Run
from hpcscale.model.system import System, python_of
from hpcscale.util.shell import Shell, quote

HEADER = Shell("# local run: started by `hpcscale submit --backend local`, not by sbatch")


def context(run: Run, system: System, run_dir: str, run_id: str) -> dict[str, object]:
    """What a local job's template sees of its (absent) scheduler."""
    return {"preamble": [HEADER], "hostlist": hostlist(run)}


def hostlist(run: Run) -> Shell:
    """No allocation: every rank on this machine."""
    return Shell(
        f"awk -v n={quote(run.ranks)} "
        '\'BEGIN {for (i = 0; i < n; i++) print "localhost"}\' > "$HPCSCALE_HOSTFILE"'
    )


# a free port on 127.0.0.1, asked of the kernel when the run starts (runs here share no job id)
FREE_PORT = (
    "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
)


def rendezvous(run: Run, system: System) -> list[Shell]:
    """Every rank on this machine: MASTER_ADDR is loopback, MASTER_PORT a free port."""
    ask = f"{quote(python_of(system))} -c {quote(FREE_PORT)}"
    return [
        Shell("# where the ranks meet (torch): this machine, a port free when the run starts"),
        Shell(f'MASTER_ADDR=127.0.0.1 MASTER_PORT="$({ask})"'),
        Shell("export MASTER_ADDR MASTER_PORT"),
    ]
