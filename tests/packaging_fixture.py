"""Session fixture `installed_hpcscale`: hpcscale as a user gets it, `pip install`ed from its
wheel into a fresh virtualenv, with no editable install and no checkout on `sys.path`.

The checkout's package inputs are copied to a scratch directory (nothing is written into the
shared working tree), an sdist is built from the copy and the wheel from that sdist (`pip wheel
--no-deps`, as `python -m build` does), so a file missing from the sdist is missing from the
wheel too. The build uses this environment's setuptools (`--no-build-isolation`: no index needed).

The wheel goes into a fresh virtualenv without pip. Its dependencies (pandas, ..., TensorFlow,
Horovod) come from the project's .venv through one .pth line naming that venv's site-packages:
site.py only appends such a directory to sys.path, it does not run the .pth files inside it, so
the editable finder installed there (`__editable___hpcscale_*_finder.install()`) is never
activated and the checkout's hpcscale cannot be imported. Horovod is not rebuilt (minutes of
C++). The fresh venv's own site-packages comes first, so its hpcscale and its metadata win.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what the build reads from the checkout (pyproject's readme, setup.py's folders, MANIFEST.in)
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
BUILD_TREES = ("hpcscale", "jobs", "templates", "campaigns", "docs")  # MANIFEST.in grafts docs
# variables that would put the checkout (or another run's workdir) in front of the installed one
SCRUBBED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "HPCSCALE_WORKDIR", "VIRTUAL_ENV")


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path  # the fresh venv's site-packages
    wheel: Path
    sdist: Path
    version: str  # from the wheel's file name

    @property
    def package(self) -> Path:
        return self.site / "hpcscale"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        return {**env, "COLUMNS": "200"}

    def run(
        self,
        *args: str,
        cwd: Path,
        timeout: float = 600,
        check: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The installed console script, run from `cwd` as a user would."""
        proc = subprocess.run(
            [str(self.venv / "bin" / "hpcscale"), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env(), **(env or {})},
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"hpcscale {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            )
        return proc


def _run(argv: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def build(scratch: Path) -> tuple[Path, Path]:
    """(sdist, wheel) of the checkout as it is now, built in `scratch`."""
    src, dist = scratch / "src", scratch / "dist"
    src.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    for name in BUILD_TREES:
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    sdist = dist / _run([sys.executable, "-c", code, str(dist)], cwd=src).strip().splitlines()[-1]
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(sdist)],
        cwd=scratch,
    )  # fmt: skip
    [wheel] = dist.glob("hpcscale-*.whl")
    return sdist, wheel


def install(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding `wheel` (no dependencies installed); its site-packages."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q",
          str(wheel)])  # fmt: skip
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]))
    site = Path(str(site).strip())
    (site / "hpcscale-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return site


@pytest.fixture(scope="session")
def installed_hpcscale(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    scratch = tmp_path_factory.mktemp("package")
    sdist, wheel = build(scratch)
    venv = scratch / "venv"
    site = install(wheel, venv)
    version = wheel.name.split("-")[1]
    return Installed(venv, site, wheel, sdist, version)
