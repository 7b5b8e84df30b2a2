"""Where state lives: <workdir>/<campaign>/{campaign.yaml, ledger.sqlite, runs/<id>/, report/}."""

from __future__ import annotations

import os
from pathlib import Path

from hpcscale.model.errors import InputError, UsageError
from hpcscale.model.validation import did_you_mean
from hpcscale.model.yamlsrc import load_yaml
from hpcscale.state.workdirs import known_workdirs

DEFAULT_WORKDIR = "hpcscale-runs"


def workdir(explicit: str | Path | None = None) -> Path:
    return Path(explicit or os.environ.get("HPCSCALE_WORKDIR") or DEFAULT_WORKDIR).absolute()


def campaign_dir(name: str, wd: str | Path | None = None) -> Path:
    return workdir(wd) / name


def run_dir(campaign: str, run_id: str, wd: str | Path | None = None) -> Path:
    return campaign_dir(campaign, wd) / "runs" / run_id


def is_campaign_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "ledger.sqlite").exists() or (path / "runs").is_dir())


def find_campaigns(wd: str | Path | None = None) -> list[Path]:
    """Every campaign directory in the workdir (rendered or submitted)."""
    root = workdir(wd)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if is_campaign_dir(p))


def campaign_name_of(path: Path) -> str:
    """The `name:` of a campaign file, without validating the rest (it may name a system
    profile this machine does not have)."""
    src = load_yaml(path)
    name = src.data.get("name") if isinstance(src.data, dict) else None
    if not isinstance(name, str) or not name:
        raise InputError(str(path), src.line_of(("name",)), "name", "a campaign needs a name")
    return name


def select_campaigns(campaign: str | None, wd: str | Path | None = None) -> list[Path]:
    """The campaign directories a command works on: the one named (by name, campaign file or
    directory), or every campaign in the workdir."""
    root = workdir(wd)
    if campaign is None:
        dirs = find_campaigns(root)
        if not dirs:
            raise UsageError(f"no campaigns in {root}; submit one first or pass --workdir")
        return dirs
    p = Path(campaign)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise UsageError(f"campaign file {p} does not exist")
        d = root / campaign_name_of(p)
        hint = f"; submit it first (hpcscale submit {p})"
    elif is_campaign_dir(p) and p.parent != Path("."):
        d, hint = p, ""
    else:
        d = root / campaign
        if not is_campaign_dir(d) and wd is None and not os.environ.get("HPCSCALE_WORKDIR"):
            d = elsewhere(campaign, root) or d
        hint = _known_hint(campaign, root)
    if not is_campaign_dir(d):
        raise UsageError(f"no campaign {d.name!r} in {root}{hint}")
    return [d]


def elsewhere(name: str, root: Path) -> Path | None:
    """The campaign `name` in another workdir hpcscale has used (hpcscale.state.workdirs);
    a name in two of them is ambiguous, and said so with both."""
    found = [w / name for w in known_workdirs() if w != root and is_campaign_dir(w / name)]
    if len(found) > 1:
        listed = "; ".join(f"--workdir {w.parent}" for w in found)
        raise UsageError(f"campaign {name!r} is in {len(found)} workdirs: pass one ({listed})")
    return found[0] if found else None


def _known_hint(name: str, root: Path) -> str:
    """The campaigns there, and a did-you-mean among every known workdir's campaigns."""
    here = [x.name for x in find_campaigns(root)]
    others = {x.name for w in known_workdirs() if w != root for x in find_campaigns(w)}
    guess = did_you_mean(name, sorted({*here, *others}))
    return f"{guess} (campaigns there: {', '.join(here) or 'none'})"


def submitted_campaigns(campaign: str | None, wd: str | Path | None = None) -> list[Path]:
    """Campaign directories with a ledger (status and control need one)."""
    dirs = [d for d in select_campaigns(campaign, wd) if (d / "ledger.sqlite").exists()]
    if not dirs:
        raise UsageError(
            f"no submitted campaign{' ' + repr(campaign) if campaign else 's'} in "
            f"{workdir(wd)} (submit it first)"
        )
    return dirs
