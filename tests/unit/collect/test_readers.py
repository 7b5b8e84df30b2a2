"""The figures-of-merit readers and the probe: expected values are hand-computed from the lines
written in each test (the probe's output is read back by the MLLOG reader in a real process)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hpcscale.collect.readers.extract import extract
from hpcscale.collect.readers.mllog import read_mllog
from hpcscale.model.extractors import Extractor, pattern_error
from hpcscale.model.presets import preset_extractors

ROOT = Path(__file__).resolve().parents[3]

SYNTHETIC_OUTPUT = """\
0: Model: ResNet50
0: Batch size: 32
0: Running warmup...
0: Iter #0: 10.5 img/sec per CPU
0: Iter #1: 11.5 img/sec per CPU
0: Iter #2: 12.0 img/sec per CPU
0: Img/sec per CPU: 11.3 +-1.0
0: Total img/sec on 2 CPU(s): 22.7 +-2.0
"""


def test_horovod_synthetic_preset_reads_the_benchmark_lines(tmp_path: Path) -> None:
    out = tmp_path / "output.log"
    out.write_text(SYNTHETIC_OUTPUT)
    got = extract({"output": out}, preset_extractors("horovod_synthetic"))
    assert got.unparsed == []
    assert got.values == {
        "images_per_s": 22.7,
        "images_per_s_per_rank": 11.3,
        "step_images_per_s": [10.5, 11.5, 12.0],
    }


@pytest.mark.parametrize(
    ("reduce", "expected"),
    [
        ("last", 4.0),
        ("first", 1.0),
        ("mean", 2.5),
        ("median", 2.5),
        ("min", 1.0),
        ("max", 4.0),
        ("sum", 10.0),
        ("series", [1.0, 3.0, 2.0, 4.0]),
    ],
)
def test_reduce(tmp_path: Path, reduce: str, expected: object) -> None:
    log = tmp_path / "train.log"
    log.write_text("loss=1\nnoise\nloss=3\nloss=2 x\n[rank 0] loss=4\n")
    got = extract({"train.log": log}, [Extractor("loss", r"loss=(\d+)", "train.log", reduce)])
    assert got.values["loss"] == expected


def test_required_metric_that_never_matches_is_unparsed_with_the_file_tail(tmp_path: Path) -> None:
    out = tmp_path / "output.log"
    out.write_text("epoch 1 done\nTraceback (most recent call last):\nValueError: boom\n")
    got = extract(
        {"output": out},
        [
            Extractor("images_per_s", r"rate=([\d.]+)"),
            Extractor("optional", r"opt=([\d.]+)", required=False),
        ],
    )
    assert got.values == {}
    assert [u.metric for u in got.unparsed] == ["images_per_s"]
    bad = got.unparsed[0]
    assert bad.reason == "no line matches" and bad.file == str(out)
    assert bad.last_lines is not None and bad.last_lines.endswith("ValueError: boom")


def test_a_match_that_is_not_a_number_is_unparsed(tmp_path: Path) -> None:
    out = tmp_path / "output.log"
    out.write_text("acc=0.5\nacc=n/a\n")
    got = extract({"output": out}, [Extractor("acc", r"acc=(\S+)")])
    assert [u.reason for u in got.unparsed] == ["matched 'n/a', which is not a number"]


def test_missing_source_file(tmp_path: Path) -> None:
    got = extract({}, [Extractor("x", r"x=(\d)", source="metrics.txt")])
    assert got.unparsed[0].reason == "file missing"


@pytest.mark.parametrize(
    ("pattern", "ok"),
    [(r"x=(\d+)", True), (r"x=(?P<value>\d+) (\d+)", True), (r"x=\d+", False), (r"x=(\d+", False)],
)
def test_pattern_error(pattern: str, ok: bool) -> None:
    assert (pattern_error(pattern) is None) is ok


def _mllog(time_ms: float, event: str, key: str, value: object = None, **meta: object) -> str:
    rec = {"namespace": "", "time_ms": time_ms, "event_type": event, "key": key,
           "value": value, "metadata": meta}  # fmt: skip
    return ":::MLLOG " + json.dumps(rec)


def test_mllog_epochs_throughput_that_adds_up_and_series() -> None:
    lines = [
        "unrelated output",
        _mllog(1000, "INTERVAL_START", "run_start"),
        _mllog(1000, "POINT_IN_TIME", "global_batch_size", 64),
        _mllog(2000, "INTERVAL_START", "epoch_start", epoch_num=0),
        _mllog(12000, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=1000),
        _mllog(12500, "POINT_IN_TIME", "eval_accuracy", 0.5, epoch_num=0),
        _mllog(13000, "INTERVAL_START", "epoch_start", epoch_num=1),
        _mllog(43000, "INTERVAL_END", "epoch_stop", epoch_num=1, samples_count=1000),
        _mllog(43100, "POINT_IN_TIME", "train_loss", 1.25, epoch_num=1),
        ":::MLLOG {not json",
        _mllog(44000, "INTERVAL_END", "run_stop", status="success"),
    ]
    run = read_mllog(lines)
    assert run.epochs == [0, 1]
    assert run.epoch_time_s == [10.0, 30.0]
    assert run.images_per_s == pytest.approx(2000 / 40)  # 50, not the mean of rates (66.7)
    assert run.epoch_time_mean_s == 20.0
    assert run.series["val_accuracy"][0] == 0.5 and math.isnan(run.series["val_accuracy"][1])
    assert math.isnan(run.series["train_loss"][0]) and run.series["train_loss"][1] == 1.25
    assert run.fit_time_s == 43.0 and run.status == "success"
    assert run.bad_lines == 1


def test_mllog_without_samples_gives_no_throughput_and_says_so() -> None:
    lines = [
        _mllog(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        _mllog(500, "INTERVAL_END", "epoch_stop", epoch_num=0),
        _mllog(600, "INTERVAL_START", "epoch_start", epoch_num=1),
    ]
    run = read_mllog(lines)
    assert run.epoch_time_s == [0.5]
    assert math.isnan(run.images_per_s)
    assert any("no throughput" in n for n in run.notes)
    assert any("[1]" in n for n in run.notes)


@pytest.mark.parametrize(("stop", "said"), [(True, False), (False, True)])
def test_a_command_run_whose_log_never_stopped_says_so(
    tmp_path: Path, stop: bool, said: bool
) -> None:
    """A command's output exists from its first line: a run killed (or still running) after
    one epoch gives figures from that epoch, which the row's notes must say."""
    from hpcscale.collect.readers.command_row import _mllog_columns

    lines = [
        _mllog(0, "INTERVAL_START", "run_start"),
        _mllog(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        _mllog(500, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=100),
    ]
    if stop:
        lines.append(_mllog(600, "INTERVAL_END", "run_stop", status="success"))
    out = tmp_path / "local.out"
    out.write_text("\n".join(lines) + "\n")
    row: dict = {}
    notes = _mllog_columns(out, row, {})
    assert row["images_per_s"] == pytest.approx(200.0)  # 100 images in 0.5 s
    assert any("no MLLOG run_stop" in n for n in notes) is said


PROBE_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from hpcscale import probe
    for e in range(2):
        with probe.epoch(e, samples=8):
            for _ in range(4):
                with probe.step():
                    time.sleep(0.002)
        probe.log(e, train_loss=1.0 / (e + 1), val_accuracy=0.5 + e / 10)
    heavy = sorted(m for m in ("pandas", "pydantic", "tensorflow", "numpy", "horovod", "mpi4py")
                   if m in sys.modules)
    print("HEAVY", heavy)
    """
)


def _run_probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(PROBE_SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI_", "SLURM"))}
    return subprocess.run(
        [sys.executable, str(script)],
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_probe_lines_read_back_and_imports_nothing_heavy(tmp_path: Path) -> None:
    proc = _run_probe(tmp_path)
    assert "HEAVY []" in proc.stdout
    lines = proc.stdout.splitlines()
    assert not any("step" in ln and "epoch_" not in ln and "step_time_ms" not in ln
                   for ln in lines if ln.startswith(":::MLLOG"))  # fmt: skip
    run = read_mllog(lines)
    assert run.epochs == [0, 1]
    assert all(t >= 0.008 for t in run.epoch_time_s)  # four 2 ms sleeps at least
    assert run.epoch_samples == [8, 8]
    assert run.series["train_loss"] == [1.0, 0.5]
    assert run.series["val_accuracy"] == [0.5, 0.6]
    assert all(p >= 2.0 for p in run.step_p50_ms)
    assert run.status == "success" and run.fit_time_s > 0
    summaries = [json.loads(ln[len(":::MLLOG ") :]) for ln in lines if "step_time_ms" in ln]
    assert [s["value"]["count"] for s in summaries] == [4, 4]


def test_probe_writes_nothing_on_other_ranks(tmp_path: Path) -> None:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK", "HOROVOD_RANK"):
        proc = _run_probe(tmp_path, **{var: "1"})
        assert ":::MLLOG" not in proc.stdout, var


def test_probe_quantiles_match_numpy() -> None:
    from hpcscale.probe import _quantile

    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100):
        xs = sorted(int(v) for v in rng.integers(1, 10**7, n))
        for q in (0.5, 0.9, 0.99):
            assert _quantile(xs, q) == pytest.approx(np.quantile(xs, q))
