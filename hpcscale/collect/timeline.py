"""Streaming parser for Horovod timelines (Chrome-trace JSON written by rank 0).

Timelines reach gigabytes, so the file is read in fixed-size binary chunks (records.py); each
chunk's records are read by one of two engines (the compiled scanner of timeline_fast.py, or
msgspec and a Python loop here), and folded into running totals; completed intervals are merged
(unioned) chunk by chunk, keeping memory flat. The format facts are in records.py; the streaming
union relies on `ts` never decreasing along the file (with SLACK_US of leeway): a span that still
arrives after its time was finalised (e.g. a B whose E was lost for STALE_US) is clipped and
counted in `late_spans`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from hpcscale.collect import intervals as iv
from hpcscale.collect.records import (
    CHUNK_SIZE,
    Event,
    TimelineError,
    decode_args,
    iter_chunks,
    iter_events,
    iter_raw_records,
    read_start_time,
)

__all__ = [  # the reader's names stay importable from here, where they always were
    "CATEGORIES",
    "NO_COLLECTIVES",
    "TimelineError",
    "TimelineSummary",
    "category_of",
    "fast_engine_available",
    "iter_chunks",
    "iter_events",
    "iter_raw_records",
    "parse_timeline",
    "read_start_time",
    "tensor_bytes",
]

_NAME, _TS, _PID = attrgetter("name"), attrgetter("ts"), attrgetter("pid")

COLLECTIVES = frozenset(
    {
        "ALLREDUCE",
        "ALLGATHER",
        "BROADCAST",
        "REDUCESCATTER",
        "ALLTOALL",
        "ADASUM",
        "BARRIER",
        "JOIN",
    }
)
TRANSPORT_PREFIXES = ("MPI_", "NCCL_", "GLOO_", "CCL_")
# JSON key of each category, in display order. Values are seconds (union across all tensors).
CATEGORIES: tuple[str, ...] = (
    "comm",
    "negotiate",
    "wait_for_data",
    "wait_for_other_tensor_data",
    "queue",
    "memcpy",
    "transport",
    "other",
)
DTYPE_BYTES = {
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "uint16": 2,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float32": 4,
    "int64": 8,
    "float64": 8,
}
NO_COLLECTIVES = "no collectives recorded"
# Intervals are only final this long behind the newest time stamp, so a file whose records are
# slightly out of time order (none written by Horovod 0.28 is) is still unioned exactly.
SLACK_US = 1_000_000
# A span open this long (a B whose E was lost) stops holding finalisation back; if it does close
# later, the part before what is already final is dropped and counted in `late_spans`.
STALE_US = 600_000_000
# Tensors kept for the top-tensors table (all tensors are counted).
TOP_KEEP = 100


def category_of(name: str) -> str:
    """Category of a B/E span by its name (top-level op or activity)."""
    if name in COLLECTIVES:
        return "comm"
    if name.startswith("NEGOTIATE_"):
        return "negotiate"
    if name == "WAIT_FOR_DATA":
        return "wait_for_data"
    if name == "WAIT_FOR_OTHER_TENSOR_DATA":
        return "wait_for_other_tensor_data"
    if name == "QUEUE":
        return "queue"
    if name.startswith("MEMCPY_"):
        return "memcpy"
    if name.startswith(TRANSPORT_PREFIXES):
        return "transport"
    return "other"


def tensor_bytes(dtype: str | None, shape: str | None) -> int | None:
    """Bytes of a tensor from the timeline's `dtype` ("float32") and `shape` ("[3, 3, 64]")."""
    if not dtype or shape is None:
        return None
    size = DTYPE_BYTES.get(dtype.lower().removeprefix("horovod_"))
    if size is None:
        return None
    dims = shape.strip().strip("[]")
    try:
        count = math.prod(int(d) for d in dims.split(",")) if dims.strip() else 1
    except ValueError:
        return None
    return size * count


