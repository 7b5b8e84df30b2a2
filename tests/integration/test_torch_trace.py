"""Real PyTorch profiler traces: a 2-rank gloo DDP run started here (torchrun, loopback only)
profiles three steps and exports one Kineto trace per rank; the reader's communication must be
the union of each rank's `gloo:*` spans as this test computes it with its own few lines
(json.load, sort, merge), and its steps the ProfilerStep markers the program was told to make.

Without torch these tests skip, unless HPCSCALE_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hpcscale.collect.traces import reader
from hpcscale.devcluster import loopback

HAVE_TORCH = importlib.util.find_spec("torch") is not None
REQUIRE_TORCH = os.environ.get("HPCSCALE_REQUIRE_TORCH") == "1"
pytestmark = pytest.mark.skipif(
    not HAVE_TORCH and not REQUIRE_TORCH,
    reason="torch not installed (make setup installs it; HPCSCALE_REQUIRE_TORCH=1 fails here)",
)
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT", "TORCHELASTIC_", "OMPI_", "PMI_", "MV2_", "SLURM_",
               "PMIX_")  # fmt: skip
ACTIVE = 3  # profiled steps: wait 1, warmup 1, active 3 -> ProfilerStep#2..#4

PROGRAM = textwrap.dedent(
    """
    import os, sys
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    run_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    ddp = DDP(net, bucket_cap_mb=0.1)  # several buckets: both gloo workers get collectives
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    name = f"rank{rank}.json" + (".gz" if rank == 1 else "")

    def ready(p):
        os.makedirs(os.path.join(run_dir, "traces"), exist_ok=True)
        p.export_chrome_trace(os.path.join(run_dir, "traces", name))

    sched = torch.profiler.schedule(wait=1, warmup=1, active=ACTIVE)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, schedule=sched, on_trace_ready=ready) as p:
        for _ in range(6):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
            p.step()
    dist.destroy_process_group()
    """
).replace("ACTIVE", str(ACTIVE))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("torch-trace")
    script = base / "prof.py"
    script.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}
    env.update(
        LD_PRELOAD=str(loopback.shim(base, ipv6="refuse")),
        GLOO_SOCKET_IFNAME="lo",
        PYTHONUNBUFFERED="1",
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", str(script), str(base / "run")]  # fmt: skip
    out = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return base / "run"


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)  # type: ignore[no-any-return]


def _union_us(spans: list[tuple[float, float]]) -> float:
    """Total length of the union, the plain way: sort by start, merge overlapping."""
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)


def _gloo_spans(doc: dict[str, Any]) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e["name"].startswith("gloo:")
    ]


def test_two_rank_traces_give_the_union_of_their_gloo_spans(run_dir: Path) -> None:
    files = {0: run_dir / "traces" / "rank0.json", 1: run_dir / "traces" / "rank1.json.gz"}
    docs = {r: _load(p) for r, p in files.items()}
    assert b"\n" in files[0].read_bytes()[:200]  # pretty-printed, as the reader must take it
    r = reader("torch")
    s = r.summarise(r.path(run_dir), ranks=None, window_unix_us=None)
    assert s.ranks == 2 and not s.truncated and s.files == 2
    for rank, doc in docs.items():
        spans = _gloo_spans(doc)
        assert spans, f"rank {rank} traced no gloo collective"
        # µs rounding: one for the union's total
        assert abs(s.per_rank[rank]["comm_us"] - _union_us(spans)) <= 1
    spans0 = _gloo_spans(docs[0])
    assert abs(s.category_us["comm"] - _union_us(spans0)) <= 1
    assert s.collectives == {"gloo:all_reduce": len(spans0)}
    base_us = docs[0]["baseTimeNanoseconds"] // 1000
    assert s.start_time_since_epoch_us == base_us
    # the intervals on rank 0's axis cover the same time (outward to whole µs: + 2 per interval)
    got = int((s.comm_intervals[:, 1] - s.comm_intervals[:, 0]).sum())
    assert 0 <= got - _union_us(spans0) <= 2 * len(s.comm_intervals)
    # the steps the program profiled, each with its own split
    assert [st["step"] for st in s.steps] == [2, 3, 4]
    marks = sorted(
        e["dur"] for e in docs[0]["traceEvents"] if e["name"].startswith("ProfilerStep#")
    )
    assert sorted(st["span_us"] for st in s.steps) == [round(d) for d in marks]
    for st in s.steps:  # each figure rounded to whole µs on its own: ±1
        assert abs(st["overlap_us"] + st["exposed_comm_us"] - st["comm_us"]) <= 1
        assert st["overlap_us"] <= st["compute_us"] <= st["span_us"]
    assert abs(s.overlap_us + s.exposed_comm_us - s.category_us["comm"]) <= 1
    # record_shapes gives each gloo span its input: bytes = elements x 4 (float32)
    want_bytes = sum(
        4 * sum(d for dims in e["args"]["Input Dims"] for d in dims)
        for e in docs[0]["traceEvents"]
        if e.get("ph") == "X" and e["name"] == "gloo:all_reduce"
    )
    assert s.allreduce_bytes == want_bytes > 0
    # waits: each matched collective's excess over the shortest of the two ranks; both ranks'
    # spans counted, so a wait lies inside its communication and only one rank can be last
    if s.waits_known:
        assert s.waits_in_comm_us == s.waits_us <= s.category_us["comm"]
        assert min(v for v in s.rank_waits_us.values() if v is not None) >= 0
    else:
        assert s.waits_unknown_why


def test_a_killed_ranks_cut_trace_still_gives_what_it_holds(run_dir: Path, tmp_path: Path) -> None:
    text = (run_dir / "traces" / "rank0.json").read_bytes()
    traces = tmp_path / "traces"
    traces.mkdir()
    # cut at the last gloo span's start: every gloo span before it is still read
    last = text.rindex(b'"gloo:all_reduce"')
    (traces / "rank0.json.tmp").write_bytes(text[:last])
    doc = json.loads(text)
    spans = sorted(_gloo_spans(doc))
    # the events before the cut, as json.load reads them from the whole file
    head = json.loads(text[: text.rindex(b"{", 0, last)].rstrip().rstrip(b",") + b"]}")
    before = _gloo_spans(head)
    assert len(before) == len(spans) - 1
    s = reader("torch").summarise(traces, ranks=None, window_unix_us=None)
    assert s.truncated
    assert abs(s.category_us["comm"] - _union_us(before)) <= 1
    assert not s.waits_known  # rank 1's trace is absent
