"""A planned campaign written into its directory: the name's claim (state.claim), every run's
job script and run.json (core.render), and the ledger's stale marks for the cells the campaign
file no longer has. `render` and `submit` write through here; a dry run leaves nothing behind
that a later command reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hpcscale.backends import script_for
from hpcscale.formats.run_record import campaign_version_of
from hpcscale.render.render import render_all
from hpcscale.results import Planned, RenderedCampaign
from hpcscale.state.claim import check_claim, claim
from hpcscale.state.ledger import LEDGER_NAME, Ledger
from hpcscale.state.paths import campaign_dir

PathLike = str | Path


def write_campaign(
    planned: Planned,
    workdir: PathLike | None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    dry: bool = False,
    force: bool = False,
) -> RenderedCampaign:
    """Render into the campaign's directory, which the file must own (state.claim); a dry run
    changes nothing a later command reads: no stale marks, no campaign.yaml, no claim."""
    lc = planned.loaded
    text = Path(lc.path).read_text(encoding="utf-8")
    wd = Path(workdir) if workdir else None
    cdir = campaign_dir(lc.campaign.name, wd)
    check_claim(cdir, lc.path, force)
    script = script_for(lc.system.scheduler)  # the scheduler's header and hosts line
    rendered = render_all(planned.runs, lc.system, script, wd, text, workers=workers,
                          progress=progress, record=not dry)  # fmt: skip
    if not dry:
        mark_stale(cdir, [r.run.run_id for r in rendered], campaign_version_of(text))
        claim(cdir, lc.path)
    return RenderedCampaign(planned, cdir, rendered)


def mark_stale(cdir: Path, run_ids: Sequence[str], version: str) -> None:
    """A submitted campaign rendered again: ledger runs its matrix no longer has are stale
    (kept, left out of status, collect and report), and runs that are back are not."""
    if (cdir / LEDGER_NAME).exists():
        with Ledger(cdir) as ledger:
            ledger.mark_stale(run_ids, f" (campaign file version {version})")