def args_bytes(raw: bytes) -> int | None:
    """Tensor bytes from a closing E's raw `args` (dtype and shape), None when not there."""
    args = decode_args(raw)
    return None if args is None else tensor_bytes(args.dtype, args.shape)


@dataclass
class TensorStat:
    name: str
    comm_us: int = 0
    ops: int = 0
    bytes: int = 0


@dataclass
class TimelineSummary:
    """What one timeline says. Times in µs internally; `as_json` reports seconds."""

    path: str
    size_bytes: int
    format: str
    events: int = 0
    metadata: int = 0
    tensors: int = 0
    start_time_since_epoch_us: int | None = None
    first_ts_us: int | None = None
    last_ts_us: int | None = None
    category_us: dict[str, int] = field(default_factory=dict)
    activity_us: dict[str, int] = field(default_factory=dict)
    collectives: dict[str, int] = field(default_factory=dict)
    allreduce_bytes: int = 0
    allreduce_tensors: int = 0
    allreduce_transport_us: int = 0
    allreduce_us: int = 0
    ranks: int | None = None
    last_ready: dict[int, int] = field(default_factory=dict)
    ticks: int = 0
    cycles: int = 0
    tensor_stats: list[TensorStat] = field(default_factory=list)
    truncated: bool = False
    bad_records: int = 0
    unclosed: int = 0
    orphan_ends: int = 0
    late_spans: int = 0
    window_us: tuple[int, int] | None = None
    comm_intervals: iv.Intervals = field(default_factory=lambda: iv.EMPTY.copy(), repr=False)

    @property
    def empty(self) -> bool:
        return self.events == 0

    @property
    def span_us(self) -> int:
        if self.first_ts_us is None or self.last_ts_us is None:
            return 0
        return self.last_ts_us - self.first_ts_us

    def seconds(self, category: str) -> float:
        return self.category_us.get(category, 0) / 1e6

    def bus_bandwidth_gbs(self) -> float | None:
        """Achieved allreduce bus bandwidth (nccl-tests convention): bytes / time x 2(n-1)/n,
        with time = union of the transport activities inside ALLREDUCE ops (else the ops)."""
        time_us = self.allreduce_transport_us or self.allreduce_us
        if not self.allreduce_bytes or not time_us:
            return None
        n = self.ranks or 1
        factor = 2 * (n - 1) / n if n > 1 else 1.0
        return self.allreduce_bytes / (time_us / 1e6) * factor / 1e9

    def straggler(self) -> tuple[int, int, int] | None:
        """(rank, times last ready, negotiations with ticks), or None without ticks."""
        if not self.last_ready:
            return None
        rank, times = max(self.last_ready.items(), key=lambda kv: (kv[1], -kv[0]))
        return rank, times, sum(self.last_ready.values())

    def top_tensors(self, n: int = 10) -> list[TensorStat]:
        return sorted(self.tensor_stats, key=lambda t: (-t.comm_us, t.name))[:n]

    def as_json(self, top: int = 10) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.path, "format": self.format}
        if self.empty:
            out["message"] = NO_COLLECTIVES
        out.update({f"{c}_s": self.seconds(c) for c in CATEGORIES})
        out["span_s"] = self.span_us / 1e6
        out.update(
            events=self.events,
            tensors=self.tensors,
            collectives=dict(sorted(self.collectives.items())),
            allreduce_tensors=self.allreduce_tensors,
            allreduce_bytes=self.allreduce_bytes,
            bytes_per_allreduce=(
                self.allreduce_bytes / self.allreduce_tensors if self.allreduce_tensors else None
            ),
            bus_bandwidth_gbs=self.bus_bandwidth_gbs(),
            ranks=self.ranks,
            cycles=self.cycles,
            start_time_since_epoch_us=self.start_time_since_epoch_us,
            activities_s={k: v / 1e6 for k, v in sorted(self.activity_us.items())},
        )
        strag = self.straggler()
        out["straggler"] = (
            None
            if strag is None
            else {
                "rank": strag[0],
                "last_ready": strag[1],
                "negotiations": strag[2],
                "by_rank": {str(k): v for k, v in sorted(self.last_ready.items())},
            }
        )
        out["top_tensors"] = [
            {"name": t.name, "comm_s": t.comm_us / 1e6, "ops": t.ops, "bytes": t.bytes}
            for t in self.top_tensors(top)
        ]
        out["problems"] = {
            "truncated": self.truncated,
            "bad_records": self.bad_records,
            "unclosed": self.unclosed,
            "orphan_ends": self.orphan_ends,
            "late_spans": self.late_spans,
        }
        return out


