"""Packs the repository's top-level templates/, jobs/ and campaigns/ into the wheel as package
data (hpcscale/_data/<folder>/), so an installed hpcscale carries what a run needs while the
repository keeps one copy of each where users expect it. Everything else is in pyproject.toml;
hpcscale/model/resources.py finds the folders in either place (an editable install uses the top-level
ones, so this copy is skipped there)."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("templates", "jobs", "campaigns")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


class BuildPyWithData(build_py):
    """build_py, plus the bundled folders copied under hpcscale/_data/ in the build tree."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        here = Path(__file__).resolve().parent
        for name in BUNDLED:
            source = here / name
            if not source.is_dir():
                raise SystemExit(f"setup.py: {source} is missing (an incomplete sdist?)")
            target = Path(self.build_lib) / "hpcscale" / "_data" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=IGNORED)


setup(cmdclass={"build_py": BuildPyWithData})
