"""What every rank of a command workload runs through: keeps which rank wrote each line.

Job output mixes every rank's lines with no mark of who wrote them, so an extractor cannot tell
rank 0's rate from rank 1's. Each rank runs `python -I rankwrap.py --dir RUN_DIR -- PROGRAM...`:
the program's stdout and stderr go on to the job's (merged) output unchanged, and its lines are
also written to `RUN_DIR/ranks/<rank>.out`. The rank comes from the launcher's own variables
(no launcher flag such as `srun --label`: under `srun ... torchrun` a task is a node, not a rank).
Signals are passed to the program; the wrapper exits as the program did.

With `--torch-trace DIR --trace-window SKIP,STEPS` the program's Pythons start a PyTorch
profiler themselves: rankwrap_boot/ (beside this file) goes first on PYTHONPATH, and its
sitecustomize.py writes one trace per rank, DIR/rank<r>.json, once torch is imported (its
docstring says how steps are counted). Pythons run with -I or -E ignore PYTHONPATH: no trace.

Standalone and stdlib only: the job's Python (a site's 3.9, a conda env) need not have hpcscale
installed, so it is run by its file path, never imported there; the launchers' rank variables
it reads from hpcscale/model/registry.py (stdlib only too) by that file's path beside it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any


def _registry_by_path() -> Any:
    """hpcscale/model/registry.py read by its path beside this file: this file is run by the
    job's Python, which need not have hpcscale installed (the registry is stdlib only, 3.9)."""
    name = "_hpcscale_registry"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model", "registry.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass reads its module's namespace
    spec.loader.exec_module(module)
    return module


# the launchers' rank variables (hpcscale.model.registry.RANK_ENV): imported where this module
# is imported, read by path where it is run
if __package__:
    from hpcscale.model import registry as _registry
else:
    _registry = _registry_by_path()
RANK_ENV = _registry.RANK_ENV

RANKS_DIR = "ranks"  # per-rank output files: ranks/<rank>.out in the run directory
# Launcher variables naming this process's rank, most specific first (the registry's order):
# a launcher's own marker must be set before its rank is trusted (torchrun's RANK: a common name)
RANK_VARS = tuple((env.rank, env.marker) for env in RANK_ENV.values())
CHUNK = 1 << 16
LINE_CAP = 1 << 20  # a partial line longer than this goes to the rank file unfinished
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT")


# PyTorch's launch contract (`--torch-env`), per launcher: rank, world size, local rank, local
# world size (None: from SLURM's tasks per node). Under torchrun they are set already.
TORCH_VARS: tuple[tuple[str, str, str, str | None], ...] = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)  # fmt: skip
TORCH_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
UNDER_TORCHRUN = RANK_ENV["torchrun"].marker  # set by torchrun for its workers


def rank_of(env: Mapping[str, str]) -> int:
    """This process's rank from the launcher's variables (0 when none is set: one process);
    srun ... torchrun: torchrun's RANK, as SLURM_PROCID is the node's task."""
    for name, marker in RANK_VARS:
        if marker and marker not in env:
            continue
        text = env.get(name, "").strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return 0


def _tasks_on_node(env: Mapping[str, str]) -> int | None:
    """This node's count in SLURM's tasks per node ("2(x3),1"), by SLURM_NODEID."""
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
    counts: list[int] = []
    for part in filter(None, spec.split(",")):
        count, _, times = part.partition("(x")
        if not count.isdigit() or (times and not times.rstrip(")").isdigit()):
            return None
        counts += [int(count)] * (int(times.rstrip(")")) if times else 1)
    node = env.get("SLURM_NODEID", "0")
    if not node.isdigit() or int(node) >= len(counts):
        return None
    return counts[int(node)]


def torch_env(env: Mapping[str, str]) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the launcher's own variables
    (the first launcher whose are all set; torchrun's own are kept as they are); {} when no
    launcher's are (one process: the program's defaults)."""
    if UNDER_TORCHRUN in env:
        return {}
    for rank, size, local, local_size in TORCH_VARS:
        values = [env.get(rank, ""), env.get(size, ""), env.get(local, "")]
        if not all(v.isascii() and v.isdigit() for v in values):
            continue
        per_node = env.get(local_size, "") if local_size else str(_tasks_on_node(env) or "")
        if not (per_node.isascii() and per_node.isdigit()):
            continue
        return dict(zip(TORCH_NAMES, (*values, per_node)))  # noqa: B905 (3.9: no strict=)
    return {}


def rank_file(run_dir: str, rank: int) -> str:
    return os.path.join(run_dir, RANKS_DIR, f"{rank}.out")


def _write_all(fd: int, data: bytes) -> bool:
    """All of `data` to `fd`; False once the reader has gone (the file still gets the lines)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return False
        view = view[n:]
    return True


