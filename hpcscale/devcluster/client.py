"""SLURM client commands against one local cluster, for `up`, `status` and `down`.

They go through the SLURM backend's own runner (`query.run`: a timeout on every call, a hang
or a missing program returned as a failed Result), with SLURM_CONF set for the child only: this
process's environment is not ours to change.
"""

from __future__ import annotations

from hpcscale.backends.slurm.query import TIMED_OUT, Result, run
from hpcscale.devcluster.layout import Layout

__all__ = ["TIMED_OUT", "slurm"]


def slurm(lay: Layout, *args: str, timeout: float = 10.0) -> Result:
    """Run `args` (sinfo, squeue, scancel, scontrol ...) against the cluster in `lay`."""
    return run(list(args), timeout, env={"SLURM_CONF": str(lay.slurm_conf)})
