"""The dry run: render and say what would be submitted, submit nothing, write no ledger."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpcscale.backends.base import Backend, BackendOptions, Refreshed, Reporter, Submission

if TYPE_CHECKING:
    from hpcscale.render.render import Rendered
    from hpcscale.state.ledger import Ledger


class DryBackend(Backend):
    """Describes a submission through the backend that would make it (`target`)."""

    name = "dry"

    def __init__(
        self, campaign_dir: Path, reporter: Reporter | None = None, target: Backend | None = None
    ) -> None:
        super().__init__(campaign_dir, reporter)
        self.target = target

    def options(self, options: BackendOptions | None) -> BackendOptions:
        return self.target.options(options) if self.target else super().options(options)

    def submit(
        self, rendered: Sequence[Rendered], ledger: Ledger | None, options: BackendOptions
    ) -> Submission:
        out = Submission(self.name, skipped=[r.run.run_id for r in rendered])
        out.described = self.describe(rendered, options)
        return out

    def describe(self, rendered: Sequence[Rendered], options: BackendOptions) -> list[str]:
        if self.target is not None:
            return self.target.describe(rendered, options)
        return [f"bash {r.run_dir / 'job.sbatch'}" for r in rendered]

    def refresh(self, ledger: Ledger) -> Refreshed:
        return Refreshed()

    def cancel(self, ledger: Ledger, run_ids: Sequence[str]) -> list[str]:
        return []

    def in_use(self, rows: Sequence[object]) -> bool:
        return False
