"""Runs that shared their machine (issue 13): overlap, busy machine, superlinear efficiency,
the machine's load each run records, and the local cluster's default array throttle.

Pure checks on constructed rows; real runs: two tiny local runs on a quiet machine, a copy of
the finished quickstart (its times moved so its two runs overlap), a tiny local run while the
test keeps the CPUs busy, and tiny real jobs on the local SLURM cluster with the default
throttle and with `--max-parallel 2`. The quiet-machine and busy-machine tests are `serial`:
`make test` runs them after its two xdist workers are done (docs/development.md).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcscale import api
from hpcscale.analysis import contention
from hpcscale.analysis.derive import derive
from hpcscale.analysis.quality import Check, busy_check, overlap_check, quality_flags
from hpcscale.backends.base import BackendOptions
from hpcscale.backends.slurm.backend import SlurmOptions, profile_throttle, with_throttle
from hpcscale.devcluster.status import ClusterInfo
from hpcscale.formats.metrics import load_metrics
from hpcscale.model.campaign import load_campaign
from hpcscale.model.errors import InputError
from hpcscale.model.system import load_system
from hpcscale.render.render import Rendered
from tests.conftest import CAMPAIGNS, hpcscale
from tests.quickstart_fixture import run_dir_of
from tests.slurm_fixture import wait_idle

BOOT = "boot:11111111-2222-3333-4444-555555555555"


def row(rid: str, start: float, end: float, **kw: object) -> dict[str, object]:
    return {"run_id": rid, "started_unix_s": start, "finished_unix_s": end, **kw}


def flags_of(runs: pd.DataFrame, kind: str, check: Check | None = None) -> dict[str, str]:
    """run id -> reason of the flags of one kind: from one check (constructed rows hold only
    its columns) or from every registered check (real runs)."""
    flags = check(runs) if check else quality_flags(runs)
    return {f.run_id: f.reason for f in flags if f.kind == kind}


# ---------------------------------------------------------------- pure: overlap


def test_overlap_is_by_machine_not_by_slurm_node_name() -> None:
    """Two array tasks on the local cluster: different virtual node names, one machine."""
    runs = pd.DataFrame(
        [
            row("a", 100.0, 130.0, machines=BOOT, hostnames="c1"),
            row("b", 110.0, 150.0, machines=f"{BOOT},{BOOT}", hostnames="c2,c3"),
            row("c", 150.0, 170.0, machines=BOOT, hostnames="c1"),  # starts as b ends
            row("d", 100.0, 200.0, machines="boot:other", hostnames="c1"),  # same name, not host
        ]
    )
    found = contention.overlaps(runs)
    assert found == {  # a summary per run (issue 28), naming its others when they are few
        "a": contention.Overlap(1, 2, (("b", 20.0),)),
        "b": contention.Overlap(1, 2, (("a", 20.0),)),
    }
    flags = flags_of(runs, "overlap", overlap_check)
    assert set(flags) == {"a", "b"}
    assert "b (20.0 s)" in flags["a"] and "a (20.0 s)" in flags["b"]
    assert all(f.action == "flagged" for f in overlap_check(runs))


def test_files_without_machines_fall_back_to_hostnames() -> None:
    runs = pd.DataFrame(
        [
            row("old1", 0.0, 10.0, machines=None, hostnames="h1"),
            row("old2", 5.0, 12.0, machines=None, hostnames="h1,h2"),
            row("old3", 5.0, 12.0, machines=None, hostnames="h9"),
        ]
    )
    assert set(contention.overlaps(runs)) == {"old1", "old2"}
    assert contention.overlap_seconds((0.0, 10.0), (10.0, 20.0)) == 0.0


def test_without_a_throttle_the_quickstart_slurm_tasks_overlap_in_the_check() -> None:
    """The issue's case, as the rows the collector makes: both tasks started together."""
    runs = pd.DataFrame(
        [
            row("n1", 1000.0, 1040.0, machines=BOOT, hostnames="host"),
            row("n2", 1001.0, 1030.0, machines=f"{BOOT},{BOOT}", hostnames="host,host"),
        ]
    )
    assert set(flags_of(runs, "overlap", overlap_check)) == {"n1", "n2"}


