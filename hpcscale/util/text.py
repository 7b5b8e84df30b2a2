"""Words for counts in messages: "1 run", "2 runs", never "1 runs"."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, plural unless n is 1 (`many` for irregular plurals: "1 process")."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
