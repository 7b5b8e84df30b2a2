"""The bundled DDP program traced end to end (issue 32): a real 2-rank gloo DCGAN campaign run by
`hpcscale submit --backend local` with `collect: {timeline: true, trace_window: ...}`, each rank
writing traces/rank<r>.json, then `hpcscale collect --timeline`. The communication in the results
must equal the union of rank 0's `gloo:*` spans as this test computes it from the file itself
(json.load and a merge), not with the reader's code. Two cells: a window holding every timed
step (per-epoch figures) and one holding 3 of 8 (per-step figures only, nothing scaled up)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from hpcscale.collect.collector import load_results
from hpcscale.collect.run_row import run_row
from tests.conftest import hpcscale
from tests.torch_fixture import needs_torch, shim_env

pytestmark = [needs_torch, pytest.mark.mpi]

SKIP, STEPS = 1, 3  # the window: the burn-in step left out, then 3 steps
CAMPAIGN = f"""\
name: ddp_traced
workload:
  model: dcgan
  epochs: 1
  args: {{image_size: 32, burn_in_steps: 1}}
system: local
scaling: weak
matrix:
  strategy: torch_ddp
  layout: "2x1"
  batch: 16
  args.steps_per_epoch: [3, 8]
collect: {{timeline: true, trace_window: {{skip: {SKIP}, steps: {STEPS}}}}}
"""


def _gloo_spans(doc: dict[str, Any]) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e["name"].startswith("gloo:")
    ]


def _union_us(spans: list[tuple[float, float]]) -> float:
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            total += 0.0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (0.0 if cur is None else cur[1] - cur[0])


def _allreduce_bytes(doc: dict[str, Any]) -> int:
    """record_shapes: each gloo all-reduce's input tensors' elements x 4 (float32)."""
    out = 0
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e["name"] == "gloo:all_reduce":
            for dims in e["args"]["Input Dims"]:
                out += 4 * math.prod(dims)
    return out


SHARED: dict[int, dict[str, Any]] = {}  # one run per session: test_torch_perfetto.py uses it


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """steps_per_epoch -> its results row (a plain dict) and run directory."""
    if SHARED:
        return SHARED
    tmp = tmp_path_factory.mktemp("traced")
    path = tmp / "ddp_traced.yaml"
    path.write_text(CAMPAIGN)
    env = {**shim_env(tmp / "lib"), "HPCSCALE_WORKDIR": str(tmp / "runs")}
    proc = hpcscale("submit", str(path), "--backend", "local", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = hpcscale("collect", str(path), "--timeline", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCSCALE_WORKDIR", env["HPCSCALE_WORKDIR"])
        df = load_results("ddp_traced")
    assert len(df) == 2 and set(df["state"]) == {"COMPLETED"}
    SHARED.update({int(r["args.steps_per_epoch"]): r for r in df.to_dict("records")})
    return SHARED


def test_each_rank_writes_its_trace_of_the_window(traced: dict[int, dict[str, Any]]) -> None:
    for row in traced.values():
        run_dir = Path(row["run_dir"])
        names = sorted(p.name for p in (run_dir / "traces").iterdir())
        assert names == ["rank0.json", "rank1.json"]  # renamed from .tmp: no .tmp left
        argv = json.loads((run_dir / "ddp.json").read_text())
        assert argv["trace_window"] == {"skip": SKIP, "steps": STEPS}
        for name in names:
            doc = json.loads((run_dir / "traces" / name).read_text())
            marks = [e for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep#")]
            # the burn-in step (#0) skipped, then the window's 3 steps
            assert sorted(e["name"] for e in marks) == [f"ProfilerStep#{n}" for n in (1, 2, 3)]
            assert doc["distributedInfo"]["world_size"] == 2 and _gloo_spans(doc)


def test_a_window_of_every_timed_step_gives_the_union_of_its_gloo_spans(
    traced: dict[int, dict[str, Any]],
) -> None:
    row = traced[3]  # 3 timed steps, all in the window: one epoch
    doc = json.loads((Path(row["run_dir"]) / "traces" / "rank0.json").read_text())
    spans = _gloo_spans(doc)
    assert row["comm_s"] > 0
    # the reader rounds each merged interval to whole µs: at most 1 µs per span
    assert abs(row["comm_s"] * 1e6 - _union_us(spans)) <= len(spans)
    assert row["allreduce_bytes_per_step"] == _allreduce_bytes(doc) / STEPS
    assert not math.isnan(row["exact_compute_s"]) and row["exact_compute_s"] > 0


def test_a_shorter_window_gives_per_step_figures_only(
    traced: dict[int, dict[str, Any]],
) -> None:
    row = traced[8]  # 3 of 8 timed steps traced
    doc = json.loads((Path(row["run_dir"]) / "traces" / "rank0.json").read_text())
    for col in ("comm_s", "waits_in_comm_s", "exact_compute_s", "exact_overlap_s"):
        assert math.isnan(row[col]), col  # no per-epoch figure scaled up from the window
    assert row["allreduce_bytes_per_step"] == _allreduce_bytes(doc) / STEPS > 0
    assert row["span_s"] > 0
    # what the window can say: per traced step, rank 0's gloo spans unioned here (the profiler
    # recorded only the window's steps), over the 3 steps; 1 µs of rounding per span and step
    assert row["traced_steps"] == STEPS
    spans = _gloo_spans(doc)
    assert abs(row["comm_per_step_s"] * 1e6 - _union_us(spans) / STEPS) <= len(spans) + STEPS
    assert row["compute_per_step_s"] > 0
    split = row["overlap_per_step_s"] + row["exposed_comm_per_step_s"]
    assert abs(split - row["comm_per_step_s"]) <= 1e-6 * STEPS
    _, notes = run_row(Path(row["run_dir"]), timeline=True)
    assert any("holds 3 of the 8 timed steps: per-step figures only" in n for n in notes), notes


def test_unknown_waits_are_empty_not_zero(
    traced: dict[int, dict[str, Any]], tmp_path: Path
) -> None:
    """Rank 1's trace gone: no cross-rank match, so the waits are unknown (NaN) and the note
    names the reader's files; the communication is still rank 0's union."""
    run_dir = tmp_path / "run"
    shutil.copytree(traced[3]["run_dir"], run_dir)
    (run_dir / "traces" / "rank1.json").unlink()
    row, notes = run_row(run_dir, timeline=True)
    for col in ("waits_in_comm_s", "wait_for_data_s", "wait_for_other_tensor_data_s"):
        assert math.isnan(row[col]), col
    assert any(n.startswith("traces/rank<r>.json[.gz]: waits unknown") for n in notes), notes
    doc = json.loads((run_dir / "traces" / "rank0.json").read_text())
    spans = _gloo_spans(doc)
    assert abs(row["comm_s"] * 1e6 - _union_us(spans)) <= len(spans)
    full, _ = run_row(Path(traced[3]["run_dir"]), timeline=True)
    assert not math.isnan(full["waits_in_comm_s"])  # both ranks: waits matched
