"""The compiled timeline engine (hpcscale.collect.traces.horovod._scan) against the pure-Python one.

Both read timelines from real Horovod runs (tests/timeline_fixture.py); the unusual shapes are
those same files rewritten: keys reordered, names and keys spelt with JSON escapes, bad records
spliced in, cut at random bytes. Whatever the shape, the two engines must report the same."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcscale.collect.split import load_steps
from hpcscale.collect.traces.horovod import (
    TimelineError,
    fast_engine_available,
    iter_raw_records,
    parse_timeline,
)
from tests.integration.test_timeline import to_old_format
from tests.timeline_fixture import RealRuns, real_runs_fixture  # noqa: F401  (fixture)

pytestmark = [pytest.mark.horovod, pytest.mark.mpi]


def both(path: Path, **kw: Any) -> tuple[Any, Any]:
    """Each engine's JSON summary (or the type of error it raised)."""
    out = []
    for engine in ("c", "python"):
        try:
            s = parse_timeline(path, engine=engine, **kw)
            out.append((s.as_json(top=1000), s.metadata, s.ticks, s.tensors))
        except (TimelineError, OSError) as exc:
            out.append(type(exc).__name__)
    return out[0], out[1]


def test_compiled_engine_is_built() -> None:
    """`make setup` installs a C compiler, so the scanner must be there: without it every
    timeline would quietly parse at the Python engine's speed."""
    assert fast_engine_available()


@pytest.mark.parametrize("chunk_size", [4 << 20, 4096, 333, 7])
def test_engines_agree_on_real_timelines(
    real_runs: RealRuns, tmp_path: Path, chunk_size: int
) -> None:
    old = tmp_path / "old.json"
    old.write_bytes(to_old_format((real_runs.mpi / "timeline.json").read_bytes()))
    paths = [real_runs.mpi / "timeline.json", real_runs.gloo / "timeline.json", real_runs.killed]
    for path in [*paths, old]:
        c, py = both(path, chunk_size=chunk_size)
        assert c == py, path
        assert c[0]["events"] > 0
    window = load_steps(real_runs.mpi / "steps.json").window_unix_us()
    c, py = both(real_runs.mpi / "timeline.json", window_unix_us=window, chunk_size=chunk_size)
    assert c == py


def _records(path: Path) -> list[dict[str, Any]]:
    return [msgspec.json.decode(r) for chunk in iter_raw_records(path) for r in chunk]


def _write(path: Path, texts: list[str]) -> Path:
    path.write_text("[\n" + ",".join(texts) + "]")
    return path


def test_unusual_spellings_read_the_same(real_runs: RealRuns, tmp_path: Path) -> None:
    """Keys in another order, extra blanks, escaped names and keys: not Horovod's layout, so
    the compiled engine's generic reader (or msgspec, record by record) takes them."""
    records = _records(real_runs.gloo / "timeline.json")
    ref = both(_write(tmp_path / "plain.json", [json.dumps(r) for r in records]))
    assert ref[0] == ref[1]
    reordered = [json.dumps(dict(reversed(r.items())), indent=1) for r in records]
    escaped = [
        json.dumps(r)
        .replace('"ALLREDUCE"', '"\\u0041LLREDUCE"')
        .replace('"ph": "E"', '"p\\u0068": "E"')
        for r in records
    ]
    for name, texts in (("reordered", reordered), ("escaped", escaped)):
        c, py = both(_write(tmp_path / f"{name}.json", texts))
        assert c == py, name
        assert c[0]["comm_s"] == ref[0][0]["comm_s"] and c[0]["events"] == ref[0][0]["events"]


def test_bad_records_are_counted_alike(real_runs: RealRuns, tmp_path: Path) -> None:
    records = [json.dumps(r) for r in _records(real_runs.mpi / "timeline.json")]
    bad = ['{"ph": "B", "name": "ALLREDUCE", "ts": 1.5, "pid": 1}', '{"ph": "Q"}', '{"ts": 3}']
    mid = len(records) // 2
    path = _write(tmp_path / "bad.json", records[:mid] + bad + records[mid:])
    c, py = both(path)
    assert c == py
    assert c[0]["problems"]["bad_records"] == 3


# Bytes that break JSON in the ways the two engines must judge alike: escapes, quotes, braces,
# non-UTF-8 and control bytes, numbers too big for int64.
JUNK = st.one_of(
    st.binary(min_size=1, max_size=8),
    st.lists(
        st.sampled_from(
            [
                b"\\",
                b"\\u",
                b"\\ud800",
                b"\\udc00",
                b"\\u00e9",
                b'"',
                b"}",
                b",{",
                b"]",
                b"\x80",
                b"\xc3\xa9",
                b"\x01",
                b" ",
                b"1.5",
                b"99999999999999999999",
                b"-",
            ]
        ),
        min_size=1,
        max_size=4,
    ).map(b"".join),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_engines_agree_on_cut_and_damaged_files(real_runs: RealRuns, data: st.DataObject) -> None:
    src = data.draw(st.sampled_from(["mpi", "gloo", "killed"]))
    raw = real_runs.killed if src == "killed" else getattr(real_runs, src) / "timeline.json"
    blob = bytearray(raw.read_bytes())
    end = data.draw(st.integers(0, len(blob)))
    del blob[end:]
    if blob and data.draw(st.booleans()):  # overwrite a few bytes somewhere with junk
        at = data.draw(st.integers(0, len(blob) - 1))
        junk = data.draw(JUNK)
        blob[at : at + len(junk)] = junk
    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        fh.write(blob)
        fh.flush()
        c, py = both(Path(fh.name), chunk_size=4096)
    assert c == py
