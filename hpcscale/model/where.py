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
    (`image_size`, or `args_image_size` for an `args.image_size` axis). A field is never
    shadowed by an argument of the same name: `nodes` is the run's."""
    env = {k.replace(".", "_"): v for k, v in fields.items()}
    args = env.pop("args", None)
    if isinstance(args, Mapping):
        env.update({k: v for k, v in args.items() if k not in env})
    return env


def holds(text: str, fields: Mapping[str, Any]) -> bool:
    """Whether the condition holds for these fields. Any failure (an unknown name, bad syntax,
    a division by zero, an index out of range, ...) is a ConditionError saying what failed."""
    ev = EvalWithCompoundTypes(names=names_of(fields), functions=FUNCTIONS)
    try:
        return bool(ev.eval(text))
    except RecursionError:
        raise ConditionError(f"cannot evaluate {text!r}: nested too deeply") from None
    except Exception as exc:  # simpleeval raises whatever the operation raises
        raise ConditionError(f"cannot evaluate {text!r}: {_why(exc)}") from None


def _why(exc: Exception) -> str:
    """A message that names the failure even when Python's is one word (KeyError: `1`)."""
    if isinstance(exc, InvalidExpression | SyntaxError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, KeyError):
        return f"no key {exc.args[0]!r} (KeyError)" if exc.args else "KeyError"
    text = str(exc)
    return f"{text} ({type(exc).__name__})" if text else type(exc).__name__
