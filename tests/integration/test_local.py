"""Local mode: real mpirun runs of real jobs, tracked in the ledger, resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpcscale import api
from hpcscale.state.ledger import Ledger
from hpcscale.state.states import RunState
from tests.conftest import hpcscale

pytestmark = [pytest.mark.mpi, pytest.mark.horovod]


def _campaign(folder: Path, name: str, workload: dict[str, object], **matrix: object) -> Path:
    """A weak-scaling campaign on this machine at 1 and 2 ranks, batch 8."""
    spec = {
        "name": name,
        "workload": workload,
        "system": "local",
        "scaling": "weak",
        "matrix": {"layout": ["1x1", "2x1"], "batch": 8, **matrix},
    }
    p = folder / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


def tiny_campaign(tmp_path: Path, name: str = "tiny", **matrix: object) -> Path:
    workload = {
        "model": "dcgan",
        "epochs": 1,
        "args": {"image_size": 16, "dataset_size": 64, "burn_in_steps": 1},
    }
    return _campaign(tmp_path, name, workload, **matrix)


# A user program for the tests about the backend and the ledger, not TensorFlow (the DCGAN
# tests above and below keep the TF path): the first process of the campaign to start makes
# `<dir>/.first` and sleeps (a run that is RUNNING for as long as the test needs it); every
# later one prints a rate and exits at once. No MPI import, so it starts fast under mpirun.
SLEEPER = """\
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
try:
    os.close(os.open(os.path.join(here, ".first"), os.O_CREAT | os.O_EXCL))
    time.sleep(float(sys.argv[1]))
except FileExistsError:
    pass
print("rate 10.0", flush=True)
"""


def sleeper_campaign(tmp_path: Path, name: str, sleep_s: float, **matrix: object) -> Path:
    """Like tiny_campaign, with SLEEPER (in its own folder) as a command workload."""
    return command_campaign(tmp_path, name, SLEEPER, [str(sleep_s)], **matrix)


def command_campaign(
    tmp_path: Path, name: str, program: str, argv: list[str], **matrix: object
) -> Path:
    """Like tiny_campaign, with `program` (in its own folder, as prog.py) as a command
    workload run as `python prog.py *argv`, its rate read from `rate <x>`."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "prog.py").write_text(program)
    workload = {
        "command": ["python", "prog.py", *argv],
        "metrics": [{"name": "samples_per_s", "pattern": "rate ([0-9.]+)"}],
        "throughput": "samples_per_s",
    }
    return _campaign(folder, name, workload, **matrix)


# The ledger, resume and failure tests check the backend, not TensorFlow (a tiny TF run costs
# about 15 s of CPU at 1 rank, 46 s at 2): a program with no MPI import that mpirun still
# starts once per rank. Every rank leaves `rank.<r>-of-<size>` (Open MPI's view of it) in the
# run directory, so a test sees how many processes the launcher really started; then, given
# `fail`, it fails as a job that refuses its arguments does at 1 rank (exit 2, a line saying
# why) and as a diverged job does at 2 (exit 3); given `ok`, rank 0 prints a rate.
RANKS = """\
import os, sys
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
open(os.path.join(os.environ["HPCSCALE_RUN_DIR"], f"rank.{rank}-of-{size}"), "w").close()
if sys.argv[1] == "fail":
    if size < 2:
        print("prog.py: fail needs at least 2 ranks", file=sys.stderr, flush=True)
        sys.exit(2)
    print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
if rank == 0:
    print("rate 10.0", flush=True)
"""


def started_ranks(run_dir: Path) -> list[str]:
    """The `rank.<r>-of-<size>` markers RANKS left: one per process the launcher started."""
    return sorted(p.name for p in run_dir.glob("rank.*-of-*"))


def expected_ranks(n: int) -> list[str]:
    """What started_ranks finds when the launcher started n ranks, each told the world is n."""
    return sorted(f"rank.{r}-of-{n}" for r in range(n))


def test_dry_run_prints_mpirun_lines(tmp_path: Path, workdir: Path) -> None:
    proc = hpcscale(
        "submit", str(tiny_campaign(tmp_path)), "--backend", "local", "--dry-run", check=True
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("mpirun")]
    assert len(lines) == 2
    assert any(" -np 1 " in ln for ln in lines) and any(" -np 2 " in ln for ln in lines)
    assert not (workdir / "tiny" / "ledger.sqlite").exists()  # nothing submitted


def test_local_runs_train_with_the_ranks_their_run_json_asks_for(
    finished_quickstart: Path,
) -> None:
    """The bundled TensorFlow job under the local backend's mpirun (the session's quickstart:
    DCGAN at 1x1 and 2x1) trained with as many Horovod ranks as each run.json says."""
    ranks = []
    for rd in (finished_quickstart / "quickstart" / "runs").iterdir():
        metrics = json.loads((rd / "metrics.json").read_text())
        run = json.loads((rd / "run.json").read_text())
        assert metrics["ranks"] == run["ranks"] and run["launcher"] == "mpirun", rd
        ranks.append(metrics["ranks"])
    assert sorted(ranks) == [1, 2]


