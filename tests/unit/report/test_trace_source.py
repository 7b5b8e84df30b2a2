"""Issue 32's report part: every figure read from a trace says which trace it came from (the
collector's `trace_source`: "Horovod timeline" or "PyTorch profiler"), per cell where a section
mixes Horovod and PyTorch DDP cells, and `compare` shows both campaigns' communication with its
source. The rows are built by hand: their communication, epoch times and bandwidths are chosen
here, so every expected share is worked out in the comments; the collector's column is checked
on test_torch_trace's hand-made traces and a two-event Horovod timeline."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hpcscale.analysis import EXACT_COLUMNS
from hpcscale.analysis import compare as cmp
from hpcscale.collect.run_row import _timeline_columns
from hpcscale.collect.table import COLUMNS, frame_of, parquet_bytes
from hpcscale.formats.run_record import RunRecord
from hpcscale.report.compare import aligned_section
from hpcscale.report.model import Section
from hpcscale.report.sections import campaign_report
from tests.unit.collect.test_torch_trace import RANK0, RANK1, write

HVD = "Horovod timeline"
TORCH = "PyTorch profiler"
NAN = float("nan")


# ---------------------------------------------------------------- the collector's column


def _columns(run: Path, strategy: str) -> dict[str, Any]:
    """The collector's timeline columns of a 2-rank run of `strategy` in `run`."""
    rec = RunRecord(
        campaign="c", system="local", model="dcgan", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=2, threads_per_task=1, gpus_per_node=0, batch_per_rank=16,
        global_batch=32, strategy=strategy, timeline=True, run_id="r1", ranks=2, replicas=2,
    )  # fmt: skip
    row: dict[str, Any] = {"timeline": True, "ranks": 2, "command": None,
                           "timeline_truncated": False, "timeline_coverage": NAN}  # fmt: skip
    row.update(dict.fromkeys(EXACT_COLUMNS, NAN))
    _timeline_columns(run, row, rec, 1, 1)
    return row


def test_the_row_names_the_trace_its_split_came_from(tmp_path: Path) -> None:
    torch_run, hvd_run, bare = tmp_path / "t", tmp_path / "h", tmp_path / "b"
    for d in (torch_run, hvd_run, bare):
        d.mkdir()
    write(torch_run, 0, RANK0)
    write(torch_run, 1, RANK1)
    (hvd_run / "timeline.json").write_text(
        json.dumps(
            [{"ph": "B", "name": "ALLREDUCE", "ts": 3, "pid": 1}, {"ph": "E", "ts": 8, "pid": 1}]
        )
    )
    torch_row = _columns(torch_run, "torch_ddp")
    assert torch_row["trace_source"] == TORCH
    assert torch_row["comm_s"] == pytest.approx(390e-6)  # rank 0's [1310, 1700) µs
    hvd_row = _columns(hvd_run, "horovod")
    assert hvd_row["trace_source"] == HVD
    assert hvd_row["comm_s"] == pytest.approx(5e-6)  # 3 µs to 8 µs
    assert "trace_source" not in _columns(bare, "torch_ddp")  # no trace read: run_row's ""
    assert "trace_source" in COLUMNS


def test_results_without_the_column_still_load_as_unknown() -> None:
    old = frame_of([{"run_id": "a", "comm_s": 1.0}])  # a row collected before the column
    assert "trace_source" in old.columns and old["trace_source"].isna().all()
    mixed = frame_of([{"run_id": "a", "trace_source": TORCH}, {"run_id": "b"}])
    back = pd.read_parquet(io.BytesIO(parquet_bytes(mixed)))
    assert back["trace_source"].iloc[0] == TORCH and pd.isna(back["trace_source"].iloc[1])


# ---------------------------------------------------------------- hand-built runs


