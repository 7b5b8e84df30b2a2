"""Where the files a run needs live: system profiles, job templates, the bundled programs (jobs/
with its manifest) and the example campaigns.

An installed hpcscale carries them as package data: the profiles in hpcscale/systems/, the rest
in hpcscale/_data/, copied there from the repository's top-level templates/, jobs/ and campaigns/
when the wheel is built (setup.py). A checkout (an editable install) has no hpcscale/_data/: there
the top-level folders themselves are used. This module is the one place that knows both, so
nothing else looks for a source tree; nothing here writes anything.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

Bundled = Literal["templates", "jobs", "campaigns"]
DATA_PACKAGE_DIR = "_data"  # inside the installed hpcscale package (setup.py puts them there)


def package_root() -> Path:
    """The directory of the imported hpcscale package (a real directory: wheels install
    unpacked, and the job templates and programs must be files for Jinja and for python)."""
    root = resources.files("hpcscale")
    if not isinstance(root, Path):  # a zip import: nothing here could run from it
        raise RuntimeError(f"hpcscale is imported from {root}, not from a directory")
    return root


@cache
def bundled_dir(name: Bundled) -> Path:
    """`name` as package data (an installed hpcscale), else the checkout's top-level folder.
    A missing folder is returned as the package-data path, so errors name where it belongs."""
    root = package_root()
    packaged = root / DATA_PACKAGE_DIR / name
    if packaged.is_dir():
        return packaged
    checkout = root.parent
    if (checkout / name).is_dir() and (checkout / "pyproject.toml").is_file():
        return checkout / name
    return packaged


def systems_dir() -> Path:
    """The shipped system profiles (plain package data in every kind of install)."""
    return package_root() / "systems"


def templates_dir() -> Path:
    return bundled_dir("templates")


def jobs_dir() -> Path:
    return bundled_dir("jobs")


def campaigns_dir() -> Path:
    return bundled_dir("campaigns")


def shipped_example(path: Path) -> str | None:
    """The shipped campaign a bare name or file name means (`quickstart`, `quickstart.yaml`),
    if there is one: the name a user types after reading about it, before `init --example`."""
    name = path.name[: -len(path.suffix)] if path.suffix in (".yaml", ".yml") else path.name
    if path.parent != Path(".") or not name:
        return None
    return name if (bundled_dir("campaigns") / f"{name}.yaml").is_file() else None
