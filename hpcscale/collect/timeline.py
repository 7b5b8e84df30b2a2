"""Streaming parser for Horovod timelines (Chrome-trace JSON written by rank 0).

Timelines reach gigabytes, so the file is read in fixed-size binary chunks; each chunk's complete
records are decoded at once by msgspec into small typed structs and folded into running totals,
and completed intervals are merged (unioned) chunk by chunk, keeping memory flat.

Format facts this relies on (Horovod 0.28.1 `common/timeline.cc`):
- The file is a JSON array. Metadata (`ph: "M"`) records end with `},\\n`; every other record is
  appended to one long line ending in `}]`, the next write overwriting `]` with `,`. Files from
  Horovod < 0.20.1 end every record with `},\\n` and are never closed. So record boundaries are
  `},` (then optional newline) or a final `}]`.
- A killed job leaves a cut final record (dropped, reported as `truncated`); `B` events can lack
  their `E` at shutdown (ignored, reported as `unclosed`); no collectives at all leaves a 0-byte
  file.
- Each tensor is a `pid` named by a `process_name` metadata record; `pid` 0 carries
  `start_time_since_epoch_in_micros`, the Unix-epoch time of `ts` 0. `ts` is integer µs since
  Horovod init, taken under one lock just before the record is queued, so it never decreases
  along the file (the streaming union relies on it; a violation is counted in `out_of_order`).
- `B`/`E` nest per pid: top-level = the negotiation (`NEGOTIATE_*`) or the collective
  (`ALLREDUCE`, ...), inside it activities (`MEMCPY_*`, `MPI_*`, `WAIT_FOR_DATA`, ...). `E` has no
  name; the collective's `E` carries `args.dtype` and `args.shape`.
- `X` with `dur: 0` named by a rank number: a rank reported ready during negotiation. `i`
  `CYCLE_START` marks a background-loop cycle (HOROVOD_TIMELINE_MARK_CYCLES=1).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from hpcscale.collect import intervals as iv

CHUNK_SIZE = 4 << 20
# A record never comes near this; more without a boundary means the file is not a timeline.
MAX_RECORD = 64 << 20

COLLECTIVES = frozenset(
    {"ALLREDUCE", "ALLGATHER", "BROADCAST", "REDUCESCATTER", "ALLTOALL", "ADASUM", "BARRIER", "JOIN"}
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

Phase = Literal["B", "E", "X", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"]


class TimelineError(Exception):
    """The file is not a Horovod timeline (wrong start, no parseable record)."""


class EventArgs(msgspec.Struct, gc=False, omit_defaults=True):
    name: str | None = None
    start_time_since_epoch_in_micros: int | None = None
    sort_index: int | None = None
    dtype: str | None = None
    shape: str | None = None


class Event(msgspec.Struct, gc=False, omit_defaults=True):
    """One trace record; unknown keys are skipped by the decoder."""

    ph: Phase
    name: str = ""
    ts: int | None = None
    pid: int | None = None
    dur: int | None = None
    s: str | None = None
    args: EventArgs | None = None


_CHUNK_DECODER = msgspec.json.Decoder(list[Event])
_ONE_DECODER = msgspec.json.Decoder(Event)
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


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
    out_of_order: int = 0
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
            "out_of_order": self.out_of_order,
        }
        return out


class _Union:
    """Streaming union of intervals: whatever ends before the watermark (no later interval can
    start earlier) is final and folded into a total, so memory stays bounded."""

    __slots__ = ("done_us", "keep", "kept", "tail", "watermark")

    def __init__(self, keep: bool = False) -> None:
        self.done_us = 0
        self.keep = keep
        self.kept: list[iv.Intervals] = []
        self.tail = iv.EMPTY
        self.watermark: int | None = None

    def add(self, rows: iv.Intervals, watermark: int | None) -> int:
        """Merge `rows`; returns how many started before an earlier watermark."""
        late = 0
        if self.watermark is not None and len(rows):
            late = int((rows[:, 0] < self.watermark).sum())
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


def iter_chunks(path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Raw byte slices of the file, each ending on a record boundary; the last slice holds
    whatever follows the last boundary (a final record, or a cut one)."""
    carry = b""
    with open(path, "rb") as fh:
        while True:
            data = fh.read(chunk_size)
            if not data:
                break
            buf = carry + data if carry else data
            cut = max(buf.rfind(b"},"), buf.rfind(b"}]"))
            if cut < 0:
                if len(buf) > MAX_RECORD:
                    raise TimelineError(f"{path}: no record boundary in {len(buf)} bytes")
                carry = buf
                continue
            yield buf[: cut + 1]
            carry = buf[cut + 2 :]
    if carry.strip():
        yield carry


