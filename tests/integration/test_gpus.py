"""GPUs bound right, or a clear error: one GPU per local rank (jobs/tf/gpus.py, pure, tested here on
a CPU machine with device names as TensorFlow lists them), and the real job exiting 2 with the
message when it is asked for GPUs it cannot see."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.tf.config import JobUsageError
from jobs.tf.gpus import gpu_for_local_rank, gpus_for_replicas

TRAIN = Path(__file__).resolve().parents[2] / "jobs" / "tf" / "train.py"
GPUS = [f"/physical_device:GPU:{i}" for i in range(4)]


def test_each_local_rank_gets_its_own_gpu() -> None:
    assert [gpu_for_local_rank(GPUS, r, 4, "0,1,2,3") for r in range(4)] == [0, 1, 2, 3]
    # more GPUs than ranks: the first ones, still one each
    assert [gpu_for_local_rank(GPUS, r, 2, None) for r in range(2)] == [0, 1]
    assert gpu_for_local_rank(GPUS[:1], 0, 1, "3") == 0


@pytest.mark.parametrize(("cuda", "shown"), [(None, "unset"), ("", "''"), ("7", "'7'")])
def test_no_gpu_visible_is_a_usage_error_naming_what_is_seen(cuda: str | None, shown: str) -> None:
    """Was a ZeroDivisionError (`local_rank % len(gpus)`)."""
    with pytest.raises(JobUsageError) as exc:
        gpu_for_local_rank([], 0, 2, cuda)
    msg = str(exc.value)
    assert "sees no GPU" in msg
    assert "visible GPUs: none" in msg
    assert f"CUDA_VISIBLE_DEVICES={shown}" in msg
    assert "2 rank(s) per node" in msg


def test_fewer_gpus_than_local_ranks_is_an_error_on_every_rank() -> None:
    """Was silent sharing: with 2 GPUs and 4 ranks, ranks 2 and 3 landed on GPUs 0 and 1 too.
    Every rank refuses, those that would have had a GPU of their own included."""
    for rank in range(4):
        with pytest.raises(JobUsageError) as exc:
            gpu_for_local_rank(GPUS[:2], rank, 4, "0,1")
        msg = str(exc.value)
        assert "4 ranks per node" in msg
        assert "sees 2 (visible GPUs: GPU:0, GPU:1; CUDA_VISIBLE_DEVICES='0,1')" in msg


def test_a_local_rank_outside_the_node_is_a_bug_not_a_usage_error() -> None:
    with pytest.raises(ValueError):
        gpu_for_local_rank(GPUS, 4, 4, None)


def test_mirrored_takes_the_first_devices_or_says_how_many_it_sees() -> None:
    logical = [f"/device:GPU:{i}" for i in range(3)]
    assert gpus_for_replicas(logical, 2, None) == logical[:2]
    with pytest.raises(JobUsageError) as exc:
        gpus_for_replicas(logical[:1], 2, "0")
    assert "--devices 2" in str(exc.value) and "only 1 GPU(s)" in str(exc.value)
    assert "visible GPUs: GPU:0; CUDA_VISIBLE_DEVICES='0'" in str(exc.value)
    with pytest.raises(JobUsageError, match="sees no GPU"):
        gpus_for_replicas([], 1, None)


HAVE_HOROVOD = importlib.util.find_spec("horovod") is not None and shutil.which("mpirun")


@pytest.mark.mpi
@pytest.mark.horovod
@pytest.mark.skipif(not HAVE_HOROVOD, reason="Horovod or mpirun not installed")
def test_a_gpu_run_on_this_cpu_machine_exits_2_with_the_message(tmp_path: Path) -> None:
    """The real job under `mpirun -np 2` with --device gpu on a machine without GPUs: each rank
    prints one line naming what it sees and the ranks per node (Horovod's local size), exit 2,
    no traceback, no measurement written."""
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        str(TRAIN),
        "--model",
        "dcgan",
        "--run-dir",
        str(run),
        "--batch-per-rank",
        "2",
        "--epochs",
        "1",
        "--image-size",
        "16",
        "--device",
        "gpu",
    ]
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root",
         "-x", "CUDA_VISIBLE_DEVICES", *cmd],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "7", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "ZeroDivisionError" not in out
    errors = [ln for ln in out.splitlines() if ln.startswith("train.py: error:")]
    assert len(errors) == 2
    assert all(
        "sees no GPU" in e and "CUDA_VISIBLE_DEVICES='7'" in e and "2 rank(s) per node" in e
        for e in errors
    )
    assert not (run / "metrics.json").exists()