def test_local_campaign_runs_and_resumes(tmp_path: Path, workdir: Path) -> None:
    camp = command_campaign(tmp_path, "tiny", RANKS, ["ok"])
    proc = hpcscale("submit", str(camp), check=True)  # local is the default for `system: local`
    assert "2 completed, 0 failed" in proc.stdout
    status = json.loads(hpcscale("status", "tiny", "--json", check=True).stdout)
    rows = status["tiny"]
    assert {r["state"] for r in rows} == {"COMPLETED"}
    ranks = []
    for r in rows:
        n = json.loads((Path(r["run_dir"]) / "run.json").read_text())["ranks"]
        assert started_ranks(Path(r["run_dir"])) == expected_ranks(n)  # mpirun started n ranks
        ranks.append(n)
    assert sorted(ranks) == [1, 2]
    again = hpcscale("submit", str(camp), check=True)
    assert "2 run(s) already completed" in again.stdout and "0 completed" in again.stdout
    with Ledger(workdir / "tiny") as ledger:
        assert [h[1] for h in ledger.history(rows[0]["run_id"])] == [
            "RENDERED",
            "SUBMITTED",
            "RUNNING",
            "COMPLETED",
        ]


def test_failing_run_is_recorded_and_campaign_goes_on(tmp_path: Path, workdir: Path) -> None:
    """Runs that pass validation and fail in the job are recorded with their exit code and
    their log's tail, and the others run: RANKS told to `fail` exits 3 at 2 ranks and stops at
    start-up at 1 rank (exit 2, its reason on stderr). One run told `ok` completes beside them
    (the 1-rank one: a second, 2-rank, completed run would check nothing more)."""
    camp = command_campaign(
        tmp_path, "mixed", RANKS, ["{args.mode}"], **{"args.mode": ["fail", "ok"]}
    )
    spec = yaml.safe_load(camp.read_text())
    spec["matrix"]["exclude"] = [{"layout": "2x1", "args.mode": "ok"}]
    camp.write_text(yaml.safe_dump(spec))
    proc = hpcscale("submit", str(camp))
    assert proc.returncode == 1
    assert "1 completed, 2 failed" in proc.stdout
    rows = json.loads(hpcscale("status", "mixed", "--json", check=True).stdout)["mixed"]
    failed = {
        json.loads((Path(r["run_dir"]) / "run.json").read_text())["ranks"]: r
        for r in rows
        if r["state"] == "FAILED"
    }
    assert sorted(failed) == [1, 2]
    assert all(
        r["state"] == "COMPLETED"
        for r in rows
        if r["run_id"] not in {f["run_id"] for f in failed.values()}
    )
    assert failed[2]["exit_code"] == "3"
    assert started_ranks(Path(failed[2]["run_dir"])) == expected_ranks(2)  # both ranks ran
    assert failed[1]["exit_code"] == "2"
    assert "fail needs at least 2 ranks" in (failed[1]["message"] or "")  # the log's tail


def test_job_refusing_to_run_at_one_rank_is_failed_with_its_reason(
    tmp_path: Path, workdir: Path
) -> None:
    """The bundled TensorFlow job's own refusal reaches the ledger: `--debug-desync` at 1 rank
    passes validation and stops at start-up (no rank to perturb), its reason the log's tail.
    (Its exit 3 on diverged ranks: test_jobs.py::test_sync_check_catches_diverged_ranks.)"""
    camp = tiny_campaign(tmp_path, name="refused", layout=["1x1"])
    spec = yaml.safe_load(camp.read_text())
    spec["workload"]["args"].update(check_sync=True, debug_desync=True)
    camp.write_text(yaml.safe_dump(spec))
    proc = hpcscale("submit", str(camp))
    assert proc.returncode == 1
    assert "0 completed, 1 failed" in proc.stdout
    (row,) = json.loads(hpcscale("status", "refused", "--json", check=True).stdout)["refused"]
    assert row["state"] == "FAILED" and row["exit_code"] == "2"
    assert "needs at least 2 Horovod ranks" in (row["message"] or "")  # the log's tail


