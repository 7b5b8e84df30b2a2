"""A collect of unchanged runs (#28: the collect inside every `hpcscale report`) reads no run's
files beyond their stats and writes nothing, and what it returns is what a full collect returns;
anything that changes what the results files hold writes them again.

The campaign is test_collect.py's: real runs (jobs/tf/train.py under mpirun and horovodrun), a
corrupt one, an unfinished one and one with an empty timeline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from hpcscale.collect import collector
from hpcscale.collect.collector import (
    CACHE_FILE,
    RESULTS_CSV,
    RESULTS_PARQUET,
    collect_campaign,
    frame_of,
)
from hpcscale.collect.run_row import planned_row
from hpcscale.formats.outputs import all_outputs
from tests.integration.test_collect import campaign  # noqa: F401  (fixture)
from tests.timeline_fixture import real_runs_fixture  # noqa: F401  (fixture)

pytestmark = [pytest.mark.horovod, pytest.mark.mpi]
FILES = (RESULTS_PARQUET, RESULTS_CSV, CACHE_FILE)


def stats(cdir: Path) -> dict[str, tuple[int, int]]:
    """Inode and mtime of the files collect writes: a file written again (atomically) has a
    new inode."""
    return {n: ((st := (cdir / n).stat()).st_ino, st.st_mtime_ns) for n in FILES}


@pytest.fixture
def planned_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run directories whose run.json collect turns into planned fields."""
    calls: list[str] = []

    def counting(d: Path):  # -> dict | None
        calls.append(Path(d).name)
        return planned_row(d)

    monkeypatch.setattr(collector, "planned_row", counting)
    return calls


def test_a_collect_of_unchanged_runs_writes_nothing_and_rebuilds_no_planned_row(
    campaign: dict[str, Path],  # noqa: F811
    planned_calls: list[str],
) -> None:
    cdir = campaign["dir"]
    first = collect_campaign(cdir, timeline=True, progress=False)
    before = stats(cdir)
    texts = {n: (cdir / n).read_bytes() for n in FILES}
    measured = {r["run_id"] for r in first.rows}
    assert set(planned_calls) >= measured  # read once, the first time
    del planned_calls[:]
    again = collect_campaign(cdir, timeline=True, progress=False)
    assert stats(cdir) == before  # neither the results nor the cache written again
    assert {n: (cdir / n).read_bytes() for n in FILES} == texts
    # the measured runs' planned fields come from their cache entries (the corrupt and the
    # unfinished run, which have no row, are read again as every time)
    assert not set(planned_calls) & measured
    assert again.planned == first.planned
    pd.testing.assert_frame_equal(again.frame, first.frame)
    assert (again.unfinished, again.not_completed) == (first.unfinished, first.not_completed)
    assert [(p.run_id, p.reason) for p in again.problems] == [
        (p.run_id, p.reason) for p in first.problems
    ]


def test_the_results_are_written_again_when_what_they_hold_may_have_changed(
    campaign: dict[str, Path],  # noqa: F811
) -> None:
    cdir = campaign["dir"]
    collect_campaign(cdir, timeline=True, progress=False)
    # removed by hand: written again
    (cdir / RESULTS_CSV).unlink()
    collect_campaign(cdir, timeline=True, progress=False)
    assert (cdir / RESULTS_CSV).is_file()
    # edited by hand (other stats): written again, as collect writes it
    before = stats(cdir)
    written = (cdir / RESULTS_CSV).read_text()
    (cdir / RESULTS_CSV).write_text("run_id\nedited\n")
    collect_campaign(cdir, timeline=True, progress=False)
    assert (cdir / RESULTS_CSV).read_text() == written
    assert stats(cdir)[RESULTS_CSV] != before[RESULTS_CSV]
    # a run's metrics changed: its row, and the files, are new
    metrics = campaign["gloo"] / "metrics.json"
    data = json.loads(metrics.read_text())
    data["fit_time_s"] = 321.0
    metrics.write_text(json.dumps(data))
    st = metrics.stat()
    os.utime(metrics, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    got = collect_campaign(cdir, timeline=True, progress=False)
    table = pd.read_csv(cdir / RESULTS_CSV).set_index("run_id")
    assert table.loc[campaign["gloo"].name, "fit_time_s"] == 321.0
    pd.testing.assert_frame_equal(
        pd.read_parquet(cdir / RESULTS_PARQUET)[["run_id", "fit_time_s"]],
        frame_of([*got.rows, *got.unmeasured_rows])[["run_id", "fit_time_s"]],
    )
    # a run left out (stale, here: its directory gone) is out of the files too
    before = stats(cdir)
    gone = campaign["mpi"]
    (gone / "run.json").rename(gone / "run.json.away")
    got = collect_campaign(cdir, timeline=True, progress=False)
    assert gone.name not in set(pd.read_csv(cdir / RESULTS_CSV)["run_id"])
    assert stats(cdir)[RESULTS_PARQUET] != before[RESULTS_PARQUET]


def test_an_older_cache_without_planned_fields_gives_the_same_planned_runs(
    campaign: dict[str, Path],  # noqa: F811
    planned_calls: list[str],
) -> None:
    """A cache written before entries held planned fields: they are read from run.json once
    more, and the cache saved with them."""
    cdir = campaign["dir"]
    first = collect_campaign(cdir, timeline=True, progress=False)
    data = json.loads((cdir / CACHE_FILE).read_text())
    for entry in data["entries"].values():
        entry.pop("planned", None)
    (cdir / CACHE_FILE).write_text(json.dumps(data))
    del planned_calls[:]
    again = collect_campaign(cdir, timeline=True, progress=False)
    assert again.planned == first.planned
    measured = {r["run_id"] for r in first.rows}
    assert set(planned_calls) >= measured
    saved = json.loads((cdir / CACHE_FILE).read_text())["entries"]
    assert all("planned" in saved[rid] for rid in measured)


def test_the_outputs_fingerprinted_are_those_all_outputs_names(tmp_path: Path) -> None:
    """collect lists a run directory once instead of globbing per scheduler: the same names in
    the same order, dangling links and directories included as pathlib's glob includes them."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "slurm-12.out").write_text("x")
    (d / "slurm-3.out").write_text("x")
    (d / "slurm-dir.out").mkdir()
    (d / "slurm-9.out").symlink_to(tmp_path / "nowhere")
    (d / "slurm-.out.bak").write_text("x")
    (d / "metrics.json").write_text("{}")
    assert collector._outputs(d) == [str(p) for p in all_outputs(d)]
    (d / "local.out").write_text("x")
    assert collector._outputs(d) == [str(p) for p in all_outputs(d)]
    (d / "local.out").unlink()
    (d / "local.out").symlink_to(tmp_path / "nowhere")  # dangling: no output, as for glob
    assert collector._outputs(d) == [str(p) for p in all_outputs(d)]
    gone = tmp_path / "gone"
    assert collector._outputs(gone) == [str(p) for p in all_outputs(gone)] == []