class _Union:
    """Streaming union of intervals: whatever ends before the watermark (no later interval can
    start earlier) is final and folded into a total, so memory stays bounded."""

    __slots__ = ("count", "done_us", "keep", "kept", "tail", "watermark")

    def __init__(self, keep: bool = False) -> None:
        self.count = 0
        self.done_us = 0
        self.keep = keep
        self.kept: list[iv.Intervals] = []
        self.tail = iv.EMPTY
        self.watermark: int | None = None

    def add(self, rows: iv.Intervals, watermark: int | None) -> int:
        """Merge `rows`; returns how many started before an earlier watermark."""
        self.count += len(rows)
        late = 0
        if self.watermark is not None and len(rows):
            early = rows[:, 0] < self.watermark
            late = int(early.sum())
            if late:  # what precedes the final part cannot be unioned any more: clip it off
                rows = rows.copy()
                rows[early, 0] = self.watermark
                rows = rows[rows[:, 1] > rows[:, 0]]
        merged = iv.union(np.concatenate((self.tail, rows)) if len(self.tail) else rows)
        if watermark is None:
            self.tail = merged
            return late
        k = int(np.searchsorted(merged[:, 1], watermark, side="right"))
        self.done_us += iv.sum_lengths(merged[:k])
        if self.keep and k:
            self.kept.append(merged[:k])
        self.tail = merged[k:]
        self.watermark = watermark if self.watermark is None else max(self.watermark, watermark)
        return late

    def total_us(self) -> int:
        return self.done_us + iv.sum_lengths(self.tail)

    def intervals(self) -> iv.Intervals:
        parts = [*self.kept, self.tail]
        return np.concatenate(parts) if len(parts) > 1 else self.tail.copy()


