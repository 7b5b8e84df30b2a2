"""A PyTorch profiler trace per rank from a user's unmodified program (issue #32).

`rankwrap.py --torch-trace DIR --trace-window SKIP,STEPS` puts this file's directory first on
the program's PYTHONPATH, so every Python the program starts (torchrun's workers, a shell
script's `python train.py`) runs it at start-up through `site`. Until the program imports
torch it costs one name comparison per import: torch is never imported here.

Once torch is imported, each optimizer's `step()` is wrapped (outside torch's own
`Optimizer.step#...` span, so ProfilerStep spans nest cleanly). The first optimizer that steps
is the clock (a GAN's two optimizers count once per iteration; when that optimizer is gone, the
next one to step takes over). An iteration ends at the clock's step, so the first iteration
(before any step is seen) is always one of the SKIP skipped ones (SKIP 0 traces as SKIP 1).
Skipped steps are only counted: no profiler exists yet, so outside the window a step costs a
counter. After step max(SKIP-1, 1) a `torch.profiler.profile` starts (CPU, CUDA when there
is one, record_shapes) with schedule(wait=0, warmup=1 when SKIP >= 2 else 0, active=STEPS,
repeat=1): iteration SKIP is its warm-up and the next STEPS iterations are traced, each a
`ProfilerStep#` span, then written to DIR/rank<r>.json (through .tmp and a rename) and the
profiler is gone. A program that ends inside the window gets what was traced by then, at exit
(its last span then runs to the exit).

A program that marks its own steps with `hpcscale.probe.step()` is counted by its marks instead:
from the first mark's start on, the probe calls `user_step_begin()` and `user_step_end()`
here, the end of each marked step ends an iteration (so the skip, the warm-up and the traced
steps are the program's own steps, each one `ProfilerStep#` span), and optimizer steps count for
nothing (no iteration counted twice, whatever its optimizers do).

A program that starts a profiler itself (torch.profiler or the autograd profiler) is left alone:
ours stops without writing and DIR/rank<r>.own-profiler says why, in one line.

Standalone, stdlib only, Python 3.9: it runs in the job's Python, which need not have hpcscale.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

# atexit, threading, warnings and weakref are imported once torch is: a program without torch
# loads nothing for this file beyond what `site` and importlib have loaded already

TRACE_DIR = "HPCSCALE_TORCH_TRACE"  # the directory the traces go to
WINDOW = "HPCSCALE_TRACE_WINDOW"  # "SKIP,STEPS"
RANK_FALLBACK = "HPCSCALE_TRACE_RANK"  # rankwrap's rank, when the launcher set no RANK
HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "_hpcscale_trace_boot"  # this module's name in sys.modules, whatever `sitecustomize` is


class _State:
    """What this process's tracing has reached (one per process)."""

    def __init__(self, trace_dir: str, skip: int, steps: int) -> None:
        self.trace_dir = trace_dir
        self.skip = skip
        self.steps = steps
        import threading

        self.lock = threading.Lock()
        self.clock: Any = None  # weakref to the optimizer whose steps count
        self.seen = 0  # the clock's steps so far
        # the profiler starts after this step: the iteration after it is the warm-up (when
        # SKIP >= 2), the STEPS after that are traced. The first iteration ends at the first
        # step seen, so it is always skipped: SKIP 0 traces as SKIP 1 does.
        self.start_at = max(skip - 1, 1)
        self.prof: Any = None  # our torch.profiler.profile, while it runs
        self.done = False  # written, abandoned, or never to start
        self.abandoned = False  # the program runs its own profiler
        self.user_marks = False  # the program marks its steps (hpcscale.probe.step())


STATE: _State | None = None


def _window(text: str) -> tuple[int, int] | None:
    skip, _, steps = text.partition(",")
    if not (skip.strip().isdigit() and steps.strip().isdigit()) or int(steps) < 1:
        return None
    return int(skip), int(steps)


def _rank() -> int:
    """The global rank: torch.distributed's when the group is up, else the launcher's RANK,
    else the one rankwrap found."""
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    for name in ("RANK", RANK_FALLBACK):
        text = os.environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return 0


def _path(state: _State, suffix: str) -> str:
    return os.path.join(state.trace_dir, f"rank{_rank()}{suffix}")


def _export(prof: Any) -> None:
    """on_trace_ready: the window's trace to DIR/rank<r>.json, whole or not at all."""
    state = STATE
    if state is None or state.abandoned:
        return
    final = _path(state, ".json")
    tmp = final + ".tmp"
    try:
        os.makedirs(state.trace_dir, exist_ok=True)
        prof.export_chrome_trace(tmp)
        os.replace(tmp, final)
    except Exception as exc:
        sys.stderr.write(f"hpcscale trace: cannot write {final}: {exc}\n")
    state.done = True
    state.prof = None


def _schedule(torch: Any, warmup: int, steps: int) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warmup=0 warns; a window at the start has no room
        return torch.profiler.schedule(wait=0, warmup=warmup, active=steps, repeat=1)


def _start(torch: Any, state: _State) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    prof = torch.profiler.profile(
        activities=activities,
        record_shapes=True,
        schedule=_schedule(torch, 1 if state.skip >= 2 else 0, state.steps),
        on_trace_ready=_export,
    )
    import atexit

    state.prof = prof
    prof.start()
    atexit.register(_at_exit)


def _at_exit() -> None:
    """A program that ends inside the window: what was traced by then."""
    state = STATE
    if state is not None and state.prof is not None and not state.done:
        prof, state.prof = state.prof, None
        with contextlib.suppress(Exception):
            prof.stop()
        state.done = True


