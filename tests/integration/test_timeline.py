"""The streaming timeline parser, the interval maths and the `timeline`/`trace` commands.

Timelines come from real Horovod runs of jobs/tf/train.py (tests/timeline_fixture.py: MPI and Gloo
controllers, with and without HOROVOD_TIMELINE_MARK_CYCLES, one run killed with SIGTERM). The
other shapes are made from those files: cut inside a record or at random bytes, rewritten in the
pre-0.20.1 layout.
The one fake is the 0-byte file, which is what Horovod leaves when no collective ran: there is
nothing in it to be real or not.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcscale.collect import intervals as iv
from hpcscale.collect.split import exact_split, load_steps, seed_split
from hpcscale.collect.traces.horovod import (
    CATEGORIES,
    NO_COLLECTIVES,
    TimelineError,
    category_of,
    parse_timeline,
    read_start_time,
    tensor_bytes,
)
from tests.conftest import hpcscale
from tests.timeline_fixture import RealRuns, real_runs_fixture  # noqa: F401  (fixture)

pytestmark = [pytest.mark.horovod, pytest.mark.mpi]
# Where a test pins figures down exactly, it checks both engines (they must agree anyway).
EngineName = Literal["c", "python"]
ENGINES: list[EngineName] = ["c", "python"]


# ---------------------------------------------------------------- an independent reference


def load_records(path: Path) -> list[dict[str, Any]]:
    """All records with json.load (an array left open by Horovod closed first)."""
    text = path.read_text().rstrip()
    if not text.endswith("]"):
        text = text.rstrip().rstrip(",") + "]"
    return json.loads(text)


def plain_tensor_bytes(args: dict[str, Any]) -> int:
    """A tensor's bytes from its `dtype` and `shape` args, by NumPy (not the parser's table)."""
    shape = json.loads(args["shape"])
    return np.dtype(args["dtype"].lower().removeprefix("horovod_")).itemsize * int(np.prod(shape))


def reference(path: Path) -> dict[str, Any]:
    """The same figures the plain way: json.load, a stack per pid, sorted-interval unions; the
    rank last ready in each closed negotiation (its last readiness tick); allreduce bytes from
    the args of each E that closes an ALLREDUCE."""
    events = load_records(path)
    stacks: dict[int, list[list[Any]]] = defaultdict(list)  # [name, ts, last tick] per open B
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    durations: dict[str, int] = defaultdict(int)
    last_ready: dict[int, int] = defaultdict(int)
    allreduce_bytes = 0
    for ev in events:
        ph, stack = ev.get("ph"), stacks[ev.get("pid", -1)]
        if ph == "B":
            stack.append([ev["name"], ev["ts"], None])
        elif ph == "X" and stack and stack[-1][0].startswith("NEGOTIATE_"):
            stack[-1][2] = ev["name"]
        elif ph == "E" and stack:
            name, t0, tick = stack.pop()
            spans[category_of(name)].append((t0, ev["ts"]))
            durations[category_of(name)] += ev["ts"] - t0
            if tick is not None:
                last_ready[int(tick)] += 1
            if name == "ALLREDUCE" and "shape" in ev.get("args", {}):
                allreduce_bytes += plain_tensor_bytes(ev["args"])
    out: dict[str, Any] = {"durations": dict(durations)}
    for cat in CATEGORIES:
        total, cur = 0, None
        for s, e in sorted(spans.get(cat, [])):
            if cur is None or s > cur[1]:
                total += 0 if cur is None else cur[1] - cur[0]
                cur = [s, e]
            else:
                cur[1] = max(cur[1], e)
        out[cat] = total + (0 if cur is None else cur[1] - cur[0])
    out["events"] = sum(1 for e in events if e.get("ph") != "M")
    out["unclosed"] = sum(len(v) for v in stacks.values())
    out["ticks"] = sum(1 for e in events if e.get("ph") == "X")
    out["last_ready"] = dict(last_ready)
    out["allreduce_bytes"] = allreduce_bytes
    return out


def to_old_format(data: bytes) -> bytes:
    """Horovod < 0.20.1: one record per line, each ending '},', the array never closed."""
    body = data.rstrip()
    body = body[:-1] if body.endswith(b"]") else body
    return body.replace(b"},{", b"},\n{").rstrip(b",\n") + b",\n"


# ---------------------------------------------------------------- real timelines


def test_mpi_timeline_matches_a_plain_sorted_union(real_runs: RealRuns) -> None:
    path = real_runs.mpi / "timeline.json"
    s = parse_timeline(path)
    ref = reference(path)
    for cat in CATEGORIES:
        assert s.category_us[cat] == ref[cat], cat
    assert s.events == ref["events"]
    # Fused tensors carry near-identical spans: summing durations would count them many times.
    assert ref["durations"]["comm"] > s.category_us["comm"] > 0
    assert s.collectives["ALLREDUCE"] > 0 and s.activity_us["MPI_ALLREDUCE"] > 0
    assert s.category_us["transport"] > 0 and s.cycles == 0
    assert s.tensors >= len(s.tensor_stats) > 1  # the table keeps the top TOP_KEEP
    assert s.start_time_since_epoch_us == read_start_time(path)
    assert s.format == "horovod>=0.20.1"
    assert not (s.truncated or s.bad_records or s.orphan_ends or s.late_spans)
    assert s.unclosed == ref["unclosed"]  # a few B events lack their E at shutdown


def test_gloo_timeline_with_cycle_marks(real_runs: RealRuns) -> None:
    path = real_runs.gloo / "timeline.json"
    s = parse_timeline(path)
    ref = reference(path)
    assert s.cycles > 0
    assert "GLOO_ALLREDUCE" in s.activity_us and "MPI_ALLREDUCE" not in s.activity_us
    assert s.category_us["transport"] == ref["transport"] > 0
    assert s.category_us["comm"] == ref["comm"]
    assert s.events == ref["events"]


@pytest.mark.parametrize("engine", ENGINES)
def test_readiness_ticks_give_ranks_and_a_straggler_hint(
    real_runs: RealRuns, engine: EngineName
) -> None:
    path = real_runs.mpi / "timeline.json"
    s = parse_timeline(path, engine=engine)
    ref = reference(path)
    assert s.ranks == 2
    assert s.ticks == ref["ticks"] > 0
    # Who was last ready, negotiation by negotiation, as the plain reading counts it.
    assert s.last_ready == ref["last_ready"]
    most = max(ref["last_ready"].values())
    rank, times, total = s.straggler()  # type: ignore[misc]
    assert rank == min(r for r, n in ref["last_ready"].items() if n == most)
    assert times == most
    assert total == sum(ref["last_ready"].values())  # negotiations with a tick, all ranks
    assert s.bus_bandwidth_gbs() is not None and s.bus_bandwidth_gbs() > 0


def allreduced_bytes(metrics: dict[str, Any]) -> int:
    """What jobs/tf/train.py all-reduces in a Horovod run, from its metrics.json: the fp32
    gradient of every trainable parameter in every step (burn-in and timed), the batch-norm
    statistics once after training (the non-trainable float32 variables), and the per-epoch
    average of the losses (one float64 each)."""
    trainable = sum(p["trainable"] for p in metrics["params"].values())
    non_trainable = sum(p["total"] - p["trainable"] for p in metrics["params"].values())
    steps = metrics["burn_in_steps"] + metrics["epochs"] * metrics["steps_per_epoch"]
    assert not metrics["fp16_allreduce"] and metrics["accuracy"] is None
    gradients = 4 * trainable * steps
    batch_norm = 4 * non_trainable
    losses = 8 * len(metrics["losses"]) * metrics["epochs"]
    return gradients + batch_norm + losses


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("run", ["mpi", "gloo"])
def test_allreduce_bytes_come_from_dtype_and_shape(
    real_runs: RealRuns, run: str, engine: EngineName
) -> None:
    run_dir = getattr(real_runs, run)
    s = parse_timeline(run_dir / "timeline.json", engine=engine)
    ref = reference(run_dir / "timeline.json")
    # Only allreduces count: broadcasts and allgathers carry dtype/shape too.
    assert s.collectives["BROADCAST"] > 0 and s.collectives["ALLGATHER"] > 0
    assert s.allreduce_bytes == ref["allreduce_bytes"]
    assert s.allreduce_bytes == allreduced_bytes(json.loads((run_dir / "metrics.json").read_text()))
    assert s.allreduce_tensors == s.collectives["ALLREDUCE"]  # every allreduce E has its args
    assert tensor_bytes("float32", "[3, 3, 64, 128]") == 4 * 3 * 3 * 64 * 128
    assert tensor_bytes("float16", "[]") == 2 and tensor_bytes("<unknown>", "[2]") is None


def whole_records(data: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The records before the last boundary, plus the one after it if whole; and whether a cut
    record was left over."""
    cut = data.rfind(b"},")
    head = json.loads(data[: cut + 1] + b"]") if cut >= 0 else []
    tail = data[cut + 2 :].strip().rstrip(b"]").strip() if cut >= 0 else data.strip()[1:]
    if not tail:
        return head, False
    try:
        return [*head, json.loads(tail)], False
    except ValueError:
        return head, True


