"""Real Horovod timelines for the collector's tests, made once per session.

Three tiny runs of jobs/tf/train.py at np=2 (DCGAN, 16 px, width 8, 2 epochs of 3 steps):
- `mpi`:    mpirun (MPI controller and MPI_ALLREDUCE), plain timeline;
- `gloo`:   horovodrun --gloo (Gloo controller, GLOO_ALLREDUCE), HOROVOD_TIMELINE_MARK_CYCLES=1;
- `killed`: mpirun, SIGTERM to mpirun once the first epoch is logged: the live, node-local
            timeline is taken as the kill left it (the harness never gets to copy it). It ends
            with negotiations never closed and, unless the kill landed mid-write, a whole
            record: the tests cut copies of it inside a record where they need a cut one.
The runs are cached in a module global, so both test modules that import the fixture share one
set of runs per session. HPCSCALE_REAL_TIMELINES=DIR reuses the runs a previous session left in
DIR (mpi/, gloo/, live/), to iterate on the tests without training again.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "jobs" / "tf" / "train.py"
TINY = [
    "--model", "dcgan", "--batch-per-rank", "4", "--image-size", "16", "--width", "8",
    "--latent-dim", "16", "--threads", "1", "--timeline",
]  # fmt: skip
HAVE_HOROVOD = (
    importlib.util.find_spec("horovod") is not None
    and shutil.which("mpirun") is not None
    and TRAIN.exists()
)
ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "20",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "120",
}


@dataclass(frozen=True)
class RealRuns:
    mpi: Path  # run dir: metrics.json, steps.json, timeline.json
    gloo: Path  # run dir, timeline with CYCLE_START markers
    killed: Path  # the live timeline file as SIGTERM left it (spans never closed)


_CACHE: dict[str, RealRuns] = {}


def _mpirun(args: list[str]) -> list[str]:
    exports = [x for name in ENV if name.startswith(("TF_", "HOROVOD_")) for x in ("-x", name)]
    return ["mpirun", "-np", "2", "--oversubscribe", *exports, sys.executable, str(TRAIN), *args]


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )


def _run_mpi(run_dir: Path) -> None:
    args = [*TINY, "--run-dir", str(run_dir), "--epochs", "2", "--steps-per-epoch", "3"]
    proc = subprocess.run(
        _mpirun(args), capture_output=True, text=True, timeout=900, env={**os.environ, **ENV}
    )
    _check(proc, "mpirun train.py")


def _run_gloo(run_dir: Path, tmp: Path) -> None:
    # horovodrun's own options would swallow train.py's (--timeline is ambiguous to it): wrap.
    script = tmp / "gloo.sh"
    args = [*TINY, "--run-dir", str(run_dir), "--epochs", "2", "--steps-per-epoch", "3"]
    script.write_text(
        "#!/bin/sh\nexec " + " ".join([sys.executable, str(TRAIN), *args, "--mark-cycles"]) + "\n"
    )
    script.chmod(0o755)
    horovodrun = Path(sys.executable).with_name("horovodrun")
    cmd = [str(horovodrun), "--gloo", "-np", "2", "-H", "localhost:2", str(script)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **ENV}
    )
    _check(proc, "horovodrun --gloo train.py")


def _run_killed(run_dir: Path, live: Path) -> Path:
    live.mkdir(parents=True, exist_ok=True)
    args = [*TINY, "--run-dir", str(run_dir), "--epochs", "4", "--steps-per-epoch", "20",
            "--timeline-dir", str(live)]  # fmt: skip
    proc = subprocess.Popen(
        _mpirun(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **ENV},
        start_new_session=True,
    )
    deadline = time.monotonic() + 900
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "epoch 1/" in line or time.monotonic() > deadline:
                break
        else:
            raise RuntimeError("train.py ended before its first epoch:\n" + "".join(seen[-30:]))
        proc.send_signal(signal.SIGTERM)  # to mpirun, which forwards it to the ranks
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    found = sorted(live.glob("hpcscale-timeline-*/timeline.json"))
    if not found:
        raise RuntimeError(f"no live timeline under {live} after SIGTERM")
    return max(found, key=lambda p: p.stat().st_size)


def make_real_runs(tmp: Path) -> RealRuns:
    reuse = os.environ.get("HPCSCALE_REAL_TIMELINES")
    if reuse and "runs" not in _CACHE:
        root = Path(reuse)
        killed = max(
            root.glob("live/hpcscale-timeline-*/timeline.json"), key=lambda p: p.stat().st_size
        )
        _CACHE["runs"] = RealRuns(mpi=root / "mpi", gloo=root / "gloo", killed=killed)
    if "runs" not in _CACHE:
        mpi, gloo = tmp / "mpi", tmp / "gloo"
        _run_mpi(mpi)
        _run_gloo(gloo, tmp)
        killed = _run_killed(tmp / "killed", tmp / "live")
        _CACHE["runs"] = RealRuns(mpi=mpi, gloo=gloo, killed=killed)
    return _CACHE["runs"]


@pytest.fixture(scope="session", name="real_runs")
def real_runs_fixture(tmp_path_factory: pytest.TempPathFactory) -> RealRuns:
    if not HAVE_HOROVOD:
        pytest.skip("Horovod, mpirun or jobs/tf/train.py not available")
    return make_real_runs(tmp_path_factory.mktemp("real-timelines"))
