"""A failed run is never a measurement: only a run whose last known state is COMPLETED enters
the tables, speedups and fits; any other is kept in results.parquet with its `state` and listed
in Data quality with its reason. The state comes from the ledger, else from the run's own exit
record (exit.json, written by its job script's EXIT trap however the script ends), else it is
unknown. Real runs: a real 2-rank mpirun whose rank 1 raises KeyError, real job scripts run by
bash (a failed command, a signal), real run directories moved away from their ledger."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hpcscale import api
from hpcscale.analysis.derive import derive
from hpcscale.analysis.quality import quality_flags
from hpcscale.collect.collector import collect_campaign, load_results
from tests.command_fixture import KEYERROR, campaign
from tests.conftest import hpcscale

EXIT_NAME = "exit.json"  # hpcscale.formats.exit_record.EXIT_NAME, named as the issue names it


def read_exit_record(run_dir: Path):  # -> ExitRecord | None
    from hpcscale.formats.exit_record import read_exit_record as read

    return read(run_dir)


pytestmark = pytest.mark.mpi

BODY = """\
name: keyerr
workload:
  command: python3 prog.py
  metrics:
    - {name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}
  throughput: samples_per_s
system: local
scaling: weak
matrix: {layout: ["1x1", "2x1"], batch: 4}
"""


@pytest.fixture(scope="module")
def keyerror(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The campaign submitted once (local backend, real mpirun) and collected: the 1-rank run
    completes, the 2-rank run fails."""
    tmp = tmp_path_factory.mktemp("keyerr")
    wd = tmp / "runs"
    path = campaign(tmp, BODY, KEYERROR)
    env = {"HPCSCALE_WORKDIR": str(wd)}
    sub = hpcscale("submit", str(path), "--backend", "local", env=env)
    assert sub.returncode == 1, sub.stdout + sub.stderr  # the 2-rank run failed
    col = hpcscale("collect", str(path), env=env)
    runs = {}
    for rd in (wd / "keyerr" / "runs").iterdir():
        runs[json.loads((rd / "run.json").read_text())["ranks"]] = rd
    return {"wd": wd, "cdir": wd / "keyerr", "collect": col, "runs": runs, "yaml": path}


def test_the_failed_run_is_kept_with_its_state_but_never_measured(keyerror: dict) -> None:
    col = keyerror["collect"]
    assert col.returncode == 0, col.stdout + col.stderr  # a failed run is no unreadable one
    failed = keyerror["runs"][2].name
    said = col.stdout + col.stderr
    # one line: how many runs were left out, and why (its state and its own reason)
    (line,) = [ln for ln in said.splitlines() if "left out" in ln]
    assert "1 run" in line and "FAILED" in line and "KeyError: 1" in line and failed in line
    # kept in the results with its state, so nothing is hidden
    everything = pd.read_parquet(keyerror["cdir"] / "results.parquet").set_index("ranks")
    assert everything.loc[2, "state"] == "FAILED" and everything.loc[1, "state"] == "COMPLETED"
    assert everything.loc[2, "samples_per_s"] > 0  # what it printed is kept, not measured
    # ... but every reader of the table sees the measured run only
    assert list(load_results("keyerr", keyerror["wd"])["ranks"]) == [1]
    assert list(api.load_results("keyerr", keyerror["wd"])["ranks"]) == [1]
    cells = derive(everything.reset_index())  # even a reader of the raw file: normalise filters
    assert list(cells["ranks"]) == [1]
    out = collect_campaign(keyerror["cdir"], progress=False)
    assert [r["ranks"] for r in out.rows] == [1]
    assert [(r, s) for r, s, _ in out.not_completed] == [(failed, "FAILED")]
    flags = [f for f in quality_flags(out.frame, out.context) if f.run_id == failed]
    assert [(f.kind, f.action) for f in flags] == [("not_completed", "excluded")]
    assert "FAILED" in flags[0].reason and "KeyError: 1" in flags[0].reason


