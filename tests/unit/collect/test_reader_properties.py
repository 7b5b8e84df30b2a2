"""Property checks (issue 28): whatever a run writes, reading it never raises out of the reader,
one run's damage never changes another run's row, and the two timeline engines agree.

MLLOG logs and timelines start from good ones and are mutated (a field replaced by a hostile
value, a line cut, nested, duplicated or dropped); a fixed budget keeps the whole file a few
seconds. The collect-level check uses run directories rendered by the real `render` (their
run.json and campaign version), each given a job output, as a finished local run leaves them.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcscale.collect.collector import collect_campaign
from hpcscale.collect.readers.command_row import _mllog_columns
from hpcscale.collect.readers.mllog import read_mllog
from hpcscale.collect.traces.horovod import TimelineError, fast_engine_available, parse_timeline
from tests.conftest import hpcscale


def _mllog(time_ms: Any, event: str, key: str, value: Any = None, **meta: Any) -> dict[str, Any]:
    return {"time_ms": time_ms, "event_type": event, "key": key, "value": value, "metadata": meta}


GOOD_LOG = [
    _mllog(0, "INTERVAL_START", "run_start"),
    _mllog(1, "POINT_IN_TIME", "global_batch_size", 8),
    _mllog(1000, "INTERVAL_START", "epoch_start", epoch_num=0),
    _mllog(3000, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=100),
    _mllog(3100, "POINT_IN_TIME", "eval_accuracy", 0.5, epoch_num=0),
    _mllog(4000, "INTERVAL_START", "block_start", first_epoch_num=1, epoch_count=2),
    _mllog(8000, "INTERVAL_END", "block_stop", first_epoch_num=1, epoch_count=2, samples_count=80),
    _mllog(8100, "POINT_IN_TIME", "step_time_ms", {"count": 4, "p50_ms": 2.0}, epoch_num=0),
    _mllog(9000, "INTERVAL_END", "run_stop", status="success"),
]
FIELDS = ("time_ms", "key", "value", "metadata", "event_type")
META = ("epoch_num", "samples_count", "first_epoch_num", "epoch_count", "status", "p50_ms")
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([10**400, -(10**400), 2**62, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1e999", "NaN", "-Infinity", "9" * 401, "", "x", "3"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(META), st.integers(-3, 3), max_size=2),
)


@st.composite
def mllog_lines(draw: st.DrawFn) -> list[str]:
    """A good log with a few fields, metadata entries or whole lines damaged."""
    records = [dict(r, metadata=dict(r["metadata"])) for r in GOOD_LOG]
    for _ in range(draw(st.integers(1, 4))):
        r = draw(st.sampled_from(records))
        if draw(st.booleans()):
            r[draw(st.sampled_from(FIELDS))] = draw(HOSTILE)
        elif isinstance(r.get("metadata"), dict):
            r["metadata"][draw(st.sampled_from(META))] = draw(HOSTILE)
    lines = [":::MLLOG " + json.dumps(r) for r in records]
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["cut", "nest", "twice", "drop"]))
        if how == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif how == "nest":
            lines[i] = ":::MLLOG " + "[" * draw(st.integers(1, 50_000))
        elif how == "twice":
            lines.insert(i, lines[i])
        elif len(lines) > 1:
            del lines[i]
    return lines


@settings(max_examples=100, deadline=None)
@given(mllog_lines())
def test_no_mllog_line_raises_out_of_the_reader(lines: list[str]) -> None:
    run = read_mllog(lines)
    n = len(run.epochs)
    assert len(run.epoch_time_s) == len(run.epoch_samples) == len(run.step_p50_ms) == n
    assert all(math.isfinite(t) and t >= 0 for t in run.epoch_time_s)
    rate = run.images_per_s
    assert math.isnan(rate) or (math.isfinite(rate) and rate >= 0)
    assert all(len(v) <= 10_000 for v in run.series.values())


# ------------------------------------------------------------------------ timelines

TL_NAMES = ["ALLREDUCE", "NEGOTIATE_ALLREDUCE", "MPI_ALLREDUCE", "WAIT_FOR_DATA", "0", "1"]
TL_RECORD = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["B", "E", "X", "i", "M"]),
        "ts": st.one_of(st.integers(-5, 50), st.sampled_from([2**40, 2**62, -(2**62)])),
        "pid": st.one_of(st.integers(-1, 4), st.sampled_from([2**62, 2**63 - 1])),
    },
    optional={
        "name": st.sampled_from([*TL_NAMES, "process_name", "CYCLE_START"]),
        "args": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "dtype": st.sampled_from(["float32", "int8", "bogus"]),
                    "shape": st.sampled_from(
                        ["[4]", "[]", "[2, 3]", "[-4]", "[99999999999999999999]", "[x]"]
                    ),
                    "name": st.sampled_from(["grad/a", "grad/b"]),
                    "start_time_since_epoch_in_micros": st.integers(0, 10**15),
                },
            ),
            st.just([]),
        ),
        "dur": st.just(0),
    },
)
ENGINES = ["python", *(["c"] if fast_engine_available() else [])]


def _read(path: Path, engine: str) -> Any:
    try:
        return parse_timeline(path, engine=engine).as_json(top=1000)
    except TimelineError as exc:
        return f"TimelineError: {exc}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TL_RECORD, min_size=1, max_size=12))
def test_the_timeline_engines_agree_on_any_records(records: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timeline.json"
        path.write_text(json.dumps(records))
        said = [_read(path, e) for e in ENGINES]
    assert all(s == said[0] for s in said), said


# ------------------------------------------------------------------------ collect

PROGRAM = "import sys\n"  # never run: the outputs are written below, as a finished run's
BODY = """\
name: props
workload:
  command: python p.py "{args.mode}"
  metrics: mllog
  args: {mode: a}
