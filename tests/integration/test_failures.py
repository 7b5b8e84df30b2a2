"""Failures explain themselves: the reason read from a failed run's own output (pure, on outputs
captured from real runs or, for SLURM's verdicts, in slurmstepd's documented words), and a real
failing campaign's reason in `status`, `status --json`, `logs` and the report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpcscale.model.errors import UsageError
from hpcscale.state.ledger import RunRow
from hpcscale.state.reason import explain, reason_from_output
from hpcscale.state.select import find_run
from hpcscale.state.states import RunState
from hpcscale.util.logtail import last_lines
from tests.conftest import hpcscale

# ---------------------------------------------------------------- outputs as jobs print them

# argparse's own error (a type conversion), usage block first
ARGPARSE = """\
usage: train.py [-h] --model {classifier,dcgan,inception_v3,resnet50,sngan,stackgan,vgg16,wgan_gp}
                --run-dir RUN_DIR [--batch-per-rank BATCH_PER_RANK] [--epochs EPOCHS]
train.py: error: argument --epochs: invalid int value: 'two'
"""

# a Python exception under TensorFlow's start-up noise, chained: the final one is the reason
TRACEBACK = """\
2026-11-24 10:02:11.512345: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow \
binary is optimized to use available CPU instructions in performance-critical operations.
[hpcscale] model=dcgan strategy=horovod ranks=1 replicas=1 global_batch=8 data=flat
Traceback (most recent call last):
  File "/work/jobs/tf/datasets/pipeline.py", line 40, in decode
    image = tf.io.decode_image(raw, channels=3)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tensorflow.python.framework.errors_impl.InvalidArgumentError: Unknown image file format.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/jobs/tf/train.py", line 240, in <module>
    sys.exit(main())
  File "/work/jobs/tf/harness.py", line 81, in run
    raise RuntimeError(f"cannot decode {path}") from exc
RuntimeError: cannot decode /data/celeba/000001.jpg: not an image
"""

# Captured from `mpirun -np 2 --tag-output` of a script whose rank 1 raised first and rank 0
# second (Open MPI 4.1, its tags split inside lines): the first cause is rank 1's.
MPI_TAGGED = """\
[1,1]<stdout>:[hpcscale] rank 1 starting
[1,0]<stdout>:[hpcscale] rank 0 starting
[1,1]<stderr>:Traceback (most recent call last):
[1,1]<stderr>:  File "/tmp/h6/boom2.py", line 6, in <module>
[1,1]<stderr>:    [1,1]<stderr>:raise ValueError("rank 1 cannot read shard 7")[1,1]<stderr>:
[1,1]<stderr>:ValueError[1,1]<stderr>:: [1,1]<stderr>:rank 1 cannot read shard 7[1,1]<stderr>:
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
[1,0]<stderr>:Traceback (most recent call last):
[1,0]<stderr>:  File "/tmp/h6/boom2.py", line 8, in <module>
[1,0]<stderr>:    raise RuntimeError("rank 0: peer rank 1 went away during allreduce")
[1,0]<stderr>:RuntimeError: rank 0: peer rank 1 went away during allreduce
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[24698,1],1]
  Exit code:    1
--------------------------------------------------------------------------
"""

# Open MPI's MPI_ABORT notice (mpi4py's excepthook calls MPI_Abort) after the aborting rank's
# error, then the other rank's consequence
MPI_ABORT = """\
[hpcscale] epoch 1/2 time_s=3.1 images_per_s=410.2
horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled cuda error
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode 1.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks
"""

# Captured from the local SLURM cluster (a run's slurm-<job>.out, srun launching the program,
# killed at its 1-minute limit): slurmstepd's verdict, then srun's account of the kill.
SLURM_TIME_LIMIT = """\
[hpcscale] epoch 1/9 time_s=1.0 images_per_s=10.0
slurmstepd-node1: error: *** STEP 1.0 ON node1 CANCELLED AT 2026-11-24T11:28:25 DUE TO TIME \
LIMIT ***
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
srun: got SIGCONT
srun: forcing job termination
srun: error: node1: task 0: Terminated
"""

SLURM_OOM = """\
[hpcscale] model=resnet50 strategy=horovod ranks=4 replicas=4 global_batch=1024
srun: error: node-b: task 2: Out Of Memory
slurmstepd: error: Detected 1 oom_kill event in StepId=4243.0. Some of the step tasks have been \
OOM Killed.
"""

SET_U = """\
/scratch/runs/q/runs/ab12/job.sbatch: line 31: HPCSCALE_HOSTFILE: unbound variable
"""

# two ranks' `print(..., file=sys.stderr)`: each writes its text, then its newline (as in CI)
GLUED = (
    "train.py: error: --data-dir /d/celeba: no .png files directly in it"
    "train.py: error: --data-dir /d/celeba: no .png files directly in it\n\n"
)
GLUED_EXCEPTIONS = "ValueError: rank 0 cannot read shard 3ValueError: rank 1 cannot read shard 7\n"
QUOTED = "RuntimeError: loader died: RuntimeError: shard 7 truncated\n"

# what Open MPI 4.1's mpirun prints for `mpirun -np 1 pythn x.py` (captured here)
MPIRUN_CANNOT_START = """\
--------------------------------------------------------------------------
mpirun was unable to find the specified executable file, and therefore
did not launch the job.  This error was first reported for process
rank 0; it may have occurred for other processes as well.