def test_the_report_shows_the_failed_run_only_in_data_quality(keyerror: dict) -> None:
    env = {"HPCSCALE_WORKDIR": str(keyerror["wd"])}
    rep = hpcscale("report", str(keyerror["yaml"]), env=env)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    md = (keyerror["cdir"] / "report" / "index.md").read_text()
    failed = keyerror["runs"][2].name
    quality = md[md.index("## Data quality") :]
    quality = quality[: quality.index("\n## ", 1)] if "\n## " in quality[1:] else quality
    assert failed in quality and "FAILED" in quality and "KeyError: 1" in quality
    assert "No run left out or flagged" not in md
    before = md[: md.index("## Data quality")]
    assert failed not in before and "| 2 |" not in before  # no 2-rank row, speedup or efficiency


def test_the_job_script_writes_its_exit_record(keyerror: dict) -> None:
    ok, bad = (read_exit_record(keyerror["runs"][r]) for r in (1, 2))
    assert ok is not None and bad is not None
    assert (ok.exit_code, ok.signal, bad.exit_code, bad.signal) == (0, None, 1, None)
    for rec in (ok, bad):
        assert rec.started_unix_s <= rec.ended_unix_s <= time.time()
        assert rec.hostname == os.uname().nodename


def test_a_run_without_a_ledger_row_is_judged_by_its_exit_record(
    keyerror: dict, tmp_path: Path
) -> None:
    """The run directories copied without their ledger (as a bench fixture or a copy from
    elsewhere has them): the exit records decide; a run with neither is of unknown state."""
    cdir = tmp_path / "keyerr"
    shutil.copytree(keyerror["cdir"], cdir, ignore=shutil.ignore_patterns("ledger.sqlite*"))
    (cdir / ".collect-cache.json").unlink(missing_ok=True)
    out = collect_campaign(cdir, progress=False)
    assert [r["ranks"] for r in out.rows] == [1]
    assert [(s, "KeyError: 1" in w) for _, s, w in out.not_completed] == [("FAILED", True)]
    # now the completed run loses its record too: neither witness, so not measured
    (cdir / "runs" / keyerror["runs"][1].name / EXIT_NAME).unlink()
    out = collect_campaign(cdir, progress=False)
    assert out.rows == []
    states = sorted(s for _, s, _ in out.not_completed)
    assert states == ["FAILED", "UNKNOWN"]
    (why,) = [w for _, s, w in out.not_completed if s == "UNKNOWN"]
    assert "unknown" in why and EXIT_NAME in why


def test_a_bundled_programs_failed_run_is_not_measured_either(tmp_path: Path) -> None:
    """Bundled programs too: two rendered DCGAN runs given the metrics.json a finished job
    writes; the 2-rank one's job script exited 1 (its exit record, no ledger): left out."""
    from hpcscale.formats.exit_record import write_exit_record
    from tests.integration.test_cli import finish

    spec = yaml.safe_load((Path(__file__).parents[2] / "campaigns" / "quickstart.yaml").read_text())
    spec["name"] = "bundled"
    spec.pop("references", None)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    rc = api.render(tmp_path / "c.yaml", tmp_path / "wd")
    ranks = {r.run.ranks: r.run_dir for r in rc.runs}
    assert {1, 2} <= ranks.keys()
    for n, rd in ranks.items():
        finish(rd)
        write_exit_record(rd, 0 if n == 1 else 1)
    out = collect_campaign(rc.directory, progress=False)
    assert sorted(r["ranks"] for r in out.rows) == [1]
    assert {s for _, s, _ in out.not_completed} == {"FAILED"}
    assert len(out.not_completed) == len(ranks) - 1


SIGNALLED = """\
import time
print("started", flush=True)
time.sleep(120)
"""


def _render(tmp_path: Path, body: str, program: str, system: dict | None = None) -> Path:
    """A one-run command campaign rendered (not submitted); its job script's path."""
    if system is not None:
        (tmp_path / "sys.yaml").write_text(yaml.safe_dump(system))
    path = campaign(tmp_path, body, program)
    rc = api.render(path, tmp_path / "wd")
    (r,) = rc.runs
    return r.run_dir / "job.sbatch"