def open_spans(records: list[dict[str, Any]]) -> int:
    depth: dict[int, int] = defaultdict(int)
    for r in records:
        if r.get("ph") in ("B", "E"):
            depth[r["pid"]] += 1 if r["ph"] == "B" else -1
    return sum(depth.values())


def cut_inside_last_record(data: bytes) -> bytes:
    """`data` ending halfway through its last record: what a kill during a write leaves."""
    start = data.rfind(b"},") + 2  # after the last boundary (or the opening "[")
    start += len(data[start:]) - len(data[start:].lstrip())
    end = len(data.rstrip().rstrip(b"]"))
    return data[: start + max(1, (end - start) // 2)]


@pytest.mark.parametrize("engine", ENGINES)
def test_timeline_of_a_killed_run_parses(
    real_runs: RealRuns, tmp_path: Path, engine: EngineName
) -> None:
    """What SIGTERM left (spans never closed; the last record whole, unless the kill landed
    mid-write), then the same file cut inside its last record, as a kill during a write leaves
    it: every whole record counts, the cut one is dropped and reported, nothing is bad."""
    data = real_runs.killed.read_bytes()
    records, cut = whole_records(data)
    whole = parse_timeline(real_runs.killed, engine=engine)
    assert whole.truncated == cut
    assert whole.events == sum(1 for r in records if r.get("ph") != "M") > 0
    assert whole.category_us["comm"] > 0
    assert whole.unclosed == open_spans(records)

    cut_file = tmp_path / "killed-cut.json"
    cut_file.write_bytes(cut_inside_last_record(data))
    kept, was_cut = whole_records(cut_file.read_bytes())
    assert was_cut and len(kept) == len(records) - (0 if cut else 1)
    s = parse_timeline(cut_file, engine=engine)
    assert s.truncated and not s.bad_records
    assert s.events == sum(1 for r in kept if r.get("ph") != "M") > 0
    assert s.unclosed == open_spans(kept)
    ref = reference(write_records(tmp_path / "kept.json", kept))
    assert s.category_us == {c: ref[c] for c in CATEGORIES}

    # Cut inside the very first record: nothing to read, but a killed run's file, not an error.
    first = tmp_path / "killed-first.json"
    first.write_bytes(data[: data.index(b"{") + 8])
    s = parse_timeline(first, engine=engine)
    assert s.truncated and s.empty and s.metadata == 0


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(records))
    return path


def test_old_format_gives_the_same_figures(real_runs: RealRuns, tmp_path: Path) -> None:
    for src in (real_runs.mpi / "timeline.json", real_runs.gloo / "timeline.json"):
        old = tmp_path / f"old-{src.parent.name}.json"
        old.write_bytes(to_old_format(src.read_bytes()))
        a, b = parse_timeline(src), parse_timeline(old)
        assert b.format == "horovod<0.20.1"
        assert a.category_us == b.category_us and a.events == b.events
        assert a.allreduce_bytes == b.allreduce_bytes and not b.truncated


def test_old_format_cut_mid_record(real_runs: RealRuns, tmp_path: Path) -> None:
    old = to_old_format((real_runs.mpi / "timeline.json").read_bytes())
    at = old.index(b'\n{"ph": "B"', len(old) // 2) + 15  # inside a record
    cut = tmp_path / "old-cut.json"
    cut.write_bytes(old[:at])
    s = parse_timeline(cut)
    assert s.events > 0 and s.truncated
    assert s.events == sum(1 for r in whole_records(old[:at])[0] if r.get("ph") != "M")


def test_empty_file_means_no_collectives(tmp_path: Path) -> None:
    empty = tmp_path / "timeline.json"
    empty.write_bytes(b"")
    s = parse_timeline(empty)
    assert s.empty and s.as_json()["message"] == NO_COLLECTIVES
    assert s.as_json()["comm_s"] == 0.0
    proc = hpcscale("timeline", str(empty))
    assert proc.returncode == 0 and NO_COLLECTIVES in proc.stdout


def test_not_a_timeline_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"traceEvents": []}')
    with pytest.raises(TimelineError):
        parse_timeline(bad)
    proc = hpcscale("timeline", str(bad))
    assert proc.returncode == 2 and "not a Horovod timeline" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert hpcscale("timeline", str(tmp_path / "missing.json")).returncode == 2


# ---------------------------------------------------------------- truncations (hypothesis)

MONOTONE = ("events", "allreduce_bytes", "allreduce_tensors", "ticks", "cycles", "span_us")


def _parse_prefix(data: bytes, n: int) -> Any:
    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        fh.write(data[:n])
        fh.flush()
        return parse_timeline(fh.name, chunk_size=4096)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_random_truncations_never_crash_and_are_monotone(
    real_runs: RealRuns, data: st.DataObject
) -> None:
    src = data.draw(st.sampled_from(["mpi", "gloo", "killed", "old"]))
    if src == "killed":
        raw = real_runs.killed.read_bytes()
    elif src == "old":
        raw = to_old_format((real_runs.mpi / "timeline.json").read_bytes())
    else:
        raw = (getattr(real_runs, src) / "timeline.json").read_bytes()
    a = data.draw(st.integers(0, len(raw)))
    b = data.draw(st.integers(a, len(raw)))
    sa, sb = _parse_prefix(raw, a), _parse_prefix(raw, b)
    for key in MONOTONE:
        assert getattr(sa, key) <= getattr(sb, key), key
    for cat in CATEGORIES:
        assert sa.category_us[cat] <= sb.category_us[cat], cat
    assert sa.tensors <= sb.tensors
    assert sum(sa.last_ready.values()) <= sum(sb.last_ready.values())


def test_chunk_size_does_not_change_the_result(real_runs: RealRuns) -> None:
    path = real_runs.gloo / "timeline.json"
    ref = parse_timeline(path)
    for size in (7, 333, 4096, 1 << 20):
        s = parse_timeline(path, chunk_size=size)
        assert s.category_us == ref.category_us and s.events == ref.events
        assert s.collectives == ref.collectives and s.cycles == ref.cycles


# ---------------------------------------------------------------- interval maths


def _plain_union_length(rows: list[tuple[int, int]]) -> int:
    covered: set[int] = set()
    for s, e in rows:
        covered.update(range(s, e))
    return len(covered)


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=40))
def test_union_length_is_the_covered_time(pairs: list[tuple[int, int]]) -> None:
    rows = [(s, s + d) for s, d in pairs]
    assert iv.length(rows) == _plain_union_length(rows)
    u = iv.union(rows)
    assert np.all(u[1:, 0] > u[:-1, 1]) if len(u) > 1 else True