def _stepped(torch: Any, optimizer: Any) -> None:
    """After an optimizer's step: the clock's steps start and step the profiler."""
    state = STATE
    if state is None or state.done or state.user_marks:
        return
    with state.lock:
        if state.done or state.user_marks:
            return
        clock = state.clock() if state.clock is not None else None
        if clock is None:  # the first optimizer to step (or the next, once that one is gone)
            import weakref

            state.clock = weakref.ref(optimizer)
        elif clock is not optimizer:
            return
        state.seen += 1
        if state.prof is not None:
            state.prof.step()
        elif state.seen == state.start_at:
            _start(torch, state)


def user_step_begin() -> None:
    """A step the program marks itself begins: its marks are the clock from now on."""
    state = STATE
    if state is not None and not state.user_marks:
        with state.lock:
            state.user_marks = True
            state.clock = None


def user_step_end() -> None:
    """A step the program marked has ended: it ends an iteration, as the clock's step does."""
    state = STATE
    if state is None or state.done:
        return
    torch = sys.modules.get("torch")
    with state.lock:
        if state.done:
            return
        state.user_marks = True
        state.seen += 1
        if state.prof is not None:
            state.prof.step()
        elif state.seen >= state.start_at and torch is not None:
            _start(torch, state)  # (a program that imports torch late starts it late)


def _own_profiler(what: str) -> None:
    """The program started a profiler: ours stops without writing, and says so once."""
    state = STATE
    if state is None or state.abandoned:
        return
    state.abandoned = True
    prof, state.prof = state.prof, None
    state.done = True
    if prof is not None:
        with contextlib.suppress(Exception):
            prof.stop()  # on_trace_ready does nothing now
    note = _path(state, ".own-profiler")
    try:
        os.makedirs(state.trace_dir, exist_ok=True)
        with open(note, "w") as f:
            f.write(
                f"rank {_rank()}: the program runs {what} itself; hpcscale's trace left out"
                f" (pid {os.getpid()})\n"
            )
    except OSError:
        pass


def _hook_profilers(torch: Any) -> None:
    """Notice a profiler the program starts (ours is told apart by identity)."""

    def watch(cls: Any, method: str, what: str) -> None:
        real = cls.__dict__.get(method)
        if real is None:
            return

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            state = STATE
            if state is not None and self is not state.prof and not state.abandoned:
                _own_profiler(what)
            return real(self, *args, **kwargs)

        wrapper.__wrapped__ = real  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(real, "__name__", method)
        setattr(cls, method, wrapper)

    profiler = importlib.import_module("torch.profiler.profiler")
    watch(profiler.profile, "start", "torch.profiler")
    watch(profiler._KinetoProfile, "start", "torch.profiler")
    autograd = importlib.import_module("torch.autograd.profiler")
    watch(autograd.profile, "__enter__", "torch.autograd.profiler")


def _hook_steps(torch: Any) -> None:
    """Every optimizer's step tells us it has finished: around the wrapper torch puts on each
    optimizer class's step (so our step boundary lies outside its Optimizer.step span); a torch
    without that wrapper gets the global post-step hook."""
    opt = importlib.import_module("torch.optim.optimizer")
    Optimizer = opt.Optimizer
    inner = Optimizer.__dict__.get("profile_hook_step")
    if isinstance(inner, staticmethod):
        real = inner.__func__

        def profile_hook_step(func: Any) -> Any:
            wrapped = real(func)

            def step(*args: Any, **kwargs: Any) -> Any:
                out = wrapped(*args, **kwargs)
                if STATE is not None and not STATE.done and args:
                    _stepped(torch, args[0])
                return out

            for attr in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__"):
                if hasattr(wrapped, attr):
                    setattr(step, attr, getattr(wrapped, attr))
            return step

        Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        return
    register = getattr(opt, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(lambda optimizer, _args, _kwargs: _stepped(torch, optimizer))


def _torch_loaded(torch: Any) -> None:
    try:
        _hook_profilers(torch)
        _hook_steps(torch)
    except Exception as exc:
        sys.stderr.write(f"hpcscale trace: not tracing this torch: {exc!r}\n")
        if STATE is not None:
            STATE.done = True


class _TorchWatch:
    """A meta-path finder that waits for `import torch`, runs `_torch_loaded` once torch's own
    module has run, then takes itself off the path."""

    busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        with_finder_gone(self)
        loader = spec.loader
        real = loader.exec_module

        def exec_module(module: Any) -> None:
            try:
                real(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module  # the loader's own method again
            _torch_loaded(module)

        loader.exec_module = exec_module  # this spec's loader object only
        return spec


def with_finder_gone(finder: Any) -> None:
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(finder)


def _chain() -> None:
    """The sitecustomize ours shadows (a site's, a venv's) runs as it would have."""
    ours = os.path.realpath(HERE)
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != ours]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                f"{type(exc).__name__}: {exc}\n"
            )


def _install() -> None:
    global STATE
    sys.modules[NAME] = sys.modules[__name__]
    trace_dir = os.environ.get(TRACE_DIR, "")
    window = _window(os.environ.get(WINDOW, "5,20"))
    if trace_dir and window is not None:
        STATE = _State(trace_dir, *window)
        torch = sys.modules.get("torch")
        if torch is not None:
            _torch_loaded(torch)
        else:
            sys.meta_path.insert(0, _TorchWatch())


if __name__ == "sitecustomize":
    _install()
    _chain()
