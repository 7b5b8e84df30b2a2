"""Shell text that is safe by construction.

Every value a template prints is quoted with `shlex.quote` unless it is a `Shell` instance, and a
`Shell` can only be made from trusted template-side fragments or by joining quoted words. So a
campaign value like `$(touch /tmp/x)` always reaches the script as an inert string.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterable


class Shell(str):
    """Text that is already valid, safe shell (never built from an unquoted campaign value)."""

    __slots__ = ()


class Raw(str):
    """A trusted shell word written by hpcscale itself (e.g. "$SLURM_JOB_NODELIST")."""

    __slots__ = ()


_QUOTED: dict[tuple[type, object], Shell] = {}
_QUOTED_STR: dict[str, Shell] = {}


def quote(value: object) -> Shell:
    kind = type(value)
    if kind is str:  # the common case, kept cheap: it runs for every printed value
        found = _QUOTED_STR.get(value)  # type: ignore[call-overload]
        if found is None:
            found = Shell(shlex.quote(value))  # type: ignore[arg-type]
            if len(_QUOTED_STR) < 100_000:
                _QUOTED_STR[value] = found  # type: ignore[index]
        return found
    if isinstance(value, Shell):
        return value
    key = (kind, value)  # the type too: 1, 1.0 and True are equal keys otherwise
    try:
        return _QUOTED[key]
    except (KeyError, TypeError):
        pass
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    quoted = Shell(shlex.quote(text))
    if len(_QUOTED) < 100_000:
        with contextlib.suppress(TypeError):  # unhashable: just don't cache
            _QUOTED[key] = quoted
    return quoted


def join(words: Iterable[object]) -> Shell:
    """A command line: `Raw` words pass through, everything else is quoted."""
    return Shell(" ".join(str(w) if isinstance(w, Raw) else quote(w) for w in words))


def finalize(value: object) -> object:
    """Jinja `finalize` hook: what a template prints is quoted unless already Shell."""
    if value is None:
        raise ValueError("a template printed None (a missing value); refusing to render")
    return quote(value)
