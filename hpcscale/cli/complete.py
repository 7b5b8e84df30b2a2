"""Shell completion of the names a user would otherwise look up: campaigns, shipped examples,
system profiles (`hpcscale --install-completion` installs it for bash, zsh or fish).

Each callback returns candidates only; typer keeps those starting with what was typed. They
read directory listings and the shipped files, never a campaign's contents, so a completion is
instant however large the workdir. When a callback has nothing to offer, the shell falls back
to its own file-name completion.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

YAML = (".yaml", ".yml")


def _yaml_files(incomplete: str) -> list[str]:
    """The campaign or profile files (*.yaml, *.yml) in the folder `incomplete` names."""
    folder, _, _ = incomplete.rpartition("/")
    root = Path(folder or ".")
    prefix = f"{folder}/" if folder else ""
    try:
        names = sorted(p.name for p in root.iterdir() if p.suffix in YAML and p.is_file())
    except OSError:
        return []
    return [prefix + name for name in names]


def campaign_names(ctx: Any, incomplete: str) -> list[str]:
    """Campaigns in this command's workdir, then those in every workdir hpcscale has used
    (`status NAME` finds them from anywhere), then campaign files here."""
    if "/" in incomplete or incomplete.endswith(YAML):
        return _yaml_files(incomplete)
    from hpcscale import api  # here: every command imports this module, few complete

    given = (getattr(ctx, "params", None) or {}).get("workdir")
    # as select_campaigns: other workdirs only when none was named
    named = api.campaign_names(given, elsewhere=not (given or os.environ.get("HPCSCALE_WORKDIR")))
    return list(dict.fromkeys([*named, *_yaml_files(incomplete)]))


def campaign_files(incomplete: str) -> list[str]:
    """Campaign files here (a command that reads the YAML itself)."""
    return _yaml_files(incomplete)


def example_names(incomplete: str) -> list[tuple[str, str]]:
    """The shipped campaigns, each with its description (zsh and fish show it)."""
    from hpcscale import api

    return [(e.name, e.description) for e in api.examples()]


def system_names(incomplete: str) -> list[str]:
    """Profiles by name (HPCSCALE_SYSTEMS_PATH, then the shipped ones), then profile files."""
    if "/" in incomplete or incomplete.endswith(YAML):
        return _yaml_files(incomplete)
    from hpcscale.model.system import search_dirs

    names: list[str] = []
    for folder in search_dirs():
        try:
            names += sorted(p.stem for p in folder.glob("*.yaml"))
        except OSError:
            continue
    return list(dict.fromkeys([*names, *_yaml_files(incomplete)]))
