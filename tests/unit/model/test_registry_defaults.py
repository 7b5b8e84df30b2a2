"""The strategy names and the default strategy come from the framework registry's lines
(hpcscale.model.registry), not from a literal in each module that needs them; the values stay
those every shipped run id was hashed with (tests/unit/model/test_run_ids.py)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from hpcscale.analysis import frame
from hpcscale.doctor_campaign import strategies_of
from hpcscale.formats.run_record import RunRecord
from hpcscale.model import registry, vocab
from hpcscale.model.campaign import LoadedCampaign, load_campaign
from hpcscale.model.command import CommandFields
from hpcscale.model.run import Run
from hpcscale.plan.expand import expand

# by hand: today's names, in the order validation errors list them
NAMES = ("horovod", "mirrored", "torch_ddp")
DEFAULT = "horovod"


def test_the_registry_names_the_strategies_and_marks_the_default() -> None:
    assert registry.STRATEGIES == NAMES
    assert registry.DEFAULT_STRATEGY == DEFAULT
    assert registry.FRAMEWORKS[registry.DEFAULT_FRAMEWORK].strategy == DEFAULT
    assert registry.COMMAND_FRAMEWORKS == {"horovod": "horovod", "torch": "torch_ddp"}
    assert registry.DEFAULT_COMMAND_FRAMEWORK == "horovod"


def test_every_default_is_the_registrys() -> None:
    assert vocab.STRATEGIES is registry.STRATEGIES
    assert get_args(vocab.Strategy) == NAMES
    assert vocab.term("strategy").help == "horovod | mirrored | torch_ddp"
    assert Run.model_fields["strategy"].default == DEFAULT
    assert RunRecord.__struct_defaults__[RunRecord.__struct_fields__.index("strategy")] == DEFAULT
    assert frame._DEFAULTS["strategy"] == DEFAULT


def _campaign(tmp_path: Path, workload: str) -> LoadedCampaign:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"name: c\nworkload:\n{workload}system: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1', '2x1']\n  batch: 64\n"
    )
    return load_campaign(path)


def test_a_campaign_naming_no_strategy_gets_the_default(tmp_path: Path) -> None:
    lc = _campaign(tmp_path, "  model: dcgan\n")
    assert strategies_of(lc) == [DEFAULT]
    assert {run.strategy for run in expand(lc).runs} == {DEFAULT}


def test_a_command_framework_gives_its_strategy(tmp_path: Path) -> None:
    lc = _campaign(tmp_path, "  command: [python, t.py]\n  metrics: mllog\n  framework: torch\n")
    assert strategies_of(lc) == ["torch_ddp"]
    assert {run.strategy for run in expand(lc).runs} == {"torch_ddp"}
    lc = _campaign(tmp_path, "  command: [python, t.py]\n  metrics: mllog\n")
    assert {run.strategy for run in expand(lc).runs} == {DEFAULT}


def test_validation_still_lists_the_names() -> None:
    """The error texts users meet are unchanged."""
    with pytest.raises(ValidationError) as exc:
        CommandFields.model_validate({"command": ["a"], "framework": "tf"})
    assert exc.value.errors()[0]["msg"] == "Input should be 'horovod' or 'torch'"
    description = CommandFields.model_fields["framework"].description or ""
    assert description.startswith("the program's framework: horovod (the default) or torch, ")
    fields = {
        "campaign": "c", "system": "s", "model": "m", "scaling": "weak", "device": "cpu",
        "nodes": 1, "tasks_per_node": 1, "threads_per_task": 1, "gpus_per_node": 0,
        "batch_per_rank": 1, "global_batch": 1, "strategy": "x",
    }  # fmt: skip
    with pytest.raises(ValidationError) as exc:
        Run.model_validate(fields)
    assert exc.value.errors()[0]["msg"] == "Input should be 'horovod', 'mirrored' or 'torch_ddp'"
