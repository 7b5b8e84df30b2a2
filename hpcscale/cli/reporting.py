"""The backends' progress drawn with rich: a bar per local run with its epoch, one line per
sbatch, warnings in yellow."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from hpcscale.api import RunState
from hpcscale.cli.common import console, err_console
from hpcscale.util.text import printable

if TYPE_CHECKING:
    from hpcscale.render.render import Rendered


class RichReporter:
    """A `hpcscale.backends.base.Reporter`; use as a context manager around a submit."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.overall: TaskID | None = None
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichReporter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.progress is not None:
            self.progress.stop()

    def info(self, message: str) -> None:
        console.print(escape(message), highlight=False)

    def warn(self, message: str) -> None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)

    def _bars(self, total: int) -> Progress:
        if self.progress is None:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[epoch]}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            self.progress.start()
            self.overall = self.progress.add_task("campaign", total=total, epoch="")
        return self.progress

    def run_started(self, r: Rendered, index: int, total: int) -> None:
        bars = self._bars(total)
        ranks = r.run.ranks
        desc = (
            f"run {index}/{total} {r.run.run_id} ({r.run.model}, {ranks} rank"
            f"{'s' if ranks > 1 else ''})"
        )
        self.tasks[r.run.run_id] = bars.add_task(desc, total=r.run.epochs, epoch="starting")

    def run_progress(self, run_id: str, epoch: int, epochs: int) -> None:
        if self.progress is not None and run_id in self.tasks:
            self.progress.update(
                self.tasks[run_id], completed=epoch, total=epochs, epoch=f"epoch {epoch}/{epochs}"
            )

    def run_ended(self, r: Rendered, state: RunState, seconds: float, tail: str | None) -> None:
        done = state == RunState.COMPLETED
        if self.progress is not None:
            mark = "[green]done[/green]" if done else f"[red]{state.lower()}[/red]"
            fields: dict[str, Any] = {"epoch": f"{mark} in {seconds:.1f}s"}
            if done:
                fields["completed"] = r.run.epochs
            self.progress.update(self.tasks[r.run.run_id], **fields)
            if self.overall is not None:
                self.progress.advance(self.overall)
        if not done:  # the job's own text: a Text (no markup, no emoji), without escapes
            said = Text(f"run {r.run.run_id} {state.lower()}", style="red")
            said.append(f"; last lines of its log ({r.run_dir}):\n")
            said.append(printable(tail or "(nothing)"))
            err_console.print(said, highlight=False, emoji=False)
