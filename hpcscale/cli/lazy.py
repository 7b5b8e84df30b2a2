"""Commands imported when they are used, not when `hpcscale` starts.

Importing every command's module at start-up cost every command (and `--version`) the imports
of all the others: `hpcscale report` paid for submit's backends, the scheduler clients and the
developer's local cluster. Here the group knows each command by name and module; a command is
imported and built when click asks for it (running it, its help, the group's help, shell
completion), through the same typer calls as `app.command()` and `app.add_typer`, so what it
does and prints is the same.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

try:  # typer 0.2x carries its own click; earlier typers (the range pyproject allows) use click's
    from typer import _click
except ImportError:  # pragma: no cover - depends on the installed typer
    import click as _click  # type: ignore[no-redef]

# name -> (module, attribute): a command's function, or a typer.Typer of subcommands
Table = Mapping[str, tuple[str, str]]


def build(name: str, module: str, attribute: str, rich_markup_mode: Any) -> _click.Command:
    """The click command `name` as the main app would have made it: registered on a Typer with
    the app's settings (typer's defaults but the markup mode), then converted by typer."""
    found = getattr(importlib.import_module(module), attribute)
    one = typer.Typer(rich_markup_mode=rich_markup_mode, pretty_exceptions_enable=False)
    one.callback()(_nothing)  # a group, as the main app is
    if isinstance(found, typer.Typer):
        one.add_typer(found, name=name)
    else:
        one.command()(found)
    command = typer.main.get_group(one).commands.get(name)
    if command is None:  # the table names a function whose command name differs
        raise RuntimeError(f"internal error: {module}.{attribute} is not the command {name!r}")
    return command


def _nothing() -> None:
    """The callback of the one-command Typer `build` converts."""


class LazyCommands(MutableMapping[str, _click.Command]):
    """A group's commands by name, in the table's order; a command is built on first access.
    Membership, iteration and length do not build anything."""

    def __init__(self, table: Table, built: Mapping[str, _click.Command], markup: Any) -> None:
        self._table = dict(table)
        self._markup = markup
        self._built: dict[str, _click.Command] = {}
        self._order: list[str] = list(self._table)
        for name, command in built.items():
            self[name] = command

    def __getitem__(self, name: str) -> _click.Command:
        if name not in self._built:
            if name not in self._table:
                raise KeyError(name)
            self._built[name] = build(name, *self._table[name], self._markup)
        return self._built[name]

    def __setitem__(self, name: str, command: _click.Command) -> None:
        if name not in self._table and name not in self._built:
            self._order.append(name)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._table.pop(name, None)
        self._built.pop(name, None)
        self._order.remove(name)

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)


class LazyGroup(TyperGroup):
    """A TyperGroup whose commands come from a table (`of`) and are imported on first use."""

    table: ClassVar[Table] = {}

    @classmethod
    def of(cls, table: Table) -> type[LazyGroup]:
        """This class with `table` as its commands (typer takes the group as a class)."""
        return type(cls.__name__, (cls,), {"table": dict(table), "__doc__": cls.__doc__})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.table, self.commands, self.rich_markup_mode)

    def list_commands(self, ctx: _click.Context) -> list[str]:
        """The names in the table's order (what TyperGroup lists), none of them imported."""
        return list(self.commands)
