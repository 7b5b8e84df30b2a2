"""Nothing a run writes can hang, crash or fool the extractors: time linear in the
output (RE2), memory constant in the matches, finite ASCII numbers only, files inside the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcscale.collect.collector import load_results
from hpcscale.collect.readers.extract import extract
from hpcscale.model.extractors import Extractor
from tests.command_fixture import campaign, run_all
from tests.conftest import hpcscale

HANG_S = 300  # a hang guard, not a timing: each extraction below takes well under a second

EXTRACT = """\
import json, sys
from pathlib import Path
from hpcscale.collect.readers.extract import Extractor, extract
got = extract({"output": Path(sys.argv[1])}, [Extractor("n", sys.argv[2], reduce=sys.argv[3])])
print(json.dumps({"values": got.values, "reasons": [u.reason for u in got.unparsed]}))
"""


def _extract_apart(log: Path, pattern: str, reduce: str) -> dict[str, object]:
    """In a child process: Python's `re` holds the GIL in a catastrophic match, so nothing in
    this process (pytest-timeout's signal or thread) could stop it; a child can be killed."""
    argv = [sys.executable, "-c", EXTRACT, str(log), pattern, reduce]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_S, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"extracting {pattern!r} hung (killed after {HANG_S} s)")
    return json.loads(proc.stdout)


def test_catastrophic_pattern_is_linear(tmp_path: Path) -> None:
    """`^(a+)+$` against "a"*40 + "!" backtracks 2**40 times in Python's re; RE2 does not."""
    log = tmp_path / "out.log"
    log.write_text("a" * 40 + "!\n" + "a" * 41 + "\n")
    got = _extract_apart(log, r"^(a+)+$", "series")
    # the only line that matches is the second one, whose value is not a number
    assert got == {"values": {}, "reasons": [f"matched {'a' * 41!r}, which is not a number"]}
    log.write_text("1" * 40 + "!\n" + "12\n" + "1" * 39 + "x\n")
    got = _extract_apart(log, r"^(\d+)+$", "series")
    assert got == {"values": {"n": [12.0]}, "reasons": []}


def test_long_digit_line_is_linear(tmp_path: Path) -> None:
    """`([\\d.]+) samples/s` over one 400k-digit line: quadratic in Python's re (13 s at 40k
    digits, 100x that here), one pass in RE2."""
    log = tmp_path / "out.log"
    log.write_text("1" * 400_000 + "\n" + "rate 12.5 samples/s\n" + "9" * 40_000 + "\n")
    got = _extract_apart(log, r"([\d.]+) samples/s", "last")
    assert got == {"values": {"n": 12.5}, "reasons": []}


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"(\d)\1 (\d+)", "RE2 cannot run it"),  # a backreference
        (r"(?<=rate )(\d+)", "RE2 cannot run it"),  # lookbehind
        (r"rate (?=\d)(\d+)", "RE2 cannot run it"),  # lookahead
    ],
)
def test_validate_refuses_patterns_re2_cannot_run(
    tmp_path: Path, pattern: str, message: str
) -> None:
    body = (
        "name: bad\nworkload:\n  command: [python, prog.py]\n"
        f"  metrics: [{{name: rate, pattern: '{pattern}'}}]\n  throughput: rate\nsystem: local\n"
    )
    proc = hpcscale("validate", str(campaign(tmp_path, body)))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert "c.yaml:4" in err and "workload.metrics[0].pattern" in err and message in err, err


@pytest.mark.parametrize("reduce", ["mean", "sum", "last", "max"])
def test_non_finite_numbers_are_refused_not_summed(tmp_path: Path, reduce: str) -> None:
    log = tmp_path / "out.log"
    log.write_text("rate 1e999\nrate -1e999\nrate 5\n")
    got = extract({"output": log}, [Extractor("rate", r"rate (\S+)", reduce=reduce)])
    assert got.values == {}
    assert [u.reason for u in got.unparsed] == ["matched '1e999', which is not a finite number"]


def test_a_sum_that_overflows_is_a_problem_not_inf(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text("rate 1e308\nrate 1e308\n")
    got = extract({"output": log}, [Extractor("rate", r"rate (\S+)", reduce="sum")])
    assert got.values == {} and "not finite" in got.unparsed[0].reason


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("rate ٣.5", r"rate (\S+)"),  # Arabic-Indic three: not an ASCII digit
        ("rate ٣.5", r"rate ([\d.]+)"),  # \d is ASCII on RE2: nothing matches
        ("rate 1_000", r"rate (\S+)"),  # float() would read 1000
        ("rate nan", r"rate (\S+)"),
        ("rate ３", r"rate (\S+)"),  # fullwidth three
    ],
)
def test_numbers_are_ascii_digits_only(tmp_path: Path, line: str, pattern: str) -> None:
    log = tmp_path / "out.log"
    log.write_text(f"{line}\n", encoding="utf-8")
    got = extract({"output": log}, [Extractor("rate", pattern)])
    assert got.values == {} and len(got.unparsed) == 1


