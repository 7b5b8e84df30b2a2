"""Issue 32: a profiler trace whose window is shorter than the run leaves the per-epoch columns
empty and gives per-traced-step ones (`traced_steps`, `compute_per_step_s`, ...). The overlap
section must show those per-step figures, in a table of their own that says "per traced step"
and how many steps, instead of showing nothing. The rows are built by hand: every figure the
report prints is one chosen here (one run per cell, so a cell's median is its run's value)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hpcscale.collect.table import COLUMNS, frame_of
from hpcscale.report.markdown import table_md
from hpcscale.report.model import Section
from hpcscale.report.sections import campaign_report

NAN = float("nan")
COMPUTE, COMM, OVERLAP, EXPOSED = (
    "Compute per traced step (s)",
    "Communication per traced step (s)",
    "Overlapped communication per traced step (s)",
    "Exposed communication per traced step (s)",
)


def _run(run_id: str, ranks: int, epoch: float, **extra: Any) -> dict:
    """A DDP run with a profiler trace; no per-epoch split unless `extra` gives one."""
    row = dict.fromkeys(COLUMNS, np.nan)
    row.update(
        run_id=run_id, campaign="c", model="dcgan", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=ranks, threads_per_task=1, gpus_per_node=0, ranks=ranks,
        batch_per_rank=8, global_batch=8 * ranks, strategy="torch_ddp", mpi="openmpi",
        repeat=0, epoch_time_s=epoch, images_per_s=80 * ranks / epoch, fp16_allreduce=False,
        hierarchical_allreduce=False, mixed_precision=False, losses={}, epoch_times_s=[epoch],
        val_accuracy=None, state="COMPLETED", timeline=True, steps_per_epoch=10,
        dataset_size=80, trace_source="PyTorch profiler",
    )  # fmt: skip
    row.update(extra)
    return row


# Two cells traced over 3 steps of a longer run: per-step figures only. 1 rank: compute 0.25 s,
# no communication; 2 ranks: compute 0.375 s, communication 0.125 s of which 0.0625 s overlapped
# by compute, so 0.0625 s exposed (0.0625 + 0.0625 = 0.125).
WINDOWED = [
    _run("w1", 1, 4.0, traced_steps=3, compute_per_step_s=0.25, comm_per_step_s=0.0,
         overlap_per_step_s=0.0, exposed_comm_per_step_s=0.0),
    _run("w2", 2, 5.0, traced_steps=3, compute_per_step_s=0.375, comm_per_step_s=0.125,
         overlap_per_step_s=0.0625, exposed_comm_per_step_s=0.0625),
]  # fmt: skip


def _overlap(rows: list[dict]) -> Section:
    return next(s for s in campaign_report(frame_of(rows), "c").sections if s.key == "overlap")


def _table(sec: Section, key: str) -> pd.DataFrame:
    return next(t.frame for t in sec.tables if t.key == key)


def test_a_shorter_window_shows_its_per_step_figures() -> None:
    sec = _overlap(WINDOWED)
    tab = next(t for t in sec.tables if t.key == "overlap_per_step")
    assert tab.title == "Compute and communication per traced step (s)"
    frame = tab.frame
    assert frame["Traced steps"].tolist() == [3, 3]
    assert frame[COMPUTE].tolist() == [0.25, 0.375]
    assert frame[COMM].tolist() == [0.0, 0.125]
    assert frame[OVERLAP].tolist() == [0.0, 0.0625]
    assert frame[EXPOSED].tolist() == [0.0, 0.0625]
    assert not any("per epoch" in c.lower() or "%" in c for c in frame.columns)
    # the printed table holds the same numbers, one line per cell
    lines = table_md(frame).splitlines()
    cells = [[v.strip() for v in line.strip("|").split("|")] for line in lines[2:]]
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    got = [dict(zip(head, c, strict=True)) for c in cells]
    assert [float(g[COMPUTE]) for g in got] == [0.25, 0.375]
    assert [float(g[COMM]) for g in got] == [0.0, 0.125]
    assert [float(g[OVERLAP]) for g in got] == [0.0, 0.0625]
    assert [float(g[EXPOSED]) for g in got] == [0.0, 0.0625]
    assert [float(g["Traced steps"]) for g in got] == [3, 3]
    assert any("per traced step" in p and "Traced steps" in p for p in sec.text)


def test_per_step_and_per_epoch_cells_stay_in_separate_tables() -> None:
    """A cell with a whole-run trace keeps the per-epoch table; the windowed ones go to the
    per-step table, and neither table holds the other's figures."""
    whole = _run("e4", 4, 6.0, comm_s=1.5, waits_in_comm_s=0.5, wait_for_data_s=0.5,
                  wait_for_other_tensor_data_s=0.0, traced_steps=10, compute_per_step_s=0.45,
                  comm_per_step_s=0.15, overlap_per_step_s=0.05,
                  exposed_comm_per_step_s=0.1)  # fmt: skip
    sec = _overlap([*WINDOWED, whole])
    epoch = _table(sec, "overlap")
    assert epoch["Overall communication"].tolist() == [1.5]  # only the whole-run cell
    assert not any("per traced step" in c for c in epoch.columns)
    step = _table(sec, "overlap_per_step")
    assert step[COMM].tolist() == [0.0, 0.125]  # only the windowed cells
    assert "Overall communication" not in step.columns


def test_no_trace_at_all_still_gives_no_overlap_section() -> None:
    rows = [_run("n1", 1, 4.0, timeline=False, trace_source=NAN)]
    assert not any(s.key == "overlap" for s in campaign_report(frame_of(rows), "c").sections)


def test_a_flagged_windowed_cell_is_marked_in_the_per_step_table() -> None:
    """Two windowed runs that ran at the same time on one host are flagged (the shared-machine
    check); the per-step table marks both cells, as the per-epoch tables mark theirs."""
    same_host = dict(hostnames="n1", machines="boot-a")
    rows = [
        {**WINDOWED[0], **same_host, "started_unix_s": 100.0, "finished_unix_s": 200.0},
        {**WINDOWED[1], **same_host, "started_unix_s": 150.0, "finished_unix_s": 250.0},
    ]
    tab = next(t for t in _overlap(rows).tables if t.key == "overlap_per_step")
    assert "Flags" in tab.frame.columns, tab.frame.columns
    assert all("overlap" in str(v) for v in tab.frame["Flags"]), tab.frame["Flags"].tolist()
    assert "Data quality" in tab.note
