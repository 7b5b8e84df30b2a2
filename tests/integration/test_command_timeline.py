"""A command run's timeline figures divide by the epochs and by the steps the program actually
ran (two counts: an epoch-time series or MLLOG epochs, and a `steps` extractor); where its output
gives no count, only per-run figures (span, span share), never a guessed divisor. Command runs
get the shared-machine check too: start and end times, host and load from their exit record.

Real runs through the local backend (real mpirun, one rank): the program writes a Horovod
timeline of known shape where HOROVOD_TIMELINE points: 3 epochs of 1 s, each with 0.2 s of
ALLREDUCE of a float32 [1000] tensor (4,000 bytes), 4 steps an epoch (12 steps)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from hpcscale.analysis.quality import quality_flags
from hpcscale.collect.collector import collect_campaign
from tests.command_fixture import campaign
from tests.conftest import hpcscale

pytestmark = pytest.mark.mpi

PROGRAM = """\
import json, os, time
start_us = int(time.time() * 1e6)
recs = [
    {"name": "process_name", "ph": "M", "pid": 0,
     "args": {"start_time_since_epoch_in_micros": start_us}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad"}},
]
for e in range(3):
    t0 = e * 1_000_000 + 800_000  # the last 0.2 s of each 1 s epoch
    recs.append({"ph": "B", "name": "ALLREDUCE", "ts": t0, "pid": 1})
    recs.append({"ph": "E", "ts": t0 + 200_000, "pid": 1,
                 "args": {"dtype": "float32", "shape": "[1000]"}})
text = "".join(json.dumps(r) + (",\\n" if r["ph"] == "M" else ",") for r in recs)
with open(os.environ["HOROVOD_TIMELINE"], "w") as fh:
    fh.write("[\\n" + text.rstrip(",\\n") + "]")
for e in range(3):
    for s in range(4):
        print(f"epoch {e} global step {4 * e + s + 1}", flush=True)
    print(f"epoch {e} time 1.000 rate 64.0", flush=True)
"""
COMM_PER_EPOCH_S = 0.2
BYTES = 3 * 4 * 1000  # three allreduces of 1000 float32
STEPS = 12
COUNTED = """\
name: counted
workload:
  command: python3 prog.py --tag "{args.tag}"
  metrics:
    - {name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}
    - {name: epoch_time_s, pattern: 'time ([\\d.]+)', reduce: series, unit: s}
    - {name: steps, pattern: 'global step (\\d+)', unit: steps}
  throughput: samples_per_s
  args: {tag: a}
system: local
scaling: weak
matrix: {layout: ["1x1"], batch: 4, args.tag: [a, b]}
collect: {timeline: true}
"""
UNCOUNTED = """\
name: uncounted
workload:
  command: python3 prog.py
  metrics:
    - {name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}
    - {name: epoch_time_s, pattern: 'time ([\\d.]+)', unit: s}
  throughput: samples_per_s
  epochs: 1
system: local
scaling: weak
matrix: {layout: ["1x1"], batch: 4}
collect: {timeline: true}
"""


def _submit(tmp: Path, body: str) -> Path:
    path = campaign(tmp, body, PROGRAM)
    hpcscale("submit", str(path), "--backend", "local", check=True)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("cmdtl")
    wd = base / "runs"
    mp = pytest.MonkeyPatch()
    mp.setenv("HPCSCALE_WORKDIR", str(wd))
    try:
        for name, body in (("counted", COUNTED), ("uncounted", UNCOUNTED)):
            (base / name).mkdir()
            _submit(base / name, body)
    finally:
        mp.undo()
    return {"counted": wd / "counted", "uncounted": wd / "uncounted"}


def test_per_epoch_and_per_step_figures_use_the_counts_the_program_ran(runs: dict) -> None:
    out = collect_campaign(runs["counted"], timeline=True, progress=False)
    assert len(out.rows) == 2, out.problems
    for row in out.rows:
        assert len(row["epoch_times_s"]) == 3
        assert row["comm_s"] == pytest.approx(COMM_PER_EPOCH_S)  # 0.6 s over 3 epochs
        assert row["allreduce_bytes_per_step"] == pytest.approx(BYTES / STEPS)  # 1,000 bytes


def test_without_a_count_only_the_per_run_figures(runs: dict) -> None:
    """A scalar epoch time and no steps extractor: no per-epoch or per-step figure (today the
    campaign's `epochs: 1` divides: 0.6 s "per epoch" and all 12,000 bytes "per step")."""
    out = collect_campaign(runs["uncounted"], timeline=True, progress=False)
    (row,) = out.rows
    assert row["epoch_time_s"] == pytest.approx(1.0)
    for col in ("comm_s", "negotiate_s", "wait_for_data_s", "allreduce_bytes_per_step"):
        assert math.isnan(row[col]), col
    assert row["span_s"] > 0
    assert row["comm_span_share"] == pytest.approx(3 * COMM_PER_EPOCH_S / row["span_s"])
    said = [p.reason for p in out.problems]
    assert any("no count of epochs" in s for s in said), said


def test_command_runs_get_the_shared_machine_check(runs: dict, tmp_path: Path) -> None:
    """Start, end, host and load come from each run's exit record (as its job script wrote
    them); the two runs ran one after the other: no overlap. A copy where the second ran
    during the first (its record says so) is flagged on both runs."""
    out = collect_campaign(runs["counted"], progress=False)
    for row in out.rows:
        rec = json.loads((Path(row["run_dir"]) / "exit.json").read_text())
        assert row["started_unix_s"] == pytest.approx(float(rec["started_unix_s"]))
        assert row["finished_unix_s"] == pytest.approx(float(rec["ended_unix_s"]))
        assert row["hostnames"] == rec["hostname"] != ""
        assert row["load_1m_start"] == pytest.approx(float(rec["load_1m_start"]))
        assert row["cpus"] == float(rec["cpus"]) >= 1
    assert not [f for f in quality_flags(out.frame, out.context) if f.kind == "overlap"]

    import shutil

    copy = tmp_path / "counted"
    shutil.copytree(runs["counted"], copy)
    (copy / ".collect-cache.json").unlink(missing_ok=True)
    first, second = sorted(out.rows, key=lambda r: r["started_unix_s"])
    path = copy / "runs" / Path(second["run_dir"]).name / "exit.json"
    rec = json.loads(path.read_text())
    rec["started_unix_s"] = first["started_unix_s"] + 0.01
    rec["ended_unix_s"] = first["finished_unix_s"] + 5.0
    path.write_text(json.dumps(rec))
    again = collect_campaign(copy, progress=False)
    flagged = {f.run_id for f in quality_flags(again.frame, again.context) if f.kind == "overlap"}
    assert flagged == {r["run_id"] for r in again.rows}
    assert isinstance(again.frame, pd.DataFrame)
