"""The figures' PNG bytes: a figure is drawn only when what it shows changed, and the figures to
draw are shared among the machine's cores.

Drawing is most of a report's time (constrained layout measures every label, Agg rasterises,
zlib compresses), and a report is mostly rebuilt from the data it had last time. So each figure
gets a digest of everything that draws it: the Figure as built (its artists, data, text and
styles, pickled: a label relabelled after the figure function returned counts) and what
matplotlib reads only when it draws (its version, the global rcParams, the DPI). The digest is
written into the PNG itself (a tEXt chunk), never into a file beside it that a crash could leave
out of step; the next report reuses the bytes of the file it is about to replace when their
digests agree, and draws the figure again on any difference. A figure that does not pickle
has no digest and is always drawn. Before any of that, a figure built while `reuse.reusing`
may not have been built at all: a `reuse.ReusedFigure` is the PNG drawn before from the same
inputs, its bytes taken as they are.

The figures left to draw are split among up to MAX_WORKERS processes forked with them in memory
(Linux only: forking copies the built figures, nothing is pickled across), each taking the next
figure from a shared pipe, largest first; anything a worker could not return is drawn here.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import signal
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcscale.report.figures import reuse
from hpcscale.report.figures.style import DPI
from hpcscale.util.forks import can_fork

if TYPE_CHECKING:  # imported to draw: a report whose figures are all reused draws none
    from matplotlib.figure import Figure

KEY = "hpcscale figure"  # the PNG text chunk that holds the digest
DIGEST_VERSION = reuse.CONTENT_VERSION  # bump it when what a digest covers changes
MAX_WORKERS = 4  # processes drawing at once, this one included
MIN_WAIT_S = 30.0  # for a worker's last figures once this process has drawn its own
_INDEX = struct.Struct(">H")  # a figure's index in the work pipe
MAX_PIPED = 4096 // _INDEX.size  # figures whose indices fit the smallest pipe buffer


def drawing_environment() -> bytes:
    """What matplotlib reads at draw time rather than from the figure (`reuse`)."""
    return reuse.drawing_environment(DPI)


def digest(fig: Figure, environment: bytes | None = None) -> str | None:
    """The figure's content digest (see the module), or None when it does not pickle;
    `environment`: `drawing_environment()`, when the caller digests several figures."""
    return reuse.digest(fig, drawing_environment() if environment is None else environment)


def stored_digest(png: bytes) -> str | None:
    """The digest written in a PNG this module drew (None: not a PNG, or none in it)."""
    return reuse.text_chunks(png).get(KEY)


def draw(fig: Figure, fig_digest: str | None = None) -> bytes:
    """The figure as PNG at the report's DPI, its digest (when it has one) written in it.

    The bytes `savefig` writes, drawn once: `savefig` lays a constrained figure out inside a
    whole draw with painting switched off and then draws it again; here the layout engine runs
    alone on the renderer that then draws (its text measured once). Where the rcParams change
    what `savefig` does (a face colour, a tight box, transparency) it is `savefig`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buf = io.BytesIO()
    meta = {KEY: fig_digest, **reuse.chunk_for(fig, fig_digest)} if fig_digest else {}
    if not _plain_savefig():
        fig.savefig(buf, format="png", dpi=DPI, metadata=meta)
        return buf.getvalue()
    engine, dpi = fig.get_layout_engine(), fig.dpi
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(DPI)
    try:
        if engine is not None:
            engine.execute(fig)
            fig.set_layout_engine("none")  # laid out: the draw keeps these positions
        canvas.print_png(buf, metadata=meta)
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
        fig.set_dpi(dpi)
    return buf.getvalue()


def _plain_savefig() -> bool:
    """The rcParams leave `savefig` nothing to add to a drawn PNG."""
    import matplotlib

    rc = matplotlib.rcParams
    return (
        all(str(rc[f"savefig.{k}"]) == "auto" for k in ("facecolor", "edgecolor"))
        and rc["savefig.bbox"] in (None, "standard")
        and not rc["savefig.transparent"]
    )


def figure_pngs(figures: Sequence[Figure | Any], previous: Sequence[Path | None]) -> list[bytes]:
    """Each figure's PNG: a `reuse.ReusedFigure`'s bytes (drawn before from the same inputs);
    the bytes of its `previous` file when that file was drawn from the same content (same
    digest); else drawn now (in parallel when several are)."""
    out: list[bytes | None] = [
        f.reused_png if isinstance(f, reuse.ReusedFigure) else None for f in figures
    ]
    built = [reuse.resolved(f) for f in figures]
    environment = drawing_environment() if any(png is None for png in out) else b""
    digests = [
        digest(f, environment) if png is None else None for f, png in zip(built, out, strict=True)
    ]
    for i, (d, path) in enumerate(zip(digests, previous, strict=True)):
        if out[i] is None and d is not None and path is not None:
            png = _reusable(path, d)  # the same content: its inputs now lead to it too
            out[i] = None if png is None else reuse.with_text(png, reuse.chunk_for(built[i], d))
    todo = [i for i, png in enumerate(out) if png is None]
    drawn = draw_all([built[i] for i in todo], [digests[i] for i in todo])
    for i, png in zip(todo, drawn, strict=True):
        out[i] = png
    return [png or b"" for png in out]