def _run(run_id: str, strategy: str, ranks: int, epoch: float, comm: float, **extra: Any) -> dict:
    """One measured run: 10 steps of 8 images a rank per epoch, `comm` s of communication a
    epoch, a quarter of it waiting; `extra` overrides (trace_source, bus_bandwidth_gbs, ...)."""
    row = dict.fromkeys(COLUMNS, np.nan)
    row.update(
        run_id=run_id, campaign="c", model="dcgan", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=ranks, threads_per_task=1, gpus_per_node=0, ranks=ranks,
        batch_per_rank=8, global_batch=8 * ranks, strategy=strategy, mpi="openmpi", repeat=0,
        epoch_time_s=epoch, images_per_s=80 * ranks / epoch, fp16_allreduce=False,
        hierarchical_allreduce=False, mixed_precision=False, losses={}, epoch_times_s=[epoch],
        val_accuracy=None, state="COMPLETED", comm_s=comm, waits_in_comm_s=comm / 4,
        wait_for_data_s=comm / 4, wait_for_other_tensor_data_s=0.0, param_count=1000,
        allreduce_bytes_per_step=4000, timeline=True, steps_per_epoch=10, dataset_size=80,
    )  # fmt: skip
    row.update(extra)
    return row


# Horovod: 1 rank 10 s (no communication), 2 ranks 6 s with 2 s of it (share 2/6 = 33.3 %);
# DDP: 1 rank 8 s, 2 ranks 5 s with 1 s (share 1/5 = 20 %). Bandwidth: Horovod 1.5, DDP 2.5 GB/s
HVD_RUNS = [
    _run("h1", "horovod", 1, 10.0, 0.0, trace_source=HVD),
    _run("h2", "horovod", 2, 6.0, 2.0, trace_source=HVD, bus_bandwidth_gbs=1.5),
]
DDP_RUNS = [
    _run("t1", "torch_ddp", 1, 8.0, 0.0, trace_source=TORCH),
    _run("t2", "torch_ddp", 2, 5.0, 1.0, trace_source=TORCH, bus_bandwidth_gbs=2.5),
]
BY_EPOCH = {10.0: HVD, 6.0: HVD, 8.0: TORCH, 5.0: TORCH}  # each run's epoch time: its source


def _sections(rows: list[dict]) -> dict[str, Section]:
    return {s.key: s for s in campaign_report(frame_of(rows), "c").sections}


def _table(section: Section, key: str) -> pd.DataFrame:
    return next(t.frame for t in section.tables if t.key == key)


def test_mixed_cells_are_labelled_per_cell_in_the_overlap_section() -> None:
    sec = _sections(HVD_RUNS + DDP_RUNS)["overlap"]
    table = _table(sec, "overlap")
    got = dict(zip(table["Epoch time (s)"], table["From"], strict=True))
    assert got == BY_EPOCH
    assert sec.text[0].startswith(
        "From the Horovod timeline or the PyTorch profiler traces (the From column says which "
        "per cell), per epoch"
    )


def test_one_source_is_named_in_the_text_and_not_as_the_horovod_timeline() -> None:
    sec = _sections(DDP_RUNS)["overlap"]
    assert sec.text[0].startswith("From the PyTorch profiler traces, per epoch")
    assert "From" not in _table(sec, "overlap").columns  # one source: the text says it


def test_results_without_a_source_are_said_unknown_not_horovod() -> None:
    old = [{**r, "trace_source": NAN} for r in HVD_RUNS]  # collected before the column
    sec = _sections(old)["overlap"]
    assert sec.text[0].startswith("From the run's trace (which kind was not recorded")