ONE_RUN = """\
name: {name}
workload:
  command: python3 prog.py
  metrics:
    - {{name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}}
  throughput: samples_per_s
system: {system}
scaling: weak
matrix: {{layout: ["1x1"], batch: 4}}
"""


def test_a_signal_still_writes_the_exit_record(tmp_path: Path) -> None:
    """SIGTERM to the job's process group (SLURM's time limit, `hpcscale cancel`)."""
    script = _render(tmp_path, ONE_RUN.format(name="sig", system="local"), SIGNALLED)
    log = tmp_path / "out.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["bash", str(script)], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        for _ in range(600):
            if "started" in log.read_text(errors="replace"):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(log.read_text())
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    rec = read_exit_record(script.parent)
    assert rec is not None and (rec.exit_code, rec.signal) == (143, "TERM")
    assert not rec.succeeded and math.isfinite(rec.ended_unix_s)


def test_a_failed_command_removes_the_hostfile_and_records_its_exit(tmp_path: Path) -> None:
    """A launcher that reads a hostfile (mpirun_rsh lists localhost for a run on this machine):
    the file made with mktemp is gone when the job ends, here by `set -e` on a launcher this
    machine lacks (exit 127), and the exit record says so."""
    if shutil.which("mpirun_rsh"):
        pytest.skip("mpirun_rsh is installed here: the launch would not fail")
    system = {"name": "rsh", "scheduler": "local", "launcher": "mpirun_rsh",
              "cores_per_node": 2, "max_nodes": 1}  # fmt: skip
    script = _render(tmp_path, ONE_RUN.format(name="rsh", system="sys.yaml"), "print(1)", system)
    assert 'HPCSCALE_HOSTFILE="$(mktemp' in script.read_text()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 127, proc.stdout + proc.stderr
    assert "mpirun_rsh" in proc.stderr
    assert list(tmpdir.iterdir()) == []  # the hostfile was made there, and removed
    rec = read_exit_record(script.parent)
    assert rec is not None and (rec.exit_code, rec.signal) == (127, None)


SLURM_KEYERROR = KEYERROR.replace(
    'os.environ.get("OMPI_COMM_WORLD_RANK", 0)',
    'os.environ.get("SLURM_PROCID", os.environ.get("OMPI_COMM_WORLD_RANK", 0))',
)


@pytest.mark.slurm
def test_on_slurm_the_failed_run_is_left_out_by_ledger_or_exit_record(
    slurm_cluster: object, tmp_path: Path, workdir: Path
) -> None:
    """The same program under srun on the local SLURM cluster (1 and 2 nodes x 1 rank): the
    2-node run fails; collect measures the 1-node run only, from the ledger after `status`,
    and from the jobs' own exit records in a copy without the ledger."""
    from tests.integration.test_slurm import wait_terminal

    body = BODY.replace("keyerr", "keyslurm").replace("system: local", "system: slurm-local")
    body = body.replace(
        'matrix: {layout: ["1x1", "2x1"], batch: 4}',
        'matrix: {nodes: [1, 2], layout: "1x1", batch: 4}',
    )
    hpcscale("submit", str(campaign(tmp_path, body, SLURM_KEYERROR)), check=True)
    rows = wait_terminal("keyslurm", timeout=300)
    assert sorted(r["state"] for r in rows) == ["COMPLETED", "FAILED"], rows
    for cdir in (workdir / "keyslurm", tmp_path / "copy" / "keyslurm"):
        if not cdir.exists():
            shutil.copytree(workdir / "keyslurm", cdir, ignore=shutil.ignore_patterns("ledger*"))
        out = collect_campaign(cdir, progress=False)
        assert [r["nodes"] for r in out.rows] == [1], cdir
        assert [s for _, s, _ in out.not_completed] == ["FAILED"], cdir
        (rd,) = [Path(r["run_dir"]) for r in out.rows]
        assert read_exit_record(rd) is not None and list(rd.glob("slurm-*.out"))
