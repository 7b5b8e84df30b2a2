"""Turn pydantic errors into one located message: file, line, key path, and a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hpcscale.model.errors import InputError
from hpcscale.model.yamlsrc import KeyPath, Source

M = TypeVar("M", bound=BaseModel)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def validate(model: type[M], data: Any, src: Source, prefix: KeyPath = ()) -> M:
    """Validate `data` (found at `prefix` inside `src`) or raise the first error, located."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise located(exc, model, src, prefix) from None


def located(
    exc: ValidationError, model: type[BaseModel], src: Source, prefix: KeyPath
) -> InputError:
    err = exc.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    key: KeyPath = (*prefix, *loc)
    msg = err["msg"]
    if err["type"] == "extra_forbidden" and loc:
        allowed = _fields_at(model, loc[:-1])
        msg = f"unknown key {loc[-1]!r}{did_you_mean(str(loc[-1]), allowed)}"
        if allowed:
            msg += f"; allowed: {', '.join(sorted(allowed))}"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif msg.startswith("Value error, "):
        msg = msg.removeprefix("Value error, ")
    return src.error(key, msg)


def _fields_at(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """Field names of the sub-model at `path` (best effort: for the did-you-mean hint)."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = _inner_model(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
