"""Which runs of a campaign directory are stale: no longer in the campaign's matrix since the
campaign file was edited. `collect` and `report` leave them out unless asked for them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from hpcscale.formats.run_record import campaign_version_of
from hpcscale.state.ledger import LEDGER_NAME, Ledger


class _Version(msgspec.Struct):
    campaign_version: str | None = None


def stale_runs(cdir: Path, dirs: Iterable[Path]) -> set[str]:
    """Run ids the campaign's matrix no longer has: those the ledger marks stale, and of the
    runs it does not know (rendered, never submitted) those whose run.json names another
    version of the campaign file than campaign.yaml (the latest render's)."""
    known: set[str] = set()
    stale: set[str] = set()
    if (cdir / LEDGER_NAME).exists():
        with Ledger(cdir) as ledger:
            for row in ledger.rows():
                known.add(row.run_id)
                if row.stale:
                    stale.add(row.run_id)
    try:
        current = campaign_version_of((cdir / "campaign.yaml").read_bytes())
    except OSError:
        return stale
    for d in dirs:
        if d.name in known:
            continue
        try:
            version = msgspec.json.decode((d / "run.json").read_bytes(), type=_Version)
        except (OSError, msgspec.DecodeError):
            continue  # its problem is reported when it is read
        if version.campaign_version not in (None, current):
            stale.add(d.name)
    return stale
