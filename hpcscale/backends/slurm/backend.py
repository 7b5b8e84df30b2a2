"""The SLURM backend behind the Backend interface. It reaches a cluster, real or the local
development one, only through the standard SLURM environment (SLURM_CONF, PATH)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpcscale.backends.base import Backend, BackendOptions, Refreshed, Submission
from hpcscale.backends.slurm import arrays, limits, stop, submit, sync
from hpcscale.backends.slurm import preflight as login_node
from hpcscale.backends.slurm.repair import has_intents
from hpcscale.model.errors import InputError
from hpcscale.model.run import Run
from hpcscale.model.system import System, load_system

if TYPE_CHECKING:
    from hpcscale.render.render import Rendered
    from hpcscale.state.ledger import Ledger, RunRow


@dataclass(frozen=True)
class SlurmOptions(BackendOptions):
    """`array`: job arrays per resource shape, split at the cluster's MaxArraySize (else one
    sbatch per run); `max_parallel`: the array throttle (%N), at most N tasks of an array at
    once; `follow`: when the queue's limits (MaxSubmitJobs, MaxJobCount) leave runs waiting,
    keep submitting them as the queue drains instead of returning."""

    array: bool = True
    max_parallel: int | None = None
    follow: bool = False


def with_throttle(
    options: BackendOptions, campaign_max: int | None, system_max: int | None
) -> BackendOptions:
    """The array throttle a submit uses: `submit --max-parallel`, else the campaign's
    `max_parallel`, else the system profile's (slurm-local: 1, since its virtual nodes share
    one machine and runs at once would measure each other), else none."""
    if not isinstance(options, SlurmOptions) or options.max_parallel is not None:
        return options
    return replace(options, max_parallel=campaign_max or system_max)


def profile_throttle(rendered: Sequence[Rendered]) -> int | None:
    """The runs' system profile's `max_parallel`, for submits that did not resolve one
    (`resubmit` has no campaign at hand); None when the profile is not found by name."""
    try:
        return load_system(rendered[0].run.system).max_parallel if rendered else None
    except InputError:
        return None


class SlurmBackend(Backend):
    name = "slurm"
    options_type = SlurmOptions

    @classmethod
    def preflight(cls, system: System, runs: Sequence[Run]) -> None:
        login_node.check(system, runs)

    def in_use(self, rows: Sequence[RunRow]) -> bool:
        return super().in_use(rows) or has_intents(self.campaign_dir)

    def submit(
        self, rendered: Sequence[Rendered], ledger: Ledger, options: BackendOptions
    ) -> Submission:
        assert isinstance(options, SlurmOptions)
        since = time.time()
        out = submit.submit_runs(
            rendered,
            ledger,
            self.campaign_dir,
            force=options.force,
            array=options.array,
            max_parallel=options.max_parallel or profile_throttle(rendered),
            reporter=self.reporter,
            follow=options.follow,
        )
        if out.submitted:  # what the refreshes of these runs enforce (stop.py)
            stop.remember(self.campaign_dir, options.max_failures, since)
        return out

    def refresh(self, ledger: Ledger) -> Refreshed:
        out = sync.refresh(ledger, self.campaign_dir)
        out += stop.stop_after_same_failures(ledger, self.campaign_dir)
        return out

    def cancel(self, ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
        return submit.cancel(ledger, run_ids)

    def outputs(self, row: RunRow) -> list[Path]:
        return sync.output_files(row, self.campaign_dir)

    def describe(self, rendered: Sequence[Rendered], options: BackendOptions) -> list[str]:
        """The sbatch calls, split as the cluster's limits (or SLURM's defaults, when no cluster
        answers) require; a dry run writes only run directories, and says which files a submit
        would add."""
        assert isinstance(options, SlurmOptions)
        lim = limits.read_limits()
        out = [f"# SLURM limits: {lim.summary()}"]
        if options.array and lim.array_tasks < 1:
            out.append("# job arrays are disabled here (MaxArraySize=0): one sbatch per run")
        if options.array:
            out.append(
                "# a dry run writes only the run directories; a submit also writes the "
                "arrays/ files marked `would write`, just before each sbatch"
            )
        if lim.max_submit is not None or lim.max_job_count is not None:
            usage, _ = limits.read_usage()
            room = limits.room(lim, usage)
            if room.runs is not None and room.runs < len(rendered):
                out.append(
                    f"# the queue has room for {room.runs} job(s) now ({room.why}): a submit "
                    f"would submit {room.runs} run(s) and leave {len(rendered) - room.runs} "
                    "waiting (RENDERED) for the next submit or --follow"
                )
        return out + arrays.describe(
            rendered,
            array=options.array,
            max_parallel=options.max_parallel,
            max_array_size=lim.array_tasks,
        )
