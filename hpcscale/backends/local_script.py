"""This machine's part of a job script: no scheduler header (the local backend runs the script
with bash) and every rank on localhost. See hpcscale.backends.slurm.script for SLURM's."""

from __future__ import annotations

from hpcscale.model.run import Run
from hpcscale.model.system import System
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
