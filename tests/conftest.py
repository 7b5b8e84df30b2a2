"""Shared fixtures. Real parts only: campaigns on disk, real mpirun, real Horovod, real SLURM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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


def hpcscale(
    *args: str, env: dict[str, str] | None = None, check: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real console script as a user would."""
    exe = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"
    proc = subprocess.run(
        [exe, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"hpcscale {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


from tests.packaging_fixture import installed_hpcscale  # noqa: E402, F401  (the wheel, installed)
from tests.quickstart_fixture import finished_quickstart, quickstart_copy  # noqa: E402, F401
from tests.slurm_fixture import slurm_cluster  # noqa: E402, F401  (session fixture: real SLURM)
