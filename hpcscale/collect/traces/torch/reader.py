"""PyTorch profiler traces as a trace reader (hpcscale.collect.traces.base.TraceReader).

The summary is the Horovod timeline's shape with the same meanings, from rank 0's trace (the
rank whose steps.json the exact split uses): `category_us["comm"]` the union of its collective
spans, `comm_intervals` that union on its axis (µs since `start_time_since_epoch_us`, Kineto's
`baseTimeNanoseconds`), waits from the cross-rank match (`waits`); the extra fields say what
only a profiler trace knows: compute, overlap and exposed communication, per step and per rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hpcscale.collect import intervals as iv
from hpcscale.collect.traces.horovod.summary import TimelineSummary
from hpcscale.collect.traces.torch.measure import Compute
from hpcscale.collect.traces.torch.measure import clip as _clip
from hpcscale.collect.traces.torch.rank import RankTrace, op_of, read_rank
from hpcscale.collect.traces.torch.stream import TraceError
from hpcscale.collect.traces.torch.waits import match

TRACE_DIR = "traces"
FILE = re.compile(r"rank(\d+)\.json(\.gz)?(\.tmp)?$")
# Kineto's ts before baseTimeNanoseconds existed were Unix µs: anything past 2001 is one
UNIX_US = 10**15


def _us(ns: int) -> int:
    return (ns + 500) // 1000


def rank_files(trace_dir: Path) -> dict[int, tuple[Path, bool]]:
    """rank -> (its file, whether only a `.tmp` of it exists); a finished file beats a .tmp."""
    out: dict[int, tuple[Path, bool]] = {}
    for p in sorted(trace_dir.iterdir()):
        m = FILE.match(p.name)
        if not m or not p.is_file():
            continue
        r, tmp = int(m.group(1)), m.group(3) is not None
        if r not in out or (out[r][1] and not tmp):
            out[r] = (p, tmp)
    return out


@dataclass
class TorchTraceSummary(TimelineSummary):
    """TimelineSummary plus what a profiler trace alone says (µs unless named otherwise).

    `waits_known` False: `waits_us`, `waits_in_comm_us` are 0 only as placeholders and
    `rank_waits_us` holds None (see `waits_unknown_why`)."""

    device: str = "cpu"
    files: int = 0
    compute_us: int = 0
    overlap_us: int = 0
    exposed_comm_us: int = 0
    waits_known: bool = False
    waits_unknown_why: str = ""
    rank_waits_us: dict[int, int | None] = field(default_factory=dict)
    per_rank: dict[int, dict[str, int | None]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self, top: int = 10) -> dict[str, Any]:
        out = super().as_json(top)
        out.update(
            source="PyTorch profiler",
            device=self.device,
            compute_s=self.compute_us / 1e6,
            overlap_s=self.overlap_us / 1e6,
            exposed_comm_s=self.exposed_comm_us / 1e6,
            waits_known=self.waits_known,
            rank_waits_s={
                str(r): None if w is None else w / 1e6
                for r, w in sorted(self.rank_waits_us.items())
            },
            steps=self.steps,
        )
        if not self.waits_known:
            out["waits_s"] = out["waits_in_comm_s"] = None
            out["waits_unknown"] = self.waits_unknown_why
        return out


def _split(
    compute: Compute, comm: iv.Intervals, where: tuple[int, int] | None
) -> tuple[int, int, int, int]:
    """(compute, comm, overlap, exposed comm) inside `where` (None: everywhere), ns: compute
    and communication unioned each, the time both run, communication while no compute runs."""
    if where is not None:
        if where[1] <= where[0]:
            return 0, 0, 0, 0
        comm = _clip(comm, *where)
    both = compute.length(comm)
    comm_ns = iv.sum_lengths(comm)
    whole = None if where is None else np.asarray([where], dtype=np.int64)
    return compute.length(whole), comm_ns, both, comm_ns - both


def _window(rt: RankTrace, window_unix_us: tuple[int, int] | None) -> tuple[int, int] | None:
    """A Unix-epoch µs window on the rank's own axis (ns), None without a window or a known
    time of ts 0 (Kineto's baseTimeNanoseconds, or Unix µs time stamps in older traces)."""
    base = rt.base_time_ns
    if base is None and rt.first_ns is not None and rt.first_ns >= UNIX_US * 1000:
        base = 0
    if window_unix_us is None or base is None:
        return None
    return window_unix_us[0] * 1000 - base, window_unix_us[1] * 1000 - base


def summarise(
    trace_dir: Path, *, ranks: int | None = None, window_unix_us: tuple[int, int] | None = None
) -> TorchTraceSummary:
    """Every rank's trace under `trace_dir`, folded; the figures are rank 0's (the lowest
    rank present), the waits every rank's. Raises TraceError where no file is a trace."""
    files = rank_files(trace_dir)
    if not files:
        raise TraceError(f"no rank<r>.json[.gz] under {trace_dir}")
    traces: dict[int, RankTrace] = {}
    per_rank: dict[int, dict[str, int | None]] = {}
    first: tuple[int, Compute] | None = None  # the lowest rank's compute, for its steps
    tmp_any = False
    for r, (p, tmp) in files.items():
        try:
            rt = read_rank(p)
        except TraceError as exc:
            if tmp:  # a .tmp cut before its first event holds nothing: a killed job's
                tmp_any = True
                continue
            raise TraceError(f"{p.name}: {exc}") from exc
        rt.stream.truncated |= tmp
        rank = rt.rank if rt.rank is not None else r
        traces[rank] = rt
        # measured now and let go, so one rank's busy time is held at a time (and rank 0's)
        compute = Compute(*rt.busy_and_calls())
        rt.drop_busy()
        comp, comm, both, exposed = _split(compute, rt.comm(), _window(rt, window_unix_us))
        per_rank[rank] = {
            "compute_us": _us(comp),
            "comm_us": _us(comm),
            "overlap_us": _us(both),
            "exposed_comm_us": _us(exposed),
            "waits_us": None,
        }
        if first is None or rank < first[0]:
            first = (rank, compute)
    if not traces or first is None:
        raise TraceError("no readable rank trace")
    r0, compute0 = first
    t0 = traces[r0]
    base_ns = t0.base_time_ns
    if base_ns is None and t0.first_ns is not None and t0.first_ns >= UNIX_US * 1000:
        base_ns = 0
    start_us = None if base_ns is None else base_ns // 1000
    window_ns = _window(t0, window_unix_us)
    world = t0.stream.header.distributed.get("world_size")
    world = world if isinstance(world, int) else None
    waits = match(traces, world)

    def clip(x: iv.Intervals) -> iv.Intervals:
        return x if window_ns is None else _clip(x, *window_ns)

    def wait_ivs(r: int) -> iv.Intervals:
        if waits.per_rank is None:
            return iv.EMPTY.copy()
        own = _window(traces[r], window_unix_us)
        w = iv.union([(c.t0, c.t0 + w) for c, w in waits.per_rank[r] if w > 0])
        return w if own is None else _clip(w, *own)

    if waits.per_rank is not None:
        for r in per_rank:
            per_rank[r]["waits_us"] = _us(iv.sum_lengths(wait_ivs(r)))
    comm0 = clip(t0.comm())
    waits0 = wait_ivs(r0)
    s = TorchTraceSummary(
        path=str(trace_dir),
        size_bytes=sum(rt.stream.size_bytes for rt in traces.values()),
        format="kineto-json",
        device="gpu" if t0.gpu else "cpu",
        files=len(files),
        start_time_since_epoch_us=start_us,
    )
    s.events = sum(rt.events for rt in traces.values())
    s.metadata = sum(rt.metadata for rt in traces.values())
    lo, hi = t0.first_ns, t0.last_ns
    if lo is not None and hi is not None and window_ns is not None:
        lo, hi = max(lo, window_ns[0]), min(hi, window_ns[1])
    if lo is not None and hi is not None and lo <= hi:
        s.first_ts_us, s.last_ts_us = lo // 1000, -(-hi // 1000)
    s.category_us = {"comm": _us(iv.sum_lengths(comm0))}
    s.comm_intervals = iv.union(
        np.column_stack((comm0[:, 0] // 1000, -(-comm0[:, 1] // 1000))) if len(comm0) else comm0
    )
    s.compute_us = per_rank[r0]["compute_us"] or 0
    s.overlap_us = per_rank[r0]["overlap_us"] or 0
    s.exposed_comm_us = per_rank[r0]["exposed_comm_us"] or 0
    _collectives(s, t0, window_ns, waits.per_rank[r0] if waits.per_rank else None)
    s.waits_known = waits.per_rank is not None
    s.waits_unknown_why = waits.why
    if s.waits_known:
        s.waits_us = _us(iv.sum_lengths(waits0))
        s.waits_in_comm_us = _us(iv.sum_lengths(iv.intersection(waits0, comm0)))
        s.last_ready = {r: n for r, n in (waits.shortest or {}).items() if n}
        s.ticks = waits.matched
    s.rank_waits_us = {r: d["waits_us"] for r, d in per_rank.items()}
    s.per_rank = per_rank
    s.steps = _steps(t0, compute0, comm0, window_ns, waits0 if s.waits_known else None)
    s.ranks = ranks if ranks is not None else (world or len(files))
    s.truncated = any(rt.stream.truncated for rt in traces.values()) or tmp_any
    s.bad_records = sum(rt.stream.bad_events for rt in traces.values())
    s.window_us = (
        None if window_ns is None or start_us is None
        else (window_unix_us[0] - start_us, window_unix_us[1] - start_us)  # type: ignore[index]
    )  # fmt: skip
    return s


def _collectives(
    s: TimelineSummary,
    rt: RankTrace,
    window_ns: tuple[int, int] | None,
    waits: list[tuple[Any, int]] | None,
) -> None:
    """Counts by span name, per-name unions, allreduce bytes and time; the transfer part of
    the allreduces (their spans less the waits) stands for Horovod's transport activities."""
    lo, hi = window_ns if window_ns is not None else (-(1 << 62), 1 << 62)
    inside = [c for c in rt.colls if c.t1 >= lo and c.t0 <= hi]
    by_name: dict[str, list[tuple[int, int]]] = {}
    for c in inside:
        s.collectives[c.name] = s.collectives.get(c.name, 0) + 1
        by_name.setdefault(c.name, []).append((max(c.t0, lo), min(c.t1, hi)))
    s.activity_us = {n: _us(iv.length(rows)) for n, rows in by_name.items()}
    ar = [c for c in inside if op_of(c.name) == "allreduce"]
    s.allreduce_us = _us(iv.length([(max(c.t0, lo), min(c.t1, hi)) for c in ar]))
    known = [c.bytes for c in ar if c.bytes >= 0]
    s.allreduce_bytes, s.allreduce_tensors = sum(known), len(known)
    if waits is not None:
        wait_of = {id(c): w for c, w in waits}
        rows = [(max(c.t0 + wait_of.get(id(c), 0), lo), min(c.t1, hi)) for c in ar]
        s.allreduce_transport_us = _us(iv.length([r for r in rows if r[1] > r[0]]))


def _steps(
    rt: RankTrace,
    compute: Compute,
    comm: iv.Intervals,
    where: tuple[int, int] | None,
    waits: iv.Intervals | None,
) -> list[dict[str, Any]]:
    """Each ProfilerStep of the rank: its span and, inside it (and the window), the split, the
    waits and the allreduce bytes enqueued in it (µs; None where not known)."""
    out = []
    colls = sorted(rt.colls, key=lambda c: c.t0)
    starts = np.fromiter((c.t0 for c in colls), np.int64, len(colls))
    for n, t0, t1, _ in rt.steps:
        inside = (t0, t1) if where is None else (max(t0, where[0]), min(t1, where[1]))
        comp, comm_ns, both, exposed = _split(compute, comm, inside)
        a, b = np.searchsorted(starts, [t0, t1], side="left").tolist()
        ar = [c for c in colls[a:b] if op_of(c.name) == "allreduce"]
        known = [c.bytes for c in ar if c.bytes >= 0]
        out.append(
            {
                "step": n,
                "span_us": _us(t1 - t0),
                "compute_us": _us(comp),
                "comm_us": _us(comm_ns),
                "overlap_us": _us(both),
                "exposed_comm_us": _us(exposed),
                "waits_us": None if waits is None else _us(iv.sum_lengths(_clip(waits, *inside))),
                "allreduce_bytes": sum(known) if ar and len(known) == len(ar) else None,
            }
        )
    return out


class TorchProfilerTrace:
    """RUN_DIR/traces/rank<r>.json[.gz], one Kineto trace per rank (see the package)."""

    name: ClassVar[str] = "torch"
    label: ClassVar[str] = "PyTorch profiler"
    file_name: ClassVar[str] = f"{TRACE_DIR}/rank<r>.json[.gz]"
    errors: ClassVar[tuple[type[Exception], ...]] = (TraceError, OSError)

    def path(self, run_dir: Path) -> Path:
        return run_dir / TRACE_DIR

    def summarise(
        self, path: Path, *, ranks: int | None, window_unix_us: tuple[int, int] | None
    ) -> TimelineSummary:
        return summarise(path, ranks=ranks, window_unix_us=window_unix_us)
