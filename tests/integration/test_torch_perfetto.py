"""#32: `hpcscale trace RUN OUT` on a PyTorch run merges every rank's profiler trace into one
Chrome-trace file: each rank its own process ("rank r"), its threads apart from the other
rank's, its time stamps moved onto one clock. The run is test_torch_timeline.py's real 2-rank
gloo DDP campaign (its fixture, shared: one run per session). Every expected figure comes from
the rank files themselves (json.load), never from the merge's code; a cut rank gives what it
holds and the command says so."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import hpcscale
from tests.integration.test_torch_timeline import traced  # noqa: F401  (the shared run)
from tests.torch_fixture import needs_torch

pytestmark = [needs_torch, pytest.mark.mpi]


def _events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's events less metadata (process and thread names are the merge's own)."""
    return [e for e in doc["traceEvents"] if e.get("ph") != "M"]


def _kinds(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((e["ph"], e.get("name", "")) for e in events)


def _merge(run_dir: Path, out: Path) -> tuple[dict[str, Any], str]:
    proc = hpcscale("trace", str(run_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out) as f:  # whole JSON, as a viewer needs it
        return json.load(f), proc.stdout + proc.stderr


def _rank_pids(doc: dict[str, Any]) -> dict[int, int]:
    """rank -> pid, from the merged file's process names ("rank r")."""
    return {
        int(e["args"]["name"].split()[1]): e["pid"]
        for e in doc["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "process_name"
        and e["args"]["name"].startswith("rank ")
    }  # fmt: skip


def test_every_rank_in_one_trace_on_one_clock(
    traced: dict[int, dict[str, Any]],  # noqa: F811
    tmp_path: Path,
) -> None:
    run_dir = Path(traced[8]["run_dir"])
    sources = {}
    for r in (0, 1):
        with open(run_dir / "traces" / f"rank{r}.json") as f:
            sources[r] = json.load(f)
    doc, said = _merge(run_dir, tmp_path / "merged.json")
    pids = _rank_pids(doc)
    assert sorted(pids) == [0, 1] and pids[0] != pids[1]
    assert "2 ranks" in said
    base = min(src["baseTimeNanoseconds"] for src in sources.values())
    assert doc["baseTimeNanoseconds"] == base
    tids = {}
    for r, src in sources.items():
        mine = [e for e in _events(doc) if e["pid"] == pids[r]]
        want = _events(src)
        assert len(mine) == len(want) > 0
        assert _kinds(mine) == _kinds(want)  # every event of the rank, and only those
        # the same times on the common clock: each moved by the rank's base less the earliest
        shift = (src["baseTimeNanoseconds"] - base) / 1000
        got = sorted(e["ts"] for e in mine if e["ph"] == "X")
        expect = sorted(e["ts"] + shift for e in want if e["ph"] == "X")
        assert got == pytest.approx(expect, abs=2e-3)
        # threads kept apart: as many as the rank's trace had (pid, tid) pairs
        tids[r] = {e["tid"] for e in mine}
        assert len(tids[r]) == len({(e.get("pid"), e.get("tid")) for e in want})
    assert not tids[0] & tids[1]
    # the run's steps.json on the same clock: each traced step lies among its timed steps
    with open(run_dir / "steps.json") as f:
        steps = json.load(f)
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert len(marks) == len(steps["start_ns"]) == 8
    lo = min(e["ts"] for e in marks)
    hi = max(e["ts"] + e["dur"] for e in marks)
    profiled = [
        e for e in doc["traceEvents"]
        if e["pid"] == pids[0] and str(e.get("name")).startswith("ProfilerStep#")
    ]  # fmt: skip
    assert len(profiled) == 3
    assert all(e["ts"] < hi and e["ts"] + e["dur"] > lo for e in profiled)


def test_a_cut_rank_is_merged_with_what_it_holds(
    traced: dict[int, dict[str, Any]],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Rank 1 killed mid-write (its file cut inside an event), rank 0 gzip: rank 0 whole, rank
    1 up to its last whole event, and the command names rank 1 as cut."""
    run_dir = tmp_path / "run"
    shutil.copytree(traced[3]["run_dir"], run_dir)
    traces = run_dir / "traces"
    whole0 = json.loads((traces / "rank0.json").read_text())
    with gzip.open(traces / "rank0.json.gz", "wb") as f:
        f.write((traces / "rank0.json").read_bytes())
    (traces / "rank0.json").unlink()
    text = (traces / "rank1.json").read_bytes()
    cut = text.index(b'"gloo:all_reduce"', len(text) // 2)  # inside an event, mid-file
    (traces / "rank1.json").write_bytes(text[:cut])
    # what the cut file holds, as json.load reads it once the cut event is dropped
    head = json.loads(text[: text.rindex(b"{", 0, cut)].rstrip().rstrip(b",") + b"]}")
    doc, said = _merge(run_dir, tmp_path / "merged.json")
    pids = _rank_pids(doc)
    assert "rank 1: rank1.json is cut short" in said
    kept1 = [e for e in _events(doc) if e["pid"] == pids[1]]
    assert _kinds(kept1) == _kinds(_events(head))
    assert 0 < len(kept1) < len(_events(json.loads(text)))
    kept0 = [e for e in _events(doc) if e["pid"] == pids[0]]
    assert _kinds(kept0) == _kinds(_events(whole0))
