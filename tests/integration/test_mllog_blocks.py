"""MLPerf logs as the MLPerf references write them (issue 27): block_start/block_stop timing,
evaluations at epoch numbers no timed epoch has, the reader's own reasons in Data quality, and a
log without run_stop said neutrally. Expected values are computed by hand from the time stamps
and counts each log was written with."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcscale.collect.collector import load_results
from hpcscale.collect.readers.command_row import _mllog_columns
from hpcscale.collect.readers.mllog import read_mllog
from hpcscale.formats.exit_record import write_exit_record
from tests.command_fixture import campaign
from tests.conftest import hpcscale


def line(time_ms: float, event: str, key: str, value: object = None, **meta: object) -> str:
    rec = {"namespace": "", "time_ms": time_ms, "event_type": event, "key": key,
           "value": value, "metadata": meta}  # fmt: skip
    return ":::MLLOG " + json.dumps(rec)


# Two blocks of two epochs (1-based, as the BERT and LLaMA-LoRA references number them): 4 s
# and 2 s, 400 samples each; an evaluation after each block at the block's last epoch.
BLOCKS = [
    line(0, "INTERVAL_START", "run_start"),
    line(1000, "INTERVAL_START", "block_start", first_epoch_num=1, epoch_count=2),
    line(5000, "INTERVAL_END", "block_stop", first_epoch_num=1, epoch_count=2, samples_count=400),
    line(5100, "POINT_IN_TIME", "eval_accuracy", 0.5, epoch_num=2),
    line(6000, "INTERVAL_START", "block_start", first_epoch_num=3, epoch_count=2),
    line(8000, "INTERVAL_END", "block_stop", first_epoch_num=3, epoch_count=2, samples_count=400),
    line(8100, "POINT_IN_TIME", "eval_accuracy", 0.75, epoch_num=4),
    line(9000, "INTERVAL_END", "run_stop", status="success"),
]


def test_a_block_only_log_gives_block_times_epochs_and_throughput() -> None:
    run = read_mllog(BLOCKS)
    assert run.block_time_s == [4.0, 2.0]
    assert run.epochs == [1, 2, 3, 4]  # a block of 2 epochs is 2 epochs, not one
    assert run.epoch_time_s == [2.0, 2.0, 1.0, 1.0]  # each block's mean: nothing finer logged
    assert run.images_per_s == pytest.approx(800 / 6)  # 800 samples in 4 s + 2 s
    assert run.fit_time_s == 9.0
    # kept against their own epoch numbers (1-based log: the list starts at epoch 1)
    assert _same(run.series["val_accuracy"], [math.nan, 0.5, math.nan, 0.75])
    assert run.notes == []


def test_blocks_beside_epochs_time_nothing_twice() -> None:
    """ResNet's reference logs both: the epochs time the run, the blocks are block times."""
    lines = [
        line(0, "INTERVAL_START", "block_start", first_epoch_num=0, epoch_count=2),
        line(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        line(3000, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=30),
        line(3000, "INTERVAL_START", "epoch_start", epoch_num=1),
        line(4000, "INTERVAL_END", "epoch_stop", epoch_num=1, samples_count=30),
        line(4500, "INTERVAL_END", "block_stop", first_epoch_num=0, epoch_count=2),
    ]
    run = read_mllog(lines)
    assert run.epochs == [0, 1] and run.epoch_time_s == [3.0, 1.0]
    assert run.block_time_s == [4.5]
    assert run.images_per_s == pytest.approx(60 / 4)


def test_eval_at_an_epoch_no_timed_epoch_has_is_kept_at_its_number() -> None:
    """Epochs timed 0-based, evaluations logged 1-based (after the epoch): none dropped."""
    lines = [
        line(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        line(1000, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=10),
        line(1100, "POINT_IN_TIME", "eval_accuracy", 0.25, epoch_num=1),
        line(2000, "INTERVAL_START", "epoch_start", epoch_num=1),
        line(3000, "INTERVAL_END", "epoch_stop", epoch_num=1, samples_count=10),
        line(3100, "POINT_IN_TIME", "eval_accuracy", 0.5, epoch_num=2),
    ]
    run = read_mllog(lines)
    assert run.epochs == [0, 1]
    assert _same(run.series["val_accuracy"], [math.nan, 0.25, 0.5])


def test_eval_far_past_the_epochs_is_named_not_dropped_silently() -> None:
    lines = [
        line(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        line(1000, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=10),
        line(1100, "POINT_IN_TIME", "eval_accuracy", 0.25, epoch_num=0),
        line(1200, "POINT_IN_TIME", "eval_accuracy", 0.5, epoch_num=2_000_000),
    ]
    run = read_mllog(lines)
    assert run.series["val_accuracy"] == [0.25]
    assert any("val_accuracy" in n and "2000000" in n for n in run.notes)


def test_a_log_without_run_stop_is_not_called_killed(tmp_path: Path) -> None:
    """Whether the job ended well is the job's exit to say, not the log's (issue 27)."""
    out = tmp_path / "local.out"
    lines = [
        line(0, "INTERVAL_START", "run_start"),
        line(0, "INTERVAL_START", "epoch_start", epoch_num=0),
        line(500, "INTERVAL_END", "epoch_stop", epoch_num=0, samples_count=100),
    ]
    out.write_text("\n".join(lines) + "\n")
    notes = _mllog_columns(out, {}, {})
    (said,) = [n for n in notes if "run_stop" in n]
    assert "no MLLOG run_stop logged" in said
    assert "killed" not in said and "still running" not in said and "did not finish" not in said
    write_exit_record(tmp_path, exit_code=0)  # as the job script leaves it
    (said,) = [n for n in _mllog_columns(out, {}, {}) if "run_stop" in n]
    assert "no MLLOG run_stop logged (the job ended with exit code 0)" in said
    assert "killed" not in said and "still running" not in said


def _same(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w)) or g == w for g, w in zip(got, want, strict=True)
    )


# A real program printing what the references print: mode "blocks" the two blocks above,
# mode "nosamples" epochs with no count of samples at all.
PROGRAM = f"""\
import json, sys
BLOCKS = {json.dumps(BLOCKS)}
NOSAMPLES = {
    json.dumps(
        [
            line(0, "INTERVAL_START", "run_start"),
            line(0, "INTERVAL_START", "epoch_start", epoch_num=0),
            line(500, "INTERVAL_END", "epoch_stop", epoch_num=0),
            line(600, "INTERVAL_END", "run_stop", status="success"),
        ]
    )
}
for text in (BLOCKS if sys.argv[1] == "blocks" else NOSAMPLES):
    print(text, flush=True)
"""

BODY = """\
name: mlblocks
workload:
  command: python blocks.py "{args.mode}"
  metrics: mllog
  args: {mode: blocks}
system: local
matrix: {layout: "1x1", batch: 4, args.mode: [blocks, nosamples]}
"""


def test_a_program_logging_blocks_is_measured_and_the_readers_reason_reaches_data_quality(
    tmp_path: Path, workdir: Path
) -> None:
    path = campaign(tmp_path, BODY, PROGRAM, "blocks.py")
    hpcscale("submit", str(path), "--backend", "local", check=True)
    proc = hpcscale("collect", str(path))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said  # one run without a figure
    assert "no samples_count, train_samples or global_batch_size" in said
    (row,) = load_results("mlblocks").to_dict("records")
    assert list(row["epoch_times_s"]) == [2.0, 2.0, 1.0, 1.0]
    assert list(row["block_times_s"]) == [4.0, 2.0]
    assert row["images_per_s"] == pytest.approx(800 / 6)
    assert _same(list(row["val_accuracy"]), [math.nan, 0.5, math.nan, 0.75])
    hpcscale("report", "mlblocks", check=True)
    md = (workdir / "mlblocks" / "report" / "index.md").read_text()
    quality = md[md.index("Data quality") :]
    assert "no samples_count, train_samples or global_batch_size" in quality
