"""Tables a person and a script can both read, never cut.

On a terminal a small table that fits is drawn with rich's boxes; anything else (piped, longer
than `RICH_MAX_ROWS`, wider than the terminal) is plain text in space-aligned columns, every cell
whole: a run id is what users copy, and rich would squeeze it to `e73c7…` to fit a width.
Plain output is also fast: 100,000 rows format in about a second, where rich takes minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

from rich.console import Console
from rich.markup import escape
from rich.table import Table

RICH_MAX_ROWS = 500  # above this a box table is slow to draw and no easier to read
GAP = "  "
Tick = Callable[[int, int], None]


@dataclass(frozen=True)
class Col:
    """A column: `key` ones (run ids) never wrap, fold or shrink, even on a narrow terminal."""

    name: str
    right: bool = False
    key: bool = False


class Grid:
    """Cells of text under a title, kept column by column (a 100,000-run plan is built and
    padded a column at a time); `show` picks rich boxes or plain text (see the module)."""

    def __init__(self, title: str, columns: Sequence[Col | str]) -> None:
        self.title = title
        self.columns = [c if isinstance(c, Col) else Col(c) for c in columns]
        self.cells: list[list[str]] = [[] for _ in self.columns]
        self.styles: dict[int, Sequence[str | None]] = {}

    def __len__(self) -> int:
        return len(self.cells[0]) if self.cells else 0

    def add_row(self, *cells: str, styles: Sequence[str | None] | None = None) -> None:
        if styles is not None:
            self.styles[len(self)] = styles
        for column, cell in zip(self.cells, cells, strict=True):
            column.append(cell)

    def set_column(self, k: int, cells: list[str]) -> None:
        """Column `k` whole (rows in the same order as every other column's)."""
        self.cells[k] = cells

    def widths(self) -> list[int]:
        pairs = zip(self.columns, self.cells, strict=True)
        return [max(len(c.name), max(map(len, cells), default=0)) for c, cells in pairs]

    def fits(self, console: Console) -> bool:
        """Drawn as boxes: a terminal, few rows, and as wide as the terminal at most."""
        if not console.is_terminal or len(self) > RICH_MAX_ROWS:
            return False
        return sum(self.widths()) + 3 * len(self.columns) + 1 <= console.width

    def rich(self) -> Table:
        """The box table; cells other than key columns fold rather than being cut."""
        table = Table(title=escape(self.title), title_justify="left")
        for c, w in zip(self.columns, self.widths(), strict=True):
            table.add_column(
                escape(c.name),
                justify="right" if c.right else "left",
                no_wrap=c.key,
                min_width=w if c.key else None,
                overflow="ignore" if c.key else "fold",
            )
        for i, row in enumerate(zip(*self.cells, strict=True)):
            style = self.styles.get(i)
            cells = [
                f"[{s}]{escape(v)}[/{s}]" if style and (s := style[k]) else escape(v)
                for k, v in enumerate(row)
            ]
            table.add_row(*cells)
        return table

    def lines(self, tick: Tick | None = None) -> list[str]:
        """Title, header and rows as plain text: columns two spaces apart, an empty cell shown
        as `-` so that splitting a line on whitespace finds every column."""
        widths = self.widths()
        last = len(widths) - 1
        padded = []
        for k, (c, w, cells) in enumerate(zip(self.columns, widths, self.cells, strict=True)):
            if k == last and not c.right:
                padded.append([c.name, *(v or "-" for v in cells)])
            elif c.right:
                padded.append([c.name.rjust(w), *((v or "-").rjust(w) for v in cells)])
            else:
                padded.append([c.name.ljust(w), *((v or "-").ljust(w) for v in cells)])
            if tick is not None:
                tick(len(self) * (k + 1) // len(widths), len(self))
        return [self.title, *map(GAP.join, zip(*padded, strict=True))]

    def prepare(self, console: Console, tick: Tick | None = None) -> Table | list[str]:
        """What `show` prints, made ahead (so that a progress bar can be cleared first)."""
        return self.rich() if self.fits(console) else self.lines(tick)

    def show(self, console: Console) -> None:
        emit([self.prepare(console)], console)


def emit(parts: Sequence[Table | list[str]], console: Console) -> None:
    """Prepared grids one after the other (plain ones a blank line apart)."""
    for i, part in enumerate(parts):
        if isinstance(part, Table):
            console.print(part)
        else:
            write_lines(chain([""] if i else [], part), console)


def write_lines(lines: Iterable[str], console: Console) -> None:
    """Plain lines straight to the console's file (stdout), in big chunks, no markup."""
    out = console.file
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= 4096:
            out.write("\n".join(chunk) + "\n")
            chunk.clear()
    if chunk:
        out.write("\n".join(chunk) + "\n")
    out.flush()