NOTE: A common cause for this error is misspelling a mpirun command
      line parameter option (remember that mpirun interprets the first
      unrecognized command line token as the executable).

Node:       vm
Executable: pythn
--------------------------------------------------------------------------
"""
# `mpirun -np 2 python3 trian.py` (captured here): Python's own line says why, not "exit code 2"
CANNOT_OPEN = """\
/venv/bin/python3: can't open file '/w/trian.py': [Errno 2] No such file or directory
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
/venv/bin/python3: can't open file '/w/trian.py': [Errno 2] No such file or directory
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[20646,1],1]
  Exit code:    2
--------------------------------------------------------------------------
"""


# torch's C++ exceptions print where they were thrown and their frames (here before the Python
# exception, as another rank's copy lands first in the merged output); the cause is the
# Python exception's line (issue 31: a rank that cannot reach the rendezvous store)
TORCH_STORE_TIMEOUT = """\
Exception raised from throwTimeoutError at /pytorch/torch/csrc/distributed/c10d/socket.cpp:1030 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f1 in /v/libc10.so)
frame #1: <unknown function> + 0x5c1e8a1 (0x7f2 in /v/libtorch_cpu.so)
Traceback (most recent call last):
  File "/w/ddp_allreduce.py", line 24, in main
    dist.init_process_group("gloo", init_method="env://")
torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. 1/2 clients joined.
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[20646,1],1]
  Exit code:    1
