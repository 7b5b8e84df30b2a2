"""The typed Python API the CLI is a thin layer over."""

from __future__ import annotations

from pathlib import Path

from hpcscale.core.campaign import LoadedCampaign, load_campaign
from hpcscale.core.expand import Plan, expand
from hpcscale.core.gcpause import gc_paused
from hpcscale.core.paths import campaign_dir
from hpcscale.core.render import Rendered, render_all

__all__ = ["Plan", "expand", "load_campaign", "plan_campaign", "render_campaign"]


def plan_campaign(path: str | Path) -> tuple[LoadedCampaign, Plan]:
    lc = load_campaign(path)
    with gc_paused():
        return lc, expand(lc)


def render_campaign(
    path: str | Path, workdir: str | Path | None = None, *, workers: int | None = None
) -> tuple[LoadedCampaign, Plan, list[Rendered]]:
    """Validate, expand and write every run's job.sbatch and run.json (all or nothing).
    `workers`: processes to render with (None: by campaign size and CPUs)."""
    lc, plan = plan_campaign(path)
    text = Path(lc.path).read_text(encoding="utf-8")
    rendered = render_all(
        plan.runs, lc.system, Path(workdir) if workdir else None, text, workers=workers
    )
    return lc, plan, rendered


def campaign_path_of(name_or_path: str, workdir: str | Path | None = None) -> Path:
    """A campaign YAML path, or a campaign name whose resolved copy lives in the workdir."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return campaign_dir(name_or_path, workdir) / "campaign.yaml"
