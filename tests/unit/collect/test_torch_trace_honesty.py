"""What the PyTorch trace reader and the collector say when a trace cannot support a figure
(issue 32's review): unknown is NaN/None and said, never 0 or a silent guess. The traces are
test_torch_trace's hand-made ones (rank 0: comm [1310, 1700) = 390 µs, waits 250 µs, 100 + 50
floats in two allreduces; rank 1: comm [5355, 5530) = 175 µs); each expected value is worked out
by hand in the comments."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hpcscale.analysis import EXACT_COLUMNS
from hpcscale.analysis.context import TableContext
from hpcscale.analysis.quality import Flag
from hpcscale.collect.run_row import _timeline_columns
from hpcscale.collect.traces.torch import summarise
from hpcscale.collect.traces.torch.stream import Stream, TraceError, iter_batches
from hpcscale.formats.run_record import RunRecord
from hpcscale.report.sections.quality import quality_section
from tests.unit.collect.test_torch_trace import BASE_NS, RANK0, RANK1, START_US, trace, write, x

NAN = float("nan")
TORCH_NAME = "traces/rank<r>.json[.gz]"
# Horovod's own categories: a profiler trace has no counterpart of any of them
HOROVOD_ONLY = ("negotiate_s", "wait_for_data_s", "wait_for_other_tensor_data_s", "queue_s",
                "memcpy_s", "transport_s")  # fmt: skip


def _steps_json(run: Path, spans_us: list[tuple[int, int]]) -> None:
    """steps.json whose monotonic 0 is the trace's ts 0 (unix_offset_ns = BASE_NS): a step
    [a, b) µs on the trace's axis is [a * 1000, b * 1000) ns here; all in epoch 0."""
    (run / "steps.json").write_text(
        json.dumps(
            {
                "format": "hpcscale.steps",
                "version": 1,
                "anchor": {"monotonic_ns": 0, "unix_ns": BASE_NS, "uncertainty_ns": 0},
                "unix_offset_ns": BASE_NS,
                "epoch": [0] * len(spans_us),
                "step": list(range(len(spans_us))),
                "start_ns": [a * 1000 for a, _ in spans_us],
                "end_ns": [b * 1000 for _, b in spans_us],
            }
        )
    )


def _columns(run: Path, ranks: int = 2, steps: int = 1) -> tuple[dict[str, Any], list[str]]:
    """The collector's timeline columns of a torch_ddp run in `run` (its traces written)."""
    rec = RunRecord(
        campaign="c", system="local", model="dcgan", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=ranks, threads_per_task=1, gpus_per_node=0, batch_per_rank=16,
        global_batch=16 * ranks, strategy="torch_ddp", timeline=True, run_id="r1",
        ranks=ranks, replicas=ranks,
    )  # fmt: skip
    row: dict[str, Any] = {"timeline": True, "ranks": ranks, "command": None,
                           "timeline_truncated": False, "timeline_coverage": NAN}  # fmt: skip
    row.update(dict.fromkeys(EXACT_COLUMNS, NAN))  # as run_row starts it
    notes = _timeline_columns(run, row, rec, 1, steps)
    return row, notes


# ---------------------------------------------------------------- 1: Horovod-only columns