--------------------------------------------------------------------------
"""  # noqa: E501


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (ARGPARSE, "train.py: error: argument --epochs: invalid int value: 'two'"),
        (TRACEBACK, "RuntimeError: cannot decode /data/celeba/000001.jpg: not an image"),
        (MPI_TAGGED, "ValueError: rank 1 cannot read shard 7"),
        (
            MPI_ABORT,
            "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: "
            "unhandled cuda error",
        ),
        (
            SLURM_TIME_LIMIT,
            "STEP 1.0 ON node1 CANCELLED AT 2026-11-24T11:28:25 DUE TO TIME LIMIT",
        ),
        (
            SLURM_OOM,
            "Detected 1 oom_kill event in StepId=4243.0. Some of the step tasks have been OOM "
            "Killed.",
        ),
        (SET_U, SET_U.strip()),
        (
            MPIRUN_CANNOT_START,
            "mpirun was unable to find the specified executable file, and therefore did not "
            "launch the job. (Node: vm) (Executable: pythn)",
        ),
        (CANNOT_OPEN, CANNOT_OPEN.splitlines()[0]),
        (GLUED, "train.py: error: --data-dir /d/celeba: no .png files directly in it"),
        (GLUED_EXCEPTIONS, "ValueError: rank 0 cannot read shard 3"),
        (QUOTED, QUOTED.strip()),
        (
            TORCH_STORE_TIMEOUT,
            "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. "
            "1/2 clients joined.",
        ),
        ("[hpcscale] epoch 1/2 time_s=3.1\n", None),
        ("", None),
    ],
    ids=["argparse", "traceback", "mpi-first-cause", "mpi-abort", "time-limit", "oom", "set-u",
         "mpirun-cannot-start", "cannot-open", "glued-ranks", "glued-exceptions", "quoted-error",
         "torch-store-timeout", "no-error", "empty"],
)  # fmt: skip
def test_reason_is_the_line_that_says_why(text: str, reason: str | None) -> None:
    assert reason_from_output(text) == reason


def test_a_long_reason_is_cut_to_one_table_line() -> None:
    text = "ValueError: " + "x" * 1000 + "\n"
    got = reason_from_output(text)
    assert got is not None and len(got) == 300 and got.endswith("…")


def test_colour_codes_and_srun_labels_are_not_part_of_the_reason() -> None:
    text = "0: \x1b[31mtrain.py: error: --data-dir /d: not a directory\x1b[0m\n"
    assert reason_from_output(text) == "train.py: error: --data-dir /d: not a directory"


@pytest.mark.parametrize(
    ("state", "text", "detail", "code", "reason"),
    [
        # the scheduler's verdict beats the ledger's own words
        (RunState.TIMEOUT, SLURM_TIME_LIMIT, None, "0:15",
         "STEP 1.0 ON node1 CANCELLED AT 2026-11-24T11:28:25 DUE TO TIME LIMIT"),
        # a run the user cancelled: that, not the error its dying ranks printed
        (RunState.CANCELLED, "KeyboardInterrupt\n", "cancelled by the user", "-15",
         "cancelled by the user"),
        (RunState.LOST, "", "the hpcscale process running it is gone", None,
         "the hpcscale process running it is gone"),
        (RunState.FAILED, ARGPARSE, "exit code 2", "2",
         "train.py: error: argument --epochs: invalid int value: 'two'"),
        (RunState.FAILED, "[hpcscale] epoch 1/2\n", "exit code 139", "139", "exit code 139"),
        (RunState.NODE_FAIL, None, None, "0:0", "NODE_FAIL, exit code 0:0; no output"),
        (RunState.FAILED, "all fine so far\n", None, "1",
         "FAILED, exit code 1; no error line in its output"),
    ],
)  # fmt: skip
def test_explain_orders_the_sources_of_a_reason(
    state: RunState, text: str | None, detail: str | None, code: str | None, reason: str
) -> None:
    assert explain(state, text, detail, code) == reason


def _row(run_id: str) -> RunRow:
    return RunRow(run_id, f"/r/{run_id}", "local", RunState.FAILED, None, None, None, None,
                  None, None, None, None, 1, None, None, 0.0)  # fmt: skip


def test_find_run_by_id_or_prefix() -> None:
    ledgers = {"a": [_row("5d8a5aa9cf"), _row("5d8a77aa00")], "b": [_row("f9d805bc42")]}
    assert find_run("f9d8", ledgers, "wd") == ("b", ledgers["b"][0])
    assert find_run("5d8a5", ledgers, "wd")[1].run_id == "5d8a5aa9cf"
    with pytest.raises(UsageError, match=r"matches several runs \(a/5d8a5aa9cf, a/5d8a77aa00\)"):
        find_run("5d8a", ledgers, "wd")
    with pytest.raises(UsageError, match="no run with this id or prefix in wd"):
        find_run("0000", ledgers, "wd")
    with pytest.raises(UsageError, match="a prefix needs 4 characters"):
        find_run("f9d", ledgers, "wd")
    short = {"c": [_row("ab")]}
    assert find_run("ab", short, "wd")[1].run_id == "ab"  # a whole id, however short


def test_last_lines_reads_backwards_across_blocks(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)) + b"\nlast")
    assert last_lines(log, 3, block=5) == b"line 999\n\nlast"
    assert last_lines(log, 1) == b"last"
    assert last_lines(log, 0) == b""
    assert last_lines(log, 5000) == log.read_bytes()


# ---------------------------------------------------------------- real runs

FIRST_CAUSE = """\
import os, sys, time
from pathlib import Path
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
flag = Path(sys.argv[1])
if rank == 1:
    flag.touch()
    raise ValueError("rank 1 cannot read shard 7")
while not flag.exists():
    time.sleep(0.01)
time.sleep(0.5)  # rank 1's traceback is out first
raise RuntimeError("rank 0: peer rank 1 went away")
"""


@pytest.mark.mpi
@pytest.mark.skipif(not shutil.which("mpirun"), reason="mpirun not installed")
def test_real_mpirun_abort_gives_the_first_cause(tmp_path: Path) -> None:
    """Two real ranks under mpirun: rank 1 fails, then rank 0 of it; the reason is rank 1's."""
    script = tmp_path / "ranks.py"
    script.write_text(FIRST_CAUSE)
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root", sys.executable,
         str(script), str(tmp_path / "flag")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "ValueError: rank 1 cannot read shard 7" in out
    assert reason_from_output(out) == "ValueError: rank 1 cannot read shard 7"


