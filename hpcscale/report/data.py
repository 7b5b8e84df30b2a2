"""Finding campaigns and their data: the campaign file (description, references, collect
options) and the collector's tidy run table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcscale.analysis.context import TableContext
from hpcscale.analysis.frame import measured
from hpcscale.collect import collector
from hpcscale.model.campaign import Campaign
from hpcscale.model.errors import UsageError
from hpcscale.model.targets import parse_target
from hpcscale.model.validation import validate
from hpcscale.model.yamlsrc import load_yaml
from hpcscale.state.paths import select_campaigns
from hpcscale.state.paths import workdir as resolve_workdir

if TYPE_CHECKING:
    from hpcscale.collect.collector import Collected


@dataclass
class CampaignSource:
    name: str
    dir: Path
    description: str = ""
    references: list[Any] = field(default_factory=list)
    timeline: bool = False
    system: str | None = None
    targets: list[Any] = field(default_factory=list)  # analysis.targets.TargetSpec


def campaign_source(cdir: Path, yaml_path: Path | None = None) -> CampaignSource:
    """What the report needs from the campaign file: `yaml_path` when the user named one (its
    references are the ones to check), else the resolved copy in the campaign directory.

    The system profile is not loaded: a report must not need the cluster's profile to exist."""
    path = yaml_path or cdir / "campaign.yaml"
    if not path.exists():
        return CampaignSource(cdir.name, cdir)
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise UsageError(f"{path}: a campaign must be a YAML mapping")
    camp = validate(Campaign, src.data, src)
    return CampaignSource(
        name=cdir.name,  # the directory is named by the campaign; a renamed copy stays apart
        dir=cdir,
        description=camp.description,
        references=list(camp.references),
        timeline=camp.collect.timeline,
        system=camp.system,
        targets=[
            parse_target(
                t.target,
                f"campaign file {path}:{src.line_of(('targets', i))}",
                placeholder=t.placeholder,
            )
            for i, t in enumerate(camp.targets)
        ],
    )


def collected_runs(source: CampaignSource, include_stale: bool = False) -> Collected:
    """The collector's result, collecting new runs first: `.frame` is the tidy table (one row
    per finished run), `.context` what travels beside it (planned runs, the (run id, reason)
    of runs it could not (fully) read, unfinished runs, and the runs no longer in the
    campaign's matrix, left out unless `include_stale`).

    Collection is incremental, so calling it every time only reads runs finished since the
    last `hpcscale collect`, and the report never shows an out-of-date table."""
    return collector.collect_campaign(
        source.dir, timeline=source.timeline, include_stale=include_stale
    )


def table_and_context(loaded: Collected | pd.DataFrame | None) -> tuple[pd.DataFrame, TableContext]:
    """A loader's result as (tidy table, what travels beside it): a `Collected` (its measured
    runs), or a plain table (a notebook's own: nothing known beyond its rows; runs it gives a
    `state` other than COMPLETED are not measurements, analysis.frame.measured)."""
    if loaded is None:
        return pd.DataFrame(), TableContext()
    if isinstance(loaded, pd.DataFrame):
        return measured(loaded), TableContext()
    return loaded.frame, loaded.context


def report_inputs(
    campaign: str | None,
    workdir: str | Path | None,
    out: str | Path | None = None,
    targets: Sequence[str] = (),
) -> tuple[list[Path], Path, dict[Path, CampaignSource], list[Any]]:
    """What `report` works on: the campaign directories (one named by name, file or directory,
    else every one in the workdir), the report directory, the campaign files the user named
    (their references are the ones to check, not the resolved copy's) and the `--target` goals
    parsed (bad syntax: UsageError)."""
    try:
        specs = [parse_target(t, "command line (--target)") for t in targets]
    except ValueError as exc:
        raise UsageError(f"--target: {exc}") from None
    wd = resolve_workdir(workdir)
    dirs = select_campaigns(campaign, wd)
    sources = {}
    if campaign is not None and Path(campaign).suffix in (".yaml", ".yml"):
        sources = {dirs[0]: campaign_source(dirs[0], Path(campaign))}
    out_dir = Path(out) if out else (dirs[0] / "report" if len(dirs) == 1 else wd / "report")
    return dirs, out_dir.absolute(), sources, specs
