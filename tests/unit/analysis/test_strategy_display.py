"""How a run's strategy is named comes from its framework (Framework.display_name), and whether
a user's program is a framework's from its launcher (Launcher.implies_strategy), not from a
launcher's name compared in analysis or collect. The names are today's, written out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from hpcscale.analysis.strategies import strategy_name, strategy_names, strategy_of
from hpcscale.collect.run_row import NO_STRATEGY, run_fields
from hpcscale.formats.run_record import RunRecord
from hpcscale.frameworks import for_cell
from hpcscale.launchers import REGISTRY, implied_strategy

KEYS = ("strategy", "cross_device_ops", "mpi", "command", "launcher")
# KEYS' values -> the name tables show
CASES = [
    (("horovod", None, "openmpi", None, "mpirun"), "Horovod (openmpi)"),
    (("horovod", None, "mvapich2", None, "srun"), "Horovod (mvapich2)"),
    (("mirrored", "nccl", "openmpi", None, "mpirun"), "NcclAllReduce"),
    (("mirrored", "reduce_to_one", "openmpi", None, ""), "ReductionToOneDevice"),
    (("mirrored", "hierarchical_copy", "openmpi", None, ""), "HierarchicalCopy"),
    (("mirrored", None, "openmpi", None, ""), "MirroredStrategy"),
    (("torch_ddp", None, "openmpi", None, "torchrun"), "PyTorch DDP (torchrun)"),
    (("torch_ddp", None, "openmpi", None, ""), "PyTorch DDP (mpirun)"),
    (("torch_ddp", None, "openmpi", "python t.py", "torchrun"), "Your program (PyTorch DDP)"),
    (("", None, "openmpi", "python t.py", "mpirun"), "Your program (openmpi)"),
    (("horovod", None, "intelmpi", "python t.py", "srun"), "Your program (intelmpi)"),
    (("horovod", None, "openmpi", "python t.py", "horovodrun"), "Horovod (openmpi)"),
    (("mirrored", None, "openmpi", "python t.py", "mpirun"), "Your program (openmpi)"),
    # a strategy the registry does not know (a notebook frame's NaN) is the default's
    (("nan", None, "openmpi", None, "mpirun"), "Horovod (openmpi)"),
]


@pytest.mark.parametrize(("fields", "name"), CASES)
def test_each_run_is_named_as_before(fields: tuple[object, ...], name: str) -> None:
    assert strategy_name(*fields) == name  # type: ignore[arg-type]
    assert strategy_of(dict(zip(KEYS, fields, strict=True))) == name


def test_a_frame_is_named_row_by_row() -> None:
    rows = pd.DataFrame([dict(zip(KEYS, f, strict=True)) for f, _ in CASES])
    assert strategy_names(rows) == [name for _, name in CASES]
    # without command and launcher columns: bundled programs under mpirun
    assert strategy_names(rows[["strategy", "cross_device_ops", "mpi"]].iloc[:3]) == [
        "Horovod (openmpi)",
        "Horovod (mvapich2)",
        "NcclAllReduce",
    ]


def test_the_framework_names_its_runs() -> None:
    fields = {"strategy": "horovod", "cross_device_ops": None, "mpi": "openmpi", "launcher": ""}
    assert for_cell("horovod", False).display_name(fields) == "Horovod (openmpi)"
    assert for_cell("horovod", True).display_name(fields) == "Your program (openmpi)"


def test_only_horovodrun_implies_a_strategy() -> None:
    assert {name: la.implies_strategy for name, la in REGISTRY.items() if la.implies_strategy} == {
        "horovodrun": "horovod"
    }
    assert implied_strategy("horovodrun") == "horovod"
    assert implied_strategy("mpirun") is None
    assert implied_strategy(float("nan")) is None  # a table's missing launcher
    assert implied_strategy("no-such-launcher") is None


def _record(launcher: str, command: str | None) -> RunRecord:
    return RunRecord(
        campaign="c", system="local", model="m", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=2, threads_per_task=1, gpus_per_node=0, batch_per_rank=8,
        global_batch=16, launcher=launcher, command=command, run_id="r", ranks=2, replicas=2,
    )  # fmt: skip


def test_a_commands_strategy_column_follows_its_launcher() -> None:
    """run.json holds the default strategy; the row keeps it only where the launcher says the
    program is that framework's."""
    assert run_fields(_record("horovodrun", "python t.py"))["strategy"] == "horovod"
    assert run_fields(_record("mpirun", "python t.py"))["strategy"] == NO_STRATEGY == ""
    assert run_fields(_record("srun", "python t.py"))["strategy"] == ""
    assert run_fields(_record("mpirun", None))["strategy"] == "horovod"
