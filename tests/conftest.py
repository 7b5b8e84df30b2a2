"""Shared fixtures. Real parts only: campaigns on disk, real mpirun, real Horovod, real SLURM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess as sp
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.cli_inprocess import run_in_process
from tests.xdist_groups import GROUPS_ENV, GroupScheduling, assign_groups, write_groups

REPO = Path(__file__).resolve().parents[1]
GROUPS_KEY = pytest.StashKey[dict]()  # group name -> its tests (tests/xdist_groups.py)
# The per-user index of workdirs (hpcscale.state.workdirs) of this test session only: the
# suite's many temporary workdirs never reach the user's own.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="hpcscale-xdg-")
CAMPAIGNS = REPO / "campaigns"
# A suite started in the background by a non-interactive shell (`make test &`, nohup) inherits
# SIGINT ignored, and so would every process it starts: the Ctrl-C tests would then test
# nothing. Ctrl-C behaves here as in a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wd = tmp_path / "runs"
    monkeypatch.setenv("HPCSCALE_WORKDIR", str(wd))
    return wd


# The CLI in this process by default: a fresh interpreter per call paid 1-2 s of imports,
# most of the integration tier's time. HPCSCALE_TEST_SUBPROCESS=1 runs every call as the
# console script again (to check a failure is not the in-process mode's).
SUBPROCESS_ENV = "HPCSCALE_TEST_SUBPROCESS"
# read once, when a module is imported (hpcscale.cli.progress, typer, rich, submitit) or when
# the interpreter starts: a call setting one of these gets its own process
IMPORT_TIME_ENV = frozenset(
    {"HPCSCALE_PROGRESS_DELAY", "SUBMITIT_LOG_LEVEL", "TERMINAL_WIDTH", "FORCE_COLOR",
     "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "GITHUB_ACTIONS", "PY_COLORS",
     "_TYPER_FORCE_DISABLE_TERMINAL", "LANG", "LC_ALL", "LC_CTYPE"}
)  # fmt: skip


def _exe() -> str:
    return shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"


def hpcscale(
    *args: str,
    env: dict[str, str] | None = None,
    check: bool = False,
    timeout: float = 600,
    subprocess: bool = False,
    cwd: Path | None = None,
) -> sp.CompletedProcess[str]:
    """Run the real CLI as a user would: its console entry point (`hpcscale.cli.main:run`) in
    this process, or the console script in its own (`subprocess=True`: where the process
    itself is what a test looks at). `cwd`: where it runs (default: here)."""
    overrides = {"COLUMNS": "200", **(env or {})}
    own = (
        subprocess
        or os.environ.get(SUBPROCESS_ENV, "") not in ("", "0")
        or threading.current_thread() is not threading.main_thread()
        or any(
            (k in IMPORT_TIME_ENV or k.startswith("PYTHON")) and os.environ.get(k) != v
            for k, v in (env or {}).items()
        )
    )
    if own:
        proc = sp.run(
            [_exe(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **overrides},
            cwd=cwd,
        )
    else:
        proc = run_in_process([_exe(), *args], overrides, cwd)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"hpcscale {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


from tests.classifier_fixture import (  # noqa: E402, F401  (one classifier campaign)
    backbone_file,
    classifier_campaign,
    folder_data,
)
from tests.packaging_fixture import installed_hpcscale  # noqa: E402, F401  (the wheel, installed)
from tests.quickstart_fixture import finished_quickstart, quickstart_copy  # noqa: E402, F401
from tests.slurm_fixture import slurm_cluster  # noqa: E402, F401  (session fixture: real SLURM)
from tests.stackgan_fixture import cub_dir, stackgan_campaign  # noqa: E402, F401  (one StackGAN run)


def pytest_configure(config: pytest.Config) -> None:
    """Under `--dist loadgroup` the xdist controller names the folder where its workers write
    their tests' groups (tests/xdist_groups.py); workers inherit it through the environment."""
    if getattr(config.option, "dist", "no") == "loadgroup" and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    ):
        os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="hpcscale-xdist-groups-")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` schedules by the suite's own groups (tests/xdist_groups.py)."""
    return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests sharing a session/module fixture or the SLURM cluster go to one xdist worker
    (tests/xdist_groups.py); HPCSCALE_TEST_SHOW_GROUPS=1 prints the groups (with
    --collect-only: check them without running anything)."""
    groups = assign_groups(items)
    config.stash[GROUPS_KEY] = groups
    if os.environ.get("HPCSCALE_TEST_SHOW_GROUPS") == "1" and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    ):
        tied = sum(len(v) for v in groups.values())
        print(f"\nxdist groups: {len(groups)} ({tied} tests); {len(items) - tied} tests free")
        for name, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            files = sorted({m.path.name for m in members})
            print(f"  {name}: {len(members)} tests in {', '.join(files)}")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook tells the controller it collected
def pytest_collection_finish(session: pytest.Session) -> None:
    """An xdist worker hands its tests' groups (final ids: after deselection) to the
    controller's scheduler."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get(GROUPS_ENV):
        groups = session.config.stash.get(GROUPS_KEY, {})
        write_groups(Path(os.environ[GROUPS_ENV]), worker, session.items, groups)