@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30)), max_size=20),
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30)), max_size=20),
)
def test_sweep_splits_time_exactly(
    a_pairs: list[tuple[int, int]], b_pairs: list[tuple[int, int]]
) -> None:
    a = [(s, s + d) for s, d in a_pairs]
    b = [(s, s + d) for s, d in b_pairs]
    ca = {t for s, e in a for t in range(s, e)}
    cb = {t for s, e in b for t in range(s, e)}
    split = iv.sweep(a, b)
    assert split == (len(ca - cb), len(cb - ca), len(ca & cb))
    assert iv.length(iv.intersection(a, b)) == len(ca & cb)
    assert iv.length(iv.difference(a, b)) == len(ca - cb)


def test_identical_fused_spans_count_once() -> None:
    fused = [(10, 50)] * 30 + [(60, 70), (65, 80)]
    assert iv.length(fused) == 40 + 20


# ---------------------------------------------------------------- split and trace


def test_exact_split_of_a_real_run_adds_up(real_runs: RealRuns) -> None:
    steps = load_steps(real_runs.mpi / "steps.json")
    s = parse_timeline(real_runs.mpi / "timeline.json", window_unix_us=steps.window_unix_us())
    assert s.window_us is not None
    x = exact_split(steps, s.comm_intervals, s.start_time_since_epoch_us)
    assert x.epochs == 2
    assert x.compute_s + x.overlap_s == pytest.approx(x.steps_s)
    assert x.overlap_s + x.exposed_comm_s == pytest.approx(x.comm_s)
    assert x.overlap_s > 0  # a synchronous step waits for its allreduces: inside the steps
    assert x.alignment_error_us < 100
    # Clipped to the timed window: less communication than the whole run (burn-in excluded).
    whole = parse_timeline(real_runs.mpi / "timeline.json")
    assert s.category_us["comm"] < whole.category_us["comm"]


