"""A real finished quickstart (campaigns/quickstart.yaml: DCGAN, 1 and 2 ranks, Horovod timeline),
run once per test session through the real CLI and mpirun, and fresh copies of it for tests that
damage their copy (a corrupt metrics.json, a truncated timeline, ...)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CAMPAIGNS, hpcscale


@pytest.fixture(scope="session")
def finished_quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workdir of a finished, collected quickstart (its campaign directory is
    `<workdir>/quickstart`). Read-only: copy it (`quickstart_copy`) before changing anything."""
    wd = tmp_path_factory.mktemp("quickstart") / "runs"
    hpcscale(
        "submit", str(CAMPAIGNS / "quickstart.yaml"), "--backend", "local", "-w", str(wd),
        check=True, timeout=1800,
    )  # fmt: skip
    hpcscale("collect", "quickstart", "--timeline", "-w", str(wd), check=True, timeout=600)
    return wd


@pytest.fixture
def quickstart_copy(finished_quickstart: Path, tmp_path: Path) -> Callable[[], Path]:
    """Returns a function making a fresh copy of the finished quickstart's workdir; the copy's
    collect cache and results are removed, so the next collect reads the (damaged) files."""

    def copy() -> Path:
        n = len(list(tmp_path.glob("copy*")))
        wd = tmp_path / f"copy{n}" / "runs"
        shutil.copytree(finished_quickstart, wd, symlinks=True)
        cdir = wd / "quickstart"
        for name in (".collect-cache.json", "results.parquet", "results.csv"):
            (cdir / name).unlink(missing_ok=True)
        shutil.rmtree(cdir / "report", ignore_errors=True)
        return wd

    return copy


def run_dir_of(workdir: Path, ranks: int) -> Path:
    """The quickstart run directory with this many ranks (1 or 2)."""
    import json

    for rd in sorted((workdir / "quickstart" / "runs").iterdir()):
        rec = json.loads((rd / "run.json").read_text())
        if rec.get("ranks") == ranks:
            return rd
    raise AssertionError(f"no {ranks}-rank run under {workdir}")
