"""`submit --max-failures N` on the real local SLURM cluster (#29): once N runs failed with the
same reason, a refresh (`status`) cancels the campaign's array tasks that have not started, and
only those (the slurm-local profile's throttle runs one task at a time: the third runs on, held
at a gate the test opens), records them CANCELLED with the reason, and the next `submit` after the
fix submits them again, nothing lost and nothing twice."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpcscale.devcluster.status import ClusterInfo
from tests.conftest import hpcscale

pytestmark = pytest.mark.slurm

CAMPAIGN = """\
name: stopslurm
workload:
  command: [python, prog.py, "{batch_per_rank}"]
  metrics: [{name: samples_per_s, pattern: 'rate ([0-9.]+)'}]
  throughput: samples_per_s
system: slurm-local
scaling: weak
matrix:
  layout: ['1x1']
  batch: [1, 2, 3, 4, 5]
"""
# every run fails the same way; the third to start waits for `gate` first, so it is running
# (not pending) when the first two have failed
FAILING = """\
import fcntl, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "started"), "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.write("x\\n")
    f.flush()
    f.seek(0)
    n = len(f.read().split())
while n == 3 and not os.path.exists(os.path.join(here, "gate")):
    time.sleep(0.2)
import a_module_not_installed
"""
FIXED = "import sys\nprint('rate', 10 * int(sys.argv[1]))\n"
REASON = "ModuleNotFoundError: No module named 'a_module_not_installed'"


def _status() -> tuple[list[dict], str]:
    proc = hpcscale("status", "stopslurm", "--json", check=True)
    return json.loads(proc.stdout)["stopslurm"], proc.stderr


def _until(done: object, timeout: float = 240) -> tuple[list[dict], str]:
    """Refresh (`status`) until `done(rows)`; every refresh's warnings, joined."""
    deadline, said = time.monotonic() + timeout, ""
    while True:
        rows, err = _status()
        said += err
        if done(rows):  # type: ignore[operator]
            return rows, said
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached after {timeout} s: {rows}")
        time.sleep(1)


def _count(rows: list[dict], state: str) -> int:
    return sum(r["state"] == state for r in rows)


def test_same_failures_cancel_the_pending_tasks_and_submit_resumes_them(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    (tmp_path / "prog.py").write_text(FAILING)
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    hpcscale("submit", str(tmp_path / "c.yaml"), "--max-failures", "2", check=True)
    started = tmp_path / "started"
    deadline = time.monotonic() + 240  # the third task is running before anything is refreshed
    while not (started.is_file() and len(started.read_text().split()) == 3):
        assert time.monotonic() < deadline, "the third run never started"
        time.sleep(0.5)
    rows, said = _until(lambda rows: _count(rows, "CANCELLED") > 0)
    states = sorted(r["state"] for r in rows)
    # the third task has started (its file says so) and is never cancelled; the ledger may
    # still hold the PENDING of the refresh before the one that saw it run
    assert states[:4] == ["CANCELLED"] * 2 + ["FAILED"] * 2 and states[4] in ("RUNNING", "PENDING")
    stopped = f"stopped after 2 runs failed with: {REASON}"
    for row in rows:
        if row["state"] == "CANCELLED":
            assert row["reason"] == stopped, row
    flat = " ".join(said.split())
    assert stopped in flat and "cancelled 2 run(s) of stopslurm that had not started" in flat

    (tmp_path / "gate").write_text("")  # the running third one fails as it would have
    _until(lambda rows: _count(rows, "FAILED") == 3)
    (tmp_path / "prog.py").write_text(FIXED)
    again = hpcscale("submit", str(tmp_path / "c.yaml"), "--max-failures", "2", check=True)
    assert "2 run(s) submitted, 3 skipped" in " ".join(again.stderr.split() + again.stdout.split())
    rows, _ = _until(lambda rows: _count(rows, "COMPLETED") == 2)
    assert sorted(r["state"] for r in rows) == ["COMPLETED"] * 2 + ["FAILED"] * 3
    assert len({r["run_id"] for r in rows}) == 5