system: local
matrix: {layout: "1x1", batch: 4, args.mode: [a, b, c]}
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A real rendered campaign (three runs' run.json and the campaign version), and the rows
    collect makes of it when every run's output is the good log."""
    tmp = tmp_path_factory.mktemp("props")
    (tmp / "p.py").write_text(PROGRAM)
    (tmp / "c.yaml").write_text(textwrap.dedent(BODY))
    hpcscale("render", str(tmp / "c.yaml"), "-w", str(tmp / "wd"), check=True)
    cdir, _ = _with_outputs(tmp / "wd" / "props", tmp / "clean", None)
    return tmp / "wd" / "props", _rows(cdir)


def _good_output() -> str:
    return "\n".join(":::MLLOG " + json.dumps(r) for r in GOOD_LOG) + "\n"


def _rows(cdir: Path) -> dict[str, str]:
    got = collect_campaign(cdir, progress=False)
    return {
        r["run_id"]: json.dumps(r, sort_keys=True, default=str) for r in got.rows if "run_id" in r
    }


def _with_outputs(rendered: Path, tmp: Path, damaged: list[str] | None) -> tuple[Path, str]:
    cdir = tmp / "props"
    shutil.copytree(rendered, cdir)
    runs = sorted(p for p in (cdir / "runs").iterdir() if p.is_dir())
    for i, run in enumerate(runs):
        text = "\n".join(damaged) + "\n" if damaged is not None and i == 1 else _good_output()
        (run / "local.out").write_text(text)
    return cdir, runs[1].name


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mllog_lines())
def test_one_runs_damaged_log_never_changes_the_other_rows(
    rendered: tuple[Path, dict[str, str]], lines: list[str]
) -> None:
    source, want = rendered
    with tempfile.TemporaryDirectory() as tmp:
        damaged, bad = _with_outputs(source, Path(tmp), lines)
        got = _rows(damaged)  # no exception escapes: the run is a row or a named problem
        assert _mllog_columns(damaged / "runs" / bad / "local.out", {}, {}) is not None
    assert set(want) - {bad} <= set(got)
    for rid, row in want.items():
        if rid != bad:
            assert _same_row(got[rid], row)


def _same_row(a: str, b: str) -> bool:
    """Equal but for where the campaign directory lies."""
    ra, rb = json.loads(a), json.loads(b)
    return {k: v for k, v in ra.items() if k != "run_dir"} == {
        k: v for k, v in rb.items() if k != "run_dir"
    }
