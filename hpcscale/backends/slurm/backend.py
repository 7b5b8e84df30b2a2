"""The SLURM backend behind the Backend interface. It reaches a cluster, real or the local
development one, only through the standard SLURM environment (SLURM_CONF, PATH)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcscale.backends.base import Backend, BackendOptions, Refreshed, Submission
from hpcscale.backends.slurm import arrays, submit, sync
from hpcscale.backends.slurm.repair import has_intents

if TYPE_CHECKING:
    from hpcscale.core.render import Rendered
    from hpcscale.state.ledger import Ledger, RunRow


@dataclass(frozen=True)
class SlurmOptions(BackendOptions):
    """`array`: one sbatch --array per resource shape (else one sbatch per run);
    `max_parallel`: the array throttle (%N), at most N tasks of an array at once."""

    array: bool = True
    max_parallel: int | None = None


class SlurmBackend(Backend):
    name = "slurm"
    options_type = SlurmOptions

    def in_use(self, rows: Sequence[RunRow]) -> bool:
        return super().in_use(rows) or has_intents(self.campaign_dir)

    def submit(
        self, rendered: Sequence[Rendered], ledger: Ledger, options: BackendOptions
    ) -> Submission:
        assert isinstance(options, SlurmOptions)
        return submit.submit_runs(
            rendered,
            ledger,
            self.campaign_dir,
            force=options.force,
            array=options.array,
            max_parallel=options.max_parallel,
            reporter=self.reporter,
        )

    def refresh(self, ledger: Ledger) -> Refreshed:
        return sync.refresh(ledger, self.campaign_dir)

    def cancel(self, ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
        return submit.cancel(ledger, run_ids)

    def describe(self, rendered: Sequence[Rendered], options: BackendOptions) -> list[str]:
        assert isinstance(options, SlurmOptions)
        return arrays.describe(rendered, array=options.array, max_parallel=options.max_parallel)
