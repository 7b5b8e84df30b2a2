"""Frameworks: the ways of training hpcscale runs (hpcscale.frameworks.base.Framework), one
module each, registered by name in hpcscale.model.registry.FRAMEWORKS with the `strategy:` value
that selects it. A user's command borrows the framework its strategy names."""

from __future__ import annotations

from functools import cache

from hpcscale.frameworks.base import Framework
from hpcscale.frameworks.command import Command
from hpcscale.model.registry import FRAMEWORKS, load
from hpcscale.model.run import Run

__all__ = ["Framework", "every_framework", "for_cell", "for_run", "for_strategy", "words_of"]


@cache
def for_strategy(strategy: str) -> Framework:
    """The framework a `strategy:` value selects."""
    for line in FRAMEWORKS.values():
        if line.strategy == strategy:
            return load(line.where)()  # type: ignore[no-any-return]
    raise KeyError(f"no framework for strategy {strategy!r}")


def every_framework() -> list[Framework]:
    """Every registered framework, in the registry's order."""
    return [for_strategy(line.strategy) for line in FRAMEWORKS.values()]


def words_of(field: str) -> dict[str, str]:
    """A framework text table (`knob_help`, `knob_studies`) merged over every framework: each
    key as the first framework in the registry's order that says it."""
    out: dict[str, str] = {}
    for fw in every_framework():
        for key, text in getattr(fw, field).items():
            out.setdefault(key, text)
    return out


@cache
def for_cell(strategy: str, command: bool) -> Framework:
    """A cell's framework: its strategy's, or a user's command following it."""
    fw = for_strategy(strategy)
    return Command(fw) if command else fw


def for_run(run: Run) -> Framework:
    return for_cell(run.strategy, run.command is not None)
