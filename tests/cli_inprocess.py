"""The console script's entry point (`hpcscale.cli.main:run`) called in the test process, with
what a fresh process would have had: its argv, environment, cwd, empty stdin, its own stdout
and stderr (a pipe, not a terminal), signal handlers, and its exit status.

Why: a fresh interpreter per call costs 1-2 s of imports, and the integration tier makes some
three hundred calls. What a process holds past one call is put back after it: the environment,
the cwd, SIGINT/SIGTERM handlers, sys.argv, the excepthook typer installs, logging handlers
bound to the streams, and the CLI consoles' terminal-dependent settings (width, colour, soft
wrap), which rich decides when a Console is made (at import) and a process would decide anew.
hpcscale's functools caches are emptied before each call, as a new process has them.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
import weakref
from collections.abc import Iterator
from typing import Any

PROG = "hpcscale"  # what the console script is called: click names it in usage lines
# what this module swapped in as a call's stdout / stderr: a logging handler made during a call
# (submitit configures its own at import) keeps it; the next call points it at its own
_OURS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _stream() -> io.TextIOWrapper:
    """A pipe's end as a child's sys.stdout sees it: text over bytes (`.buffer`), no tty."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    """What `subprocess.run(text=True)` reads from a pipe: decoded, universal newlines."""
    stream.flush()
    data = stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    return data.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _environment(overrides: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in saved]:
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def _ours(stream: Any) -> str | None:
    """Which of a call's streams (out, err) `stream` was, or None."""
    try:
        return _OURS.get(stream)
    except TypeError:  # neither hashable nor weakly referenced: not one of ours
        return None


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    """Every plain StreamHandler (not a FileHandler, not pytest's capture handlers)."""
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    return [h for lg in loggers for h in lg.handlers if type(h) is logging.StreamHandler]


@contextlib.contextmanager
def _logging_to(
    out: io.TextIOWrapper, err: io.TextIOWrapper, outer_out: Any, outer_err: Any
) -> Iterator[None]:
    """Handlers writing to this process's stdout or stderr (`outer_*`) write to the call's, as
    a fresh process's would; back to this process's streams afterwards."""
    outer = {"out": outer_out, "err": outer_err}
    kind_of = {id(outer_out): "out", id(outer_err): "err", id(sys.__stdout__): "out",
               id(sys.__stderr__): "err"}  # fmt: skip
    ours = {"out": out, "err": err}
    moved: list[tuple[logging.StreamHandler[Any], str]] = []
    for h in _stream_handlers():
        kind = _ours(h.stream) or kind_of.get(id(h.stream))
        if kind is not None:
            h.stream = ours[kind]
            moved.append((h, kind))
    try:
        yield
    finally:
        for h in _stream_handlers():
            kind = _ours(h.stream)
            if kind is not None:
                h.stream = outer[kind]
        for h, kind in moved:
            h.stream = outer[kind]


@contextlib.contextmanager
def _fresh_consoles() -> Iterator[None]:
    """The CLI's rich consoles (made once, at import) set up as a new process would: width
    from COLUMNS now, colour and soft wrap from the (non-terminal) stream now."""
    from hpcscale.cli import common

    saved = []
    for c in (common.console, common.err_console):
        saved.append((c, c._width, c._height, c._color_system, c.soft_wrap))
        c._width = c._height = None  # read from COLUMNS / LINES at each use
        c._color_system = c._detect_color_system()
        c.soft_wrap = not c.is_terminal  # as hpcscale.cli.common decides it
    try:
        yield
    finally:
        for c, width, height, colour, soft in saved:
            c._width, c._height, c._color_system, c.soft_wrap = width, height, colour, soft


def _cold_caches() -> None:
    """Empty hpcscale's functools caches (keyed by path, strategy, template dirs...), which a
    new process starts without."""
    for name, module in list(sys.modules.items()):
        if name == "hpcscale" or name.startswith("hpcscale."):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


class _Named:
    """The Typer app, called with the console script's name: click would otherwise name the
    program after this interpreter's __main__ (`python -m pytest`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("prog_name", PROG)
        return self.app(*args, **kwargs)


def _code(exc: SystemExit, err: io.TextIOWrapper) -> int:
    """The exit status Python gives `sys.exit(code)`."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=err)
    return 1


def run_in_process(
    argv: list[str], overrides: dict[str, str], cwd: str | os.PathLike[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` (the console script and its arguments) through `hpcscale.cli.main.run` here,
    in `cwd` (default: this process's)."""
    assert threading.current_thread() is threading.main_thread()  # signals, sys.stdout
    out, err = _stream(), _stream()
    _OURS[out], _OURS[err] = "out", "err"
    stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # `< /dev/null`
    here = os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr, sys.excepthook)
    code = 0
    with _environment(overrides):
        from hpcscale.cli import main  # imported with the call's environment, as a process would

        app = main.app
        try:
            _cold_caches()
            sys.argv = list(argv)
            sys.stdin, sys.stdout, sys.stderr = stdin, out, err
            with _fresh_consoles(), _logging_to(out, err, saved[2], saved[3]):
                if cwd is not None:
                    os.chdir(cwd)
                main.app = _Named(app)  # type: ignore[assignment]
                try:
                    main.run()
                except SystemExit as exc:
                    code = _code(exc, err)
                except Exception:  # what the interpreter prints for an uncaught exception
                    traceback.print_exc(file=err)
                    code = 1
        finally:
            main.app = app
            sys.argv, sys.stdin, sys.stdout, sys.stderr, sys.excepthook = saved
            for s, h in handlers.items():
                if h is not None:
                    signal.signal(s, h)
            os.chdir(here)
    return subprocess.CompletedProcess(argv, code, _text(out), _text(err))
