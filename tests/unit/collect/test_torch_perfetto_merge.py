"""#32: the merge of per-rank PyTorch profiler traces (hpcscale.collect.traces.torch.perfetto)
on small hand-made traces laid out as torch 2.13 writes them (pretty-printed, keys around the
array), whose every expected time stamp, pid and name is worked out here by hand."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from hpcscale.collect.traces.torch.perfetto import TraceError, write_trace

BASE0 = 1_790_000_000_000_000_000  # rank 0's baseTimeNanoseconds
BASE1 = BASE0 + 500_000  # rank 1 started its clock 500 µs later


def _trace(rank: int, base: int | None, events: list[dict[str, Any]]) -> str:
    """A Kineto-shaped file: header keys, one event per few lines, a key after the array."""
    head = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2}}
    if base is not None:
        head["baseTimeNanoseconds"] = base
    body = ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ") for e in events)
    return json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n' + body + (
        '\n  ],\n  "traceName": "x.json"\n}\n'
    )  # fmt: skip


def _events(pid: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "ts": 1.0, "pid": pid, "tid": 0,
         "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "ts": 1.0, "pid": pid, "tid": pid,
         "args": {"name": f"thread {pid} (python)"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": pid, "tid": pid,
         "ts": 10.25, "dur": 100.0, "args": {"External id": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": pid,
         "tid": pid + 1, "ts": 20.5, "dur": 30.0, "args": {"Input Dims": [[4, 8]]}},
        {"ph": "s", "id": 7, "pid": pid, "tid": pid, "ts": 11.0, "cat": "fwdbwd",
         "name": "fwdbwd"},
        {"ph": "f", "id": 7, "pid": pid, "tid": pid, "ts": 60.0, "cat": "fwdbwd",
         "name": "fwdbwd", "bp": "e"},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 120.0},
    ]  # fmt: skip


def _by_pid(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    names = {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] != "M":
            out.setdefault(names[e["pid"]], []).append(e)
    return out


def test_ranks_on_one_clock_each_its_process(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank0.json").write_text(_trace(0, BASE0, _events(100)))
    with gzip.open(traces / "rank1.json.gz", "wt") as f:
        f.write(_trace(1, BASE1, _events(100)))  # the same OS pid and tids as rank 0
    info = write_trace(traces, None, tmp_path / "out.json")
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["baseTimeNanoseconds"] == BASE0
    ranks = _by_pid(doc)
    assert sorted(ranks) == ["rank 0", "rank 1"]
    assert info.records == 10 and not info.truncated  # 5 non-metadata events + thread_name x0
    for name, shift in (("rank 0", 0.0), ("rank 1", 500.0)):
        got = {(e["ph"], e["name"]): e for e in ranks[name]}
        assert got["X", "ProfilerStep#3"]["ts"] == 10.25 + shift
        assert got["X", "gloo:all_reduce"]["ts"] == 20.5 + shift
        assert got["X", "gloo:all_reduce"]["args"] == {"Input Dims": [[4, 8]]}  # kept whole
        assert got["i", "Record Window End"]["s"] == "p"  # the rank's, not the file's
        assert got["f", "fwdbwd"]["bp"] == "e"
    # threads apart: rank 0's two threads and rank 1's two, no tid shared
    tids = {n: {e["tid"] for e in evs if e["ph"] == "X"} for n, evs in ranks.items()}
    assert len(tids["rank 0"]) == len(tids["rank 1"]) == 2
    assert not tids["rank 0"] & tids["rank 1"]
    # flows keep to their rank: the two ranks' id 7 differ
    flow_ids = {n: {e["id"] for e in evs if e["ph"] in "sf"} for n, evs in ranks.items()}
    assert len(flow_ids["rank 0"]) == len(flow_ids["rank 1"]) == 1
    assert flow_ids["rank 0"] != flow_ids["rank 1"]
    thread_names = {
        e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert "python: thread 100 (python)" in thread_names


def test_a_cut_tmp_and_a_trace_without_a_base(tmp_path: Path) -> None:
    """Rank 1 only as a .tmp cut inside its 4th event: its 3 whole events merged, flagged.
    Rank 2 from an older torch: Unix µs stamps and no base, on the common clock as base 0."""
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank0.json").write_text(_trace(0, BASE0, _events(100)))
    text = _trace(1, BASE1, _events(200))
    (traces / "rank1.json.tmp").write_text(text[: text.index('"ph": "f"') + 4])
    old = [{**e, "ts": e["ts"] + BASE0 / 1000 + 1000.0} for e in _events(300)]
    (traces / "rank2.json").write_text(_trace(2, None, old))
    info = write_trace(traces, None, tmp_path / "out.json")
    doc = json.loads((tmp_path / "out.json").read_text())
    ranks = _by_pid(doc)
    assert [e["name"] for e in ranks["rank 1"]] == ["ProfilerStep#3", "gloo:all_reduce", "fwdbwd"]
    assert info.ranks[1].truncated and not info.ranks[0].truncated
    assert any(n.startswith("rank 1: rank1.json.tmp is cut short") for n in info.notes())
    step2 = next(e for e in ranks["rank 2"] if e["name"] == "ProfilerStep#3")
    assert step2["ts"] == pytest.approx(10.25 + 1000.0, abs=1e-3)  # 1 ms after rank 0's ts 0


def test_no_trace_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    with pytest.raises(TraceError, match=r"no rank<r>\.json"):
        write_trace(tmp_path / "traces", None, tmp_path / "out.json")
    (tmp_path / "traces" / "rank0.json").write_text('{"schemaVersion": 1}')
    with pytest.raises(TraceError, match=r"rank0\.json: no traceEvents"):
        write_trace(tmp_path / "traces", None, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