class _Tee:
    """Copies the program's streams to the job's output as they come, and whole lines of both
    to the rank's file (a lock keeps stdout's and stderr's lines whole there)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def _file(self, data: bytes) -> None:
        with self.lock:
            try:
                self.out.write(data)
                self.out.flush()
            except (OSError, ValueError):
                pass  # a full disk must not stop the program's own output

    def pump(self, src: int, dest: int) -> None:
        partial = b""
        alive = True
        while True:
            try:
                data = os.read(src, CHUNK)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
            if alive:
                alive = _write_all(dest, data)
            partial += data
            cut = partial.rfind(b"\n") + 1
            if cut == 0 and len(partial) > LINE_CAP:
                cut = len(partial)
            if cut:
                self._file(partial[:cut])
                partial = partial[cut:]
        if partial:
            self._file(partial + b"\n")


def _forward_signals(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    def handler(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            proc.send_signal(signum)

    for name in FORWARDED:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, handler)


def _exit_like(code: int) -> None:
    """Exit as the program did: by the same signal when a signal ended it."""
    if code < 0:
        sig = -code
        try:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        sys.exit(128 + sig)
    sys.exit(code)


# --torch-trace: the bootstrap directory and what it is told through the environment (the
# names hpcscale/rankwrap_boot/sitecustomize.py reads)
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rankwrap_boot")
TRACE_DIR_VAR = "HPCSCALE_TORCH_TRACE"
TRACE_WINDOW_VAR = "HPCSCALE_TRACE_WINDOW"
TRACE_RANK_VAR = "HPCSCALE_TRACE_RANK"
TRACE_WINDOW = (5, 20)  # collect.trace_window's defaults: skip 5 steps, trace 20
USAGE = (
    "usage: rankwrap.py --dir RUN_DIR [--torch-env] [--torch-trace DIR "
    "[--trace-window SKIP,STEPS]] -- PROGRAM [ARG...]\n"
)


def _usage(why: str = "") -> None:
    sys.stderr.write((f"rankwrap: {why}\n" if why else "") + USAGE)
    sys.exit(2)


def _trace_window(text: str) -> tuple[int, int]:
    skip, _, steps = text.partition(",")
    if not (skip.isascii() and skip.isdigit() and steps.isascii() and steps.isdigit()):
        _usage(f"--trace-window wants SKIP,STEPS (two whole numbers), not {text!r}")
    if int(steps) < 1:
        _usage("--trace-window: STEPS must be at least 1")
    return int(skip), int(steps)


def _options(argv: list[str]) -> tuple[str, bool, str | None, tuple[int, int], list[str]]:
    """--dir RUN_DIR first, then the options in any order up to `--`, then the program."""
    if len(argv) < 2 or argv[0] != "--dir":
        _usage()
    run_dir, rest = argv[1], argv[2:]
    torch, trace, window = False, None, TRACE_WINDOW
    while rest and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--torch-env":
            torch = True
        elif flag in ("--torch-trace", "--trace-window") and rest and rest[0] != "--":
            value = rest.pop(0)
            if flag == "--torch-trace":
                trace = value
            else:
                window = _trace_window(value)
        else:
            _usage(f"unknown or incomplete option {flag!r}")
    if len(rest) < 2:
        _usage()
    return run_dir, torch, trace, window, rest[1:]


def trace_env(env: Mapping[str, str], trace_dir: str, window: tuple[int, int], rank: int
              ) -> dict[str, str]:  # fmt: skip
    """What the program's Pythons need to trace themselves: the bootstrap first on PYTHONPATH
    (the program's own entries after it), the trace directory, the window, and this rank for a
    program whose launcher sets no RANK."""
    path = env.get("PYTHONPATH", "")
    return {
        "PYTHONPATH": BOOT_DIR + (os.pathsep + path if path else ""),
        TRACE_DIR_VAR: os.path.abspath(trace_dir),
        TRACE_WINDOW_VAR: f"{window[0]},{window[1]}",
        TRACE_RANK_VAR: str(rank),
    }


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> None:
    run_dir, torch, trace, window, program = _options(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ) if env is None else env
    if torch:
        env.update(torch_env(env))
    rank = rank_of(env)
    if trace is not None:
        os.makedirs(trace, exist_ok=True)
        env.update(trace_env(env, trace, window, rank))
    os.makedirs(os.path.join(run_dir, RANKS_DIR), exist_ok=True)
    with open(rank_file(run_dir, rank), "wb") as out:
        try:
            proc = subprocess.Popen(
                program, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
        except OSError as exc:
            msg = f"rankwrap: cannot run {program[0]}: {exc}\n"
            out.write(msg.encode())
            _write_all(2, msg.encode())
            sys.exit(126 if isinstance(exc, PermissionError) else 127)
        _forward_signals(proc)
        tee = _Tee(out)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [
            threading.Thread(target=tee.pump, args=(proc.stdout.fileno(), 1), daemon=True),
            threading.Thread(target=tee.pump, args=(proc.stderr.fileno(), 2), daemon=True),
        ]
        for t in pumps:
            t.start()
        code = proc.wait()
        for t in pumps:
            t.join()
        proc.stdout.close()
        proc.stderr.close()
    _exit_like(code)


if __name__ == "__main__":
    main()
