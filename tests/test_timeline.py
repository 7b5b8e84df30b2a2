"""The streaming timeline parser, the interval maths and the `timeline`/`trace` commands.

Timelines come from real Horovod runs of jobs/train.py (tests/timeline_fixture.py: MPI and Gloo
controllers, with and without HOROVOD_TIMELINE_MARK_CYCLES, one run killed with SIGTERM). The
other shapes are made from those files: cut at random bytes, rewritten in the pre-0.20.1 layout.
The one fake is the 0-byte file, which is what Horovod leaves when no collective ran: there is
nothing in it to be real or not.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcscale.collect import intervals as iv
from hpcscale.collect.split import exact_split, load_steps, seed_split
from hpcscale.collect.timeline import (
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


# ---------------------------------------------------------------- an independent reference


def reference(path: Path) -> dict[str, Any]:
    """The same figures the plain way: json.load, a stack per pid, sorted-interval unions."""
    text = path.read_text().rstrip()
    if not text.endswith("]"):
        text = text.rstrip().rstrip(",") + "]"
    events = json.loads(text)
    stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    durations: dict[str, int] = defaultdict(int)
    for ev in events:
        if ev.get("ph") == "B":
            stacks[ev["pid"]].append((ev["name"], ev["ts"]))
        elif ev.get("ph") == "E" and stacks[ev["pid"]]:
            name, t0 = stacks[ev["pid"]].pop()
            spans[category_of(name)].append((t0, ev["ts"]))
            durations[category_of(name)] += ev["ts"] - t0
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


def test_readiness_ticks_give_ranks_and_a_straggler_hint(real_runs: RealRuns) -> None:
    s = parse_timeline(real_runs.mpi / "timeline.json")
    assert s.ranks == 2
    rank, times, total = s.straggler()  # type: ignore[misc]
    assert rank in (0, 1) and 0 < times <= total == sum(s.last_ready.values())
    assert s.bus_bandwidth_gbs() is not None and s.bus_bandwidth_gbs() > 0


def test_allreduce_bytes_come_from_dtype_and_shape(real_runs: RealRuns) -> None:
    path = real_runs.mpi / "timeline.json"
    expected = 0
    for ev in json.loads(path.read_text()):
        args = ev.get("args") or {}
        if ev.get("ph") == "E" and "shape" in args:
            expected += tensor_bytes(args["dtype"], args["shape"]) or 0
    s = parse_timeline(path)
    # Broadcasts and allgathers carry dtype/shape too; only allreduces are counted as bytes.
    assert 0 < s.allreduce_bytes <= expected
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


def test_timeline_of_a_killed_run_parses(real_runs: RealRuns) -> None:
    """Whatever SIGTERM left (a cut record, spans never closed): every whole record counts."""
    data = real_runs.killed.read_bytes()
    records, cut = whole_records(data)
    s = parse_timeline(real_runs.killed)
    assert s.events == sum(1 for r in records if r.get("ph") != "M") > 0
    assert s.truncated == cut
    assert s.category_us["comm"] > 0
    depth: dict[int, int] = defaultdict(int)
    for r in records:
        if r.get("ph") in ("B", "E"):
            depth[r["pid"]] += 1 if r["ph"] == "B" else -1
    assert s.unclosed == sum(depth.values())


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
    x = exact_split(steps, s.comm_intervals, s.start_time_since_epoch_us)  # type: ignore[arg-type]
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
    from hpcscale.collect.trace import write_trace

    info = write_trace(real_runs.killed, None, tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())
    assert len(events) == info.records > 0