class _Folder:
    """Folds decoded events into totals. B/E stacks per pid live across chunks.

    The per-event Python loop only pairs each `E` with its `B` (and notes readiness ticks);
    classification, per-tensor sums and unions run vectorised per chunk over the pairs."""

    def __init__(
        self,
        keep_comm: bool,
        window: tuple[int, int] | None = None,
        window_unix: tuple[int, int] | None = None,
    ) -> None:
        self.window = window
        # A Unix-epoch window becomes `window` once pid 0's start time is read (the file's first
        # record, so before any span is folded).
        self.window_unix = window_unix
        self.newest = -(1 << 62)
        self.stacks: dict[int, list[Event]] = {}
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.cat_index = {c: i for i, c in enumerate(CATEGORIES)}
        self.code_cat = np.empty(0, dtype=np.int64)
        self.by_name: list[_Union] = []
        self.by_cat = [_Union(keep=(c == "comm" and keep_comm)) for c in CATEGORIES]
        self.allreduce_transport = _Union()
        self.allreduce_code = self._code("ALLREDUCE")
        # Per tensor (pid): arrays indexed by pid (Horovod numbers tensors 1, 2, ...); names as
        # indices into a pool of distinct names, so millions of tensors stay cheap.
        self.name_pool: dict[str, int] = {}
        self.name_idx = np.full(64, -1, dtype=np.int64)
        self.comm_us = np.zeros(64, dtype=np.int64)
        self.ops = np.zeros(64, dtype=np.int64)
        self.tbytes = np.zeros(64, dtype=np.int64)
        self.op_count = np.zeros(1, dtype=np.int64)
        self.size_cache: dict[bytes, int | None] = {}
        # id() of an open NEGOTIATE_* B event -> the last rank that reported ready in it
        self.ready_in: dict[int, str] = {}
        self.last_ready: dict[int, int] = {}
        self.max_rank = -1
        self.allreduce_bytes = 0
        self.allreduce_tensors = 0
        self.events = 0
        self.metadata = 0
        self.ticks = 0
        self.cycles = 0
        self.orphan_ends = 0
        self.late_spans = 0
        self.start_time: int | None = None
        self.first_ts: int | None = None
        self.last_ts: int | None = None

    def _code(self, name: str) -> int:
        code = len(self.names)
        self.codes[name] = code
        self.names.append(name)
        self.code_cat = np.append(self.code_cat, self.cat_index[category_of(name)])
        self.by_name.append(_Union())
        if hasattr(self, "op_count"):
            self.op_count = np.append(self.op_count, 0)
        return code

    def fold(self, events: list[Event]) -> None:
        """Pair B/E events (the hot loop: locals and list/dict methods only), then fold the
        pairs vectorised."""
        stacks = self.stacks
        get = stacks.get
        begins: list[Event] = []
        ends: list[Event] = []
        parents: list[Event | None] = []
        push_b, push_e, push_p = begins.append, ends.append, parents.append
        ready_in = self.ready_in
        rare: list[Event] = []
        orphans = 0
        for ev in events:
            ph = ev.ph
            if ph == "E":
                stk = get(ev.pid)
                if stk:
                    push_b(stk.pop())
                    push_e(ev)
                    if stk:
                        push_p(stk[0])
                    else:
                        push_p(None)
                        del stacks[ev.pid]  # only open spans stay: the watermark scans them
                else:
                    orphans += 1
            elif ph == "B":
                stk = get(ev.pid)
                if stk is None:
                    stk = stacks[ev.pid] = []
                stk.append(ev)
            else:
                if ph == "X":  # a rank is ready: note it on the open negotiation, in order
                    stk = get(ev.pid)
                    if stk and stk[-1].name.startswith("NEGOTIATE_"):
                        ready_in[id(stk[-1])] = ev.name
                rare.append(ev)
        self.orphan_ends += orphans
        n_meta = self._fold_rare(rare)
        self.metadata += n_meta
        self.events += len(events) - n_meta
        self._fold_pairs(begins, ends, parents)

    def _fold_rare(self, rare: list[Event]) -> int:
        """Metadata, readiness ticks and cycle markers (a small share of the records)."""
        n_meta = 0
        point_ts: list[int] = []
        for ev in rare:
            ph = ev.ph
            if ph == "X":
                self.ticks += 1
                point_ts.append(ev.ts)
                if ev.name.isdigit():
                    self.max_rank = max(self.max_rank, int(ev.name))
            elif ph == "M":
                n_meta += 1
                self._meta(ev.name, ev.pid, ev.args)
            elif ph == "i" or ph == "I":
                if ev.name == "CYCLE_START":
                    self.cycles += 1
                if ev.ts >= 0:
                    point_ts.append(ev.ts)
        if point_ts:
            self._extend_span(min(point_ts), max(point_ts))
        return n_meta

    def _fold_pairs(self, begins: list[Event], ends: list[Event], parents: list[Any]) -> None:
        """The Python path's pairs as the arrays _fold_pair_arrays takes."""
        n = len(begins)
        if not n:
            return
        codes = self.codes
        names = list(map(_NAME, begins))
        code_list = list(map(codes.get, names))
        if None in code_list:
            for name in set(names) - codes.keys():
                self._code(name)
            code_list = list(map(codes.get, names))
        code = np.fromiter(code_list, dtype=np.int64, count=n)
        t0 = np.fromiter(map(_TS, begins), dtype=np.int64, count=n)
        t1 = np.fromiter(map(_TS, ends), dtype=np.int64, count=n)
        pids = np.fromiter(map(_PID, ends), dtype=np.int64, count=n)
        negotiations = np.flatnonzero(self.code_cat[code] == self.cat_index["negotiate"]).tolist()
        pop = self.ready_in.pop
        ready = [pop(id(begins[i]), None) for i in negotiations] if self.ready_in else []
        self._fold_pair_arrays(
            code,
            t0,
            t1,
            pids,
            ready,
            end_sizes=lambda rows: self._sizes([bytes(ends[i].args) for i in rows]),
            under_allreduce=lambda rows: [
                parents[i] is not None and parents[i].name == "ALLREDUCE" for i in rows
            ],
        )

    def _fold_pair_arrays(
        self,
        code: np.ndarray,
        t0: np.ndarray,
        t1: np.ndarray,
        end_pid: np.ndarray,
        ready: list[str | None],
        end_sizes: Callable[[list[int]], np.ndarray],
        under_allreduce: Callable[[list[int]], Sequence[bool]],
    ) -> None:
        """Fold closed spans, one row each: name code, begin and end µs, the closing E's pid;
        `ready` is the last rank ready in each negotiation row, in row order; `end_sizes(rows)`
        gives the tensor bytes in the closing E's args (-1: unknown) and `under_allreduce(rows)`
        whether the span sat inside an ALLREDUCE, for the few rows that need them. Both engines
        end here."""
        n = len(code)
        cat = self.code_cat[code]
        negotiations = np.flatnonzero(cat == self.cat_index["negotiate"]).tolist()
        mark = self.watermark(int(t1.max()))
        idx = np.arange(n)
        if self.window is not None:
            lo, hi = self.window
            idx = np.flatnonzero((t1 >= lo) & (t0 <= hi))
            if not len(idx):
                return
            ready = [r for i, r in zip(negotiations, ready, strict=False) if lo <= t1[i] <= hi]
            code, cat, end_pid = code[idx], cat[idx], end_pid[idx]
            t0, t1 = np.clip(t0[idx], lo, hi), np.clip(t1[idx], lo, hi)
        for rank, times in Counter(ready).items():
            if rank is not None:
                self._ready(rank, times)
        self._extend_span(int(t0.min()), int(t1.max()))
        self.op_count += np.bincount(code, minlength=len(self.op_count))
        comm = np.flatnonzero(cat == self.cat_index["comm"])
        if len(comm):
            rows = idx[comm].tolist()
            self._fold_collectives(
                comm, code, t0, t1, end_pid[comm], lambda pos: end_sizes([rows[j] for j in pos])
            )
        transport = np.flatnonzero(cat == self.cat_index["transport"])
        spans = np.column_stack((t0, t1))
        if len(transport):
            inside = np.fromiter(
                under_allreduce(idx[transport].tolist()), dtype=bool, count=len(transport)
            )
            if inside.any():
                self.allreduce_transport.add(spans[transport[inside]], mark)
        present = np.flatnonzero(np.bincount(code, minlength=len(self.names)))
        for c in present.tolist():
            self.by_name[c].add(spans[code == c], mark)
        for k in np.unique(cat).tolist():
            self.late_spans += self.by_cat[k].add(spans[cat == k], mark)

    def _fold_collectives(
        self,
        comm: np.ndarray,
        code: np.ndarray,
        t0: np.ndarray,
        t1: np.ndarray,
        pids: np.ndarray,
        end_sizes: Callable[[list[int]], np.ndarray],
    ) -> None:
        """Per-tensor time and op counts, and allreduce bytes from the closing E's args."""
        upid, inv = np.unique(pids, return_inverse=True)
        upid = np.maximum(upid, 0)
        self._grow(int(upid[-1]))
        self.comm_us[upid] += np.bincount(inv, weights=(t1 - t0)[comm]).astype(np.int64)
        self.ops[upid] += np.bincount(inv)
        # Allreduce bytes from the closing E's args, one decode per distinct (dtype, shape).
        ar = np.flatnonzero(code[comm] == self.allreduce_code).tolist()
        sizes = end_sizes(ar) if ar else np.empty(0, dtype=np.int64)
        ok = sizes >= 0
        if ok.any():
            self.allreduce_bytes += int(sizes[ok].sum())
            self.allreduce_tensors += int(ok.sum())
            pid_sizes = np.bincount(inv[ar][ok], weights=sizes[ok], minlength=len(upid))
            self.tbytes[upid] += pid_sizes.astype(np.int64)

    def _sizes(self, keys: list[bytes]) -> np.ndarray:
        """Tensor bytes per raw `args` of a closing E (-1: unknown), one decode per distinct."""
        cache = self.size_cache
        for key in set(keys) - cache.keys():
            cache[key] = args_bytes(key)
        return np.fromiter(
            (-1 if (b := cache[k]) is None else b for k in keys), dtype=np.int64, count=len(keys)
        )

    def _grow(self, pid: int) -> None:
        if pid < len(self.comm_us):
            return
        size = max(pid + 1, 2 * len(self.comm_us))
        for name in ("comm_us", "ops", "tbytes", "name_idx"):
            old = getattr(self, name)
            new = np.full(size, -1 if name == "name_idx" else 0, dtype=np.int64)
            new[: len(old)] = old
            setattr(self, name, new)

    def _ready(self, rank_name: str, times: int = 1) -> None:
        try:
            rank = int(rank_name)
        except ValueError:
            return
        self.last_ready[rank] = self.last_ready.get(rank, 0) + times
        self.max_rank = max(self.max_rank, rank)

    def _meta(self, name: str, pid: int, raw_args: bytes | msgspec.Raw) -> None:
        args = decode_args(raw_args) if name == "process_name" and pid >= 0 else None
        if args is None:
            return
        if args.start_time_since_epoch_in_micros is not None:
            self.start_time = args.start_time_since_epoch_in_micros
            if self.window_unix is not None and self.window is None:
                lo, hi = self.window_unix
                self.window = (lo - self.start_time, hi - self.start_time)
        elif args.name is not None and pid > 0:
            self._grow(pid)
            self.name_idx[pid] = self.name_pool.setdefault(args.name, len(self.name_pool))

    def _extend_span(self, lo: int, hi: int) -> None:
        if self.window is not None:
            lo, hi = max(lo, self.window[0]), min(hi, self.window[1])
            if lo > hi:
                return
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)

    def watermark(self, newest: int) -> int:
        """No interval still to come can start before this time (see SLACK_US)."""
        self.newest = max(self.newest, newest)
        mark = self.newest - SLACK_US
        stale = self.newest - STALE_US
        for ts in self._open_bottoms():
            if stale < ts < mark:
                mark = ts
        return mark

    def _open_bottoms(self) -> Iterable[int]:
        """ts of the outermost open B of each pid."""
        return (stk[0].ts for stk in self.stacks.values() if stk)

    def _open_ts(self) -> list[int]:
        """ts of every open B (a span whose E has not come, or never will)."""
        return [b.ts for stk in self.stacks.values() for b in stk]

    def _top_tensors(self) -> list[TensorStat]:
        """The TOP_KEEP tensors with the most communication time (ties: lower pid first)."""
        pids = np.flatnonzero(self.ops > 0)
        order = np.lexsort((pids, -self.comm_us[pids]))[:TOP_KEEP]
        pool = list(self.name_pool)
        out = []
        for pid in pids[order].tolist():
            k = int(self.name_idx[pid])
            out.append(
                TensorStat(
                    name=pool[k] if k >= 0 else f"pid {pid}",
                    comm_us=int(self.comm_us[pid]),
                    ops=int(self.ops[pid]),
                    bytes=int(self.tbytes[pid]),
                )
            )
        return out

    def summary(self, path: str, size: int, st: dict[str, Any]) -> TimelineSummary:
        open_begins = self._open_ts()
        if len(open_begins):
            self._extend_span(int(min(open_begins)), int(max(open_begins)))
        stats = self._top_tensors()
        cats = self.code_cat
        collectives = {
            self.names[c]: int(n)
            for c, n in enumerate(self.op_count.tolist())
            if n and cats[c] == self.cat_index["comm"]
        }
        return TimelineSummary(
            path=path,
            size_bytes=size,
            format=st["format"],
            events=self.events,
            metadata=self.metadata,
            tensors=int(max((self.name_idx >= 0).sum(), (self.ops > 0).sum())),
            start_time_since_epoch_us=self.start_time,
            first_ts_us=self.first_ts,
            last_ts_us=self.last_ts,
            category_us={c: self.by_cat[i].total_us() for i, c in enumerate(CATEGORIES)},
            activity_us={
                n: self.by_name[i].total_us()
                for i, n in enumerate(self.names)
                if self.by_name[i].count
            },
            collectives=collectives,
            allreduce_bytes=self.allreduce_bytes,
            allreduce_tensors=self.allreduce_tensors,
            allreduce_transport_us=self.allreduce_transport.total_us(),
            allreduce_us=self.by_name[self.allreduce_code].total_us(),
            ranks=self.max_rank + 1 if self.max_rank >= 0 else None,
            last_ready=dict(self.last_ready),
            ticks=self.ticks,
            cycles=self.cycles,
            tensor_stats=stats,
            truncated=bool(st["truncated"]),
            bad_records=int(st["bad_records"]),
            unclosed=len(open_begins),
            orphan_ends=self.orphan_ends,
            late_spans=self.late_spans,
            window_us=self.window,
            comm_intervals=self.by_cat[self.cat_index["comm"]].intervals(),
        )