# ---------------------------------------------------------------- pure: the busy rule


@pytest.mark.parametrize(
    ("others", "cpus", "own", "busy"),
    [
        (2.0, 2, 1, True),  # two CPU burners, a 1-rank run on 2 cores
        (1.4, 2, 1, False),  # one core's worth of others: the run's core stays free
        (0.6, 2, 2, True),  # a 2-rank run needs both cores
        (0.4, 2, 2, False),  # daemons and noise
        (10.0, 64, 8, False),  # a big shared node with room to spare
        (math.nan, 2, 1, False),  # not measured: no verdict
        (3.0, 2, 4, True),  # oversubscribed run: own capped at the machine's CPUs
    ],
)
def test_busy_rule(others: float, cpus: int, own: float, busy: bool) -> None:
    assert contention.is_busy(others, cpus, own) is busy


def test_busy_flag_states_the_rule_and_own_cpus_count_ranks_on_the_machine() -> None:
    r = {"machines": f"{BOOT},{BOOT},boot:x", "threads_per_task": 2, "tasks_per_node": 1}
    assert contention.own_cpus(r) == 4.0  # 2 of 3 ranks on rank 0's machine x 2 threads
    runs = pd.DataFrame(
        [
            row("quiet", 0, 1, machines=BOOT, cpus=2, others_cpus_start=0.1, others_cpus_end=0.2),
            row("busy", 0, 1, machines=BOOT, cpus=2, others_cpus_start=0.2, others_cpus_end=1.9),
            row("old", 0, 1),  # no load recorded
        ]
    )
    flags = flags_of(runs, "busy", busy_check)
    assert set(flags) == {"busy"}
    assert "1.9 CPUs at the end of 2" in flags["busy"] and contention.BUSY_RULE in flags["busy"]


# ---------------------------------------------------------------- pure: superlinear


def test_superlinear_names_a_contaminated_baseline() -> None:
    cells = pd.DataFrame(
        {
            "group": [0, 0, 1, 1],
            "axis": "nodes",
            "axis_value": [1, 2, 1, 2],
            "base_axis_value": [1, 1, 1, 1],
            "nodes": [1, 2, 1, 2],
            "efficiency": [1.0, 1.10, 1.0, 1.05],
            "run_ids": [["b1"], ["r2"], ["c1"], ["s2"]],
        }
    )
    tainted = {"b1": "ran alongside r2"}
    found = {f.run_id: f for f in contention.superlinear_findings(cells, tainted)}
    assert set(found) == {"r2", "s2"}
    assert "efficiency 1.10 is above 1" in found["r2"].reason
    assert "baseline is contaminated: baseline run b1 ran alongside r2" in found["r2"].reason
    assert "likely causes" in found["s2"].reason and "cache" in found["s2"].reason
    assert "noise" in found["s2"].reason and found["s2"].others == ("c1",)


# ---------------------------------------------------------------- real runs


