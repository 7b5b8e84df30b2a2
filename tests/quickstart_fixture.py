"""A real finished quickstart (campaigns/quickstart.yaml: DCGAN, 1 and 2 ranks, Horovod timeline),
run once per test session through the real CLI and mpirun, and fresh copies of it for tests that
damage their copy (a corrupt metrics.json, a truncated timeline, ...).

It is run as a user runs it: by hpcscale installed from its wheel (tests/packaging_fixture.py),
from a directory outside the checkout, on the campaign `hpcscale init --example quickstart`
copies there; so the same run is the end-to-end test of the installed package
(tests/integration/test_packaging.py) and no second TensorFlow run is needed for it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.packaging_fixture import Installed


@pytest.fixture(scope="session")
def finished_quickstart(
    tmp_path_factory: pytest.TempPathFactory, installed_hpcscale: Installed
) -> Path:
    """The workdir of a finished, collected quickstart (its campaign directory is
    `<workdir>/quickstart`). Read-only: copy it (`quickstart_copy`) before changing anything."""
    home = tmp_path_factory.mktemp("quickstart")  # the user's directory, outside the checkout
    wd = home / "runs"
    run = installed_hpcscale.run
    run("init", "--example", "quickstart", cwd=home, check=True)
    run("submit", "quickstart.yaml", "--backend", "local", "-w", str(wd), cwd=home, check=True,
        timeout=1800)  # fmt: skip
    run("collect", "quickstart", "--timeline", "-w", str(wd), cwd=home, check=True, timeout=600)
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