def test_interrupt_leaves_ledger_consistent_and_resume_finishes(
    tmp_path: Path, workdir: Path
) -> None:
    camp = sleeper_campaign(tmp_path, "intr", sleep_s=60)  # the first run sleeps: interrupted
    exe = Path(sys.executable).parent / "hpcscale"
    proc = subprocess.Popen(
        [str(exe), "submit", str(camp)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    ledger_path = workdir / "intr" / "ledger.sqlite"
    deadline = time.monotonic() + 120
    running = False
    while time.monotonic() < deadline and not running:
        time.sleep(0.5)
        if ledger_path.exists():
            with Ledger(ledger_path.parent) as ledger:
                running = any(r.state == "RUNNING" for r in ledger.rows())
    assert running, "no run reached RUNNING"
    # RUNNING is set before the job script starts: wait until the program itself runs (its
    # marker), so the interrupt finds the run's process group (the local backend's .pgid)
    marker = camp.parent / ".first"
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.2)
    assert marker.exists(), "the first run's program never started"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    # what the user reads: one line, no runner's KeyboardInterrupt traceback beside it
    assert "interrupted; state on disk is consistent" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    with Ledger(ledger_path.parent) as ledger:
        states = sorted(str(r.state) for r in ledger.rows())
        pgids = list((workdir / "intr").rglob(".pgid"))
    assert "RUNNING" not in states and "CANCELLED" in states
    assert not pgids
    done = hpcscale("submit", str(camp), check=True)
    finished = states.count("COMPLETED")  # skipped; the interrupted and unstarted ones run
    assert f"{len(states) - finished} completed, 0 failed, {finished} skipped" in done.stdout
    rows = json.loads(hpcscale("status", "intr", "--json", check=True).stdout)["intr"]
    assert {r["state"] for r in rows} == {"COMPLETED"}


def test_gloo_flavour_runs_through_horovodrun(tmp_path: Path, workdir: Path) -> None:
    """The `local` system's gloo flavour: horovodrun (through the job's Python, with its own
    launcher options rather than mpirun's), Gloo controller, two real ranks. Both layouts are
    rendered; only the 2-rank run is trained (a 1-rank one would join no one over Gloo)."""
    camp = tiny_campaign(tmp_path, "gloo", mpi="gloo")
    dry = hpcscale("submit", str(camp), "--dry-run", check=True).stdout
    for n in (1, 2):
        assert f"-m horovod.runner.launch -np {n} -H localhost:{n} --gloo " in dry
    camp = tiny_campaign(tmp_path, "gloo", mpi="gloo", layout=["2x1"])
    proc = hpcscale("submit", str(camp), check=True)
    assert "1 completed, 0 failed" in proc.stdout
    # the dry run rendered both run directories; only the 2-rank one ran
    (run,) = [d for d in (workdir / "gloo" / "runs").iterdir() if (d / "metrics.json").exists()]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["ranks"] == json.loads((run / "run.json").read_text())["ranks"] == 2


def test_local_backend_through_the_api(tmp_path: Path, workdir: Path) -> None:
    """The local backend behind the Backend interface: a Submission back, a dry run that
    describes and writes no ledger, a lost runner found by refresh, cancel from another
    process stopping exactly the run's process group."""
    camp = sleeper_campaign(tmp_path, "iface", sleep_s=0)
    dry = api.submit(camp, dry_run=True)
    assert dry.backend == "dry" and len(dry.described) == 4 and not dry.submitted
    assert dry.described[1].startswith("mpirun -np ")
    assert not (workdir / "iface" / "ledger.sqlite").exists()

    sub = api.submit(camp)
    assert sub.backend == "local" and len(sub.submitted) == 2 and sub.ok
    (st,) = api.status("iface")
    assert {r.state for r in st.rows} == {RunState.COMPLETED} and not st.changes

    # a runner that died (kill -9 of hpcscale): its run is LOST, said once
    dead = subprocess.Popen(["true"])
    dead.wait()
    rid = st.rows[0].run_id
    with Ledger(workdir / "iface") as ledger:
        ledger.update(rid, RunState.RUNNING, runner_pid=dead.pid, backend="local")
    (st,) = api.status("iface")
    assert [(c.run_id, c.new) for c in st.changes] == [(rid, RunState.LOST)]
    assert "1 local run(s) lost" in st.warnings[0]

    # cancel a running local run from another process
    slow = sleeper_campaign(tmp_path, "slow", sleep_s=600, layout="1x1")  # runs till cancelled
    exe = Path(sys.executable).parent / "hpcscale"
    runner = subprocess.Popen([str(exe), "submit", str(slow)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if (workdir / "slow" / "ledger.sqlite").exists():
            with Ledger(workdir / "slow") as ledger:
                if any(r.state == RunState.RUNNING for r in ledger.rows()):
                    break
    while time.monotonic() < deadline and not (slow.parent / ".first").exists():
        time.sleep(0.2)  # the program itself runs (SLEEPER's marker): its group is recorded
    (res,) = api.cancel("slow")
    assert len(res.run_ids) == 1
    runner.communicate(timeout=120)
    assert runner.returncode == 1  # the run did not complete
    (st,) = api.status("slow")
    assert [r.state for r in st.rows] == [RunState.CANCELLED]
    assert not list((workdir / "slow").rglob(".pgid"))
    # nothing of the run is left running: mpirun gives its rank a process group of its own,
    # and a cancel while mpirun was starting left the rank (rankwrap and prog.py) behind
    slow_dir = str(workdir / "slow")
    left = []
    for _ in range(50):
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, slow_dir)]
        if not left:
            break
        time.sleep(0.1)
    assert left == [], [(p / "cmdline").read_bytes() for p in left]


def _mentions(proc: Path, text: str) -> bool:
    """A process whose command line names `text` (gone or unreadable: False)."""
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
