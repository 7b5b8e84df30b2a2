"""The SLURM backend against the real local cluster (tests/slurm_fixture.py): job arrays per
resource shape, the ledger, crash repair, concurrent submits, rejections, sacct outages,
cancel and resubmit.

Most campaigns here run a stand-in `train.py` (written to a tmp `jobs_dir` of a test copy of
the slurm-local system profile): it starts under the real rendered script and the real `srun`,
writes a metrics.json and exits (or sleeps/fails on request). The SLURM mechanics are under
test, not TensorFlow; `test_real_workload_two_nodes_pmix` runs the real jobs/tf/train.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

from hpcscale import api
from hpcscale.api import render_campaign
from hpcscale.backends.base import QuietReporter
from hpcscale.backends.slurm import arrays as slurm_arrays
from hpcscale.backends.slurm import limits as slurm_limits
from hpcscale.backends.slurm import submit as slurm_submit
from hpcscale.backends.slurm.backend import SlurmOptions
from hpcscale.devcluster import procs
from hpcscale.devcluster.cluster import LocalCluster
from hpcscale.devcluster.spec import first_free_port_base
from hpcscale.devcluster.status import ClusterInfo
from hpcscale.model.system import SHIPPED_DIR
from hpcscale.state.ledger import TERMINAL, Ledger
from hpcscale.state.paths import campaign_dir
from tests.conftest import hpcscale
from tests.slurm_fixture import (
    TEST_PORT_BASES,
    skip_unless_available,
    slurm_run,
    stop_test_cluster,
    wait_for_sacct,
    wait_idle,
)

pytestmark = pytest.mark.slurm

STAND_IN = '''\
"""Stand-in for jobs/tf/train.py (SLURM mechanics under test): metrics.json; sleeps (on the first
attempt only with --sleep-once yes) or fails on request."""
import json, os, sys, time
from pathlib import Path

argv = sys.argv[1:]


def opt(name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


once = Path(opt("--run-dir"), ".slept")
if opt("--sleep") and not (opt("--sleep-once") == "yes" and once.exists()):
    once.touch()
    time.sleep(float(opt("--sleep")))
if opt("--fail") == "yes":
    print("stand-in: failing on request", file=sys.stderr)
    sys.exit(7)
if os.environ.get("SLURM_PROCID", "0") == "0":
    metrics = {"ranks": int(os.environ["SLURM_NTASKS"]), "node": os.environ["SLURMD_NODENAME"]}
    Path(opt("--run-dir"), "metrics.json").write_text(json.dumps(metrics))
print("stand-in done on", os.environ["SLURMD_NODENAME"])
'''

# The same stand-in's plain case (write metrics.json, exit 0) for /bin/sh, the profile's
# `python` in the 1,010-task test, which is about the array split: its jobs' CPU (sacct
# TotalCPU) falls from 210 s with the Python stand-in (a start of this venv's Python and its
# site-packages in every task) to 86 s, on a 2-core machine.
SH_STAND_IN = """\
# Stand-in for jobs/tf/train.py, run by /bin/sh: metrics.json and exit 0.
while [ $# -gt 0 ]; do
  if [ "$1" = --run-dir ]; then run_dir=$2; fi
  shift
done
if [ "${SLURM_PROCID:-0}" = 0 ]; then
  printf '{"ranks": %d, "node": "%s"}' "$SLURM_NTASKS" "$SLURMD_NODENAME" > "$run_dir/metrics.json"
fi
echo "stand-in done on $SLURMD_NODENAME"
"""


def stand_in_system(tmp_path: Path, program: str = STAND_IN, **overrides: object) -> Path:
    """The shipped slurm-local profile with `jobs_dir` (a jobs root) holding the stand-in as
    its tf/train.py."""
    jobs = tmp_path / "jobs"
    (jobs / "tf").mkdir(parents=True, exist_ok=True)
    (jobs / "tf" / "train.py").write_text(program)
    spec = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    # stand-ins measure nothing: their runs go at once, not one at a time as slurm-local's do
    spec.update({"name": "slurm-test", "jobs_dir": str(jobs), "max_parallel": None, **overrides})
    path = tmp_path / "slurm-test.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def campaign(tmp_path: Path, name: str, matrix: dict, args: dict | None = None, **sys_kw) -> Path:
    spec = {
        "name": name,
        "workload": {"model": "dcgan", "epochs": 1, "args": args or {}},
        "system": str(stand_in_system(tmp_path, **sys_kw)),
        "scaling": "weak",
        "matrix": {"batch": 4, **matrix},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(autouse=True)
def _nodes_idle_afterwards(request: pytest.FixtureRequest) -> Iterator[None]:
    """Leave the shared session cluster as found (idle nodes) for the tests that follow."""
    yield
    if "slurm_cluster" not in request.fixturenames:
        return
    wait_idle(request.getfixturevalue("slurm_cluster"))


# 8 runs in 4 shapes: (1 or 2 nodes) x (1 rank x 2 threads or 2 ranks x 1 thread), 2 batches
FOUR_SHAPES = {"nodes": [1, 2], "layout": ["1x2", "2x1"], "batch": [4, 8]}


def status_rows(name: str) -> tuple[list[dict], str]:
    proc = hpcscale("status", name, "--json", check=True, timeout=60)
    return json.loads(proc.stdout)[name], proc.stderr


def wait_terminal(name: str, timeout: float = 120, ignore: tuple[str, ...] = ()) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        rows, _ = status_rows(name)
        if all(r["state"] in TERMINAL or r["state"] in ignore for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} not finished after {timeout} s: {rows}")
        time.sleep(1)


def jobs_named(info: ClusterInfo, prefix: str) -> set[str]:
    """Job ids (array tasks expanded) whose name starts with `prefix`, from squeue and sacct."""
    out = slurm_run(
        info.env, "sacct", "-X", "-n", "-P", "-S", "now-1days", "-o", "JobID,JobName"
    ).stdout
    out += slurm_run(info.env, "squeue", "-h", "-r", "-t", "all", "-o", "%i|%j").stdout
    return {
        line.split("|")[0] for line in out.splitlines() if line.split("|")[1].startswith(prefix)
    }


# ---------------------------------------------------------------- no cluster needed


def test_index_spec_and_shapes(tmp_path: Path, workdir: Path) -> None:
    assert slurm_arrays.index_spec([7, 0, 1, 2, 5, 8]) == "0-2,5,7-8"
    assert slurm_arrays.index_spec([3]) == "3"
    _, _, rendered = render_campaign(campaign(tmp_path, "plan", FOUR_SHAPES))
    lines = slurm_arrays.describe(rendered, array=True, max_parallel=3)
    sbatch = [ln for ln in lines if ln.startswith("sbatch")]
    assert len(sbatch) == 4
    assert all("%3 " in ln and "--job-name=plan.hpcscale.a-" in ln for ln in sbatch)
    assert sum("--nodes=2 --ntasks-per-node=2 --cpus-per-task=1" in ln for ln in sbatch) == 1
    plain = slurm_arrays.describe(rendered, array=False, max_parallel=None)
    assert len(plain) == 8 and all(ln.endswith("/job.sbatch") for ln in plain)


# ---------------------------------------------------------------- the real cluster


def test_one_array_per_shape_all_completed_and_resubmit_is_a_no_op(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(tmp_path, "shapes", FOUR_SHAPES)
    proc = hpcscale("submit", str(camp), check=True)
    assert "8 run(s) submitted" in proc.stdout
    rows = wait_terminal("shapes")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    arrays = {r["array_job_id"] for r in rows}
    assert len(arrays) == 4 and None not in arrays  # one sbatch per shape
    by_array: dict[str, set[tuple[int, int]]] = {}
    for r in rows:
        run = json.loads((Path(r["run_dir"]) / "run.json").read_text())
        by_array.setdefault(r["array_job_id"], set()).add((run["nodes"], run["tasks_per_node"]))
        assert r["job_id"] == f"{r['array_job_id']}_{r['array_index']}"
        assert r["exit_code"] == "0:0" and r["nodelist"] and r["attempts"] == 1
        assert r["started_at"] and r["ended_at"] >= r["started_at"]
        metrics = json.loads((Path(r["run_dir"]) / "metrics.json").read_text())
        assert metrics["ranks"] == run["nodes"] * run["tasks_per_node"]
        outs = list(Path(r["run_dir"]).glob("slurm-*.out"))  # output lands in the run dir
        assert len(outs) == 1 and "stand-in done" in outs[0].read_text()
    assert all(len(shapes) == 1 for shapes in by_array.values())
    with Ledger(workdir / "shapes") as ledger:
        states = [h[1] for h in ledger.history(rows[0]["run_id"])]
    assert states[:2] == ["RENDERED", "SUBMITTED"] and states[-1] == "COMPLETED"

    again = hpcscale("submit", str(camp), check=True)
    assert "0 run(s) submitted, 8 skipped" in again.stdout
    assert len(jobs_named(slurm_cluster, "shapes.hpcscale.")) == 8  # nothing submitted twice


def test_no_array_submits_one_job_per_run(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(tmp_path, "plain", {"nodes": [1, 2]})
    hpcscale("submit", str(camp), "--no-array", check=True)
    rows = wait_terminal("plain")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert all(r["array_job_id"] is None and r["job_id"].isdigit() for r in rows)
    for r in rows:  # the template's own --output
        assert (Path(r["run_dir"]) / f"slurm-{r['job_id']}.out").exists()


def test_max_parallel_throttles_the_array(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """Each task sleeps 3 s, so tasks run together would overlap by seconds (sacct's times
    have 1 s resolution): the spans must follow one another."""
    camp = campaign(tmp_path, "throttled", {"batch": [4, 8, 16]}, {"sleep": 3})
    hpcscale("submit", str(camp), "--max-parallel", "1", check=True)
    rows, _ = status_rows("throttled")
    (array,) = {r["array_job_id"] for r in rows}
    shown = slurm_run(slurm_cluster.env, "scontrol", "show", "job", array).stdout
    if "ArrayTaskThrottle" in shown:  # gone from scontrol once every task has ended
        assert "ArrayTaskThrottle=1" in shown
    rows = wait_terminal("throttled")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    spans = sorted((r["started_at"], r["ended_at"]) for r in rows)
    assert all(end - start >= 2 for start, end in spans)  # the sleep is in the spans
    assert all(a[1] <= b[0] for a, b in pairwise(spans))  # one task at a time


def test_backend_interface_submit_status_cancel(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """The SLURM backend through the Python API: typed options in, a Submission out, state
    changes from status, cancel by condition."""
    camp = campaign(tmp_path, "iface", {"batch": [4, 8]}, {"sleep": 6})
    sub = api.submit(camp, backend="slurm", options=SlurmOptions(max_parallel=1))
    assert sub.backend == "slurm" and len(sub.submitted) == 2 and len(sub.jobs) == 1
    assert sub.ok and not sub.skipped
    (st,) = api.status("iface")
    assert {str(r.state) for r in st.rows} <= {"SUBMITTED", "PENDING", "RUNNING"}
    by_batch = {}
    for row in st.rows:
        by_batch[json.loads((Path(row.run_dir) / "run.json").read_text())["batch_per_rank"]] = row
    (cancelled,) = api.cancel("iface", where="batch_per_rank == 8")
    assert cancelled.run_ids == [by_batch[8].run_id]
    assert cancelled.jobs == [by_batch[8].job_id]
    changes = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        (st,) = api.status("iface")
        changes += st.changes
        if st.ended:
            break
        time.sleep(1)
    states = {r.run_id: str(r.state) for r in st.rows}
    assert states == {by_batch[4].run_id: "COMPLETED", by_batch[8].run_id: "CANCELLED"}
    assert {(c.run_id, str(c.new)) for c in changes} >= {
        (by_batch[4].run_id, "COMPLETED"),
        (by_batch[8].run_id, "CANCELLED"),
    }
    again = api.submit(camp, backend="slurm")
    assert again.submitted == [] and sorted(again.skipped) == sorted(states)


def test_crash_after_sbatch_is_repaired_without_duplicates(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """sbatch goes through, then hpcscale "dies" before the ledger write (we stop after
    `_sbatch`, as a kill would): the next command finds the jobs by name."""
    camp = campaign(tmp_path, "crash", FOUR_SHAPES)
    _, _, rendered = render_campaign(camp)
    cdir = campaign_dir("crash")
    with Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
        indices = {row.run_id: i for i, row in enumerate(ledger.rows())}
    batches = slurm_arrays.plan(rendered, indices, array=True, stamp="crash1")
    lost = batches[0]
    assert slurm_submit.sbatch(cdir, lost, None).ok
    plain = slurm_arrays.plan([batches[1].runs[0][1]], indices, array=False, stamp="")[0]
    assert slurm_submit.sbatch(cdir, plain, None).ok
    with Ledger(cdir) as ledger:
        assert all(ledger.get(rid).job_id is None for rid in lost.run_ids)

    # status from a fresh shell repairs (the intent files say an sbatch was in flight)
    rows, err = status_rows("crash")
    assert "repaired the ledger: 3 run(s)" in " ".join(err.split())
    assert {r["run_id"] for r in rows if r["job_id"]} == {*lost.run_ids, *plain.run_ids}

    proc = hpcscale("submit", str(camp), check=True)
    assert "5 run(s) submitted, 3 skipped" in proc.stdout
    rows = wait_terminal("crash")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert len(jobs_named(slurm_cluster, "crash.hpcscale.")) == 8  # each run exactly once


def test_lost_ledger_rows_are_rebuilt_from_sacct(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """The ledger is a cache: delete it after the jobs finished; submit finds every job in
    sacct (squeue no longer lists them) and submits nothing."""
    camp = campaign(tmp_path, "rebuild", {"nodes": [1, 2]})
    hpcscale("submit", str(camp), check=True)
    done = wait_terminal("rebuild")
    wait_for_sacct(slurm_cluster.env, [r["job_id"] for r in done])
    (workdir / "rebuild" / "ledger.sqlite").unlink()
    for extra in ("ledger.sqlite-wal", "ledger.sqlite-shm"):
        (workdir / "rebuild" / extra).unlink(missing_ok=True)
    proc = hpcscale("submit", str(camp), check=True)
    assert "0 run(s) submitted, 2 skipped" in proc.stdout
    rows, _ = status_rows("rebuild")
    assert {(r["run_id"], r["job_id"], r["state"]) for r in rows} == {
        (r["run_id"], r["job_id"], "COMPLETED") for r in done
    }


def test_two_concurrent_submits_submit_each_run_once(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """Both wait on the campaign lock; the second finds every run submitted. (The campaign is
    rendered first: two *first* renders racing is render's business, not submission's.)"""
    camp = campaign(tmp_path, "twice", FOUR_SHAPES)
    render_campaign(camp)
    exe = Path(sys.executable).parent / "hpcscale"
    procs_ = [
        subprocess.Popen(
            [exe, "submit", str(camp)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs_]
    assert [p.returncode for p in procs_] == [0, 0], outs
    outs = [out for out, _ in outs]
    assert sorted("8 run(s) submitted" in o for o in outs) == [False, True]
    wait_terminal("twice")
    assert len(jobs_named(slurm_cluster, "twice.hpcscale.")) == 8


def test_rejected_shape_shows_slurm_message_and_others_go_in(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """The profile claims a GPU per node, the cluster has none: sbatch refuses the GPU shape
    only, with SLURM's message; the CPU shape goes in."""
    camp = campaign(tmp_path, "reject", {"device": ["cpu", "gpu"]}, gpus_per_node=1)
    proc = hpcscale("submit", str(camp))
    assert proc.returncode == 1
    text = " ".join((proc.stdout + proc.stderr).split())
    rejected = "sbatch rejected 1 run(s) (--nodes=1 --ntasks-per-node=1 --cpus-per-task=2"
    assert f"{rejected} --gpus-per-node=1" in text
    assert "Invalid generic resource (gres) specification" in text  # SLURM's own words
    assert "1 run(s) submitted, 0 skipped, 1 rejected" in text
    rows = {
        json.loads((Path(r["run_dir"]) / "run.json").read_text())["device"]: r
        for r in wait_terminal("reject", timeout=60, ignore=("RENDERED",))
    }
    assert rows["gpu"]["state"] == "RENDERED" and rows["gpu"]["job_id"] is None
    assert "gres" in rows["gpu"]["message"]
    assert rows["cpu"]["state"] == "COMPLETED"


def test_status_degrades_to_squeue_when_slurmdbd_is_down_then_cancel(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(tmp_path, "dbdown", {"nodes": [1]}, args={"sleep": 60})
    hpcscale("submit", str(camp), check=True)
    deadline = time.monotonic() + 30
    while status_rows("dbdown")[0][0]["state"] != "RUNNING":
        assert time.monotonic() < deadline, "job never started"
        time.sleep(0.5)
    cluster = LocalCluster(slurm_cluster.state_dir)
    procs.stop([cluster.records()["slurmdbd"]])
    try:
        t0 = time.monotonic()
        rows, err = status_rows("dbdown")
        assert time.monotonic() - t0 < 30  # never hangs
        err = " ".join(err.split())
        assert "sacct failed" in err and "slurmdbd down" in err and "squeue" in err
        assert rows[0]["state"] == "RUNNING"  # from squeue
        cancelled = hpcscale("cancel", "dbdown", "--where", "nodes == 1", check=True)
        assert "cancel requested for 1 run(s)" in cancelled.stdout
    finally:
        cluster.up()
    rows = wait_terminal("dbdown", timeout=60)
    assert rows[0]["state"] == "CANCELLED"


def test_failed_runs_are_resubmitted(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(tmp_path, "flaky", {"nodes": [1, 2]}, args={"fail": "yes"})
    hpcscale("submit", str(camp), check=True)
    rows = wait_terminal("flaky")
    assert {r["state"] for r in rows} == {"FAILED"}
    assert all("failing on request" in (r["message"] or "") for r in rows)
    assert hpcscale("resubmit", "flaky").returncode == 2  # which runs? say --failed
    # the cause is fixed (here: the program), then the same runs go again
    (tmp_path / "jobs" / "tf" / "train.py").write_text(STAND_IN.replace('== "yes"', '== "never"'))
    proc = hpcscale("resubmit", "flaky", "--failed", check=True)
    assert "resubmitting 2 run(s)" in proc.stdout
    rows = wait_terminal("flaky")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert all(r["attempts"] == 2 and r["message"] is None for r in rows)
    again = hpcscale("resubmit", "flaky", "--failed", check=True)
    assert "nothing to resubmit" in again.stdout


def test_killed_node_fails_its_run_and_resubmit_finishes_the_campaign(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """One run per node (4 cores each); the slurmd of one run's node is killed while it runs:
    that run ends NODE_FAIL (the cluster has JobRequeue=0), the other completes, and
    `resubmit --failed` finishes the campaign once the node is back. The victim's first
    attempt sleeps 45 s, well past the ~10-20 s SLURM takes to call a dead slurmd's node down;
    the survivor's 20 s, enough to be seen running beside it when the slurmd is killed (the
    test waited for a 45 s survivor after the victim had failed)."""
    camp = campaign(
        tmp_path,
        "nodefail",
        {"layout": ["1x4"], "args.sleep": [45, 20]},
        args={"sleep_once": "yes"},
        cores_per_node=4,
    )
    hpcscale("submit", str(camp), check=True)
    deadline = time.monotonic() + 30
    while True:
        rows, _ = status_rows("nodefail")
        if all(r["state"] == "RUNNING" for r in rows):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)
    sleeps = [json.loads((Path(r["run_dir"]) / "run.json").read_text())["args"]["sleep"]
              for r in rows]  # fmt: skip
    victim, survivor = rows if sleeps == [45, 20] else rows[::-1]
    assert sorted(sleeps) == [20, 45] and victim["nodelist"] != survivor["nodelist"]
    cluster = LocalCluster(slurm_cluster.state_dir)
    procs.stop([cluster.records()[f"slurmd-{victim['nodelist']}"]])
    try:
        rows = {r["run_id"]: r for r in wait_terminal("nodefail", timeout=120)}
        assert rows[victim["run_id"]]["state"] == "NODE_FAIL"
        assert rows[survivor["run_id"]]["state"] == "COMPLETED"
        table = hpcscale("status", "nodefail", check=True).stdout
        assert "NODE_FAIL: 1" in table
    finally:
        cluster.up()
    proc = hpcscale("resubmit", "nodefail", "--failed", check=True)
    assert "resubmitting 1 run(s)" in proc.stdout
    rows = {r["run_id"]: r for r in wait_terminal("nodefail", timeout=120)}
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    assert rows[victim["run_id"]]["attempts"] == 2
    assert rows[survivor["run_id"]]["attempts"] == 1


@pytest.mark.horovod
def test_real_workload_two_nodes_pmix(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """jobs/tf/train.py (DCGAN, tiny) on 2 virtual nodes x 1 rank via `srun --mpi=pmix`."""
    spec = {
        "name": "realgan",
        "workload": {
            "model": "dcgan",
            "epochs": 1,
            "args": {"image_size": 16, "dataset_size": 32, "burn_in_steps": 1},
        },
        "system": "slurm-local",
        "scaling": "weak",
        "matrix": {"nodes": [2], "layout": ["1x2"], "batch": 8},
        "collect": {"timeline": True},
    }
    camp = tmp_path / "realgan.yaml"
    camp.write_text(yaml.safe_dump(spec))
    hpcscale("submit", str(camp), check=True)
    (row,) = wait_terminal("realgan", timeout=400)
    out = "".join(p.read_text() for p in Path(row["run_dir"]).glob("slurm-*.out"))
    assert row["state"] == "COMPLETED", out[-3000:]
    assert "srun --mpi=pmix" in (Path(row["run_dir"]) / "job.sbatch").read_text()
    metrics = json.loads((Path(row["run_dir"]) / "metrics.json").read_text())
    assert metrics["ranks"] == 2
    timeline = (Path(row["run_dir"]) / "timeline.json").read_text()
    assert "ALLREDUCE" in timeline.upper()


# ---------------------------------------------------------------- a stock SLURM's limits


@pytest.fixture(scope="module")
def enforcing_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterInfo]:
    """A second, smaller cluster that enforces association and QOS limits, as sites do
    (SLURM's own default, kept by the session cluster, enforces none): a MaxSubmitJobs there
    is SLURM's rule, not only hpcscale's courtesy."""
    skip_unless_available()
    cluster = LocalCluster(tmp_path_factory.mktemp("slurm-enforcing"))
    try:
        cluster.up(
            port_base=first_free_port_base(TEST_PORT_BASES),
            cluster_name="hpcscaleenf",
            nodes=2,
            slurmd_timeout_s=10,
            accounting_enforce="associations,limits,qos",
        )
        yield cluster.status()
    finally:
        stop_test_cluster(cluster)


@pytest.fixture
def enforcing(enforcing_cluster: ClusterInfo, monkeypatch: pytest.MonkeyPatch) -> ClusterInfo:
    """The enforcing cluster as the one SLURM_CONF names, for one test."""
    monkeypatch.setenv("SLURM_CONF", enforcing_cluster.slurm_conf)
    return enforcing_cluster


@contextmanager
def max_submit_jobs(info: ClusterInfo, n: int) -> Iterator[None]:
    """The user's MaxSubmitJobs on the test cluster's accounting, for the duration."""
    user = slurm_limits.user_name()
    where = ["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set"]
    slurm_run(info.env, *where, f"MaxSubmitJobs={n}")
    try:
        yield
    finally:
        slurm_run(info.env, *where, "MaxSubmitJobs=-1")


def test_over_max_array_size_goes_in_as_several_arrays_that_complete(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """The test cluster keeps SLURM's default MaxArraySize (1001), as users meet it: 1,010
    runs of a program that exits at once go in as arrays of at most 1,001 tasks, indices
    below 1001, and all complete."""
    conf = slurm_run(slurm_cluster.env, "scontrol", "show", "config").stdout
    assert re.search(r"^MaxArraySize\s*=\s*1001$", conf, re.M)
    batches = {"batch": list(range(1, 1011))}
    camp = campaign(tmp_path, "wide", batches, program=SH_STAND_IN, python="/bin/sh",
                    cores_per_node=1, srun_mpi="none")  # fmt: skip
    proc = hpcscale("submit", str(camp), check=True)
    assert "1010 run(s) submitted, 0 skipped, 0 rejected" in proc.stdout
    deadline = time.monotonic() + 1500
    while not (st := api.status("wide")[0]).ended:  # in-process and seldom: the CPUs run jobs
        assert time.monotonic() < deadline, st.counts()
        time.sleep(5)
    rows = [r.__dict__ for r in st.rows]
    assert {r["state"] for r in rows} == {"COMPLETED"}
    tasks = Counter(r["array_job_id"] for r in rows)
    assert sorted(tasks.values()) == [9, 1001]
    assert max(r["array_index"] for r in rows) == 1000
    assert all(r["job_id"] == f"{r['array_job_id']}_{r['array_index']}" for r in rows)


def test_split_arrays_with_equal_indices_are_repaired_to_their_own_runs(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """Two arrays both of index 0 only, lost before the ledger write: each run gets its own
    array's task (the index -> run map is per array), nothing is submitted twice."""
    camp = campaign(tmp_path, "split", {"batch": [4, 8, 16]})
    _, _, rendered = render_campaign(camp)
    cdir = campaign_dir("split")
    with Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
    lost = slurm_arrays.plan(rendered, array=True, stamp="split1", max_array_size=1)[:2]
    jobs = {}
    for b in lost:
        res = slurm_submit.sbatch(cdir, b, None)
        assert res.ok
        jobs[b.run_ids[0]] = f"{res.stdout.strip().split(';')[0]}_0"
    _, err = status_rows("split")
    assert "repaired the ledger: 2 run(s)" in " ".join(err.split())
    proc = hpcscale("submit", str(camp), check=True)
    assert "1 run(s) submitted, 2 skipped" in proc.stdout
    rows = {r["run_id"]: r for r in wait_terminal("split")}
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    assert {rid: rows[rid]["job_id"] for rid in jobs} == jobs
    assert len(jobs_named(slurm_cluster, "split.hpcscale.")) == 3


def test_max_submit_jobs_submits_what_fits_and_follow_submits_the_rest(
    enforcing: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(
        tmp_path, "capped", {"batch": list(range(1, 8))}, {"sleep": 4}, cores_per_node=1
    )
    with max_submit_jobs(enforcing, 3):
        first = hpcscale("submit", str(camp), check=True)
        text = " ".join(first.stdout.split())
        assert "3 run(s) submitted, 0 skipped, 0 rejected, 4 waiting" in text
        assert "4 run(s) wait for room in the queue (MaxSubmitJobs=3" in text
        rows, _ = status_rows("capped")
        waiting = [r for r in rows if r["state"] == "RENDERED"]
        assert len(waiting) == 4 and all(r["job_id"] is None for r in waiting)
        follow = hpcscale("submit", str(camp), "--follow", check=True)
        text = " ".join(follow.stdout.split())
        assert re.search(r"following: \d/4 run\(s\) submitted, \d waiting \(MaxSubmitJobs=3", text)
        assert "4 run(s) submitted, 3 skipped, 0 rejected" in text
    rows = wait_terminal("capped")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    tasks = Counter(r["array_job_id"] for r in rows)
    assert len(tasks) >= 3 and max(tasks.values()) <= 3


def test_ctrl_c_stops_follow_and_leaves_the_ledger_consistent(
    enforcing: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    camp = campaign(
        tmp_path, "stopped", {"batch": list(range(1, 6))}, {"sleep": 60}, cores_per_node=1
    )
    exe = Path(sys.executable).parent / "hpcscale"
    with max_submit_jobs(enforcing, 2):
        proc = subprocess.Popen(
            [exe, "submit", str(camp), "--follow"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        )
        assert proc.stdout is not None
        seen = ""
        while "following:" not in seen:
            line = proc.stdout.readline()
            assert line, f"submit --follow ended early: {seen}{proc.communicate()}"
            seen += line
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (seen, rest, err)
    assert "stopped following: 2 run(s) submitted, 3 still RENDERED" in " ".join(rest.split())
    assert "state on disk is consistent" in err
    rows, _ = status_rows("stopped")
    assert sorted(r["job_id"] is None for r in rows) == [False, False, True, True, True]
    assert all(r["state"] == "RENDERED" for r in rows if r["job_id"] is None)
    assert not list((workdir / "stopped" / "arrays").glob("*.pending"))
    assert len(jobs_named(enforcing, "stopped.hpcscale.")) == 2
    hpcscale("cancel", "stopped", check=True)
    wait_terminal("stopped", ignore=("RENDERED",))


def test_a_limit_sbatch_enforces_unseen_leaves_the_runs_waiting(
    enforcing: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """Where the user cannot see their limit (here: told so), sbatch's "job submit limit" is
    a full queue, not a rejected run: the runs wait, RENDERED, with no error."""
    camp = campaign(tmp_path, "unseen", {"batch": list(range(1, 6))})
    _, _, rendered = render_campaign(camp)
    cdir = campaign_dir("unseen")
    with max_submit_jobs(enforcing, 3), Ledger(cdir) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered)
        sub = slurm_submit.submit_runs(
            rendered,
            ledger,
            cdir,
            force=False,
            array=True,
            max_parallel=None,
            reporter=QuietReporter(),
            limits=slurm_limits.Limits(),  # MaxSubmitJobs not visible
        )
        rows = ledger.rows()
    assert sub.ok and sub.submitted == [] and sub.rejected == []
    assert all(r.state == "RENDERED" and r.message is None for r in rows)
    assert not list((cdir / "arrays").glob("*.pending"))
    assert jobs_named(enforcing, "unseen.hpcscale.") == set()


SUBMITTED = re.compile(r"submitted (?:array|job) (\d+)(?: \(\d+ runs\))?(?: after (\d+))?:")


def most_at_once(rows: list[dict]) -> int:
    """The most runs whose [start, end) spans (sacct, 1 s resolution) hold one instant."""
    spans = [(r["started_at"], r["ended_at"]) for r in rows]
    return max(sum(s <= t < e for s, e in spans) for t, _ in spans)


def test_follow_keeps_the_max_parallel_chain_across_rounds(
    enforcing: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """MaxSubmitJobs=2 lets 2 of 4 runs in; `--follow` submits the rest in later rounds, each
    round's first array after the previous round's last, so `--max-parallel 1` still means one
    run at a time (both nodes are free: an unchained array would start beside the other)."""
    camp = campaign(tmp_path, "chain", {"batch": [1, 2, 3, 4]}, {"sleep": 3}, cores_per_node=1)
    with max_submit_jobs(enforcing, 2):
        proc = hpcscale("submit", str(camp), "--max-parallel", "1", "--follow", check=True)
    text = " ".join(proc.stdout.split())
    assert "following:" in text and "4 run(s) submitted" in text
    rows = wait_terminal("chain")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert len({r["array_job_id"] for r in rows}) >= 2  # more than one round
    assert most_at_once(rows) == 1
    chain = SUBMITTED.findall(text)  # the dependency each sbatch was given, as said
    assert len({r["array_job_id"] for r in rows}) == len(chain)
    assert chain[0][1] == ""  # the first waits for nothing
    assert [after for _, after in chain[1:]] == [job for job, _ in chain[:-1]], chain


def test_no_array_with_max_parallel_runs_n_at_once(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    """`--no-array --max-parallel 2`: two lanes of plain jobs (job k after job k-2), so two
    runs go at once and never three, on a cluster with room for all four."""
    camp = campaign(tmp_path, "lanes", {"batch": [4, 8, 16, 32]}, {"sleep": 4})
    proc = hpcscale("submit", str(camp), "--no-array", "--max-parallel", "2", check=True)
    rows = wait_terminal("lanes")
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert all(r["array_job_id"] is None for r in rows)
    assert most_at_once(rows) == 2
    jobs = SUBMITTED.findall(" ".join(proc.stdout.split()))  # each sbatch's dependency
    assert [after for _, after in jobs] == ["", "", jobs[0][0], jobs[1][0]], jobs


def test_doctor_on_the_local_cluster_and_without_it(slurm_cluster: ClusterInfo) -> None:
    """`doctor --system slurm-local` asks the real controller and accounting: both answer while
    the session cluster runs; pointed at a SLURM_CONF with no daemons behind it, both fail
    with the way to start one, and doctor exits 1."""
    proc = hpcscale("doctor", "--system", "slurm-local", "--json", env=slurm_cluster.env)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    for name in ("sbatch", "sacct", "cluster", "accounting"):
        assert checks[name]["passed"], checks[name]
    assert "slurmctld answers" in checks["cluster"]["detail"]
    assert "slurmdbd answers" in checks["accounting"]["detail"]
    dead = Path(slurm_cluster.slurm_conf).parent / "dead.conf"
    text = Path(slurm_cluster.slurm_conf).read_text()
    dead.write_text(re.sub(r"SlurmctldPort=\d+(-\d+)?", "SlurmctldPort=1", text))
    proc = hpcscale("doctor", "--system", "slurm-local", "--json", env={"SLURM_CONF": str(dead)})
    assert proc.returncode == 1, proc.stdout
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert not checks["cluster"]["passed"]
    assert "hpcscale cluster up" in checks["cluster"]["fix"]
