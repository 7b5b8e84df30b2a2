"""What a run writes can damage its own reading, never the reader (issue 28): MLLOG lines with
numbers no float holds, epoch numbers that are not numbers, metadata of the wrong type, nesting
past Python's stack; and Horovod timelines both engines must read alike or refuse alike with a
TimelineError that names the problem. Each file here is what a careless program could print."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hpcscale.collect.readers.command_row import _mllog_columns
from hpcscale.collect.readers.mllog import read_mllog
from hpcscale.collect.traces.horovod import TimelineError, fast_engine_available, parse_timeline


def rec(
    time_ms: Any, key: str, value: Any = None, event: str = "POINT_IN_TIME", **meta: Any
) -> str:
    return ":::MLLOG " + json.dumps(
        {"time_ms": time_ms, "event_type": event, "key": key, "value": value, "metadata": meta}
    )


# One good epoch (2 s, 100 samples) that every damaged log below keeps readable.
GOOD = [
    rec(0, "epoch_start", event="INTERVAL_START", epoch_num=0),
    rec(2000, "epoch_stop", event="INTERVAL_END", epoch_num=0, samples_count=100),
]
BIG = "9" * 401  # an integer JSON reads, and float() cannot hold


@pytest.mark.parametrize(
    ("damage", "skipped"),
    [
        (f':::MLLOG {{"time_ms": {BIG}, "key": "epoch_start", "metadata": {{"epoch_num": 1}}}}',
         "unreadable"),
        (f':::MLLOG {{"time_ms": 5, "key": "loss", "event_type": "POINT_IN_TIME", '
         f'"value": {BIG}, "metadata": {{"epoch_num": 0}}}}', "not a valid number"),
        (':::MLLOG {"time_ms": 5, "key": "epoch_start", "metadata": {"epoch_num": NaN}}',
         "not a valid number"),
        (':::MLLOG {"time_ms": 5, "key": "epoch_start", "metadata": {"epoch_num": Infinity}}',
         "not a valid number"),
        (':::MLLOG {"time_ms": 5, "key": "epoch_start", "metadata": {"epoch_num": "1e999"}}',
         "not a valid number"),
        (':::MLLOG {"time_ms": 5, "key": "run_stop", "metadata": ["status", "success"]}',
         "unreadable"),
        (':::MLLOG {"time_ms": 5, "key": "run_stop", "metadata": "success"}', "unreadable"),
        (":::MLLOG " + "[" * 100_000, "unreadable"),
    ],
)  # fmt: skip
def test_a_damaged_mllog_line_is_skipped_and_said(damage: str, skipped: str) -> None:
    run = read_mllog([GOOD[0], damage, GOOD[1]])
    assert run.epochs == [0] and run.epoch_time_s == [2.0]
    assert run.images_per_s == 50.0  # 100 samples in 2 s
    assert any(skipped in n for n in run.notes), run.notes


def test_infinite_sample_counts_of_opposite_signs_give_no_throughput_not_a_crash() -> None:
    lines = [
        rec(0, "epoch_start", event="INTERVAL_START", epoch_num=0),
        rec(1000, "epoch_stop", event="INTERVAL_END", epoch_num=0, samples_count=math.inf),
        rec(1000, "epoch_start", event="INTERVAL_START", epoch_num=1),
        rec(2000, "epoch_stop", event="INTERVAL_END", epoch_num=1, samples_count=-math.inf),
    ]
    run = read_mllog(lines)
    assert run.epoch_time_s == [1.0, 1.0]
    assert math.isnan(run.images_per_s)
    assert any("no throughput" in n for n in run.notes)
    assert any("not a valid number" in n for n in run.notes)


def test_malformed_lines_are_counted_in_the_notes() -> None:
    run = read_mllog([*GOOD, ":::MLLOG {not json", ':::MLLOG {"key": "x"}', ":::MLLOG 3"])
    assert run.bad_lines == 3
    assert "3 of 5 MLLOG lines unreadable: skipped" in run.notes


def test_an_epoch_whose_stop_precedes_its_start_is_noted() -> None:
    lines = [
        *GOOD,
        rec(5000, "epoch_start", event="INTERVAL_START", epoch_num=1),
        rec(4000, "epoch_stop", event="INTERVAL_END", epoch_num=1, samples_count=100),
    ]
    run = read_mllog(lines)
    assert run.epochs == [0]
    assert any("[1] stop before they start" in n for n in run.notes), run.notes


@pytest.mark.parametrize("status", [1, {"ok": True}, ["success"]])
def test_a_run_stop_whose_status_is_not_a_string_is_not_did_not_finish(
    tmp_path: Path, status: Any
) -> None:
    out = tmp_path / "local.out"
    out.write_text("\n".join([*GOOD, rec(3000, "run_stop", event="INTERVAL_END", status=status)]))
    notes = _mllog_columns(out, {}, {})
    assert not any("no MLLOG run_stop" in n or "did not finish" in n for n in notes), notes
    assert any("is not a string" in n for n in notes)


# ------------------------------------------------------------------------ Horovod timelines

ENGINES = ["python", *(["c"] if fast_engine_available() else [])]


def _read(path: Path, engine: str) -> Any:
    try:
        s = parse_timeline(path, engine=engine)
    except TimelineError as exc:
        return f"TimelineError: {exc}"
    return s.as_json(top=1000)


def _timeline(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(records))
    return path


def test_a_timeline_without_args_reads_the_same_in_both_engines(tmp_path: Path) -> None:
    path = _timeline(
        tmp_path,
        [{"ph": "B", "name": "ALLREDUCE", "ts": 3, "pid": 1}, {"ph": "E", "ts": 8, "pid": 1}],
    )
    for engine in ENGINES:
        s = parse_timeline(path, engine=engine)
        assert s.collectives == {"ALLREDUCE": 1}
        assert s.category_us["comm"] == 5  # 3 µs to 8 µs
        assert s.allreduce_bytes == 0 and s.allreduce_tensors == 0  # no args: size unknown
    assert _read(path, "c" if "c" in ENGINES else "python") == _read(path, "python")


def test_a_pid_past_any_tensor_count_is_read_in_both_engines(tmp_path: Path) -> None:
    pid = 2**62
    path = _timeline(
        tmp_path,
        [
            {"ph": "B", "name": "ALLREDUCE", "ts": 3, "pid": pid},
            {"ph": "E", "ts": 8, "pid": pid, "args": {"dtype": "float32", "shape": "[4]"}},
        ],
    )
    for engine in ENGINES:
        s = parse_timeline(path, engine=engine)
        assert s.allreduce_bytes == 16  # 4 float32
        (t,) = s.tensor_stats
        assert (t.name, t.comm_us, t.ops, t.bytes) == (f"pid {pid}", 5, 1, 16)
    assert len({json.dumps(_read(path, e), sort_keys=True) for e in ENGINES}) == 1


def test_a_shape_no_tensor_has_is_an_unknown_size_in_both_engines(tmp_path: Path) -> None:
    path = _timeline(
        tmp_path,
        [
            {"ph": "B", "name": "ALLREDUCE", "ts": 3, "pid": 1},
            {"ph": "E", "ts": 8, "pid": 1,
             "args": {"dtype": "float32", "shape": "[99999999999999999999]"}},
        ],
    )  # fmt: skip
    for engine in ENGINES:
        s = parse_timeline(path, engine=engine)
        assert s.collectives == {"ALLREDUCE": 1}
        assert s.allreduce_bytes == 0 and s.allreduce_tensors == 0
    assert len({json.dumps(_read(path, e), sort_keys=True) for e in ENGINES}) == 1


def test_an_end_before_its_begin_is_refused_alike_and_named(tmp_path: Path) -> None:
    path = _timeline(
        tmp_path,
        [{"ph": "B", "name": "ALLREDUCE", "ts": 8, "pid": 1}, {"ph": "E", "ts": 3, "pid": 1}],
    )
    said = {_read(path, e) for e in ENGINES}
    assert said == {
        "TimelineError: 1 span(s) end before they begin (first: 'ALLREDUCE' on pid 1, "
        "B at ts 8, E at ts 3)"
    }


def test_an_e_record_ahead_of_its_b_in_the_file_is_read_alike(tmp_path: Path) -> None:
    path = _timeline(
        tmp_path,
        [{"ph": "E", "ts": 2, "pid": 1}, {"ph": "B", "name": "ALLREDUCE", "ts": 3, "pid": 1}],
    )
    for engine in ENGINES:
        s = parse_timeline(path, engine=engine)
        assert (s.orphan_ends, s.unclosed, s.collectives) == (1, 1, {})
    assert len({json.dumps(_read(path, e), sort_keys=True) for e in ENGINES}) == 1


def test_many_named_tensors_read_alike(tmp_path: Path) -> None:
    """Per-tensor rows grow as tensors come (a slot per distinct pid, whatever its value)."""
    records: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"grad/{pid}"}}
        for pid in range(1, 201)
    ]
    for pid in range(1, 201):
        records += [
            {"ph": "B", "name": "ALLREDUCE", "ts": 10 * pid, "pid": pid},
            {"ph": "E", "ts": 10 * pid + pid % 7, "pid": pid,
             "args": {"dtype": "float32", "shape": "[2]"}},
        ]  # fmt: skip
    path = _timeline(tmp_path, records)
    for engine in ENGINES:
        s = parse_timeline(path, engine=engine)
        assert s.tensors == 200 and s.allreduce_bytes == 200 * 8
        top = s.tensor_stats[0]  # the most time: 6 µs, lowest pid first among ties (pid 6)
        assert (top.name, top.comm_us) == ("grad/6", 6)
    assert len({json.dumps(_read(path, e), sort_keys=True) for e in ENGINES}) == 1
