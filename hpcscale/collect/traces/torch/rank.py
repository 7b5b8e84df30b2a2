"""One rank's trace folded into intervals: its steps, collectives, compute and enqueue calls.

What the events mean (torch 2.13, Kineto; see the package docstring for the layout):
- CPU / gloo: a collective runs on one of gloo's worker threads (`pt_gloo_runloop`) as a
  `gloo:<op>` user annotation (nested `record_param_comms` or `c10d::*` there are the same
  collective); two workers may run collectives at once, so communication is their union. The
  training thread enqueues each one through a `c10d::<op>` call (in enqueue order); its other
  `cpu_op` and `user_annotation` spans, less those calls, are its forward, backward and
  optimizer work. `ProfilerStep#N` spans on it are the steps.
- GPU / NCCL: `kernel` events named `nccl*` are communication, every other kernel compute.
  A kernel's collective is its `Collective name` arg (newer Kineto); an older trace names
  every NCCL kernel alike (`ncclKernel_SendRecv_*` under `c10d::allreduce_` too) and says no
  collective, so the kernel is traced back to its launch: the `cuda_runtime` call with the
  kernel's `correlation` (what the `ac2g` flow draws), and the `c10d::*`, `record_param_comms`
  and `nccl:*` spans around that call on its thread, innermost first, give the collective and
  its size. (An older kernel's `External id` is its correlation, no CPU op's id: not used.)
  Memory copies and sets (`gpu_memcpy`, `gpu_memset`) are neither: they are data movement,
  not the model's arithmetic (on one of HTA's traces counting them would add 20 % to compute).

Times become integer ns (Kineto writes µs with three decimals) so unions are exact.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from hpcscale.collect import intervals as iv
from hpcscale.collect.traces.torch.stream import Event, Stream, iter_batches

STEP = re.compile(r"ProfilerStep#(\d+)")
# spans that are no forward/backward/optimizer work: steps and communication calls
SPECIAL = ("ProfilerStep#", "gloo:", "c10d::", "record_param_comms", "nccl:")
WORK_CATS = frozenset({"cpu_op", "user_annotation"})
# Kineto's dtype names (c10 scalar types as torch prints them, and record_param_comms' own)
DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "half": 2, "bfloat16": 2,
    "long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2, "signed char": 1,
    "unsigned char": 1, "bool": 1, "byte": 1, "char": 1, "int64": 8, "int32": 4,
    "float32": 4, "float64": 8, "float16": 2, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}  # fmt: skip
OTHER, WORK, NAMED, LAUNCH = 3, 1, 2, 4  # kinds of span (non-zero: a cache hit is truthy)
_NO_NAMES: dict[str, int] = {}  # a category not seen yet (never written to)


class CommArgs(msgspec.Struct, gc=False):
    input_dims: list[object] | None = msgspec.field(default=None, name="Input Dims")
    input_type: list[object] | None = msgspec.field(default=None, name="Input type")
    nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    dtype: str | None = None
    collective: str | None = msgspec.field(default=None, name="Collective name")
    correlation: int | None = None


class LaunchArgs(msgspec.Struct, gc=False):
    correlation: int | None = None


COMM_ARGS = msgspec.json.Decoder(CommArgs)
LAUNCH_ARGS = msgspec.json.Decoder(LaunchArgs)
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})


def op_of(name: str) -> str:
    """The collective a span names: `gloo:all_reduce`, `c10d::allreduce_` and
    `ncclDevKernel_AllReduce_Sum_f32_RING_LL` all say allreduce."""
    base = name.split(":")[-1].split("(")[0].lower().strip("_")
    for op in ("allreduce", "all_reduce"):
        if op in base:
            return "allreduce"
    return re.sub(r"[^a-z]", "", base.split("_sum")[0]) or name


def is_nccl_kernel(name: str) -> bool:
    return name.lower().startswith("nccl")


def _args(raw: msgspec.Raw) -> CommArgs:
    """A collective span's (or NCCL kernel's) args; none where they do not decode."""
    if not raw:
        return CommArgs()
    try:
        return COMM_ARGS.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return CommArgs()


def _correlation(raw: msgspec.Raw) -> int | None:
    """A launch call's `correlation` (the id its kernel carries)."""
    try:
        return LAUNCH_ARGS.decode(raw).correlation if raw else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _bytes(raw: msgspec.Raw | CommArgs) -> int:
    """The bytes a collective span's args say it moves (-1: not said): `In msg nelems` and
    `dtype` (record_param_comms, NCCL kernels), else the input tensors' `Input Dims` and `Input
    type` (with record_shapes)."""
    a = raw if isinstance(raw, CommArgs) else _args(raw)
    if a.nelems is not None and a.dtype:
        size = DTYPE_BYTES.get(a.dtype.lower())
        return -1 if size is None else a.nelems * size
    if not a.input_dims or not a.input_type:
        return -1
    size = DTYPE_BYTES.get(str(a.input_type[0]).lower())
    if size is None:
        return -1

    def count(dims: object) -> int:  # a tensor [n, m] or a list of them [[n], [m]]
        if isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims):
            return sum(count(d) for d in dims)
        if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
            return int(np.prod(dims)) if dims else 1
        return -(1 << 60)

    n = count(a.input_dims[0])
    return n * size if n >= 0 else -1


