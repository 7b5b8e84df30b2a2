"""How `--help` reads: typer's rich help adjusted where it misleads a newcomer (issue 29).

- A usage line names arguments as click does (`CAMPAIGN`, `[CAMPAIGN]`, `CAMPAIGN...`), not
  `{campaign}`, which reads like a placeholder to fill in.
- A repeatable option shows the type of one value (`<str>`), not `<list[str]>`; a flag none.
- Help text is plain text, never rich markup: a `[default: local]` in a help string is shown,
  not swallowed as an unknown style tag.
- An option's name is never cut short (`--include-partial-tim…` at 80 columns): the name and
  short-name columns keep their widest entry; the type and help columns fit in what is left.
- A docstring's single line breaks are spaces, so text is wrapped at the terminal's width only,
  never mid-sentence where the source line ended; a paragraph starting with `\\b` keeps its
  line breaks (click's convention, for a block of example commands).

typer imports its rich help (`typer.rich_utils`: rich's markdown and traceback, about a tenth
of a second) only to print help or an error; `install` adjusts it when it is imported, so a
command that prints neither (a report) never imports it (#28).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

LIST_TYPE = re.compile(r"^<list\[(.*)\]>$")


def _paragraphs(text: str) -> str:
    """`text` with single line breaks joined, `\\b` paragraphs kept as written."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            out.append(para.lstrip("\b").strip("\n"))
        else:
            out.append(" ".join(line.strip() for line in para.splitlines()))
    return "\n\n".join(out)


def _plain(cell: Any) -> list[str]:
    """The text of a help-table cell (a rich Text, or Columns of them)."""
    if isinstance(getattr(cell, "plain", None), str):
        return [cell.plain]
    return [t for r in getattr(cell, "renderables", []) for t in _plain(r)]


def _whole_columns_table(table_class: type) -> type:
    """A rich Table whose name columns never shrink below their widest entry; the last two (an
    option's type, folded if need be, and its help, wrapped) take what is left."""

    class WholeColumns(table_class):  # type: ignore[misc, valid-type]
        def __rich_console__(self, console: Any, options: Any) -> Any:
            for column in self.columns[:-2]:
                widest = max((len(t) for c in column._cells for t in _plain(c)), default=0)
                column.min_width, column.no_wrap = widest or None, True
            return super().__rich_console__(console, options)

    return WholeColumns


class _WhenImported:
    """A `sys.meta_path` finder that runs `then(module)` once the module `name` is imported
    (after its code ran, before the import returns it), and leaves the path."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # as if this finder were not there
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, then = spec.loader.exec_module, self.then

        def exec_module(module: ModuleType) -> None:
            run(module)
            then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _adjust_rich_help(rich_utils: ModuleType) -> None:
    """The adjustments to typer's rich help (`typer.rich_utils`)."""
    from rich.text import Text

    def make_rich_text(*, text: str, style: str = "", markup_mode: Any) -> Any:
        return rich_utils.highlighter(Text(_paragraphs(text), style=style))

    def make_command_help(*, help_text: str, markup_mode: Any) -> Any:
        first = inspect.cleandoc(help_text).split("\n\n")[0]
        return make_rich_text(text=first, style=rich_utils.STYLE_OPTION_HELP, markup_mode=None)

    rich_utils._make_rich_text = make_rich_text  # type: ignore[assignment]
    rich_utils._make_command_help = make_command_help  # type: ignore[assignment]
    rich_utils.Table = _whole_columns_table(rich_utils.Table)  # type: ignore[misc]


def install() -> None:
    """Apply the adjustments to typer's classes (once, at CLI import) and to its rich help
    when that is imported (at once if it is already)."""
    from typer.core import TyperArgument, TyperOption

    if "typer.rich_utils" in sys.modules:
        _adjust_rich_help(sys.modules["typer.rich_utils"])
    elif not any(isinstance(f, _WhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenImported("typer.rich_utils", _adjust_rich_help))

    option_type = TyperOption.display_type_rich
    argument_type = TyperArgument.display_type_rich

    def option_display_type(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None  # a flag takes no value: no `<bool>` beside it
        shown = option_type(self, ctx)
        return LIST_TYPE.sub(r"<\1>", shown) if shown else shown

    def argument_display_type(self: TyperArgument, ctx: Any) -> str | None:
        shown = argument_type(self, ctx)
        return LIST_TYPE.sub(r"<\1>...", shown) if shown else shown

    def usage_name(self: TyperArgument) -> str:
        name = (self.metavar or self.display_name_raw).upper()
        if self.nargs != 1:
            name += "..."
        return name if self.required else f"[{name}]"

    TyperOption.display_type_rich = option_display_type  # type: ignore[method-assign]
    TyperArgument.display_type_rich = argument_display_type  # type: ignore[method-assign]
    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