def _body(raw: bytes, first: bool) -> bytes:
    """The records in `raw` without the array's brackets and separators at either end."""
    body = raw.strip()
    if first:
        if not body.startswith(b"["):
            raise TimelineError("does not start with '[' (not a Chrome-trace JSON array)")
        body = body[1:].lstrip()
    body = body.lstrip(b",").lstrip()
    if body.endswith(b"]"):
        body = body[:-1].rstrip()
    return body.rstrip(b",").rstrip()


def decode_records(body: bytes) -> tuple[list[Event], int]:
    """Decode a run of records; on a bad record fall back to one by one. Returns the events
    and how many records could not be decoded."""
    if not body:
        return [], 0
    try:
        return _CHUNK_DECODER.decode(b"[" + body + b"]"), 0
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    pieces = _BOUNDARY.split(body)
    events: list[Event] = []
    bad = 0
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        rec = (b"" if i == 0 else b"{") + piece + (b"" if i == last else b"}")
        try:
            events.append(_ONE_DECODER.decode(rec))
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad += 1
    return events, bad


def iter_events(
    path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE, stats: dict[str, Any] | None = None
) -> Iterator[list[Event]]:
    """Decoded records, one list per chunk. `stats` (if given) receives `bad_records`,
    `truncated` and `format` as they become known."""
    st = stats if stats is not None else {}
    st.setdefault("bad_records", 0)
    st.setdefault("truncated", False)
    st.setdefault("format", "empty")
    first = True
    pending: bytes | None = None
    for raw in iter_chunks(path, chunk_size):
        if pending is not None:
            body = _body(pending, first)
            if first:
                st["format"] = _format_of(body)
            first = False
            events, bad = decode_records(body)
            st["bad_records"] += bad
            yield events
        pending = raw
    if pending is None:
        return
    # The last slice may end in a cut record: decode what is whole, drop the cut tail.
    body = _body(pending, first)
    if first:
        st["format"] = _format_of(body)
    head, sep, tail = _last_record_split(body)
    events, bad = decode_records(head)
    st["bad_records"] += bad
    if tail:
        try:
            events.append(_ONE_DECODER.decode(tail))
        except (msgspec.DecodeError, msgspec.ValidationError):
            st["truncated"] = True
    yield events


def _last_record_split(body: bytes) -> tuple[bytes, bytes, bytes]:
    """Split off the final record so a cut one cannot spoil the decode of the rest."""
    cut = body.rfind(b"},")
    if cut < 0:
        return b"", b"", body
    return body[: cut + 1], b",", body[cut + 2 :].lstrip()


def _format_of(body: bytes) -> str:
    if not body:
        return "empty"
    # 0.20.1+ appends events to one line ("},{"); older versions write one record per line.
    if b"},{" in body:
        return "horovod>=0.20.1"
    return "horovod<0.20.1" if body.count(b"\n") > 1 else "unknown"


