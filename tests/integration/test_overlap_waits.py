"""Overlap arithmetic that cannot go negative: the two Horovod waits unioned in time, inside
communication, before they are taken from it (hpcscale.analysis.overlap, the timeline folding).

The overlap of the two waits only happens on GPU runs, which this machine cannot make, so its
shape comes from a small timeline written here in Horovod 0.28.1's layout, with the spans
Horovod's HorovodOp::WaitForData writes for a fused batch: every tensor WAIT_FOR_DATA from the
start, then, once its own data is ready, WAIT_FOR_OTHER_TENSOR_DATA until all are. Its figures
are worked out by hand below. The real timelines (tests/timeline_fixture.py, the quickstart
fixture) are CPU runs without waits: they check that nothing else moved and that Only
communication stays at or above zero there too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hpcscale import api
from hpcscale.analysis.derive import derive
from hpcscale.analysis.overlap import WAITS_SUMMED, split, with_overlap
from hpcscale.collect.collector import collect_campaign
from hpcscale.collect.split import load_steps
from hpcscale.collect.traces.horovod import parse_timeline
from hpcscale.report.sections.knobs import overlap_section
from tests.conftest import hpcscale
from tests.quickstart_fixture import run_dir_of
from tests.timeline_fixture import RealRuns, real_runs_fixture  # noqa: F401  (fixture)

ENGINES = ["c", "python"]
UNIT = 100_000  # µs per time unit of the hand timeline: 0.1 s, so unions finalise mid-file
START_US = 1_700_000_000_000_000


def _B(name: str, t: float, pid: int) -> dict[str, Any]:
    return {"ph": "B", "name": name, "ts": int(t * UNIT), "pid": pid}


def _E(t: float, pid: int, **args: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"ph": "E", "ts": int(t * UNIT), "pid": pid}
    return {**rec, "args": args} if args else rec


def _meta(pid: int, **args: Any) -> list[dict[str, Any]]:
    return [
        {"name": "process_name", "ph": "M", "pid": pid, "args": args},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}},
    ]


def fused_batch_records(killed: bool = False) -> list[dict[str, Any]]:
    """A broadcast, then one ALLREDUCE fusing two tensors (pids 1, 2). Time units of 0.1 s:
    broadcast [0, 5]; allreduce [100, 200]; tensor 1's data ready at 130, tensor 2's at 170;
    MPI_ALLREDUCE [171, 190]. `killed`: a next allreduce of tensor 1 opens at 300, its data is
    ready at 340, and the file ends there (no E for the collective)."""
    size = {"dtype": "float32", "shape": "[10]"}
    recs = [
        *_meta(0, start_time_since_epoch_in_micros=START_US),
        *_meta(1, name="grad_a"),
        *_meta(2, name="grad_b"),
        *_meta(3, name="bcast"),
        _B("BROADCAST", 0, 3), _E(5, 3, **size),
        _B("NEGOTIATE_ALLREDUCE", 60, 1), _B("NEGOTIATE_ALLREDUCE", 60, 2),
        _E(70, 1), _E(70, 2),
        _B("ALLREDUCE", 100, 1), _B("ALLREDUCE", 100, 2),
        _B("WAIT_FOR_DATA", 100, 1), _B("WAIT_FOR_DATA", 100, 2),
        _E(130, 1), _B("WAIT_FOR_OTHER_TENSOR_DATA", 130, 1),  # tensor 1 ready
        _E(170, 2), _B("WAIT_FOR_OTHER_TENSOR_DATA", 170, 2),  # tensor 2 ready: all are
        _E(171, 1), _E(171, 2),
        _B("MPI_ALLREDUCE", 171, 1), _B("MPI_ALLREDUCE", 171, 2), _E(190, 1), _E(190, 2),
        _E(200, 1, **size), _E(200, 2, **size),
    ]  # fmt: skip
    if killed:
        recs += [
            _B("ALLREDUCE", 300, 1), _B("WAIT_FOR_DATA", 300, 1),
            _E(340, 1), _B("WAIT_FOR_OTHER_TENSOR_DATA", 340, 1),
        ]  # fmt: skip
    return recs


def write_horovod(path: Path, records: list[dict[str, Any]]) -> Path:
    """Horovod 0.28.1's layout: metadata records end with '},\\n', the others follow one
    another on one line, the array closed by ']'."""
    text = "".join(json.dumps(r) + (",\n" if r["ph"] == "M" else ",") for r in records)
    path.write_text("[\n" + text.rstrip(",\n") + "]")
    return path


# By hand, in seconds (units of 0.1 s):
#   communication     [0, 5] + [100, 200]              = 10.5
#   wait for data     [100, 170]  (+ [300, 340] killed) = 7.0  (11.0)
#   wait for other    [130, 171]                        = 4.1
#   their sum                                           = 11.1 (15.1): more than communication
#   their union       [100, 171]  (+ [300, 340] killed) = 7.1  (11.1)
#   union inside comm [100, 171]                        = 7.1
HAND = {"comm": 10.5, "wfd": 7.0, "wfo": 4.1, "waits": 7.1, "inside": 7.1}
KILLED = {**HAND, "wfd": 11.0, "waits": 11.1}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("chunk_size", [4 << 20, 200, 7])
@pytest.mark.parametrize("killed", [False, True])
def test_overlapping_waits_are_unioned_inside_communication(
    tmp_path: Path, engine: str, chunk_size: int, killed: bool
) -> None:
    path = write_horovod(tmp_path / "timeline.json", fused_batch_records(killed))
    s = parse_timeline(path, engine=engine, chunk_size=chunk_size)  # type: ignore[arg-type]
    want = KILLED if killed else HAND
    assert s.seconds("comm") == pytest.approx(want["comm"])
    assert s.seconds("wait_for_data") == pytest.approx(want["wfd"])
    assert s.seconds("wait_for_other_tensor_data") == pytest.approx(want["wfo"])
    assert s.waits_us / 1e6 == pytest.approx(want["waits"])
    assert s.waits_in_comm_us / 1e6 == pytest.approx(want["inside"])
    assert s.seconds("transport") == pytest.approx(1.9) and s.unclosed == (2 if killed else 0)
    out = s.as_json()
    assert out["waits_s"] == pytest.approx(want["waits"])
    assert out["waits_in_comm_s"] == pytest.approx(want["inside"])


def test_split_of_the_hand_timeline_by_hand() -> None:
    """An epoch of 50 s around the hand timeline: Computation 50 - 10.5 = 39.5, Overlap 7.1,
    Only communication 10.5 - 7.1 = 3.4; 79 %, 14.2 %, 6.8 %. The seed's sum would leave
    10.5 - 11.1 = -0.6 s of communication."""
    p = split(50.0, HAND["comm"], HAND["wfd"], HAND["wfo"], HAND["inside"])
    assert float(p.compute_s) == pytest.approx(39.5)
    assert float(p.only_comm_s) == pytest.approx(3.4)
    assert float(p.only_compute_pct) == pytest.approx(79.0)
    assert float(p.overlap_pct) == pytest.approx(14.2)
    assert float(p.only_comm_pct) == pytest.approx(6.8)
    assert not bool(p.waits_summed)


def test_without_the_union_the_sum_stands_in_flagged_and_never_goes_negative() -> None:
    """Tables without `waits_in_comm_s` (the seeds', a results file from before it): with one
    wait the union is that wait; with both, their sum, flagged; a sum above communication is
    impossible and leaves the split out."""
    df = pd.DataFrame(
        {
            "epoch_time_s": [50.0, 50.0, 50.0, 50.0],
            "comm_s": [10.5, 10.5, 10.5, np.nan],
            "wait_for_data_s": [7.0, 7.0, 5.0, np.nan],
            "wait_for_other_tensor_data_s": [4.1, 0.0, 4.1, np.nan],
        }
    )
    out = with_overlap(df)
    # row 0: 7.0 + 4.1 = 11.1 > 10.5: no Only communication, no Overlap %
    assert math.isnan(out.loc[0, "only_comm_s"]) and math.isnan(out.loc[0, "overlap_pct"])
    assert out.loc[0, "compute_s"] == pytest.approx(39.5)
    # row 1: one wait: 10.5 - 7.0 = 3.5 (exact, not flagged)
    assert out.loc[1, "only_comm_s"] == pytest.approx(3.5) and not out.loc[1, WAITS_SUMMED]
    # row 2: 10.5 - 9.1 = 1.4, the sum standing in for the union (flagged)
    assert out.loc[2, "only_comm_s"] == pytest.approx(1.4) and out.loc[2, WAITS_SUMMED]
    assert math.isnan(out.loc[3, "only_comm_s"]) and not out.loc[3, WAITS_SUMMED]
    assert (out["only_comm_s"].dropna() >= 0).all()
    # with the union the same rows are all possible
    df["waits_in_comm_s"] = [7.1, 7.0, 7.1, np.nan]
    out = with_overlap(df)
    np.testing.assert_allclose(out["only_comm_s"][:3], [3.4, 3.5, 3.4])
    assert not out[WAITS_SUMMED].any()


def test_report_says_when_the_sum_stood_in() -> None:
    df = pd.DataFrame(
        [
            {"nodes": n, "epoch_time_s": t, "comm_s": c, "wait_for_data_s": 0.9,
             "wait_for_other_tensor_data_s": 0.1}
            for n, t, c in ((1, 100.0, 10.0), (2, 60.0, 12.0))
        ],
    ).assign(model="dcgan", scaling="weak", device="gpu", batch_per_rank=32)  # fmt: skip
    section = overlap_section(derive(df))
    assert section is not None
    text = " ".join(section.text)
    assert "unioned in time" in text and "2 of 2 cell(s)" in text and "their sum" in text


# ---------------------------------------------------------------------------- real runs


def test_real_timelines_only_communication_is_never_negative(real_runs: RealRuns) -> None:
    """CPU runs record no waits: the union and its part in communication are 0, and Only
    communication is the whole of it, per epoch of the run's own epoch times."""
    for path in (
        real_runs.mpi / "timeline.json",
        real_runs.gloo / "timeline.json",
        real_runs.killed,
    ):
        for engine in ENGINES:
            s = parse_timeline(path, engine=engine)  # type: ignore[arg-type]
            assert 0 <= s.waits_in_comm_us <= min(s.waits_us, s.category_us["comm"])
            assert s.waits_us == 0 and s.category_us["comm"] > 0
    steps = load_steps(real_runs.mpi / "steps.json")
    s = parse_timeline(real_runs.mpi / "timeline.json", window_unix_us=steps.window_unix_us())
    m = json.loads((real_runs.mpi / "metrics.json").read_text())
    per = m["epochs"]
    p = split(
        np.mean(m["epoch_time_s"]),
        s.seconds("comm") / per,
        s.seconds("wait_for_data") / per,
        s.seconds("wait_for_other_tensor_data") / per,
        s.waits_in_comm_us / 1e6 / per,
    )
    assert float(p.only_comm_s) == pytest.approx(s.seconds("comm") / per) and p.only_comm_s > 0


def test_collected_quickstart_carries_the_union(finished_quickstart: Path) -> None:
    runs = api.load_results("quickstart", finished_quickstart)
    assert runs["comm_s"].notna().all() and (runs["waits_in_comm_s"] == 0).all()
    cells = derive(runs)
    assert (cells["only_comm_s"] >= 0).all()
    np.testing.assert_allclose(cells["only_comm_s"], cells["comm_s"])


def test_collect_and_report_a_run_with_overlapping_waits(quickstart_copy) -> None:
    """The 2-rank quickstart run with the hand timeline (killed shape: a wait outside every
    closed collective) in place of its own and no steps.json: the whole timeline over the
    run's epochs. The row carries the union inside communication, collect says what was left
    out, and Only communication is communication less that union."""
    wd = quickstart_copy()
    rd = run_dir_of(wd, 2)
    write_horovod(rd / "timeline.json", fused_batch_records(killed=True))
    (rd / "steps.json").unlink()
    epochs = json.loads((rd / "metrics.json").read_text())["epochs"]
    out = collect_campaign(wd / "quickstart", timeline=True, progress=False)
    row = next(r for r in out.rows if r["run_id"] == rd.name)
    assert row["comm_s"] == pytest.approx(KILLED["comm"] / epochs)
    assert row["waits_in_comm_s"] == pytest.approx(KILLED["inside"] / epochs)
    said = [p.reason for p in out.problems if p.run_id == rd.name]
    assert any("4 s of waiting for data outside any closed collective" in r for r in said), said
    cells = derive(api.load_results("quickstart", wd)).set_index("ranks")
    assert cells.loc[2, "only_comm_s"] == pytest.approx((10.5 - 7.1) / epochs)
    assert (cells["only_comm_s"] >= 0).all()
    proc = hpcscale("timeline", str(rd / "timeline.json"), "--json")
    assert json.loads(proc.stdout)["waits_in_comm_s"] == pytest.approx(7.1)
