"""The PyTorch profiler trace reader on small hand-made Kineto traces: every figure is worked
out by hand below from the intervals each trace is written with (µs on the trace's axis)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from hpcscale.collect.traces import reader
from hpcscale.collect.traces.torch import TorchTraceSummary, TraceError, summarise
from hpcscale.collect.traces.torch.stream import Stream, iter_batches

BASE_NS = 1_700_000_000_000_000_000  # baseTimeNanoseconds: ts 0 is this Unix time
START_US = BASE_NS // 1000


def x(
    name: str, ts: float, dur: float, tid: int, pid: int, cat: str = "cpu_op", **args: Any
) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": 7, **args}}  # fmt: skip


def trace(rank: int, events: list[dict], world: int = 2) -> dict:
    """A Kineto trace as torch 2.13 lays it out: header keys, the events, a closing key."""
    meta = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0,
             "args": {"name": "thread 1 (pt_gloo_runloop)"}}]  # fmt: skip
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "distributedInfo": {
            "backend": "gloo",
            "rank": rank,
            "world_size": world,
            "pg_count": 1,
            "pg_config": [{"pg_name": "0", "ranks": [0, 1]}],
        },
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": [*meta, *events],
        "traceName": f"rank{rank}.json",
    }


# Rank 0: training thread 100, gloo workers 201 and 202 (their spans overlap in 1520..1600).
#   step 5 [1000, 2000); work: forward [1010, 1200) (linear nested in it), backward
#   [1200, 1500) holding the enqueue of A (c10d [1300, 1320)), enqueue of B [1500, 1510),
#   optimizer [1800, 1900). Collectives: A on 201 [1310, 1600) 100 floats (with a nested
#   record_param_comms, the same collective), B on 202 [1520, 1700) 50 floats.
RANK0 = [
    x("ProfilerStep#5", 1000, 1000, 100, 10, "user_annotation"),
    x("DistributedDataParallel.forward", 1010, 190, 100, 10, "user_annotation"),
    x("aten::linear", 1020, 80, 100, 10),
    x("autograd::engine::evaluate_function: AddmmBackward0", 1200, 300, 100, 10),
    x("c10d::allreduce_", 1300, 20, 100, 10),
    x("c10d::allreduce_", 1500, 10, 100, 10),
    x("Optimizer.step#SGD.step", 1800, 100, 100, 10, "user_annotation"),
    x("gloo:all_reduce", 1310, 290, 201, 10, "user_annotation",
      **{"Input Dims": [[100]], "Input type": ["float"]}),
    x("record_param_comms", 1320, 270, 201, 10),
    x("gloo:all_reduce", 1520, 180, 202, 10, "user_annotation",
      **{"Input Dims": [[50]], "Input type": ["float"]}),
]  # fmt: skip
# Rank 1: step 5 [5000, 6000); enqueues A [5350, 5360), B [5400, 5410); worker spans, by start:
# A on 402 [5355, 5455) (100 µs), B on 401 [5410, 5530) (120 µs).
RANK1 = [
    x("ProfilerStep#5", 5000, 1000, 300, 30, "user_annotation"),
    x("DistributedDataParallel.forward", 5010, 290, 300, 30, "user_annotation"),
    x("c10d::allreduce_", 5350, 10, 300, 30),
    x("c10d::allreduce_", 5400, 10, 300, 30),
    x("gloo:all_reduce", 5355, 100, 402, 30, "user_annotation"),
    x("gloo:all_reduce", 5410, 120, 401, 30, "user_annotation"),
    x("Optimizer.step#SGD.step", 5600, 100, 300, 30, "user_annotation"),
]


def write(run: Path, rank: int, events: list[dict], gz: bool = False, world: int = 2) -> Path:
    d = run / "traces"
    d.mkdir(parents=True, exist_ok=True)
    text = json.dumps(trace(rank, events, world), indent=2).encode()  # many lines, as torch
    if gz:
        p = d / f"rank{rank}.json.gz"
        p.write_bytes(gzip.compress(text))
    else:
        p = d / f"rank{rank}.json"
        p.write_bytes(text)
    return p


def test_the_hand_made_gloo_trace_gives_the_hand_computed_figures(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1, gz=True)
    r = reader("torch")
    assert (r.name, r.label) == ("torch", "PyTorch profiler")
    s = r.summarise(r.path(tmp_path), ranks=None, window_unix_us=None)
    assert isinstance(s, TorchTraceSummary)
    # communication: the union of [1310, 1600) and [1520, 1700) = [1310, 1700)
    assert s.category_us["comm"] == 390
    assert s.comm_intervals.tolist() == [[1310, 1700]]
    assert s.start_time_since_epoch_us == START_US
    # compute: [1010, 1500) ∪ [1800, 1900) less the enqueue [1300, 1320) = 290 + 180 + 100
    assert s.compute_us == 570
    # overlap: compute ∩ comm = [1320, 1500); exposed: comm less compute = 390 - 180
    assert (s.overlap_us, s.exposed_comm_us) == (180, 210)
    # waits: A lasts 290 (rank 0) and 100 (rank 1), B 180 and 120: rank 0 waits 190 + 60 at
    # the start of each span, [1310, 1500) and [1520, 1580); rank 1 is the shortest both times
    assert s.waits_known
    assert (s.waits_us, s.waits_in_comm_us) == (250, 250)
    assert s.rank_waits_us == {0: 250, 1: 0}
    assert s.straggler() == (1, 2, 2)
    # bytes: 100 + 50 floats; transfer part of the allreduces: [1500, 1600) ∪ [1580, 1700)
    assert (s.allreduce_bytes, s.allreduce_tensors) == (600, 2)
    assert (s.allreduce_us, s.allreduce_transport_us) == (390, 200)
    assert s.collectives == {"gloo:all_reduce": 2}  # the nested record_param_comms is A itself
    assert s.ranks == 2 and not s.truncated
    assert s.steps == [
        {"step": 5, "span_us": 1000, "compute_us": 570, "comm_us": 390, "overlap_us": 180,
         "exposed_comm_us": 210, "waits_us": 250, "allreduce_bytes": 600}
    ]  # fmt: skip
    # rank 1: compute [5010, 5300) ∪ [5600, 5700) = 390; comm [5355, 5530) = 175, no overlap
    assert s.per_rank[1] == {"compute_us": 390, "comm_us": 175, "overlap_us": 0,
                             "exposed_comm_us": 175, "waits_us": 0}  # fmt: skip
    assert (s.first_ts_us, s.last_ts_us) == (1000, 2000)


def test_a_window_clips_every_figure(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    # window [1400, 1650) on rank 0's axis: comm [1400, 1650) = 250, compute [1400, 1500)
    s = summarise(tmp_path / "traces", window_unix_us=(START_US + 1400, START_US + 1650))
    assert s.window_us == (1400, 1650)
    assert s.category_us["comm"] == 250
    assert (s.compute_us, s.overlap_us, s.exposed_comm_us) == (100, 100, 150)
    # rank 0's waits [1310, 1500) ∪ [1520, 1580) inside the window: 100 + 60
    assert s.waits_us == 160


def test_a_missing_rank_leaves_the_waits_unknown(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)  # world_size 2, rank 1's trace absent
    s = summarise(tmp_path / "traces")
    assert not s.waits_known and s.rank_waits_us == {0: None}
    assert "1 of 2 ranks" in s.waits_unknown_why
    assert s.as_json()["waits_s"] is None
    assert s.category_us["comm"] == 390 and s.compute_us == 570  # the rest stays known


def test_ranks_disagreeing_on_a_steps_collectives_leave_the_waits_unknown(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0)
    write(tmp_path, 1, [e for e in RANK1 if e["ts"] != 5400 and e["ts"] != 5410])
    s = summarise(tmp_path / "traces")
    assert not s.waits_known and s.rank_waits_us == {0: None, 1: None}


def test_a_cut_trace_gives_what_it_holds_flagged(tmp_path: Path) -> None:
    p = write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    text = p.read_bytes()
    # cut inside the second gloo span (B): the array never closes, B is lost
    cut = text.index(b'"ts": 1520')
    p.unlink()
    tmp = p.with_name("rank0.json.tmp")
    tmp.write_bytes(text[:cut])
    s = summarise(tmp_path / "traces")
    assert s.truncated
    assert s.category_us["comm"] == 290  # A alone: [1310, 1600)
    assert s.collectives == {"gloo:all_reduce": 1}
    # the same cut in a file that kept its final name is flagged as well
    tmp.rename(p)
    s = summarise(tmp_path / "traces")
    assert s.truncated and s.category_us["comm"] == 290
    # cut right after a whole event (an unterminated array)
    end = text.index(b"}", text.index(b'"ts": 1520')) + 1
    end = text.index(b"}", end) + 1  # past the args object, then the event's own brace
    p.write_bytes(text[:end])
    s = summarise(tmp_path / "traces")
    assert s.truncated and s.category_us["comm"] == 390


def test_a_finished_file_wins_over_its_tmp_and_garbage_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, 0, RANK0)
    write(tmp_path, 1, RANK1)
    p.with_name("rank0.json.tmp").write_bytes(p.read_bytes()[:300])
    assert not summarise(tmp_path / "traces").truncated
    p.write_text("not a trace at all")
    with pytest.raises(TraceError):
        summarise(tmp_path / "traces")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError):
        summarise(tmp_path / "empty")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_events_decode_the_same_at_any_chunk_size(tmp_path: Path, chunk: int) -> None:
    """Cuts that fall inside strings and nested arrays (`}, {` there too) lose nothing."""
    tricky = [
        x('name with }, { and "quotes" },{', 1, 2, 3, 4),
        x("nested", 5, 6, 3, 4, objs=[{"a": 1}, {"b": [{"c": "}, {"}]}]),
        x("plain", 7, 8, 3, 4),
    ]
    p = write(tmp_path, 0, tricky * 20)
    st = Stream()
    got = [(e.name, e.ts, e.dur) for b in iter_batches(p, st, chunk_size=chunk) for e in b]
    want = [
        (e["name"], e["ts"], e.get("dur", 0.0)) for e in json.loads(p.read_text())["traceEvents"]
    ]
    assert got == want
    assert st.header.base_time_ns == BASE_NS and st.header.distributed["rank"] == 0
    assert not st.truncated and st.bad_events == 0


# GPU / NCCL: compute kernels [100, 300) and [250, 400) on stream 7, the allreduce kernel on
# stream 20 [350, 600) with 1000 floats; rank 1's same kernel lasts 150 µs.
GPU0 = [
    x("ProfilerStep#1", 0, 700, 100, 10, "user_annotation"),
    x("void gemm_kernel<float>", 100, 200, 7, 0, "kernel"),
    x("void elementwise_kernel", 250, 150, 7, 0, "kernel"),
    x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 350, 250, 20, 0, "kernel",
      **{"In msg nelems": 1000, "dtype": "Float"}),
    x("record_param_comms", 340, 5, 100, 10),
]  # fmt: skip
GPU1 = [
    x("ProfilerStep#1", 1000, 700, 100, 10, "user_annotation"),
    x("void gemm_kernel<float>", 1100, 200, 7, 0, "kernel"),
    x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1350, 150, 20, 0, "kernel"),
]


def test_the_hand_made_nccl_trace_splits_kernels(tmp_path: Path) -> None:
    write(tmp_path, 0, GPU0)
    write(tmp_path, 1, GPU1)
    s = summarise(tmp_path / "traces")
    assert s.device == "gpu"
    # comm [350, 600) = 250; compute [100, 400) = 300; overlap [350, 400) = 50; exposed 200
    assert s.category_us["comm"] == 250 and s.compute_us == 300
    assert (s.overlap_us, s.exposed_comm_us) == (50, 200)
    # 250 against 150: rank 0 waits 100, [350, 450)
    assert s.waits_known and s.rank_waits_us == {0: 100, 1: 0}
    assert (s.allreduce_bytes, s.allreduce_transport_us) == (4000, 150)
    assert s.collectives == {"ncclDevKernel_AllReduce_Sum_f32_RING_LL": 1}


def test_keys_after_the_array_and_unix_time_stamps_are_read(tmp_path: Path) -> None:
    """Older torch puts `distributedInfo` after `traceEvents` and writes no
    `baseTimeNanoseconds`: its ts are Unix µs, so ts 0 is the epoch."""
    unix0 = 1_682_725_898_000_000  # µs
    for rank, events in ((0, GPU0), (1, GPU1)):
        moved = [{**e, "ts": e["ts"] + unix0} for e in events]
        doc = trace(rank, moved)
        info = doc.pop("distributedInfo")
        del doc["baseTimeNanoseconds"]
        doc["distributedInfo"] = info  # after the array now
        d = tmp_path / "traces"
        d.mkdir(exist_ok=True)
        (d / f"rank{rank}.json").write_text(json.dumps(doc, indent=1))
    s = summarise(tmp_path / "traces")
    assert s.start_time_since_epoch_us == 0 and s.ranks == 2
    assert s.comm_intervals.tolist() == [[unix0 + 350, unix0 + 600]]
    assert s.waits_known and s.rank_waits_us == {0: 100, 1: 0}


def test_a_cut_gzip_trace_gives_what_its_compressed_part_holds(tmp_path: Path) -> None:
    write(tmp_path, 1, RANK1)
    text = json.dumps(trace(0, RANK0), indent=2).encode()
    cut = text.index(b'"ts": 1520')  # inside B's gloo span: A's is whole before it
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
        gz.write(text[:cut])
        gz.flush()  # a sync point: the bytes so far decompress to exactly text[:cut]
        at = raw.tell()
        gz.write(text[cut:])
    (tmp_path / "traces" / "rank0.json.gz").write_bytes(raw.getvalue()[:at])
    s = summarise(tmp_path / "traces")
    assert s.truncated
    assert s.category_us["comm"] == 290 and s.collectives == {"gloo:all_reduce": 1}


def test_one_rank_waits_for_nobody(tmp_path: Path) -> None:
    write(tmp_path, 0, RANK0, world=1)
    s = summarise(tmp_path / "traces")
    assert s.waits_known and s.rank_waits_us == {0: 0} and s.waits_us == 0
    assert s.ranks == 1


def test_events_in_any_order_and_small_pieces_give_the_same_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kineto writes each thread's events by start time (the reader streams on that); events
    in another order, folded a few at a time, still give the hand-computed figures."""
    from hpcscale.collect.traces.torch import stream

    monkeypatch.setattr(stream, "CHUNK_SIZE", 200)
    order = [9, 3, 0, 7, 1, 8, 5, 2, 6, 4]
    write(tmp_path, 0, [RANK0[i] for i in order] + [x("aten::add", 1250, 10, 100, 10)])
    write(tmp_path, 1, RANK1[::-1])
    s = summarise(tmp_path / "traces")
    assert s.category_us["comm"] == 390 and s.compute_us == 570  # add lies inside backward
    assert (s.overlap_us, s.exposed_comm_us) == (180, 210)
    assert s.waits_known and s.rank_waits_us == {0: 250, 1: 0}
