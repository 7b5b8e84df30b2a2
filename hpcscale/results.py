"""What the API returns: typed objects, for scripts and notebooks as for the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcscale.backends.base import StateChange
from hpcscale.backends.outputs import RunOutput
from hpcscale.model.campaign import Campaign, LoadedCampaign
from hpcscale.model.run import Run
from hpcscale.model.system import System
from hpcscale.plan.expand import Excluded, Plan
from hpcscale.render.render import Rendered
from hpcscale.state.ledger import RunRow


@dataclass
class Planned:
    """A validated campaign and the runs it expands to."""

    loaded: LoadedCampaign
    expansion: Plan

    @property
    def campaign(self) -> Campaign:
        return self.loaded.campaign

    @property
    def system(self) -> System:
        return self.loaded.system

    @property
    def runs(self) -> list[Run]:
        return self.expansion.runs

    @property
    def excluded(self) -> list[Excluded]:
        return self.expansion.excluded

    @property
    def axes(self) -> dict[str, list[Any]]:
        return self.expansion.axes


@dataclass
class RenderedCampaign:
    """A campaign whose run directories (job.sbatch, run.json) are written."""

    planned: Planned
    directory: Path
    runs: list[Rendered]


@dataclass
class CampaignStatus:
    """A campaign's runs as the ledger has them after a refresh from every backend in use;
    `outputs`: run id -> its output file and failure reason (runs that have started)."""

    name: str
    directory: Path
    rows: list[RunRow]
    changes: list[StateChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    outputs: dict[str, RunOutput] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows:
            out[str(row.state)] = out.get(str(row.state), 0) + 1
        return dict(sorted(out.items()))

    @property
    def ended(self) -> bool:
        return all(row.terminal for row in self.rows)


@dataclass
class Cancelled:
    campaign: str
    run_ids: list[str]
    jobs: list[str]
    warnings: list[str] = field(default_factory=list)