def test_seed_arithmetic_is_the_analysis_modules() -> None:
    # Seed 001, 2 nodes strong DCGAN on GPUs: T 107.2, C 16.64, waits 0.958 and 0.086.
    got = seed_split(107.2, 16.64, 0.958, 0.086)
    assert got["only_compute_pct"] == pytest.approx(84.48, abs=0.01)
    assert got["overlap_pct"] == pytest.approx(0.97, abs=0.01)
    assert got["only_comm_pct"] == pytest.approx(14.55, abs=0.01)


def test_timeline_command_table_and_json(real_runs: RealRuns) -> None:
    path = real_runs.mpi / "timeline.json"
    proc = hpcscale("timeline", str(path), "--json", "--top", "3")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["comm_s"] == pytest.approx(parse_timeline(path).seconds("comm"))
    assert len(out["top_tensors"]) == 3 and out["straggler"]["rank"] in (0, 1)
    table = hpcscale("timeline", str(path))
    assert table.returncode == 0
    assert "comm_s" in table.stdout and "straggler hint" in table.stdout


def test_trace_merges_steps_and_timeline(real_runs: RealRuns, tmp_path: Path) -> None:
    out = tmp_path / "merged.json"
    tl = real_runs.mpi / "timeline.json"
    proc = hpcscale("trace", str(real_runs.mpi), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == 6
    horovod = [e for e in events if e.get("ph") in ("B", "E")]
    begins = sum(e["ph"] == "B" for e in horovod)
    assert begins - sum(e["ph"] == "E" for e in horovod) == parse_timeline(tl).unclosed
    # Steps land inside the timeline's span, on its axis (µs since Horovod init).
    ts = [e["ts"] for e in horovod]
    assert min(ts) < steps[0]["ts"] < steps[-1]["ts"] + steps[-1]["dur"] < max(ts) + 1e6


def test_trace_of_a_cut_timeline_is_valid_json(real_runs: RealRuns, tmp_path: Path) -> None:
    from hpcscale.collect.traces.horovod.perfetto import write_trace

    cut = tmp_path / "killed-cut.json"
    cut.write_bytes(cut_inside_last_record(real_runs.killed.read_bytes()))
    kept, was_cut = whole_records(cut.read_bytes())
    assert was_cut
    info = write_trace(cut, None, tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())
    assert info.truncated
    assert events == kept and info.records == len(kept) > 0  # byte for byte, the cut one dropped
