"""The version of hpcscale that is running, as its package metadata says (what pip installed);
a source tree that was never installed falls back to `hpcscale.__version__`. Recorded in every
run.json and report, and printed by `hpcscale --version`."""

from __future__ import annotations

from functools import cache
from importlib import metadata

from hpcscale import __version__


@cache
def hpcscale_version() -> str:
    try:
        return metadata.version("hpcscale")
    except metadata.PackageNotFoundError:
        return __version__
