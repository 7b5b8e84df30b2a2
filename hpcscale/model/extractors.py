"""A figure of merit as a campaign declares it (`metrics:`): its pattern, where it is read, how
its matches are reduced. Patterns run on RE2, so that reading a run's output takes time linear in
its size; the scanning itself is hpcscale.collect.readers.extract's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

OUTPUT = "output"  # the job's captured output (rank 0's, or each rank's: `ranks`)
ALL_RANKS = "all"
_OPTIONS = re2.Options()
_OPTIONS.never_nl = True  # a match never crosses a line
_OPTIONS.log_errors = False


@dataclass(frozen=True)
class Extractor:
    """One figure: `pattern` has one capture group (or a group named `value`). `ranks`: 0 (rank
    0's lines) or "all" (each rank reduced, then combined `across` them)."""

    name: str
    pattern: str
    source: str = OUTPUT
    reduce: str = "last"
    unit: str = ""
    better: str = "lower"
    scale: str = "global"
    required: bool = True
    ranks: int | str = 0
    across: str = "sum"

    @property
    def all_ranks(self) -> bool:
        return self.ranks == ALL_RANKS


@lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """The pattern on RE2, over bytes, `^`/`$` at line ends; re2.error when RE2 refuses it."""
    return re2.compile(b"(?m)" + pattern.encode("utf-8"), _OPTIONS)


def group_of(rx: Any) -> int:
    return int(rx.groupindex.get(b"value", 1))


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` cannot be an extractor (bad syntax, not linear-time, no capture group)."""
    try:
        rx = compiled(pattern)
    except re2.error as exc:
        try:
            re.compile(pattern)
        except re.error as py_exc:
            return f"not a regular expression: {py_exc}"
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        return (
            f"RE2 cannot run it ({why}): extractors run in time linear in the output, so "
            "backreferences and lookaround are refused; rewrite it without them"
        )
    if b"value" not in rx.groupindex and rx.groups != 1:
        return f"needs one capture group (or one named 'value'), has {rx.groups}"
    return None
