"""horovodrun, through the job's Python (`-m horovod.runner.launch`): nothing needs to be on
PATH, so a venv need not be activated. Knobs go as its own flags (fusion in MB here)."""

from __future__ import annotations

from hpcscale.launchers.base import Launcher, LaunchRequest
from hpcscale.util.shell import Raw


class Horovodrun(Launcher):
    name = "horovodrun"
    reads_hostfile = True
    implies_strategy = "horovod"  # it starts Horovod programs only

    def argv(self, req: LaunchRequest) -> list[object]:
        run = req.run
        knobs: list[object] = []
        if (fusion := run.knob("fusion_threshold_mb")) is not None:
            knobs += ["--fusion-threshold-mb", fusion]
        if (cycle := run.knob("cycle_time_ms")) is not None:
            knobs += ["--cycle-time-ms", cycle]
        if run.knob("hierarchical_allreduce"):
            knobs.append("--hierarchical-allreduce")
        hosts = Raw('"$HPCSCALE_HOSTS"') if self.needs_hostfile(req.allocated) else None
        return [
            req.python,
            "-m",
            "horovod.runner.launch",
            "-np",
            run.ranks,
            "-H",
            hosts if hosts is not None else f"localhost:{run.ranks}",
            *knobs,
            *req.extra,
            *req.program,
        ]
