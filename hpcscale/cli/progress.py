"""A progress bar on stderr for long plans and renders.

Drawn only when stderr is a terminal, cleared when done, and silent for the first `DELAY`
seconds so that a quick command prints nothing extra. `Activity(..., thread=False)` draws only
when its caller reports progress: `render` forks workers, which it does only while the process
runs no other thread (a refresh thread's locks would be copied mid-use).
"""

from __future__ import annotations

import os
import time
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from hpcscale.cli.common import err_console

# seconds before anything is drawn (HPCSCALE_PROGRESS_DELAY: tests that must see the bar)
DELAY = float(os.environ.get("HPCSCALE_PROGRESS_DELAY", "1.0"))
MIN_INTERVAL = 0.1  # seconds between refreshes the caller asks for


class _Delayed(Progress):
    """A Progress that draws nothing until DELAY seconds after it started."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.started = time.monotonic()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def get_renderable(self) -> RenderableType:
        if time.monotonic() - self.started < DELAY:
            return Group()
        return super().get_renderable()


class Activity:
    """`with Activity("render fusion_sweep") as bar:` then pass `bar` as a `(done, total)`
    callback; `bar.step("expanding the matrix")` names a step whose size is not known."""

    def __init__(self, description: str, *, thread: bool, console: Console = err_console) -> None:
        self.description = description
        self.progress: _Delayed | None = None
        self.task: TaskID | None = None
        self.last = 0.0
        if console.is_terminal:
            self.progress = _Delayed(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                auto_refresh=thread,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.task = self.progress.add_task(description, total=None)

    def __enter__(self) -> Activity:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Clear the bar (before printing the result: both may go to the same terminal)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def step(self, what: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=f"{self.description}: {what}")

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None or self.task is None:
            return
        self.progress.update(self.task, completed=done, total=total)
        now = time.monotonic()
        if done >= total or now - self.last >= MIN_INTERVAL:
            self.last = now
            self.progress.refresh()
