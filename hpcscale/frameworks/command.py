"""A user's own program (`workload.command`): run unmodified through the per-rank wrapper
(hpcscale.rankwrap), laid out and launched as the framework its `strategy` names (Horovod's
by default), and told through the environment what a bundled program would switch on itself."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from hpcscale import rankwrap
from hpcscale.frameworks.base import Cell, Framework, Placement
from hpcscale.launchers import implied_strategy
from hpcscale.model.command import AS_WRITTEN, command_words, placeholder_values
from hpcscale.model.run import Run
from hpcscale.model.system import System, python_of

# Run by its path with -I (no user site, no script directory on sys.path): the job's Python
# need not have hpcscale installed, and hpcscale/'s own modules never shadow a stdlib one.
RANKWRAP = str(Path(rankwrap.__file__).resolve())
OWN_PROGRAM = "Your program"  # how tables name a command's runs: its framework may be none


def command_argv(run: Run, system: System, run_dir: str, rank_env: bool = False) -> list[object]:
    """A command workload's words for one rank, placeholders filled (quoted by the renderer),
    run through the per-rank wrapper (hpcscale.rankwrap): each rank's lines are also kept in
    `ranks/<rank>.out`, so extractors read one rank at a time, on every launcher."""
    assert run.command is not None
    python = python_of(system)
    own = None if run.interpreter == AS_WRITTEN else python  # workload.interpreter
    words = command_words(run.command, placeholder_values(run, run_dir), own)
    # `rank_env`: the borrowed framework's ranks meet at a rendezvous (torch): each gets
    # RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the launcher's variables
    torch: list[object] = ["--torch-env"] if rank_env else []
    if (window := run.trace_window) is not None:  # collect.timeline: the profiler, injected
        skip, steps = window["skip"], window["steps"]
        torch += ["--torch-trace", f"{run_dir}/traces", "--trace-window", f"{skip},{steps}"]
    return [python, "-I", RANKWRAP, "--dir", run_dir, *torch, "--", *words]


def command_env(run: Run, run_dir: str) -> dict[str, object]:
    """What a bundled program would switch on itself, given to the user's program through the
    environment Horovod reads: its timeline in the run directory."""
    env: dict[str, object] = {}
    if run.timeline:
        env["HOROVOD_TIMELINE"] = f"{run_dir}/timeline.json"
    if run.mark_cycles:
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = 1
    return env


class Command(Framework):
    """`borrowed`: the framework whose layout, knobs and launch contract the program follows."""

    name: ClassVar[str] = "command"

    def __init__(self, borrowed: Framework) -> None:
        self.borrowed = borrowed
        self.knobs = borrowed.knobs  # type: ignore[misc]
        self.trace = borrowed.trace  # type: ignore[misc]
        self.rendezvous = borrowed.rendezvous  # type: ignore[misc]
        self.python_modules = ()  # type: ignore[misc]  # the program imports what it needs

    def place(self, cell: Cell) -> Placement:
        return self.borrowed.place(cell)

    def argv(self, run: Run, system: System, run_dir: str) -> list[object]:
        return command_argv(run, system, run_dir, rank_env=self.borrowed.rendezvous)

    def env(self, run: Run, run_dir: str) -> dict[str, object]:
        own = command_env(run, run_dir) if self.trace == "horovod" else {}
        return {**self.borrowed.env(run, run_dir), **own}

    def single_process(self, run: Run) -> bool:
        return self.borrowed.single_process(run)

    def display_name(self, fields: Mapping[str, object]) -> str:
        """Named after the framework its campaign declared, or that its launcher implies
        (Launcher.implies_strategy); otherwise by its MPI: the program may use no framework."""
        if (label := self.borrowed.own_program_label) is not None:
            return f"{OWN_PROGRAM} ({label})"
        if implied_strategy(fields.get("launcher")) is not None:
            return self.borrowed.display_name(fields)
        return f"{OWN_PROGRAM} ({fields['mpi']})"