SERIES_CAP = 100_000  # documented in docs/own-program.md


def test_series_is_capped_and_says_so(tmp_path: Path) -> None:
    n = SERIES_CAP + 5
    log = tmp_path / "out.log"
    log.write_text("".join(f"step {i}\n" for i in range(n)))
    got = extract({"output": log}, [Extractor("steps", r"step (\d+)", reduce="series")])
    series = got.values["steps"]
    assert isinstance(series, list) and series[:3] == [0.0, 1.0, 2.0]
    assert len(series) == SERIES_CAP and series[-1] == SERIES_CAP - 1
    assert got.notes == [f"steps: series kept its first 100,000 of {n:,} values"]


def test_streaming_reductions_keep_no_values() -> None:
    """mean/sum/min/max/last/first hold a few numbers, whatever the matches: the exact sum
    is folded every few thousand values."""
    from hpcscale.collect.readers import reducers  # the streaming reductions

    for reduce in ("mean", "sum", "min", "max", "last", "first"):
        acc = reducers.Acc(reduce)
        for i in range(50_000):
            acc.add(str(i % 7).encode())
        assert len(acc.kept) == 0 and len(acc.block) <= 4096, reduce
    acc = reducers.Acc("mean")
    for i in range(50_000):
        acc.add(str(i % 7).encode())
    expected = sum(i % 7 for i in range(50_000)) / 50_000  # by hand: the plain mean
    assert acc.result()[0] == pytest.approx(expected)


def test_median_beyond_its_cap_is_a_sample_and_says_so() -> None:
    from hpcscale.collect.readers import reducers

    acc = reducers.Acc("median")
    n = reducers.MEDIAN_CAP * 2
    for i in range(n):
        acc.add(str(i % 101).encode())  # values 0..100, evenly: median 50
    value, why, note = acc.result()
    assert why is None and len(acc.kept) == reducers.MEDIAN_CAP
    assert value == pytest.approx(50, abs=2)
    assert note == f"median of a uniform sample of 100,000 of {n:,} values"


# ------------------------------------------------------------------ files stay inside their run

ESCAPE = """\
import os
run_dir = os.environ["HPCSCALE_RUN_DIR"]
os.symlink(os.environ["SECRET"], os.path.join(run_dir, "train.log"))
print("rate 5.0", flush=True)
"""

CONFINED = """\
name: confined
workload:
  command: python prog.py
  metrics:
    - {name: rate_per_s, pattern: 'rate ([\\d.]+)'}
    - {name: secret, pattern: 'SECRET=(\\S+)', source: train.log, required: false}
  throughput: rate_per_s
system: local
scaling: weak
matrix: {layout: "1x1", batch: 4}
"""


@pytest.mark.mpi
def test_a_source_linked_outside_the_run_is_refused(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text("SECRET=7319482651\nroot:x:0:0:the-secret-line\n")
    monkeypatch.setenv("SECRET", str(secret))
    path = campaign(tmp_path, CONFINED, program=ESCAPE)
    out = run_all(path)  # the optional figure is left out, named; the run is kept
    assert "refused: a link leading outside the run directory" in out, out
    assert "the-secret-line" not in out
    df = load_results("confined")
    assert list(df["rate_per_s"]) == [5.0]
    assert "secret" not in df.columns or df["secret"].isna().all()
    assert "7319482651" not in (workdir / "confined" / "results.csv").read_text()
    proc = hpcscale("report", "confined")
    md = (workdir / "confined" / "report" / "index.md").read_text()
    assert "refused" in md, proc.stdout + proc.stderr
    assert "the-secret-line" not in md and "7319482651" not in md


def test_extract_refuses_a_link_out_of_root(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "passwd").write_text("x=1\n")
    os.symlink(tmp_path / "passwd", run_dir / "train.log")
    (run_dir / "inside.log").write_text("x=2\n")
    os.symlink(run_dir / "inside.log", run_dir / "link.log")  # a link that stays inside: fine
    exs = [Extractor("a", r"x=(\d)", "train.log"), Extractor("b", r"x=(\d)", "link.log")]
    got = extract({e.source: run_dir / e.source for e in exs}, exs, root=run_dir)
    assert got.values == {"b": 2.0}
    (bad,) = got.unparsed
    assert bad.metric == "a" and bad.reason.startswith("refused") and bad.last_lines is None


@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 1 << 20])
def test_blocks_cut_anywhere_read_the_same_lines(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines cut by a block's end, `\\r` progress lines and `\\r\\n` ends: one value per line,
    the line's first match, whatever the block size."""
    from hpcscale.collect.readers import extract as module

    monkeypatch.setattr(module, "CHUNK", chunk)
    log = tmp_path / "out.log"
    log.write_bytes(b"v=1 v=9\nnoise\r\nv=22\rv=3\r\n" + b"x" * 40 + b" v=4444\nv=5")
    got = extract({"output": log}, [Extractor("v", r"v=(\d+)", reduce="series")])
    assert got.values == {"v": [1.0, 22.0, 3.0, 4444.0, 5.0]}
