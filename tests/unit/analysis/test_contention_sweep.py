"""The shared-machine check as a sweep line per machine: a summary per run (how many
other runs overlapped it, the most runs at once on its machine while it ran) instead of every
pair, and `mark_flagged` joining a knob sweep's identical cells once. Expected values are worked
out by hand from the intervals below; the 1,000-run timing is bench/report_bench.py --overlap.
"""

from __future__ import annotations

import pandas as pd

from hpcscale.analysis import contention
from hpcscale.analysis.quality import overlap_check
from hpcscale.report.model import Table
from hpcscale.report.sections.quality import FLAGS_COLUMN, mark_flagged

A, B = "boot:aaaa", "boot:bbbb"


def row(rid: str, start: float, end: float, machines: str, hosts: str = "h") -> dict:
    return {
        "run_id": rid,
        "started_unix_s": start,
        "finished_unix_s": end,
        "machines": machines,
        "hostnames": hosts,
    }


def test_counts_and_peak_concurrency_on_one_machine() -> None:
    """On A: r1 [0,10), r2 [2,6), r3 [4,12), r4 [10,14) (starts as r1 ends), r5 [20,25)
    alone; r6 [0,30) alone on B.
    r1: r2 (2..6 = 4 s), r3 (4..10 = 6 s); at 4..6 r1, r2, r3 run at once: peak 3.
    r2: r1 (4 s), r3 (4..6 = 2 s); peak 3.  r3: r1 (6), r2 (2), r4 (10..12 = 2); peak 3.
    r4: r3 (2 s); at 10..12 r3 and r4 only (r1 ended at 10): peak 2."""
    runs = pd.DataFrame(
        [
            row("r1", 0, 10, A),
            row("r2", 2, 6, A),
            row("r3", 4, 12, A),
            row("r4", 10, 14, A),
            row("r5", 20, 25, A),
            row("r6", 0, 30, B),
        ]
    )
    ov = contention.Overlap
    assert contention.overlaps(runs) == {
        "r1": ov(2, 3, (("r2", 4.0), ("r3", 6.0))),
        "r2": ov(2, 3, (("r1", 4.0), ("r3", 2.0))),
        "r3": ov(3, 3, (("r1", 6.0), ("r2", 2.0), ("r4", 2.0))),
        "r4": ov(1, 2, (("r3", 2.0),)),
    }


def test_a_run_on_two_machines_counts_each_other_run_once() -> None:
    """m on A and B [0,10); x on A [5,8); y on B [1,3); z on A and B [2,4).
    m: x, y, z (z shares both machines, counted once) = 3; on B at 2..3 m, y, z: peak 3.
    z: m (2..4 = 2 s), y (2..3 = 1 s) = 2, peak 3 (on B).  x: m only; on A m, x: peak 2.
    y: m, z; peak 3."""
    runs = pd.DataFrame(
        [
            row("m", 0, 10, f"{A},{B}", "n1,n2"),
            row("x", 5, 8, A, "n1"),
            row("y", 1, 3, B, "n2"),
            row("z", 2, 4, f"{A},{B}", "n1,n2"),
        ]
    )
    found = contention.overlaps(runs)
    assert {k: (v.others, v.peak) for k, v in found.items()} == {
        "m": (3, 3),
        "x": (1, 2),
        "y": (2, 3),
        "z": (2, 3),
    }
    assert found["z"].named == (("m", 2.0), ("y", 1.0))


def test_many_overlapping_runs_are_summarised_not_listed() -> None:
    """Six runs on A, run k over [k, 100 + k): every one overlaps the five others, and all six
    run at once over [5, 100). More than NAMED_OTHERS (3) others: counted, not named, in the
    flag and in the superlinear check's note on a contaminated baseline."""
    runs = pd.DataFrame([row(f"k{k}", k, 100 + k, A) for k in range(6)])
    found = contention.overlaps(runs)
    assert found == {f"k{k}": contention.Overlap(5, 6) for k in range(6)}
    flags = {f.run_id: f.reason for f in overlap_check(runs)}
    assert set(flags) == set(found)
    assert "ran at the same time as 5 other runs (up to 6 runs at once)" in flags["k0"]
    tainted = contention.contaminated_runs(
        ("overlap", f) for f in contention.overlap_findings(runs)
    )
    assert tainted["k3"] == "ran alongside 5 other runs (up to 6 at once)"


def test_runs_without_boot_ids_meet_every_run_by_hostname() -> None:
    """old (no boot id) on host h [0,10) meets new1 (boot A, host h) [5,15): 5 s; new1 and
    new2 (boot B, host h) [6,8) do not meet: both recorded boot ids and they differ. old and
    new2 meet (6..8 = 2 s)."""
    runs = pd.DataFrame(
        [
            row("old", 0, 10, None),
            row("new1", 5, 15, A),
            row("new2", 6, 8, B),
        ]
    )
    found = contention.overlaps(runs)
    assert found["old"].named == (("new1", 5.0), ("new2", 2.0))
    assert found["new1"].named == (("old", 5.0),) and found["new2"].named == (("old", 2.0),)


def test_identical_flagged_cells_mark_each_row_once() -> None:
    """A knob sweep's copies: 4 cells alike in model, batch and images/s at each of 2 ranks
    (the table's rows repeat them), one of them also busy: every row of its figures gets the
    union of their kinds, in order."""
    cells = pd.DataFrame(
        {
            "model": "dcgan",
            "axis": "ranks",
            "axis_value": [1, 1, 1, 1, 2, 2, 2, 2],
            "images_per_s": [100.0] * 4 + [180.0] * 4,
            "batch_per_rank": 16,
            "flags": ["overlap"] * 4 + ["overlap", "overlap, busy", "overlap", "overlap"],
        }
    )
    frame = pd.DataFrame({"Model": "dcgan", "Images/s": cells["images_per_s"]})
    out = mark_flagged(
        Table("batch", "Batch", frame), cells, {"Model": "model", "Images/s": "images_per_s"}
    )
    assert list(out.frame[FLAGS_COLUMN]) == ["overlap"] * 4 + ["overlap, busy"] * 4
    assert "Left out" not in out.note
