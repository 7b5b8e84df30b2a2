"""Words for counts in messages ("1 run", "2 runs", never "1 runs"), and job output made safe to
show on a terminal (a job's own bytes must not drive the user's terminal)."""

from __future__ import annotations

import re

# Terminal control sequences: CSI (colours, cursor moves; ESC [ or the 8-bit 0x9b), OSC (window
# titles, hyperlinks; ended by BEL or ST), the other ESC-introduced strings (DCS, SOS, PM, APC),
# two-character ESC sequences; then any control character left but tab and newline.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, plural unless n is 1 (`many` for irregular plurals: "1 process")."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def printable(text: str) -> str:
    """`text` (a job's output) with its terminal escapes and control characters removed; a
    carriage return (progress bars) becomes a line break."""
    return _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
