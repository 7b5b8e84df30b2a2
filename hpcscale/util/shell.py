"""Shell text that is safe by construction.

Every value a template prints is quoted with `shlex.quote` unless it is a `Shell` instance, and a
`Shell` can only be made from trusted template-side fragments or by joining quoted words. So a
campaign value like `$(touch /tmp/x)` always reaches the script as an inert string.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterable

from hpcscale.model.errors import UsageError
from hpcscale.model.names import ENV_NAME, SBATCH_SAFE


class Shell(str):
    """Text that is already valid, safe shell (never built from an unquoted campaign value)."""

    __slots__ = ()


class Raw(Shell):
    """A trusted shell word written by hpcscale itself (e.g. "$SLURM_JOB_NODELIST")."""

    __slots__ = ()


_CACHE_MAX = 100_000
# Quoted text per (type, value): the type too, since 1, 1.0 and True are equal dict keys. Plain
# str and int get their own tables: they are nearly every printed value, so they skip the tuple.
_QUOTED: dict[tuple[type, object], Shell] = {}
_QUOTED_STR: dict[str, Shell] = {}
_QUOTED_INT: dict[int, Shell] = {}


def quote(value: object) -> Shell:
    kind = type(value)
    if kind is str:
        found = _QUOTED_STR.get(value)  # type: ignore[call-overload]
        if found is None:
            found = Shell(shlex.quote(value))  # type: ignore[arg-type]
            if len(_QUOTED_STR) < _CACHE_MAX:
                _QUOTED_STR[value] = found  # type: ignore[index]
        return found
    if kind is int:
        found = _QUOTED_INT.get(value)  # type: ignore[call-overload]
        if found is None:
            found = Shell(str(value))  # digits and a sign need no quotes
            if len(_QUOTED_INT) < _CACHE_MAX:
                _QUOTED_INT[value] = found  # type: ignore[index]
        return found
    if isinstance(value, Shell):
        return value
    if value is None:  # a template printed a missing value: never render the text "None"
        raise ValueError("a template printed None (a missing value); refusing to render")
    key = (kind, value)
    try:
        return _QUOTED[key]
    except (KeyError, TypeError):
        pass
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    quoted = Shell(shlex.quote(text))
    if len(_QUOTED) < _CACHE_MAX:
        with contextlib.suppress(TypeError):  # unhashable: just don't cache
            _QUOTED[key] = quoted
    return quoted


def join(words: Iterable[object]) -> Shell:
    """A command line: `Shell` and `Raw` words pass through, everything else is quoted."""
    return Shell(" ".join(map(quote, words)))


# Jinja's `finalize` hook: what a template prints is quoted unless already Shell (and None is
# refused). It is `quote` itself, as it runs for every printed value of every run.
finalize = quote


def sbatch_value(value: object) -> Shell:
    """#SBATCH lines are parsed by sbatch, not a shell: allow only values needing no quotes."""
    text = str(value)
    found = _SBATCH_OK.get(text)
    if found is None:
        if not SBATCH_SAFE.fullmatch(text):
            raise UsageError(
                f"value {text!r} cannot go on an #SBATCH line (use plain characters, no spaces)"
            )
        found = Shell(text)
        if len(_SBATCH_OK) < 100_000:
            _SBATCH_OK[text] = found
    return found


def env_name(name: str) -> Shell:
    found = _ENV_OK.get(name)
    if found is None:
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"{name!r} is not a valid environment variable name")
        found = _ENV_OK[name] = Shell(name)  # names come from profiles: a handful
    return found


# Checked values, so the regexes run once per distinct value rather than once per run.
_SBATCH_OK: dict[str, Shell] = {}
_ENV_OK: dict[str, Shell] = {}