def tiny_campaign(path: Path, name: str, layouts: list[str]) -> Path:
    """A DCGAN campaign of a few seconds a run on this machine (local mpirun)."""
    spec = {
        "name": name,
        "workload": {
            "model": "dcgan",
            "epochs": 1,
            "args": {"image_size": 16, "dataset_size": 32, "burn_in_steps": 1},
        },
        "system": "local",
        "scaling": "weak",
        "matrix": {"layout": layouts, "batch": 8},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.serial  # no other test may load the machine while these runs probe it
def test_real_runs_record_the_load_and_sequential_runs_are_not_flagged(tmp_path: Path) -> None:
    """Its own two tiny runs (1 and 2 ranks), not the session's quickstart: under `make test`
    that one trains while a second xdist worker keeps a core busy, and is rightly `busy`."""
    # named quickstart: run_dir_of finds its runs where it finds the quickstart's
    camp = tiny_campaign(tmp_path / "quiet.yaml", "quickstart", ["1x1", "2x1"])
    wd = tmp_path / "runs"
    hpcscale("submit", str(camp), "--backend", "local", "-w", str(wd), check=True, timeout=600)
    hpcscale("collect", "quickstart", "-w", str(wd), check=True, timeout=300)
    for ranks in (1, 2):
        m = load_metrics(run_dir_of(wd, ranks) / "metrics.json")
        assert m.load is not None
        assert len(m.load.machines) == ranks and len(set(m.load.machines)) == 1
        for s in (m.load.start, m.load.end):
            assert s.cpus == os.cpu_count() and s.load_1m >= 0 and s.others_cpus is not None
            assert s.other_jobs is None  # not under SLURM
        assert m.started_unix_s <= m.load.start.unix_s <= m.load.end.unix_s <= m.finished_unix_s
    runs = api.load_results("quickstart", wd)
    for col in ("machines", "cpus", "others_cpus_start", "load_1m_end", "started_unix_s"):
        assert runs[col].notna().all(), col
    assert not flags_of(runs, "overlap")  # the local backend runs one at a time
    # rank 1's own threads (Horovod's cycle, tf.data) are this run's, not other processes':
    # counting them made every 2-rank run on 2 cores look busy on an idle machine
    assert not flags_of(runs, "busy"), runs[["ranks", "others_cpus_start", "others_cpus_end"]]


def test_busy_cpus_subtracts_every_rank_of_the_run_on_the_machine() -> None:
    from jobs.load import busy_cpus

    # 200 of 200 jiffies busy on 2 CPUs = 2 CPUs busy; the run's ranks used 1.5 of them
    assert busy_cpus((100, 1000), (300, 1200), 2, ours=1.5) == pytest.approx(0.5)
    assert busy_cpus((100, 1000), (150, 1200), 2, ours=1.5) == 0.0  # never negative
    assert busy_cpus(None, (150, 1200), 2, ours=0.0) is None


def test_overlapping_copy_is_flagged_and_its_superlinear_efficiency_names_the_baseline(
    quickstart_copy,
) -> None:
    """The 2-rank run moved into the 1-rank run's time, and the 1-rank run slowed (as when
    both shared the cores) enough that efficiency is 1.5 or more whatever the real runs
    measured on this shared machine: efficiency goes above 1, and the flags say why."""
    wd = quickstart_copy()
    one, two = run_dir_of(wd, 1), run_dir_of(wd, 2)
    m1, m2 = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    shift = m1["started_unix_s"] + 5 - m2["started_unix_s"]
    m2["started_unix_s"] += shift
    m2["finished_unix_s"] += shift

    def rate(m: dict) -> float:  # images of the timed epochs over their time (issue #19)
        times = m["epoch_time_s"]
        return m["global_batch"] * m["steps_per_epoch"] * len(times) / sum(times)

    slower = max(3.0, 3.0 * rate(m1) / rate(m2))  # efficiency = slower * X_2 / (2 X_1) >= 1.5
    m1["epoch_time_s"] = [t * slower for t in m1["epoch_time_s"]]
    m1["images_per_s"] = [x / slower for x in m1["images_per_s"]]
    (one / "metrics.json").write_text(json.dumps(m1))
    (two / "metrics.json").write_text(json.dumps(m2))
    hpcscale("collect", "quickstart", "-w", str(wd), check=True, timeout=300)
    runs = api.load_results("quickstart", wd)
    overlap = flags_of(runs, "overlap")
    assert set(overlap) == {one.name, two.name}
    assert two.name in overlap[one.name] and " s)" in overlap[one.name]
    (eff,) = derive(runs).query("ranks == 2")["efficiency"]
    assert eff > 1
    superlinear = flags_of(runs, "superlinear")
    assert set(superlinear) == {two.name}
    assert f"baseline run {one.name} ran alongside {two.name}" in superlinear[two.name]
    hpcscale("report", "quickstart", "-w", str(wd), check=True, timeout=300)
    md = (wd / "quickstart" / "report" / "index.md").read_text()
    scaling, quality = md.split("## Data quality")
    assert "overlap" in quality and "superlinear" in quality and "ran alongside" in quality
    first = [[c.strip() for c in ln.split("|")] for ln in scaling.splitlines() if "|" in ln][:4]
    assert (first[0][3], first[0][-2]) == ("Ranks", "Flags"), first[0]
    by_ranks = {cells[3]: cells[-2] for cells in first[2:]}  # the first table's Flags column
    assert "overlap" in by_ranks["1"] and "superlinear" not in by_ranks["1"]
    assert "overlap" in by_ranks["2"] and "superlinear" in by_ranks["2"]


@pytest.mark.serial  # its burners would make every run of the other xdist worker `busy`
def test_a_run_on_a_busy_machine_is_flagged_busy(tmp_path: Path) -> None:
    """One CPU burner per CPU (this test's own children, stopped by pid) for the run's
    duration: while the run's rank sleeps for the load probe they take every CPU, more than the
    cpus - 1 + 0.5 the busy rule allows a 1-rank run on any machine (two burners made a run
    busy only on a 2-core host). The burners run at the lowest priority (nice 19): while the
    rank sleeps nothing else wants the CPUs, so they still take them all (/proc/stat counts
    nice time as busy), but they no longer slow the run's own start-up and training."""
    camp = tiny_campaign(tmp_path / "busyrun.yaml", "busyrun", ["1x1"])
    wd = tmp_path / "runs"
    burn = ["nice", "-n", "19", sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(burn) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(1)
        hpcscale("submit", str(camp), "--backend", "local", "-w", str(wd), check=True, timeout=600)
    finally:
        for p in burners:
            p.terminate()
        for p in burners:
            p.wait(timeout=30)
    hpcscale("collect", "busyrun", "-w", str(wd), check=True, timeout=300)
    runs = api.load_results("busyrun", wd)
    (rid,) = runs["run_id"]
    busy = flags_of(runs, "busy")
    assert set(busy) == {rid}, runs[["others_cpus_start", "others_cpus_end", "cpus"]]
    assert "measured on a busy machine" in busy[rid] and contention.BUSY_RULE in busy[rid]


# ---------------------------------------------------------------- the throttle


def test_throttle_comes_from_the_flag_else_the_campaign_else_the_profile() -> None:
    assert with_throttle(SlurmOptions(), None, 1).max_parallel == 1
    assert with_throttle(SlurmOptions(), 3, 1).max_parallel == 3
    assert with_throttle(SlurmOptions(max_parallel=2), 3, 1).max_parallel == 2
    assert with_throttle(SlurmOptions(), None, None).max_parallel is None
    assert with_throttle(BackendOptions(), 3, 1) == BackendOptions()  # other backends
    assert load_system("slurm-local").max_parallel == 1
    assert load_system("cpu-cluster").max_parallel is None


def test_resubmit_takes_the_throttle_from_the_runs_profile(tmp_path: Path) -> None:
    """`resubmit` hands the backend runs read back from their directories, no campaign."""
    camp = CAMPAIGNS / "quickstart_slurm.yaml"
    for system, expected in (("slurm-local", 1), ("cpu-cluster", None)):
        _, _, rendered = api.render_campaign(camp, tmp_path / system, system=system)
        again = [Rendered.from_run_dir(r.run_dir) for r in rendered]
        assert profile_throttle(again) == expected


def test_slurm_local_default_submits_one_run_at_a_time(workdir: Path) -> None:
    """Both arrays (1 node, 2 nodes) throttled to %1, the second after the first."""
    sub = api.submit(CAMPAIGNS / "quickstart_slurm.yaml", dry_run=True, check=False)
    sbatch = [ln for ln in sub.described if ln.startswith("sbatch")]
    assert len(sbatch) == 2 and all("--array=0%1 " in ln for ln in sbatch)
    assert "--dependency" not in sbatch[0]
    assert "--dependency=afterany:<job of sbatch 1>" in sbatch[1]
    lifted = api.submit(
        CAMPAIGNS / "quickstart_slurm.yaml",
        dry_run=True,
        check=False,
        options=SlurmOptions(max_parallel=2),
    )
    assert all("%2 " in ln for ln in lifted.described if ln.startswith("sbatch"))


@pytest.mark.parametrize(
    ("where", "text", "key"),
    [("system", "max_parallel: 0\n", "max_parallel"), ("campaign", "max_parallel: 0\n", None)],
)
def test_bad_max_parallel_is_a_located_error(
    tmp_path: Path, where: str, text: str, key: str | None
) -> None:
    profile = (Path(api.__file__).parent / "systems" / "slurm-local.yaml").read_text()
    profile = profile.replace("max_parallel: 1\n", "")
    sysfile = tmp_path / "prof.yaml"
    sysfile.write_text(profile + (text if where == "system" else ""))
    camp = (CAMPAIGNS / "quickstart_slurm.yaml").read_text().replace("slurm-local", str(sysfile))
    cfile = tmp_path / "camp.yaml"
    cfile.write_text(camp + (text if where == "campaign" else ""))
    with pytest.raises(InputError) as err:
        load_campaign(cfile)
    bad = sysfile if where == "system" else cfile
    assert err.value.file == str(bad) and err.value.line is not None
    assert "max_parallel" in str(err.value)
    proc = hpcscale("plan", str(cfile))
    assert proc.returncode == 2 and "max_parallel" in proc.stderr


# ---------------------------------------------------------------- the real local SLURM cluster


def tiny_slurm_campaign(
    tmp_path: Path, name: str, matrix: dict, system: str = "slurm-local"
) -> Path:
    """A quickstart_slurm-like campaign (real jobs/tf/train.py on slurm-local), tiny."""
    spec = yaml.safe_load((CAMPAIGNS / "quickstart_slurm.yaml").read_text())
    spec["name"] = name
    spec["system"] = system
    spec["workload"].update(
        epochs=1, args={"image_size": 16, "dataset_size": 32, "burn_in_steps": 1}
    )
    spec["matrix"] = {"layout": "1x1", "batch": 8, **matrix}
    spec.pop("collect", None)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def finished_slurm(name: str, wd: Path, timeout: float = 900) -> pd.DataFrame:
    """Wait until every run ended (COMPLETED asserted), collect, and return the table."""
    deadline = time.monotonic() + timeout
    while True:
        proc = hpcscale("status", name, "--json", "-w", str(wd), check=True, timeout=120)
        rows = json.loads(proc.stdout)[name]
        if all(r["state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for r in rows):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(3)
    assert {r["state"] for r in rows} == {"COMPLETED"}, rows
    hpcscale("collect", name, "-w", str(wd), check=True, timeout=300)
    return api.load_results(name, wd)


def intervals_overlap(runs: pd.DataFrame) -> bool:
    spans = sorted(zip(runs["started_unix_s"], runs["finished_unix_s"], strict=True))
    return any(b[0] < a[1] for a, b in pairwise(spans))


# A start barrier for the jobs of one campaign: Python imports this `sitecustomize` from the
# PYTHONPATH the test's profile sets, before jobs/tf/train.py runs. Once a job has recorded its
# start time (jobs.tf.harness.run takes it, then calls `_run`), it waits until every job of the
# campaign has, so the measured [started, finished] intervals all contain the instant the last
# one arrived: they overlap by construction, not by the scheduler's timing. A job left alone
# (the throttle not lifted) gives up after BARRIER_WAIT_S and runs apart.
BARRIER_WAIT_S = 240
BARRIER = """\
import importlib.machinery
import os
import sys
import time


def _wait():
    where, n = os.environ["HPCSCALE_TEST_BARRIER"], int(os.environ["HPCSCALE_TEST_BARRIER_N"])
    open(os.path.join(where, os.environ["HPCSCALE_RUN_ID"]), "w").close()
    deadline = time.monotonic() + float(os.environ["HPCSCALE_TEST_BARRIER_WAIT_S"])
    while len(os.listdir(where)) < n and time.monotonic() < deadline:
        time.sleep(0.2)


class _AfterHarness:
    def find_spec(self, name, path=None, target=None):
        if name != "jobs.tf.harness":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            inner = module._run

            def _run(*args, **kwargs):
                _wait()
                return inner(*args, **kwargs)

            module._run = _run

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterHarness())
"""


def barrier_profile(tmp_path: Path, jobs: int) -> tuple[Path, Path]:
    """slurm-local with the start barrier for `jobs` jobs: (profile, the barrier's directory)."""
    code, arrived = tmp_path / "barrier", tmp_path / "arrived"
    code.mkdir()
    arrived.mkdir()
    (code / "sitecustomize.py").write_text(BARRIER)
    profile = yaml.safe_load(
        (Path(api.__file__).parent / "systems" / "slurm-local.yaml").read_text()
    )
    profile["name"] = "slurm-local-barrier"
    profile["env"] = {
        **profile.get("env", {}),
        "PYTHONPATH": str(code),
        "HPCSCALE_TEST_BARRIER": str(arrived),
        "HPCSCALE_TEST_BARRIER_N": str(jobs),
        "HPCSCALE_TEST_BARRIER_WAIT_S": str(BARRIER_WAIT_S),
    }
    path = tmp_path / "slurm-local-barrier.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path, arrived


@pytest.mark.slurm
def test_slurm_local_runs_one_task_at_a_time_by_default_and_overlaps_are_flagged(
    slurm_cluster: ClusterInfo, tmp_path: Path
) -> None:
    """Default (profile max_parallel: 1): the 1-node and 2-node arrays one after the other, no
    overlap flag. `--max-parallel 2` on one array of two tasks, held together by a start
    barrier (BARRIER): both ran at once, so both must be flagged, each naming the other."""
    wd = tmp_path / "runs"
    serial = tiny_slurm_campaign(tmp_path, "cont_serial", {"nodes": [1, 2]})
    hpcscale("submit", str(serial), "-w", str(wd), check=True, timeout=300)
    runs = finished_slurm("cont_serial", wd)
    assert len(runs) == 2 and not intervals_overlap(runs)
    assert not flags_of(runs, "overlap")
    assert runs["machines"].str.split(",").map(len).tolist() == runs["ranks"].tolist()
    for rd in runs["run_dir"]:  # under SLURM the job counts the node's other jobs
        m = load_metrics(Path(rd) / "metrics.json")
        assert m.load is not None and isinstance(m.load.start.other_jobs, int)

    profile, arrived = barrier_profile(tmp_path, jobs=2)
    free = tiny_slurm_campaign(
        tmp_path, "cont_free", {"nodes": [1], "batch": [4, 8]}, system=str(profile)
    )
    hpcscale("submit", str(free), "--max-parallel", "2", "-w", str(wd), check=True, timeout=300)
    runs = finished_slurm("cont_free", wd)
    a, b = runs["run_id"]
    assert sorted(p.name for p in arrived.iterdir()) == sorted([a, b])  # both met the barrier
    overlap = flags_of(runs, "overlap")
    assert set(overlap) == {a, b}, runs[["run_id", "started_unix_s", "finished_unix_s"]]
    assert b in overlap[a] and a in overlap[b]
    wait_idle(slurm_cluster)
