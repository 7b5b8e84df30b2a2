"""`collect.trace_window` (issue 32): it travels to a torch_ddp run that traces, and only there
(so no other run's id changes), and reaches jobs/torch/train.py as --timeline --trace-skip
--trace-steps; a run without a timeline gets no trace flag at all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hpcscale import frameworks
from hpcscale.api import plan_campaign
from hpcscale.model.errors import InputError
from hpcscale.model.system import load_system

CAMPAIGN = """\
name: traced
workload:
  model: dcgan
  args: {image_size: 32}
system: local
scaling: weak
matrix:
  strategy: [horovod, torch_ddp]
  layout: "2x1"
  batch: 16
"""


def _plan(tmp: Path, collect: str) -> dict[str, object]:
    path = tmp / "traced.yaml"
    path.write_text(CAMPAIGN + collect)
    _, plan = plan_campaign(path)
    return {r.strategy: r for r in plan.runs}


def _argv(run: object) -> list[str]:
    fw = frameworks.for_run(run)  # type: ignore[arg-type]
    system = load_system("local")
    return [str(x) for x in fw.argv(run, system, "/runs/r")]  # type: ignore[arg-type]


def test_the_window_reaches_a_traced_ddp_run_as_its_flags(tmp_path: Path) -> None:
    runs = _plan(tmp_path, "collect: {timeline: true, trace_window: {skip: 2, steps: 7}}\n")
    ddp, hvd = runs["torch_ddp"], runs["horovod"]
    assert ddp.trace_window == {"skip": 2, "steps": 7}  # type: ignore[attr-defined]
    assert hvd.trace_window is None  # type: ignore[attr-defined]  # a Horovod timeline: whole run
    argv = _argv(ddp)
    i = argv.index("--timeline")
    assert argv[i : i + 5] == ["--timeline", "--trace-skip", "2", "--trace-steps", "7"]
    # the defaults: skip 5, steps 20
    ddp = _plan(tmp_path, "collect: {timeline: true}\n")["torch_ddp"]
    assert ddp.trace_window == {"skip": 5, "steps": 20}  # type: ignore[attr-defined]
    assert _argv(ddp)[-5:] == ["--timeline", "--trace-skip", "5", "--trace-steps", "20"]


def test_no_timeline_no_trace_flags_and_the_same_run_ids(tmp_path: Path) -> None:
    plain = _plan(tmp_path, "")
    off = _plan(tmp_path, "collect: {timeline: false}\n")
    for strategy, run in plain.items():
        assert run.trace_window is None  # type: ignore[attr-defined]
        assert run.run_id == off[strategy].run_id  # type: ignore[attr-defined]
    argv = _argv(plain["torch_ddp"])
    assert not {"--timeline", "--trace-skip", "--trace-steps"} & set(argv)
    # a traced run is another run (another id); the Horovod one differs by timeline only
    on = _plan(tmp_path, "collect: {timeline: true}\n")
    assert on["torch_ddp"].run_id != plain["torch_ddp"].run_id  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("collect", "why"),
    [
        ("{trace_window: {skip: 1, steps: 2}}", "needs timeline: true"),
        ("{timeline: true, trace_window: {skip: -1}}", "greater than or equal to 0"),
        ("{timeline: true, trace_window: {steps: 0}}", "greater than or equal to 1"),
        ("{timeline: true, trace_window: {skip: 1, step: 2}}", "step"),
    ],
)
def test_a_bad_window_is_a_located_error(tmp_path: Path, collect: str, why: str) -> None:
    with pytest.raises(InputError, match=why) as info:
        _plan(tmp_path, f"collect: {collect}\n")
    assert "collect" in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_the_trace_flags_are_the_programs_own(tmp_path: Path) -> None:
    """jobs/torch/train.py's parser takes what the framework writes, timeline no longer refused."""
    from jobs.torch import train

    ddp = _plan(tmp_path, "collect: {timeline: true, trace_window: {skip: 0, steps: 3}}\n")
    args = train.parser().parse_args(_argv(ddp["torch_ddp"])[2:])
    assert (args.timeline, args.trace_skip, args.trace_steps) == (True, 0, 3)
    train.check_args(args)  # no SystemExit: --timeline applies to torch_ddp now
    defaults = train.parser().parse_args(["--model", "dcgan", "--run-dir", str(tmp_path)])
    assert (defaults.timeline, defaults.trace_skip, defaults.trace_steps) == (False, 5, 20)