def test_the_efficiency_section_labels_each_communication_share() -> None:
    sec = _sections(HVD_RUNS + DDP_RUNS)["efficiency"]
    table = _table(sec, "overhead")
    share = next(c for c in table.columns if c.startswith("Comm. share of epoch"))
    assert "Horovod" not in share  # the column's own name claims no one trace
    got = {(s, round(v, 6)) for s, v, r in zip(table["Strategy"], table[share], table["Ranks"],
                                                strict=True) if r == 2}  # fmt: skip
    assert {(s.split(" ")[0], v) for s, v in got} == {("Horovod", 33.333333), ("PyTorch", 20.0)}
    # every row, the baselines too (equal in model, ranks, efficiency 1 and share 0)
    froms = {(s.split(" ")[0], r): f for s, r, f in zip(table["Strategy"], table["Ranks"],
                                                        table["From"], strict=True)}  # fmt: skip
    assert froms == {("Horovod", 1): HVD, ("Horovod", 2): HVD, ("PyTorch", 1): TORCH,
                     ("PyTorch", 2): TORCH}  # fmt: skip
    assert "from the Horovod timeline or the PyTorch profiler traces" in " ".join(sec.text)


def test_no_trace_names_the_switch_for_both_frameworks() -> None:
    bare = [{**r, "comm_s": NAN, "trace_source": ""} for r in HVD_RUNS + DDP_RUNS]
    text = " ".join(_sections(bare)["efficiency"].text)
    assert "No communication share is measured without a trace" in text
    assert "PyTorch profiler" in text and "Horovod timeline" in text
    assert "`collect: {timeline: true}`" in text and "`collect --timeline`" in text


def test_the_bandwidth_table_says_where_each_bandwidth_came_from() -> None:
    sec = _sections(HVD_RUNS + DDP_RUNS)["extrapolation"]
    table = _table(sec, "comm_cost")
    got = set(zip(table["Bandwidth (GB/s)"], table["From"], strict=True))
    assert got == {(1.5, HVD), (2.5, TORCH)}
    assert "measured from the Horovod timeline or the PyTorch profiler traces" in " ".join(sec.text)


def test_a_knob_section_names_its_source() -> None:
    # mixed precision off and on, at 2 ranks, under DDP: 5 s / 1 s and 4 s / 0.5 s
    rows = [DDP_RUNS[1], _run("t3", "torch_ddp", 2, 4.0, 0.5, trace_source=TORCH,
                              mixed_precision=True)]  # fmt: skip
    sec = _sections(rows)["precision"]
    assert "Communication figures from the PyTorch profiler traces." in sec.text
    hvd = [HVD_RUNS[1], _run("h3", "horovod", 2, 4.5, 1.0, trace_source=HVD, fp16_allreduce=True)]
    sec = _sections(rows + hvd)["precision"]
    table = _table(sec, "precision")
    got = dict(zip(table["Epoch time (s)"], table["From"], strict=True))
    assert got == {5.0: TORCH, 4.0: TORCH, 6.0: HVD, 4.5: HVD}


# ---------------------------------------------------------------- compare


def test_compare_shows_both_campaigns_communication_with_its_source() -> None:
    h = frame_of([{**r, "campaign": "hvd"} for r in HVD_RUNS])
    t = frame_of([{**r, "campaign": "ddp"} for r in DDP_RUNS])
    cells = {"hvd": cmp.campaign_cells(h, "ranks"), "ddp": cmp.campaign_cells(t, "ranks")}
    aligned, keys = cmp.align(cells, "ranks")
    sec = aligned_section(aligned, ["hvd", "ddp"], "ranks", keys)
    table = _table(sec, "aligned")
    at2 = table[table["Ranks"] == 2].iloc[0]
    assert at2["hvd: Comm. share of epoch (%)"] == pytest.approx(100 * 2 / 6)
    assert at2["ddp: Comm. share of epoch (%)"] == pytest.approx(100 * 1 / 5)
    assert at2["hvd: Comm. from"] == HVD and at2["ddp: Comm. from"] == TORCH
    text = " ".join(sec.text)
    assert "hvd: the Horovod timeline; ddp: the PyTorch profiler traces" in text
    at1 = table[table["Ranks"] == 1].iloc[0]
    assert at1["ddp: Comm. share of epoch (%)"] == 0.0 and at1["ddp: Comm. from"] == TORCH
    assert not math.isnan(at1["hvd: Comm. share of epoch (%)"])