@pytest.fixture(scope="module")
def failed_campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real local campaign (DCGAN, 1 and 2 ranks under mpirun) every run of which fails inside
    the job: its flat data set is a directory that exists (so validate and submit accept it)
    but holds no image, which only the job finds out. (workdir, the empty data directory)"""
    root = tmp_path_factory.mktemp("failing")
    empty = root / "celeba"
    empty.mkdir()
    spec = {
        "name": "broken",
        "workload": {
            "model": "dcgan",
            "epochs": 1,
            "args": {"image_size": 16, "dataset": "flat", "data_dir": str(empty)},
        },
        "system": "local",
        "scaling": "weak",
        "matrix": {"layout": ["1x1", "2x1"], "batch": 8},
    }
    camp = root / "broken.yaml"
    camp.write_text(yaml.safe_dump(spec))
    wd = root / "runs"
    proc = hpcscale("submit", str(camp), "-w", str(wd), timeout=900)
    assert proc.returncode == 1 and "0 completed, 2 failed" in proc.stdout, proc.stdout
    return wd, empty


def _expected_reason(empty: Path) -> str:
    """What the job says of a directory without images (jobs/tf/datasets/flat.py, as train.py
    prints a usage error)."""
    images = ".bmp, .gif, .jpeg, .jpg, .png"
    return f"train.py: error: --data-dir {empty}: no {images} files directly in it"


@pytest.mark.mpi
@pytest.mark.horovod
def test_status_json_gives_each_failed_runs_reason_and_output(
    failed_campaign: tuple[Path, Path],
) -> None:
    wd, empty = failed_campaign
    rows = json.loads(hpcscale("status", "broken", "-w", str(wd), "--json", check=True).stdout)
    rows = rows["broken"]
    assert len(rows) == 2 and {r["state"] for r in rows} == {"FAILED"}
    for r in rows:
        assert r["reason"] == _expected_reason(empty)
        assert r["output"] == str(Path(r["run_dir"]) / "local.out")
        assert r["reason"] in Path(r["output"]).read_text().splitlines()


@pytest.mark.mpi
@pytest.mark.horovod
def test_status_table_shows_the_reason_and_the_output_file(
    failed_campaign: tuple[Path, Path],
) -> None:
    wd, empty = failed_campaign
    proc = hpcscale("status", "broken", "-w", str(wd), check=True)
    lines = [ln for ln in proc.stdout.splitlines()[2:] if "FAILED" in ln]  # past title, header
    assert len(lines) == 2
    for ln in lines:
        run_id = ln.split()[0]
        assert ln.endswith(_expected_reason(empty))
        assert f"{wd / 'broken' / 'runs' / run_id / 'local.out'}" in ln
    assert "output" in proc.stdout.splitlines()[1].split()  # the header names the column


@pytest.mark.mpi
@pytest.mark.horovod
def test_logs_prints_a_runs_output_by_id_prefix(failed_campaign: tuple[Path, Path]) -> None:
    wd, empty = failed_campaign
    rows = json.loads(hpcscale("status", "broken", "-w", str(wd), "--json", check=True).stdout)
    for r in rows["broken"]:
        whole = Path(r["output"]).read_text()
        proc = hpcscale("logs", r["run_id"][:6], "-w", str(wd), check=True)
        assert proc.stdout == whole
        assert _expected_reason(empty) in proc.stdout
        tail = hpcscale("logs", r["run_id"], "--tail", "3", "-w", str(wd), check=True)
        assert tail.stdout.splitlines() == whole.splitlines()[-3:]
    missing = hpcscale("logs", "0000000", "-w", str(wd))
    assert missing.returncode == 2 and "no run with this id or prefix" in missing.stderr


@pytest.mark.mpi
@pytest.mark.horovod
def test_report_of_an_all_failed_campaign_lists_each_run_and_why(
    failed_campaign: tuple[Path, Path],
) -> None:
    wd, empty = failed_campaign
    proc = hpcscale("report", "broken", "-w", str(wd))
    assert proc.returncode == 0, proc.stderr
    md = (wd / "broken" / "report" / "index.md").read_text()
    html = (wd / "broken" / "report" / "index.html").read_text()
    assert "## Data quality" in md
    rows = json.loads(hpcscale("status", "broken", "-w", str(wd), "--json", check=True).stdout)
    for r in rows["broken"]:
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| {r['run_id']} "))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2:4] == ["FAILED", _expected_reason(empty)]
        assert r["run_id"] in html
    assert "no run finished" in proc.stderr
    checked = hpcscale("report", "broken", "-w", str(wd), "--check")
    assert checked.returncode == 1 and "no run finished in broken" in checked.stderr


def test_logs_of_a_run_without_output_says_so(tmp_path: Path) -> None:
    """A rendered run in the ledger, never started: no output (exit 1, its state named)."""
    from hpcscale.state.ledger import Ledger

    wd = tmp_path / "runs"
    camp = tmp_path / "idle.yaml"
    spec = {"name": "idle", "workload": {"model": "dcgan", "epochs": 1}, "system": "local",
            "scaling": "weak", "matrix": {"layout": ["1x1"], "batch": 8}}  # fmt: skip
    camp.write_text(yaml.safe_dump(spec))
    hpcscale("render", str(camp), "-w", str(wd), check=True)
    (run_dir,) = (wd / "idle" / "runs").iterdir()
    with Ledger(wd / "idle") as ledger:
        ledger.ensure([(run_dir.name, str(run_dir))])
    proc = hpcscale("logs", run_dir.name, "-w", str(wd))
    assert proc.returncode == 1, proc.stderr
    assert f"run {run_dir.name} of idle (RENDERED) has no output yet" in proc.stderr
