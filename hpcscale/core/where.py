"""Conditions over a run's fields (`matrix.where:`, `cancel --where`), evaluated by simpleeval:
no Python eval, so a campaign or a command line cannot run code through them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simpleeval import EvalWithCompoundTypes, InvalidExpression

FUNCTIONS = {"min": min, "max": max, "abs": abs}


class ConditionError(ValueError):
    """The condition cannot be evaluated for these fields (unknown name, bad syntax, ...)."""


def names_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The names a condition sees: every field, workload arguments by their own name too
    (`image_size`, or `args_image_size` for an `args.image_size` axis)."""
    env = {k.replace(".", "_"): v for k, v in fields.items()}
    args = env.pop("args", None)
    if isinstance(args, Mapping):
        env.update(args)
    return env


def holds(text: str, fields: Mapping[str, Any]) -> bool:
    """Whether the condition holds for these fields."""
    ev = EvalWithCompoundTypes(names=names_of(fields), functions=FUNCTIONS)
    try:
        return bool(ev.eval(text))
    except (InvalidExpression, SyntaxError, TypeError, ValueError, KeyError) as exc:
        raise ConditionError(f"cannot evaluate {text!r}: {exc}") from None
