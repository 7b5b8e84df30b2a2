"""Frameworks (hpcscale.frameworks): one module and one registry line each, selected by the
cell's `strategy`, a user's command following its strategy's framework; a run's knobs travel in
`Run.knobs` and are recorded and hashed flat, as the fields they were."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from hpcscale import frameworks
from hpcscale.frameworks.base import Framework
from hpcscale.frameworks.command import Command
from hpcscale.model.registry import FRAMEWORKS, load
from hpcscale.model.run import Run
from hpcscale.model.vocab import STRATEGIES

BASE: dict[str, Any] = {
    "campaign": "c", "system": "local", "model": "dcgan", "scaling": "weak", "device": "cpu",
    "nodes": 1, "tasks_per_node": 2, "threads_per_task": 1, "gpus_per_node": 0,
    "batch_per_rank": 4, "global_batch": 8,
}  # fmt: skip


def test_every_strategy_has_one_framework_from_its_registry_line() -> None:
    assert sorted(line.strategy for line in FRAMEWORKS.values()) == sorted(STRATEGIES)
    for name, line in FRAMEWORKS.items():
        cls = load(line.where)
        assert issubclass(cls, Framework) and cls.name == name
        assert type(frameworks.for_strategy(line.strategy)) is cls


def test_a_command_follows_the_framework_its_strategy_names() -> None:
    run = Run(**BASE, command="python train.py", program="command")
    fw = frameworks.for_run(run)
    assert isinstance(fw, Command) and fw.borrowed is frameworks.for_strategy("horovod")
    assert fw.trace == "horovod" and "fusion_threshold_mb" in fw.knobs
    mirrored = Run(**{**BASE, "tasks_per_node": 1}, strategy="mirrored", command="python t.py")
    assert frameworks.for_run(mirrored).single_process(mirrored)  # one process, no launcher
    assert not frameworks.for_run(run).single_process(run)


def test_knobs_are_held_in_knobs_and_recorded_and_hashed_flat() -> None:
    run = Run(**BASE, fusion_threshold_mb=64, fp16_allreduce=False, cycle_time_ms=None)
    assert run.knobs == {"fusion_threshold_mb": 64.0}  # defaults left out, typed as before
    assert run == Run(**BASE, knobs={"fusion_threshold_mb": 64.0})  # one run, one form
    assert run.knob("fusion_threshold_mb") == 64.0 and run.knob("hierarchical_allreduce") is False
    rec = run.as_record()
    assert (
        "knobs" not in rec and rec["fusion_threshold_mb"] == 64.0 and rec["cycle_time_ms"] is None
    )
    assert Run.from_record(rec) == run
    # the id of the same run when the knobs were fields (computed here, by hand)
    content = {k: v for k, v in rec.items() if k not in ("run_id", "ranks", "replicas", "swept")}
    content["workload"] = content.pop("program")
    for k in ("command", "interpreter", "cwd", "trace_window"):  # not set: not hashed
        content.pop(k)
    want = hashlib.sha256(msgspec.json.encode(content, order="sorted")).hexdigest()[:10]
    assert run.run_id == want


def test_env_and_argv_of_the_horovod_framework_read_the_knobs() -> None:
    run = Run(**BASE, fusion_threshold_mb=2, cycle_time_ms=3.5, hierarchical_allreduce=True)
    env = frameworks.for_run(run).env(run, "/r")
    assert env == {
        "HOROVOD_FUSION_THRESHOLD": 2 * 1024 * 1024,
        "HOROVOD_CYCLE_TIME": 3.5,
        "HOROVOD_HIERARCHICAL_ALLREDUCE": 1,
        "OMP_NUM_THREADS": 1,
    }


def test_a_runs_trace_is_read_by_the_reader_its_framework_names() -> None:
    from hpcscale.collect.traces import reader_for

    assert reader_for("horovod", command=False).file_name == "timeline.json"
    assert reader_for("horovod", command=True).label == "Horovod timeline"  # borrowed
    assert reader_for("mirrored", command=False) is None  # MirroredStrategy writes no trace