class _Folder:
    """Folds decoded events into totals; B/E stacks per pid live across chunks."""

    def __init__(self, keep_comm: bool) -> None:
        self.stacks: list[list[Any]] = []
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.code_cat: list[int] = []
        self.cat_index = {c: i for i, c in enumerate(CATEGORIES)}
        self.by_name: list[_Union] = []
        self.by_cat = [_Union(keep=(c == "comm" and keep_comm)) for c in CATEGORIES]
        self.allreduce = _Union()
        self.allreduce_transport = _Union()
        self.tensor_names: dict[int, str] = {}
        self.comm_us: dict[int, int] = {}
        self.ops: dict[int, int] = {}
        self.tbytes: dict[int, int] = {}
        self.collectives: dict[str, int] = {}
        self.last_tick: dict[int, str] = {}
        self.last_ready: dict[int, int] = {}
        self.max_rank = -1
        self.allreduce_bytes = 0
        self.allreduce_tensors = 0
        self.events = 0
        self.metadata = 0
        self.ticks = 0
        self.cycles = 0
        self.orphan_ends = 0
        self.out_of_order = 0
        self.start_time: int | None = None
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        # rows of (code, start, end); code -1 = transport inside an ALLREDUCE (bus bandwidth)
        self.rows: list[int] = []
        self.point_ts: list[int] = []

    def _code(self, name: str) -> int:
        code = len(self.names)
        self.codes[name] = code
        self.names.append(name)
        self.code_cat.append(self.cat_index[category_of(name)])
        self.by_name.append(_Union())
        return code

    def fold(self, events: list[Event]) -> None:
        stacks = self.stacks
        codes = self.codes
        rows = self.rows
        push = rows.append
        comm_us = self.comm_us
        code_cat = self.code_cat
        comm_cat = self.cat_index["comm"]
        neg_cat = self.cat_index["negotiate"]
        transport_cat = self.cat_index["transport"]
        n_meta = 0
        for ev in events:
            ph = ev.ph
            if ph == "E":
                pid = ev.pid
                try:
                    stk = stacks[pid]  # type: ignore[index]
                except (IndexError, TypeError):
                    stk = None
                if not stk:
                    self.orphan_ends += 1
                    continue
                t0 = stk.pop()
                name = stk.pop()
                t1 = ev.ts
                code = codes.get(name)
                if code is None:
                    code = self._code(name)
                push(code)
                push(t0)
                push(t1)
                cat = code_cat[code]
                if stk:
                    if cat == transport_cat and stk[-2] == "ALLREDUCE":
                        push(-1)
                        push(t0)
                        push(t1)
                elif cat == comm_cat:
                    comm_us[pid] = comm_us.get(pid, 0) + (t1 - t0)
                    self._collective(pid, name, ev.args)
                elif cat == neg_cat:
                    rank = self.last_tick.pop(pid, None)
                    if rank is not None:
                        self._ready(rank)
            elif ph == "B":
                pid = ev.pid
                try:
                    stacks[pid].append(ev.name)  # type: ignore[index]
                except IndexError:
                    stacks.extend([] for _ in range(pid + 1 - len(stacks)))  # type: ignore[operator]
                    stacks[pid].append(ev.name)  # type: ignore[index]
                except TypeError:
                    continue
                stacks[pid].append(ev.ts)  # type: ignore[index]
            elif ph == "X":
                self.ticks += 1
                self.last_tick[ev.pid] = ev.name  # type: ignore[index]
                self.point_ts.append(ev.ts)  # type: ignore[arg-type]
            elif ph == "M":
                n_meta += 1
                self._meta(ev)
            elif ph == "i" or ph == "I":
                if ev.name == "CYCLE_START":
                    self.cycles += 1
                if ev.ts is not None:
                    self.point_ts.append(ev.ts)
        self.metadata += n_meta
        self.events += len(events) - n_meta

    def _collective(self, pid: int, name: str, args: EventArgs | None) -> None:
        self.collectives[name] = self.collectives.get(name, 0) + 1
        self.ops[pid] = self.ops.get(pid, 0) + 1
        if args is not None and name == "ALLREDUCE":
            nbytes = tensor_bytes(args.dtype, args.shape)
            if nbytes is not None:
                self.allreduce_bytes += nbytes
                self.allreduce_tensors += 1
                self.tbytes[pid] = self.tbytes.get(pid, 0) + nbytes

    def _ready(self, rank_name: str) -> None:
        try:
            rank = int(rank_name)
        except ValueError:
            return
        self.last_ready[rank] = self.last_ready.get(rank, 0) + 1
        self.max_rank = max(self.max_rank, rank)

    def _meta(self, ev: Event) -> None:
        if ev.name != "process_name" or ev.args is None or ev.pid is None:
            return
        if ev.args.start_time_since_epoch_in_micros is not None:
            self.start_time = ev.args.start_time_since_epoch_in_micros
        elif ev.args.name is not None and ev.pid > 0:
            self.tensor_names[ev.pid] = ev.args.name

    def watermark(self) -> int | None:
        """No interval still to come can start before this time."""
        if self.last_ts is None:
            return None
        mark = self.last_ts
        for stk in self.stacks:
            if stk and stk[1] < mark:
                mark = stk[1]
        return mark

    def flush(self, final: bool = False) -> None:
        """Move this chunk's completed intervals into the running unions."""
        rows = np.asarray(self.rows, dtype=np.int64).reshape(-1, 3)
        self.rows = []
        self._track_ts(rows)
        mark = None if final else self.watermark()
        if len(rows):
            order = np.argsort(rows[:, 0], kind="stable")
            rows = rows[order]
            codes, starts = np.unique(rows[:, 0], return_index=True)
            bounds = np.append(starts[1:], len(rows))
            cat_parts: dict[int, list[np.ndarray]] = {}
            for code, lo, hi in zip(codes.tolist(), starts.tolist(), bounds.tolist(), strict=True):
                part = rows[lo:hi, 1:]
                if code == -1:
                    self.allreduce_transport.add(part, mark)
                    continue
                self.by_name[code].add(part, mark)
                cat_parts.setdefault(self.code_cat[code], []).append(part)
                if self.names[code] == "ALLREDUCE":
                    self.allreduce.add(part, mark)
            for cat, parts in cat_parts.items():
                self.out_of_order += self.by_cat[cat].add(np.concatenate(parts), mark)
        elif mark is not None:
            for u in (*self.by_cat, *self.by_name, self.allreduce, self.allreduce_transport):
                u.add(iv.EMPTY, mark)

    def _track_ts(self, rows: np.ndarray) -> None:
        lo: list[int] = []
        hi: list[int] = []
        if len(rows):
            lo.append(int(rows[:, 1].min()))
            hi.append(int(rows[:, 2].max()))
        if self.point_ts:
            lo.append(min(self.point_ts))
            hi.append(max(self.point_ts))
            self.point_ts = []
        for stk in self.stacks:
            if stk:
                lo.append(stk[1])
                hi.append(stk[-1])
        if lo:
            self.first_ts = min(lo) if self.first_ts is None else min(self.first_ts, *lo)
            self.last_ts = max(hi) if self.last_ts is None else max(self.last_ts, *hi)

    def summary(self, path: str, size: int, st: dict[str, Any]) -> TimelineSummary:
        self.flush(final=True)
        stats = [
            TensorStat(
                name=self.tensor_names.get(pid, f"pid {pid}"),
                comm_us=self.comm_us.get(pid, 0),
                ops=self.ops.get(pid, 0),
                bytes=self.tbytes.get(pid, 0),
            )
            for pid in sorted(self.comm_us)
        ]
        return TimelineSummary(
            path=path,
            size_bytes=size,
            format=st["format"],
            events=self.events,
            metadata=self.metadata,
            tensors=len(self.tensor_names) or len(self.comm_us),
            start_time_since_epoch_us=self.start_time,
            first_ts_us=self.first_ts,
            last_ts_us=self.last_ts,
            category_us={c: self.by_cat[i].total_us() for i, c in enumerate(CATEGORIES)},
            activity_us={n: self.by_name[i].total_us() for i, n in enumerate(self.names)},
            collectives=dict(self.collectives),
            allreduce_bytes=self.allreduce_bytes,
            allreduce_tensors=self.allreduce_tensors,
            allreduce_transport_us=self.allreduce_transport.total_us(),
            allreduce_us=self.allreduce.total_us(),
            ranks=self.max_rank + 1 if self.max_rank >= 0 else None,
            last_ready=dict(self.last_ready),
            ticks=self.ticks,
            cycles=self.cycles,
            tensor_stats=stats,
            truncated=bool(st["truncated"]),
            bad_records=int(st["bad_records"]),
            unclosed=sum(len(s) // 2 for s in self.stacks),
            orphan_ends=self.orphan_ends,
            out_of_order=self.out_of_order,
            comm_intervals=self.by_cat[self.cat_index["comm"]].intervals(),
        )


def parse_timeline(
    path: str | os.PathLike[str],
    *,
    ranks: int | None = None,
    keep_comm: bool = True,
    chunk_size: int = CHUNK_SIZE,
) -> TimelineSummary:
    """Summarise one timeline file in one streaming pass (memory independent of file size).

    `ranks` overrides the rank count inferred from readiness ticks (used for bus bandwidth).
    `keep_comm` keeps the merged communication intervals (for the exact compute/comm split).
    Raises TimelineError when the file is not a Horovod timeline, OSError when unreadable."""
    p = Path(path)
    size = p.stat().st_size
    st: dict[str, Any] = {}
    folder = _Folder(keep_comm=keep_comm)
    for events in iter_events(p, chunk_size, st):
        folder.fold(events)
        folder.flush()
    summary = folder.summary(str(p), size, st)
    if summary.events == 0 and summary.metadata == 0 and (st["bad_records"] or st["truncated"]):
        raise TimelineError(f"{p}: no parseable Horovod timeline record")
    if ranks is not None:
        summary.ranks = ranks
    return summary