def test_horovod_only_columns_are_unknown_for_a_torch_trace(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    _steps_json(tmp_path, [(1000, 2000)])  # step 5 itself: one timed step, one epoch
    row, _ = _columns(tmp_path)
    for col in HOROVOD_ONLY:
        assert math.isnan(row[col]), (col, row[col])
    # what the trace does measure keeps its value: comm 390 µs, waits 250 µs all inside comm
    assert row["comm_s"] == pytest.approx(390e-6)
    assert row["waits_in_comm_s"] == pytest.approx(250e-6)
    assert row["allreduce_bytes_per_step"] == 600  # (100 + 50) floats x 4 bytes, one step
    # the exact split: the step [1000, 2000) holds all of [1310, 1700): overlap 390, compute 610
    assert row["exact_overlap_s"] == pytest.approx(390e-6)
    assert row["exact_compute_s"] == pytest.approx(610e-6)
    assert not row["timeline_truncated"]
    js = summarise(tmp_path / "traces").as_json()
    assert all(js[c] is None for c in HOROVOD_ONLY) and js["comm_s"] == pytest.approx(390e-6)


# ---------------------------------------------------------------- 2: rank 0 missing


def test_a_missing_rank_0_is_said_and_its_exact_split_left_out(tmp_path: Path) -> None:
    write(tmp_path, 1, RANK1)
    # a steps.json over rank 1's step [5000, 6000): the figures stay, the exact split goes
    _steps_json(tmp_path, [(5000, 6000)])
    row, notes = _columns(tmp_path)
    assert row["comm_s"] == pytest.approx(175e-6)  # rank 1's [5355, 5530)
    assert math.isnan(row["exact_compute_s"]) and math.isnan(row["exact_overlap_s"])
    assert any(n.startswith(f"{TORCH_NAME}: no trace of rank 0") for n in notes), notes
    s = summarise(tmp_path / "traces", ranks=2)
    assert s.figures_rank == 1 and s.category_us["comm"] == 175
    assert any("no trace of rank 0: the figures are rank 1's" in n for n in s.notes), s.notes


# ---------------------------------------------------------------- 3: duplicate and extra ranks


def test_two_files_of_one_rank_are_said_and_one_is_chosen(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    # a second, different rank 1 (its A lasts 290 µs like rank 0's: no waits at all if read)
    other = [e if e["ts"] != 5355 else {**e, "dur": 290} for e in RANK1]
    write(tmp_path, 1, other, gz=True)
    d = tmp_path / "traces"
    (d / "rank0.json.tmp").write_bytes((d / "rank0.json").read_bytes()[:400])
    s = summarise(d, ranks=2)
    # rank1.json (first by name) is read: rank 0 waits 190 + 60 as with the one file
    assert s.rank_waits_us == {0: 250, 1: 0}
    assert not s.truncated  # the finished rank0.json, not its .tmp
    assert "rank 1 has several files: rank1.json read, rank1.json.gz ignored" in s.notes
    assert "rank 0 has several files: rank0.json read, rank0.json.tmp ignored" in s.notes
    # a file named for rank 5 whose distributedInfo says rank 1 (no world size given): the
    # file found first (by rank, finished first) keeps rank 1, the other is said
    (d / "rank1.json.gz").unlink()
    doc = trace(1, other)
    (d / "rank5.json").write_text(json.dumps(doc))
    s = summarise(d)
    assert s.rank_waits_us == {0: 250, 1: 0}
    assert "rank5.json and rank1.json both hold rank 1: rank1.json read" in s.notes


def test_files_of_an_earlier_larger_world_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    # left by an earlier 4-rank attempt: rank3.json (a rank this run lacks) and rank2.json
    write(tmp_path, 3, RANK1, world=4)
    write(tmp_path, 2, RANK1, world=4)
    s = summarise(tmp_path / "traces", ranks=2)
    assert s.rank_waits_us == {0: 250, 1: 0} and s.files == 2
    assert any(n.startswith("rank3.json: rank 3 but the run has 2 ranks") for n in s.notes)
    assert any(n.startswith("rank2.json: rank 2 but the run has 2 ranks") for n in s.notes)
    # a file named for a rank the run has, written by a 4-rank world: not this run's either
    (tmp_path / "traces" / "rank2.json").unlink()
    (tmp_path / "traces" / "rank3.json").unlink()
    write(tmp_path, 1, RANK1, world=4)
    s = summarise(tmp_path / "traces", ranks=2)
    assert s.rank_waits_us == {0: None}  # rank 1's trace is not this run's: no match
    assert any("rank1.json: written by a world of 4 ranks, the run has 2" in n for n in s.notes)


def test_when_no_trace_is_this_runs_the_error_says_why(tmp_path: Path) -> None:
    # every file from a 4-rank world (HTA's sampled ranks of a larger job, or an earlier
    # attempt's): nothing to read, and the error names each file and its reason
    write(tmp_path, 0, RANK0, world=4)
    write(tmp_path, 1, RANK1, world=4)
    with pytest.raises(TraceError) as err:
        summarise(tmp_path / "traces", ranks=2)
    text = str(err.value)
    assert text.startswith("no readable rank trace")
    for name in ("rank0.json", "rank1.json"):
        assert f"{name}: written by a world of 4 ranks, the run has 2" in text


def test_no_rank_file_names_what_the_directory_holds(tmp_path: Path) -> None:
    # a trace copied in under its own name (HTA's rank-0.json.gz, a profiler's default name)
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank-0.json.gz").write_bytes(b"")
    (traces / "host_123.pt.trace.json").write_text("{}")
    with pytest.raises(TraceError, match=r"it holds host_123\.pt\.trace\.json, rank-0\.json\.gz"):
        summarise(traces, ranks=2)
    for name in list(traces.iterdir()):
        name.unlink()
    with pytest.raises(TraceError, match=r"\(it is empty\)"):
        summarise(traces, ranks=2)


# ---------------------------------------------------------------- 4: unsized collectives


def test_an_unsized_allreduce_leaves_bytes_and_bandwidth_out(tmp_path: Path) -> None:
    # B's gloo span without Input Dims / Input type: 1 of the 2 allreduces has a size
    unsized = [{**e, "args": {"External id": 7}} if e["ts"] == 1520 else e for e in RANK0]
    write(tmp_path, 0, unsized)
    write(tmp_path, 1, RANK1)
    _steps_json(tmp_path, [(1000, 2000)])
    row, notes = _columns(tmp_path)
    assert math.isnan(row["allreduce_bytes_per_step"]) and math.isnan(row["bus_bandwidth_gbs"])
    assert row["comm_s"] == pytest.approx(390e-6)  # the time is still known
    assert any("1 of 2 allreduce spans carry a size" in n for n in notes), notes
    s = summarise(tmp_path / "traces", ranks=2)
    assert not s.bytes_known and s.bus_bandwidth_gbs() is None
    assert (s.allreduce_sized, s.allreduce_tensors) == (1, 2)
    js = s.as_json()
    assert js["allreduce_bytes"] is None and js["bus_bandwidth_gbs"] is None


# ---------------------------------------------------------------- 5: no base time


def _no_base(tmp_path: Path, rank: int, events: list[dict]) -> None:
    doc = trace(rank, events)
    del doc["baseTimeNanoseconds"]
    d = tmp_path / "traces"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"rank{rank}.json").write_text(json.dumps(doc, indent=2))


def test_a_trace_without_a_base_time_says_the_window_is_not_applied(tmp_path: Path) -> None:
    _no_base(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    # the window [1400, 1650) would clip comm to 250; without a base it cannot be placed
    s = summarise(tmp_path / "traces", ranks=2, window_unix_us=(START_US + 1400, START_US + 1650))
    assert s.window_us is None and s.start_time_since_epoch_us is None
    assert s.category_us["comm"] == 390  # the whole trace, said so
    assert any(n.startswith("rank0.json: no baseTimeNanoseconds") for n in s.notes), s.notes
    _steps_json(tmp_path, [(1000, 2000)])
    row, notes = _columns(tmp_path)
    assert "timeline has no start time: whole timeline used, no exact view" in notes
    assert not any("no steps.json" in n for n in notes), notes  # it is there, not placed
    assert math.isnan(row["exact_compute_s"])
    # rank 1 alone without one: rank 0's figures are windowed, rank 1's are its whole trace
    write(tmp_path, 0, RANK0)
    _no_base(tmp_path, 1, RANK1)
    s = summarise(tmp_path / "traces", ranks=2, window_unix_us=(START_US + 1400, START_US + 1650))
    assert s.category_us["comm"] == 250 and s.per_rank[1]["comm_us"] == 175
    assert any(n.startswith("rank1.json: no baseTimeNanoseconds") for n in s.notes), s.notes


# ---------------------------------------------------------------- 6: a window is no truncation


def test_a_short_trace_window_is_not_a_truncation(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    # four timed steps, the trace's window holds the first (step 5 = [1000, 2000))
    _steps_json(tmp_path, [(1000, 2000), (2000, 3000), (3000, 4000), (4000, 5000)])
    row, notes = _columns(tmp_path, steps=4)
    assert row["timeline_truncated"] is False, notes
    assert not any("covers" in n or "cut record" in n for n in notes), notes
    assert any("holds 1 of the 4 timed steps" in n for n in notes), notes
    assert row["allreduce_bytes_per_step"] == 600  # per traced step: 600 bytes in 1 step
    # the same window whose file was cut (a .tmp): truncated, said as a cut, no coverage %
    p = tmp_path / "traces" / "rank0.json"
    text = p.read_bytes()
    p.unlink()
    (tmp_path / "traces" / "rank0.json.tmp").write_bytes(text[: text.index(b'"ts": 1520')])
    row, notes = _columns(tmp_path, steps=4)
    assert row["timeline_truncated"] is True
    cut = [n for n in notes if "cut record" in n]
    assert cut and cut[0].startswith(f"{TORCH_NAME} ends in a cut record") and "%" not in cut[0]


# ---------------------------------------------------------------- 7: one bad event


def test_one_bad_event_costs_one_event_and_no_more(tmp_path: Path) -> None:
    """An event msgspec refuses (a `ts` that is text) is skipped and counted; the events after
    it still come a chunk at a time (the old decoder held every later event back behind it,
    re-decoding an ever larger piece, and gave them all at the end of the file)."""
    bad = {"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 10, "tid": 100, "ts": "soon"}
    filler = [x("aten::add", 1010 + i / 2, 0.4, 100, 10) for i in range(200)]  # in forward
    p = write(tmp_path, 0, [bad, *filler, *RANK0])
    st = Stream()
    batches = list(iter_batches(p, st, chunk_size=300))
    got = [e.name for b in batches for e in b]
    want = [e["name"] for e in json.loads(p.read_text())["traceEvents"] if e["name"] != "bad"]
    assert got == want and st.bad_events == 1 and not st.truncated
    assert max(len(b) for b in batches) <= 5  # ~250-byte events, 300-byte chunks
    write(tmp_path, 1, RANK1)
    s = summarise(tmp_path / "traces", ranks=2)
    # the adds lie inside forward [1010, 1200): the figures are the hand-computed ones
    assert s.category_us["comm"] == 390 and s.compute_us == 570 and s.bad_records == 1
    assert "1 events not of an event's shape: skipped" in s.notes


def test_a_piece_that_never_decodes_is_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Garbage that is never whole JSON is bounded by MAX_EVENT, not read to the end."""
    from hpcscale.collect.traces.torch import TraceError, stream

    monkeypatch.setattr(stream, "MAX_EVENT", 4096)
    p = write(tmp_path, 0, RANK0 * 20)
    text = p.read_bytes()
    at = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    p.write_bytes(text[:at] + b'{"name": "never closed", "x": [}, ' + text[at:])
    with pytest.raises(TraceError):
        list(iter_batches(p, Stream(), chunk_size=300))


# ---------------------------------------------------------------- the report's Data quality


def test_a_torch_cut_note_is_folded_into_the_truncation_flag() -> None:
    note = (
        f"{TORCH_NAME} ends in a cut record (job killed?): partial timeline, its per-epoch "
        "figures are left out unless --include-partial-timelines"
    )
    runs = pd.DataFrame({"run_id": ["r1"], "model": ["dcgan"], "nodes": [1], "ranks": [2]})
    flag = Flag("r1", "timeline_truncated", "excluded", "its timeline is cut")
    other = f"{TORCH_NAME}: no trace of rank 0: the figures are rank 1's"
    ctx = TableContext.of(problems=[("r1", note), ("r1", other)])
    frame = quality_section(runs, [flag], ctx).tables[0].frame
    assert frame["Kind"].tolist() == ["timeline_truncated", "collect_note"]
    assert frame["Reason"].tolist()[1] == other


# ---------------------------------------------------------------- waits keyed by step


def test_collectives_are_matched_step_by_step(tmp_path: Path) -> None:
    """Two steps per rank and a collective before the first (outside every step: not keyed).
    Step 5: rank 0's span lasts 290, rank 1's 100: rank 0 waits 190. Step 6: 90 against 150:
    rank 1 waits 60. The early ones (10 and 20 µs) are matched with nothing."""
    r0 = [
        x("ProfilerStep#5", 1000, 1000, 100, 10, "user_annotation"),
        x("ProfilerStep#6", 2000, 1000, 100, 10, "user_annotation"),
        x("c10d::allreduce_", 500, 5, 100, 10),
        x("gloo:all_reduce", 510, 10, 201, 10, "user_annotation"),
        x("c10d::allreduce_", 1300, 5, 100, 10),
        x("gloo:all_reduce", 1310, 290, 201, 10, "user_annotation"),
        x("c10d::allreduce_", 2300, 5, 100, 10),
        x("gloo:all_reduce", 2310, 90, 201, 10, "user_annotation"),
    ]
    r1 = [
        x("ProfilerStep#5", 5000, 1000, 300, 30, "user_annotation"),
        x("ProfilerStep#6", 6000, 1000, 300, 30, "user_annotation"),
        x("c10d::allreduce_", 4500, 5, 300, 30),
        x("gloo:all_reduce", 4510, 20, 401, 30, "user_annotation"),
        x("c10d::allreduce_", 5350, 5, 300, 30),
        x("gloo:all_reduce", 5355, 100, 401, 30, "user_annotation"),
        x("c10d::allreduce_", 6300, 5, 300, 30),
        x("gloo:all_reduce", 6310, 150, 401, 30, "user_annotation"),
    ]
    write(tmp_path, 0, r0)
    write(tmp_path, 1, r1)
    s = summarise(tmp_path / "traces", ranks=2)
    assert s.waits_known and s.rank_waits_us == {0: 190, 1: 60}
    assert s.ticks == 2 and s.last_ready == {0: 1, 1: 1}
    assert [st["waits_us"] for st in s.steps] == [190, 0]
