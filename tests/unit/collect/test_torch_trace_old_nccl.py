"""Older Kineto GPU traces name every NCCL kernel alike (`ncclKernel_SendRecv_*`, even under
`c10d::allreduce_`, as in HTA's trace_filter and negative_queue_length_values_check traces) and
give the kernel no `Collective name`: the reader must trace each kernel back to its launch.

The traces here are hand-made, with the layout of those real ones, because no GPU runs here:
Unix-µs time stamps and no baseTimeNanoseconds, the kernel's `External id` equal to its
`correlation`, the `cudaLaunchKernel` call carrying that correlation inside `c10d::*` >
`record_param_comms` > `nccl:*` spans, `ac2g` flow events from launch to kernel. Every expected
figure is worked out by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcscale.collect.traces.torch import summarise

U = 1_683_564_900_000_000  # Unix µs of ts offset 0 (older traces write Unix µs)
TRAIN, GPU, COMPUTE, NCCL = 4515, 0, 7, 285  # training thread (= its pid), GPU pid, streams
SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def cpu(name: str, ts: int, dur: int, cat: str = "cpu_op", ext: int = 1, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": TRAIN, "tid": TRAIN, "ts": U + ts,
            "dur": dur, "args": {"External id": ext, **args}}  # fmt: skip


def launch(ts: int, corr: int) -> list[dict]:
    """A cudaLaunchKernel call and the start of its ac2g flow."""
    return [
        cpu("cudaLaunchKernel", ts, 5, "cuda_runtime", ext=corr, correlation=corr, cbid=211),
        {"ph": "s", "id": corr, "pid": TRAIN, "tid": TRAIN, "ts": U + ts, "cat": "ac2g",
         "name": "ac2g"},
    ]  # fmt: skip


def kernel(name: str, ts: int, dur: int, stream: int, corr: int, **args: Any) -> list[dict]:
    """A kernel (External id = correlation, as older Kineto writes) and its flow's end."""
    return [
        {"ph": "X", "cat": "kernel", "name": name, "pid": GPU, "tid": stream, "ts": U + ts,
         "dur": dur, "args": {"External id": corr, "queued": 0, "device": 0, "stream": stream,
                              "correlation": corr, **args}},
        {"ph": "f", "id": corr, "pid": GPU, "tid": stream, "ts": U + ts, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
    ]  # fmt: skip


def unsized(name: str, ts: int, dur: int, ext: int = 1) -> dict:
    """c10d:: / record_param_comms as older traces write them: no size said (a TensorList,
    Scalars)."""
    return cpu(name, ts, dur, ext=ext, **{"Input Dims": [[], [], []],
                                          "Input type": ["TensorList", "", "Scalar"]})  # fmt: skip


def nccl_span(name: str, ts: int, dur: int, n: int, dtype: str) -> dict:
    return cpu(name, ts, dur, "user_annotation", **{"Input Dims": [[n]], "Input type": [dtype]})


def write(tmp_path: Path, events: list[dict]) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    doc = {
        "schemaVersion": 1,
        "traceEvents": events,
        "traceName": "rank0.json",
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
    }
    (d / "rank0.json").write_text(json.dumps(doc, indent=1))
    return d


# One step [0, 1000). Training thread: allreduce 1 (c10d [100, 160) > record_param_comms >
# nccl:all_reduce [110, 150) of 1000 floats) launches correlation 900 at 120; an alltoall
# (nccl:all_to_all of 64 floats) launches 901 at 315; allreduce 2 (nccl:all_reduce of 250
# halves) launches 902 at 520; a gemm is launched at 200 (903). The alltoall's c10d span has
# External id 900: an older kernel's External id is its correlation, no CPU op's id.
# GPU: SendRecv kernels on stream 285: 899 [0, 50) (its launch before the trace), 900
# [170, 300), 901 [345, 420), 902 [570, 700); gemm on stream 7 [210, 400).
OLD = [
    cpu("ProfilerStep#1", 0, 1000, "user_annotation"),
    unsized("c10d::allreduce_", 100, 60),
    unsized("record_param_comms", 105, 50),
    nccl_span("nccl:all_reduce", 110, 40, 1000, "float"),
    *launch(120, 900),
    *launch(200, 903),
    unsized("c10d::alltoall_base_", 300, 40, ext=900),
    unsized("record_param_comms", 305, 30),
    nccl_span("nccl:all_to_all", 310, 20, 64, "float"),
    *launch(315, 901),
    unsized("c10d::allreduce_", 500, 60),
    unsized("record_param_comms", 505, 50),
    nccl_span("nccl:all_reduce", 510, 40, 250, "c10::Half"),
    *launch(520, 902),
    *kernel(SENDRECV, 0, 50, NCCL, 899),
    *kernel(SENDRECV, 170, 130, NCCL, 900),
    *kernel("void gemm_kernel<float>", 210, 190, COMPUTE, 903),
    *kernel(SENDRECV, 345, 75, NCCL, 901),
    *kernel(SENDRECV, 570, 130, NCCL, 902),
]


def test_old_generic_nccl_kernels_take_their_launching_collective(tmp_path: Path) -> None:
    s = summarise(write(tmp_path, OLD))
    assert s.device == "gpu"
    # 900 and 902 were launched inside nccl:all_reduce, 901 inside nccl:all_to_all; 899's
    # launch is not in the trace, so it keeps its kernel name (and is no allreduce)
    assert s.collectives == {SENDRECV: 1, "nccl:all_reduce": 2, "nccl:all_to_all": 1}
    # sizes from the nccl:all_reduce spans: 1000 floats x 4 B + 250 halves x 2 B = 4500
    assert (s.allreduce_tensors, s.allreduce_sized) == (2, 2)
    assert s.bytes_known and s.allreduce_bytes == 4500
    # comm: [0, 50) + [170, 300) + [345, 420) + [570, 700) = 50 + 130 + 75 + 130 = 385;
    # compute [210, 400) = 190; overlap [210, 300) + [345, 400) = 90 + 55 = 145
    assert s.category_us["comm"] == 385 and s.compute_us == 190
    assert (s.overlap_us, s.exposed_comm_us) == (145, 240)


# Newer Kineto: a SendRecv kernel whose own args say `Collective name` allreduce and 100
# floats (no launch in the trace: its args alone say it); and an old-style kernel launched in
# a c10d::allreduce_ whose spans say no size anywhere.
MIXED = [
    *kernel(SENDRECV, 0, 100, NCCL, 50,
            **{"Collective name": "allreduce", "In msg nelems": 100, "dtype": "Float"}),
    unsized("c10d::allreduce_", 200, 60),
    *launch(210, 51),
    *kernel(SENDRECV, 300, 100, NCCL, 51),
]  # fmt: skip


def test_a_kernels_collective_name_counts_and_an_unsized_launcher_leaves_bytes_unknown(
    tmp_path: Path,
) -> None:
    s = summarise(write(tmp_path, MIXED))
    assert s.collectives == {"nccl:allreduce": 1, "c10d::allreduce_": 1}
    # two allreduces, one sized (400 B): the sum would under-count, so none is given
    assert (s.allreduce_tensors, s.allreduce_sized) == (2, 1)
    assert not s.bytes_known and s.bus_bandwidth_gbs() is None