def parse_timeline(
    path: str | os.PathLike[str],
    *,
    ranks: int | None = None,
    keep_comm: bool = True,
    window_unix_us: tuple[int, int] | None = None,
    chunk_size: int = CHUNK_SIZE,
    engine: Literal["auto", "c", "python"] = "auto",
) -> TimelineSummary:
    """Summarise one timeline file in one streaming pass (memory independent of file size).

    `ranks` overrides the rank count inferred from readiness ticks (used for bus bandwidth).
    `keep_comm` keeps the merged communication intervals (for the exact compute/comm split).
    `window_unix_us` (Unix-epoch µs, e.g. the timed epochs from steps.json) clips every span to
    that window and drops ops outside it; it needs pid 0's start time (`window_applied`).
    `engine`: "c" is the compiled scanner (hpcscale.collect._scan), "python" the msgspec path
    it must agree with; "auto" takes the compiled one when it was built.
    Raises TimelineError when the file is not a Horovod timeline, OSError when unreadable."""
    p = Path(path)
    size = p.stat().st_size
    st: dict[str, Any] = {}
    if engine == "auto":
        engine = "c" if fast_engine_available() else "python"
    if engine == "c":
        from hpcscale.collect.timeline_fast import fold_file

        folder: _Folder = fold_file(p, chunk_size, st, keep_comm, window_unix_us)
    else:
        folder = _Folder(keep_comm=keep_comm, window_unix=window_unix_us)
        for events in iter_events(p, chunk_size, st):
            folder.fold(events)
    summary = folder.summary(str(p), size, st)
    # A killed job can leave one cut record and nothing else; anything else is not ours.
    unreadable = st["bad_records"] or (st["truncated"] and not st.get("cut_record"))
    if summary.events == 0 and summary.metadata == 0 and unreadable:
        raise TimelineError("no parseable Horovod timeline record")
    if ranks is not None:
        summary.ranks = ranks
    return summary


def fast_engine_available() -> bool:
    """Whether the compiled scanner was built (it needs a C compiler at install time)."""
    try:
        from hpcscale.collect import _scan  # noqa: F401
    except ImportError:
        return False
    return True