def _reusable(path: Path, fig_digest: str) -> bytes | None:
    """The file's bytes when it holds the figure of this digest (read once: what is checked is
    what is reused)."""
    try:
        png = path.read_bytes()
    except OSError:
        return None
    whole = png.endswith(reuse.PNG_END)  # the digest comes first: a file cut short is drawn
    return png if whole and stored_digest(png) == fig_digest else None


def workers(count: int) -> int:
    """Processes to draw `count` figures with: the cores this process may use, at most
    MAX_WORKERS and `count`; 1 where forking a process with its figures is not safe."""
    # the work pipe is filled before any worker reads it: at most 4 kB, the smallest pipe
    if not 2 <= count <= MAX_PIPED or sys.platform != "linux" or not can_fork():
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS, count))


def draw_all(figures: Sequence[Figure], digests: Sequence[str | None]) -> list[bytes]:
    """`draw` of every figure, shared among `workers` processes (see the module)."""
    n = workers(len(figures))
    if n == 1:
        return [draw(f, d) for f, d in zip(figures, digests, strict=True)]
    # largest first: the last figure taken then is a small one, and the processes end together
    order = sorted(range(len(figures)), key=lambda i: -_area(figures[i]))
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(_INDEX.pack(i) for i in order))  # <= 4 kB: never blocks
    os.close(write_end)  # empty pipe: a read returns b"", the work is done
    sys.stdout.flush()
    sys.stderr.flush()
    children: list[tuple[int, int]] = []
    out: dict[int, bytes] = {}
    start = time.monotonic()
    try:
        for _ in range(n - 1):
            try:
                children.append(_fork_worker(read_end, figures, digests))
            except OSError:  # no process to spare (a login node's limit): fewer workers
                break
        out.update(_take(read_end, figures, digests))
    finally:
        os.close(read_end)
        # a worker has a figure or so left when this process is done: one that takes far
        # longer is stuck (a lock held by a thread at the fork), and its figures are drawn here
        deadline = time.monotonic() + max(MIN_WAIT_S, 4 * (time.monotonic() - start))
        for pid, results in children:
            out.update(_collect(pid, results, deadline))
    # what a worker did not return (it failed, or was killed) is drawn here
    return [out[i] if i in out else draw(f, digests[i]) for i, f in enumerate(figures)]


def _area(fig: Figure) -> float:
    width, height = fig.get_size_inches()
    return float(width * height)


def _take(work: int, figures: Sequence[Figure], digests: Sequence[str | None]) -> dict[int, bytes]:
    """Draw figures taken from the work pipe until it is empty (reads of two bytes are atomic:
    no figure is taken twice)."""
    out = {}
    while len(got := os.read(work, _INDEX.size)) == _INDEX.size:
        (i,) = _INDEX.unpack(got)
        out[i] = draw(figures[i], digests[i])
    return out


def _fork_worker(
    work: int, figures: Sequence[Figure], digests: Sequence[str | None]
) -> tuple[int, int]:
    """A forked process drawing from the work pipe; (its pid, the pipe its PNGs come back on).
    It sends them once the work is done (a full pipe would otherwise stall it)."""
    results_read, results_write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(results_read)
        os.close(results_write)
        raise
    if pid == 0:  # the worker: never returns, never runs the parent's exit handlers
        code = 1
        try:
            os.close(results_read)
            done = _take(work, figures, digests)
            with open(results_write, "wb") as fh:
                pickle.dump(done, fh, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(results_write)
    return pid, results_read


def _collect(pid: int, results: int, deadline: float) -> dict[int, bytes]:
    """A worker's PNGs by figure index, once it has ended; {} when it sent nothing whole by the
    `deadline` (time.monotonic()), when it is killed."""
    chunks: list[bytes] = []
    try:
        while _readable(results, deadline):
            if not (chunk := os.read(results, 1 << 20)):
                break  # all sent
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            chunks = []
    finally:
        os.close(results)
        os.waitpid(pid, 0)
    try:
        got = pickle.loads(b"".join(chunks))
    except Exception:  # nothing, or part of what a worker sent: its figures are drawn here
        return {}
    return got if isinstance(got, dict) else {}


def _readable(fd: int, deadline: float) -> bool:
    """Whether `fd` has data (or its end) before the deadline."""
    wait = deadline - time.monotonic()
    return wait > 0 and bool(select.select([fd], [], [], wait)[0])