def _ns(us: np.ndarray) -> np.ndarray:
    """µs (float) -> integer ns, whole µs apart from their fraction: Unix µs (older traces)
    times 1000 would pass 2**53, where a float64 no longer holds every ns."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


class SortedUnion:
    """A thread's (or stream's) busy time as sorted, disjoint intervals, built as the batches
    come. Kineto writes each thread's events by start time, so everything before the last
    block is final once a batch is folded in, and no re-sorting of the whole set is needed;
    spans that start before the final part ends (another writer's order) are kept apart and
    unioned at the end."""

    def __init__(self) -> None:
        self.done: list[np.ndarray] = []
        self.cur: np.ndarray | None = None
        self.final_end = -(1 << 62)
        self.late: list[np.ndarray] = []

    def add(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        if int(rows[:, 0].min()) <= self.final_end:
            self.late.append(iv.union(rows))
            return
        u = iv.union(rows if self.cur is None else np.concatenate((self.cur, rows)))
        if len(u) > 1:
            self.done.append(u[:-1])
            self.final_end = int(u[-2, 1])
        self.cur = u[-1:]

    def get(self) -> iv.Intervals:
        """The whole set (after the last `add`)."""
        parts = [*self.done, *([] if self.cur is None else [self.cur])]
        out = np.concatenate(parts) if parts else iv.EMPTY.copy()
        if self.late:
            out = iv.union(np.concatenate((out, *self.late)))
        self.done, self.cur, self.late = [out], None, []  # one copy from now on
        return out


@dataclass
class Coll:
    """One collective span: ns start and end, its thread or stream, op, bytes (-1: unknown);
    an NCCL kernel's own `Collective name` and `correlation` where its args give them."""

    t0: int
    t1: int
    tid: int | str
    name: str
    bytes: int
    collective: str | None = None
    correlation: int | None = None


@dataclass
class Launches:
    """The kernel launch calls (`cuda_runtime`), as arrays a batch at a time (a GPU trace has
    one per kernel, millions in a big one): correlation, ns time, thread."""

    corr: list[np.ndarray] = field(default_factory=list)
    t0: list[np.ndarray] = field(default_factory=list)
    tids: list[list[int | str]] = field(default_factory=list)

    def add(self, corr: list[int], t0: np.ndarray, tids: list[int | str]) -> None:
        self.corr.append(np.array(corr, np.int64))
        self.t0.append(t0)
        self.tids.append(tids)

    def find(self, wanted: set[int]) -> dict[int, tuple[int, int | str]]:
        """correlation -> (time, thread) of the launches of the `wanted` kernels."""
        out: dict[int, tuple[int, int | str]] = {}
        want = np.fromiter(wanted, np.int64, len(wanted))
        for corr, t0, tids in zip(self.corr, self.t0, self.tids, strict=True):
            for i in np.flatnonzero(np.isin(corr, want)).tolist():
                out[int(corr[i])] = (int(t0[i]), tids[i])
        return out


@dataclass
class RankTrace:
    """What one rank's file holds, folded (all times ns on the trace's own axis)."""

    path: Path
    stream: Stream
    events: int = 0
    metadata: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    steps: list[tuple[int, int, int, int | str]] = field(default_factory=list)  # (n, t0, t1, tid)
    colls: list[Coll] = field(default_factory=list)
    calls: list[tuple[int, int, int | str, str]] = field(default_factory=list)  # c10d enqueues
    # every CPU-side collective span (c10d::, record_param_comms, nccl:): a kernel's launchers
    # (t0, t1, tid, name, bytes, collective name)
    launchers: list[tuple[int, int, int | str, str, int, str | None]] = field(default_factory=list)
    launches: Launches = field(default_factory=Launches)
    work: dict[int | str, SortedUnion] = field(default_factory=dict)
    kernels: dict[int | str, SortedUnion] = field(default_factory=dict)
    gpu: bool = False
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)  # cat -> name -> kind
    tid: int | str | None = None

    @property
    def rank(self) -> int | None:
        r = self.stream.header.distributed.get("rank")
        return r if isinstance(r, int) else None

    @property
    def base_time_ns(self) -> int | None:
        return self.stream.header.base_time_ns

    def training_tid(self) -> int | str | None:
        """The thread with the ProfilerStep markers, else the one enqueueing collectives, else
        the busiest (fixed by `finish`)."""
        if self.tid is not None:
            return self.tid
        if self.steps:
            return self.steps[0][3]
        if self.calls:
            return self.calls[0][2]
        if self.work:
            return max(self.work, key=lambda t: iv.sum_lengths(self.work[t].get()))
        return None

    def enqueues(self) -> list[tuple[int, int, str]]:
        """The training thread's c10d calls in order, those nested in another dropped."""
        tid = self.training_tid()
        out: list[tuple[int, int, str]] = []
        for t0, t1, t, name in sorted(self.calls):
            if t != tid:
                continue
            if out and t1 <= out[-1][1]:
                continue
            out.append((t0, t1, name))
        return out

    def comm(self) -> iv.Intervals:
        return iv.union([(c.t0, c.t1) for c in self.colls])

    def busy_and_calls(self) -> tuple[iv.Intervals, iv.Intervals]:
        """Compute is the first less the second (see measure.Compute): GPU, the compute
        kernels on every stream and nothing; CPU, the training thread's work and its c10d
        calls."""
        if self.gpu:
            streams = [u.get() for u in self.kernels.values()]
            busy = (
                streams[0] if len(streams) == 1 else iv.union(np.concatenate(streams or [iv.EMPTY]))
            )
            return busy, iv.EMPTY.copy()
        tid = self.training_tid()
        if tid is None or tid not in self.work:
            return iv.EMPTY.copy(), iv.EMPTY.copy()
        return self.work[tid].get(), iv.union([(t0, t1) for t0, t1, _ in self.enqueues()])

    def drop_busy(self) -> None:
        """Let go of the busy time (the big part) once it has been measured."""
        self.work.clear()
        self.kernels.clear()
        self.kinds.clear()

    # ------------------------------------------------------------ folding

    def fold(self, batch: list[Event]) -> None:
        """One batch: its time stamps as arrays; the few named spans (steps, collectives,
        kernels) one by one; every other span of the work categories into its thread's union."""
        phs = [e.ph for e in batch]  # one pass: counted in C, filtered only where needed
        meta, n = phs.count("M"), phs.count("X")
        self.metadata += meta
        self.events += len(batch) - meta
        if not n:
            return
        xs = (
            batch if n == len(batch) else [e for e, ph in zip(batch, phs, strict=True) if ph == "X"]
        )
        t0 = _ns(np.array([e.ts for e in xs], np.float64))
        dur = np.rint(np.array([e.dur for e in xs], np.float64) * 1000)
        t1 = t0 + np.maximum(dur, 0).astype(np.int64)
        codes: dict[int | str, int] = {}
        tid_code = np.array([codes.setdefault(e.tid, len(codes)) for e in xs], np.int64)
        real = np.array([type(e.pid) is int for e in xs], bool)
        if real.any():
            lo, hi = int(t0[real].min()), int(t1[real].max())
            self.first_ns = lo if self.first_ns is None else min(self.first_ns, lo)
            self.last_ns = hi if self.last_ns is None else max(self.last_ns, hi)
        cache, kind_of, none = self.kinds, self._kind, _NO_NAMES
        # by cat, then name: no (cat, name) tuple made per event
        kind = np.array(
            [cache.get(e.cat, none).get(e.name) or kind_of(e.cat, e.name) for e in xs], np.int64
        )
        work = kind == WORK
        kernels: dict[int | str, list[int]] = {}
        for i in np.flatnonzero(kind == NAMED).tolist():
            e = xs[i]
            a, b, name = int(t0[i]), int(t1[i]), e.name
            if e.cat == "kernel":
                self.gpu = True
                if is_nccl_kernel(name):
                    args = _args(e.args)
                    self.colls.append(
                        Coll(a, b, e.tid, name, _bytes(args), args.collective, args.correlation)
                    )
                else:
                    kernels.setdefault(e.tid, []).append(i)
            elif e.cat not in WORK_CATS:
                continue
            elif name.startswith("ProfilerStep#"):
                m = STEP.match(name)
                if m:
                    self.steps.append((int(m.group(1)), a, b, e.tid))
            elif name.startswith(("c10d::", "record_param_comms", "nccl:")):
                args = _args(e.args)
                size = _bytes(args)
                self.launchers.append((a, b, e.tid, name, size, args.collective))
                if name.startswith("c10d::"):
                    self.calls.append((a, b, e.tid, name))
                elif name == "record_param_comms":
                    self.colls.append(Coll(a, b, e.tid, name, size))
            elif name.startswith("gloo:"):
                self.colls.append(Coll(a, b, e.tid, name, _bytes(e.args)))
        launch = np.flatnonzero(kind == LAUNCH).tolist()
        if launch:
            known = [(i, c) for i in launch if (c := _correlation(xs[i].args)) is not None]
            if known:
                rows = [i for i, _ in known]
                self.launches.add([c for _, c in known], t0[rows], [xs[i].tid for i in rows])
        for stream, ks in kernels.items():
            self.kernels.setdefault(stream, SortedUnion()).add(np.column_stack((t0[ks], t1[ks])))
        if not work.any():
            return
        rows = np.column_stack((t0[work], t1[work]))
        tids = tid_code[work]
        for tid, code in codes.items():
            self.work.setdefault(tid, SortedUnion()).add(rows[tids == code])

    def _kind(self, cat: str, name: str) -> int:
        """What a span is: work, a named span (step, collective, kernel) or nothing we use."""
        if cat == "kernel" or (cat in WORK_CATS and name.startswith(SPECIAL)):
            k = NAMED
        elif cat in LAUNCH_CATS and "Launch" in name:
            k = LAUNCH
        else:
            k = WORK if cat in WORK_CATS else OTHER
        self.kinds.setdefault(cat, {})[name] = k
        return k

    def finish(self) -> None:
        """Order the steps; keep, per thread, the outermost of nested collective spans (a
        `record_param_comms` inside its `gloo:` span, a c10d call on a worker), so each
        collective is one span; a GPU trace's collectives are its kernels alone."""
        self.steps.sort(key=lambda s: s[1])
        colls = self.colls
        tid = self.tid = self.training_tid()
        colls += [Coll(t0, t1, t, name, -1) for t0, t1, t, name in self.calls if t != tid]
        if self.gpu:
            colls = [c for c in colls if is_nccl_kernel(c.name)]
            self._name_kernels(colls)
        colls.sort(key=lambda c: (c.t0, -c.t1))
        kept: list[Coll] = []
        last_end: dict[int | str, int] = {}
        for c in colls:
            if c.t1 <= last_end.get(c.tid, -(1 << 62)) and kept:
                outer = next(k for k in reversed(kept) if k.tid == c.tid)
                if outer.bytes < 0 <= c.bytes:
                    outer.bytes = c.bytes
                continue
            kept.append(c)
            last_end[c.tid] = c.t1
        self.colls = kept
        self.launchers.clear()
        self.launches = Launches()

    def _name_kernels(self, kernels: list[Coll]) -> None:
        """Each NCCL kernel named after its collective (see the module): its `Collective name`,
        else the spans around its launch, innermost first (their `Collective name`, else the
        innermost one's name); sized from them where the kernel's args give no size. A kernel
        whose name already says that collective keeps it."""
        wanted = {
            c.correlation for c in kernels if c.collective is None and c.correlation is not None
        }
        found = self.launches.find(wanted) if wanted else {}
        spans: dict[int | str, list[tuple[int, int, str, int, str | None]]] = {}
        for a, b, tid, name, size, coll in sorted(self.launchers, key=lambda s: s[0]):
            spans.setdefault(tid, []).append((a, b, name, size, coll))
        starts = {tid: [s[0] for s in ss] for tid, ss in spans.items()}
        for c in kernels:
            label = c.collective
            at = found.get(c.correlation) if c.correlation is not None else None
            if label is None and at is not None:
                t, tid = at
                ss = spans.get(tid, [])
                k = bisect.bisect_right(starts.get(tid, []), t)
                # nesting is shallow (c10d:: > record_param_comms > nccl:): a few back suffice
                around = [s for s in reversed(ss[max(0, k - 16) : k]) if s[1] >= t]
                if around:
                    label = next((s[4] for s in around if s[4]), around[0][2])
                    if c.bytes < 0:
                        c.bytes = next((s[3] for s in around if s[3] >= 0), -1)
            if label and op_of(label) not in op_of(c.name):
                c.name = label if ":" in label else f"nccl:{label}"


def read_rank(path: Path) -> RankTrace:
    """Fold one file (TraceError: not a trace; OSError: unreadable)."""
    st = Stream()
    rt = RankTrace(path=path, stream=st)
    for batch in iter_batches(path, st):
        rt.fold(batch)
    rt.finish()
    return rt
