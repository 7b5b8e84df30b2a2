"""What every rank of a command workload runs through: keeps which rank wrote each line.

Job output mixes every rank's lines with no mark of who wrote them, so an extractor cannot tell
rank 0's rate from rank 1's. Each rank runs `python -I rankwrap.py --dir RUN_DIR -- PROGRAM...`:
the program's stdout and stderr go on to the job's (merged) output unchanged, and its lines are
also written to `RUN_DIR/ranks/<rank>.out`. The rank comes from the launcher's own variables
(no launcher flag such as `srun --label`: under `srun ... torchrun` a task is a node, not a rank).
Signals are passed to the program; the wrapper exits as the program did.

Standalone and stdlib only: the job's Python (a site's 3.9, a conda env) need not have hpcscale
installed, so it is run by its file path, never imported there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO

RANKS_DIR = "ranks"  # per-rank output files: ranks/<rank>.out in the run directory
# Launcher variables naming this process's rank, most specific first. SLURM_PROCID comes last:
# a batch script's own step sets it to 0, and mpirun's ranks inside the job inherit that.
RANK_VARS = (
    "OMPI_COMM_WORLD_RANK",  # Open MPI's mpirun (and horovodrun over it)
    "PMIX_RANK",  # srun --mpi=pmix, Open MPI 4+
    "PMI_RANK",  # MPICH/Intel MPI Hydra, srun --mpi=pmi2
    "MV2_COMM_WORLD_RANK",  # MVAPICH2's mpirun_rsh
    "HOROVOD_RANK",  # horovodrun --gloo
    "SLURM_PROCID",  # srun
)
CHUNK = 1 << 16
LINE_CAP = 1 << 20  # a partial line longer than this goes to the rank file unfinished
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT")


def rank_of(env: Mapping[str, str]) -> int:
    """This process's rank from the launcher's variables (0 when none is set: one process)."""
    for name in RANK_VARS:
        text = env.get(name, "").strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return 0


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


def _parse(argv: list[str]) -> tuple[str, list[str]]:
    if len(argv) < 4 or argv[0] != "--dir" or argv[2] != "--":
        sys.stderr.write("usage: rankwrap.py --dir RUN_DIR -- PROGRAM [ARG...]\n")
        sys.exit(2)
    return argv[1], argv[3:]


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> None:
    run_dir, program = _parse(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ) if env is None else env
    rank = rank_of(env)
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
