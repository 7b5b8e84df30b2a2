"""Folding closed spans into a timeline's totals: the NumPy code both engines end in.

An engine reads records and pairs each `E` with its `B` (its own way: a Python loop, or C);
`SpanFolder` takes the pairs of a chunk as arrays and does the rest once for both: category of
each span, per-tensor time, op counts and allreduce bytes, streaming unions per category and per
activity, the union of the two waits and its part inside communication, readiness ticks, and
the final `TimelineSummary`. One copy of that logic is what keeps the two engines' figures
identical.

The streaming unions rely on `ts` never decreasing along the file, with SLACK_US of leeway: a
span that still arrives after its time was finalised (e.g. a B whose E was lost for STALE_US)
is clipped and counted in `late_spans`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hpcscale.collect.traces.horovod.classify import CATEGORIES, category_of
from hpcscale.collect.traces.horovod.records import TimelineError
from hpcscale.collect.traces.horovod.streaming_union import StreamingUnion
from hpcscale.collect.traces.horovod.summary import TensorStat, TimelineSummary

# Intervals are only final this long behind the newest time stamp, so a file whose records are
# slightly out of time order (none written by Horovod 0.28 is) is still unioned exactly.
SLACK_US = 1_000_000
# A span open this long (a B whose E was lost) stops holding finalisation back; if it does close
# later, the part before what is already final is dropped and counted in `late_spans`.
STALE_US = 600_000_000
# Tensors kept for the top-tensors table (all tensors are counted).
TOP_KEEP = 100

COMM, NEGOTIATE, TRANSPORT = (CATEGORIES.index(c) for c in ("comm", "negotiate", "transport"))
WAITS = np.array([CATEGORIES.index(c) for c in ("wait_for_data", "wait_for_other_tensor_data")])

# For the few rows that need them: the tensor bytes in each closing E's args (-1: unknown), and
# whether each span sat inside an ALLREDUCE. Rows index the arrays given to `fold_spans`.
EndSizes = Callable[[list[int]], np.ndarray]
UnderAllreduce = Callable[[list[int]], Sequence[bool]]


class SpanFolder(ABC):
    """Running totals of one timeline. An engine subclasses it, keeps the open B/E spans (and
    says where they are: `open_bottom_ts`, `open_begin_ts`), and hands over each chunk's closed
    spans through `fold_spans`; `summary` gives the result.

    Names (of spans and ticks) become small integer codes as they are first met; per-tensor
    figures live in arrays indexed by a slot per distinct pid (Horovod numbers tensors 1, 2, ...,
    but a file may say any int64), with tensor names as indices into a pool of distinct names,
    so millions of tensors stay cheap."""

    def __init__(self, keep_comm: bool, window_unix: tuple[int, int] | None = None) -> None:
        self.window: tuple[int, int] | None = None
        # A Unix-epoch window becomes `window` once pid 0's start time is read (the file's first
        # record, so before any span is folded).
        self.window_unix = window_unix
        self.newest = -(1 << 62)
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.code_cat = np.empty(0, dtype=np.int64)
        self.op_count = np.empty(0, dtype=np.int64)
        self.by_name: list[StreamingUnion] = []
        self.by_cat = [StreamingUnion(keep=(c == "comm" and keep_comm)) for c in CATEGORIES]
        self.allreduce_transport = StreamingUnion()
        # The two waits unioned in time: in a fused batch a tensor already ready waits for the
        # others (WAIT_FOR_OTHER_TENSOR_DATA) while another still waits for its own data
        # (WAIT_FOR_DATA), so the two overlap. And that union with communication, from the
        # first wait on (`_fold_waits`), for the part of the waits inside communication.
        self.waits = StreamingUnion()
        self.waits_or_comm: StreamingUnion | None = None
        self.allreduce_code = self._code("ALLREDUCE")
        self.name_pool: dict[str, int] = {}
        self.slot_of: dict[int, int] = {}  # pid -> its row in the per-tensor arrays
        self.slot_pid = np.empty(0, dtype=np.int64)
        self.name_idx = np.full(64, -1, dtype=np.int64)
        self.comm_us = np.zeros(64, dtype=np.int64)
        self.ops = np.zeros(64, dtype=np.int64)
        self.tbytes = np.zeros(64, dtype=np.int64)
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

    # ------------------------------------------------------------ what an engine provides

    @abstractmethod
    def open_bottom_ts(self) -> np.ndarray:
        """ts of the outermost open B of each pid (they hold finalisation back)."""

    @abstractmethod
    def open_begin_ts(self) -> np.ndarray:
        """ts of every open B (a span whose E has not come, or never will)."""

    # ------------------------------------------------------------ what an engine calls

    def _code(self, name: str) -> int:
        """A new code for a span or tick name met for the first time."""
        code = len(self.names)
        self.codes[name] = code
        self.names.append(name)
        self.code_cat = np.append(self.code_cat, CATEGORIES.index(category_of(name)))
        self.op_count = np.append(self.op_count, 0)
        self.by_name.append(StreamingUnion())
        return code

    def fold_spans(
        self,
        code: np.ndarray,
        t0: np.ndarray,
        t1: np.ndarray,
        end_pid: np.ndarray,
        ready: list[str | None],
        end_sizes: EndSizes,
        under_allreduce: UnderAllreduce,
    ) -> None:
        """Fold closed spans, one row each: name code, begin and end µs, the closing E's pid;
        `ready` is the last rank ready in each negotiation row, in row order; `end_sizes` and
        `under_allreduce` answer for the few rows that need them (see their types)."""
        n = len(code)
        backwards = np.flatnonzero(t1 < t0)
        if len(backwards):  # Horovod's clock never runs back: the file is damaged
            i = int(backwards[0])
            raise TimelineError(
                f"{len(backwards)} span(s) end before they begin (first: "
                f"{self.names[int(code[i])]!r} on pid {int(end_pid[i])}, B at ts {int(t0[i])}, "
                f"E at ts {int(t1[i])})"
            )
        cat = self.code_cat[code]
        negotiations = np.flatnonzero(cat == NEGOTIATE).tolist()
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
        comm = np.flatnonzero(cat == COMM)
        if len(comm):
            rows = idx[comm].tolist()
            self._fold_collectives(
                comm, code, t0, t1, end_pid[comm], lambda pos: end_sizes([rows[j] for j in pos])
            )
        transport = np.flatnonzero(cat == TRANSPORT)
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
        self._fold_waits(spans, cat, mark)

    def _fold_waits(self, spans: np.ndarray, cat: np.ndarray, mark: int) -> None:
        """Union the two waits, and the waits with communication: |waits ∩ comm| = |waits| +
        |comm| - |waits ∪ comm|. The second starts as a copy of the communication union when the
        first wait comes (this chunk's communication is already in it), so a timeline without
        waits (CPU) pays nothing for it. Late spans are counted once, by the category unions."""
        is_wait = np.isin(cat, WAITS)
        if self.waits_or_comm is None:
            if not is_wait.any():
                return
            self.waits_or_comm = self.by_cat[COMM].copy()
            rows = is_wait
        else:
            rows = is_wait | (cat == COMM)
        if is_wait.any():
            self.waits.add(spans[is_wait], mark)
        if rows.any():
            self.waits_or_comm.add(spans[rows], mark)

    def _fold_collectives(
        self,
        comm: np.ndarray,
        code: np.ndarray,
        t0: np.ndarray,
        t1: np.ndarray,
        pids: np.ndarray,
        end_sizes: EndSizes,
    ) -> None:
        """Per-tensor time and op counts, and allreduce bytes from the closing E's args."""
        upid, inv = np.unique(np.maximum(pids, 0), return_inverse=True)
        upid = self.slots(upid)
        self.comm_us[upid] += np.bincount(inv, weights=(t1 - t0)[comm]).astype(np.int64)
        self.ops[upid] += np.bincount(inv)
        ar = np.flatnonzero(code[comm] == self.allreduce_code).tolist()
        sizes = end_sizes(ar) if ar else np.empty(0, dtype=np.int64)
        ok = sizes >= 0
        if ok.any():
            self.allreduce_bytes += int(sizes[ok].sum())
            self.allreduce_tensors += int(ok.sum())
            pid_sizes = np.bincount(inv[ar][ok], weights=sizes[ok], minlength=len(upid))
            self.tbytes[upid] += pid_sizes.astype(np.int64)

    def slots(self, pids: np.ndarray) -> np.ndarray:
        """The per-tensor arrays' rows of `pids`, new pids given new rows (arrays grown)."""
        slot_of = self.slot_of
        new = [p for p in dict.fromkeys(pids.tolist()) if p not in slot_of]
        if new:
            for p in new:
                slot_of[p] = len(slot_of)
            self.slot_pid = np.concatenate((self.slot_pid, np.asarray(new, dtype=np.int64)))
            self._grow(len(slot_of) - 1)
        return np.fromiter(map(slot_of.__getitem__, pids.tolist()), np.int64, count=len(pids))

    def _grow(self, slot: int) -> None:
        """Make the per-tensor arrays long enough to index `slot`."""
        if slot < len(self.comm_us):
            return
        size = max(slot + 1, 2 * len(self.comm_us))
        for name in ("comm_us", "ops", "tbytes", "name_idx"):
            old = getattr(self, name)
            new = np.full(size, -1 if name == "name_idx" else 0, dtype=np.int64)
            new[: len(old)] = old
            setattr(self, name, new)

    def _ready(self, rank_name: str, times: int = 1) -> None:
        """`rank_name` was the last rank ready in `times` negotiations."""
        try:
            rank = int(rank_name)
        except ValueError:
            return
        self.last_ready[rank] = self.last_ready.get(rank, 0) + times
        self.max_rank = max(self.max_rank, rank)

    def _note_start_time(self, start_us: int) -> None:
        """pid 0's Unix time of `ts` 0; the first one read places a Unix-epoch window."""
        self.start_time = start_us
        if self.window_unix is not None and self.window is None:
            lo, hi = self.window_unix
            self.window = (lo - start_us, hi - start_us)

    def _extend_span(self, lo: int, hi: int) -> None:
        """Widen the first..last time stamp seen (inside the window, if any)."""
        if self.window is not None:
            lo, hi = max(lo, self.window[0]), min(hi, self.window[1])
            if lo > hi:
                return
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)

    def watermark(self, newest: int) -> int:
        """No interval still to come can start before this time (see SLACK_US, STALE_US)."""
        self.newest = max(self.newest, newest)
        mark = self.newest - SLACK_US
        bottoms = self.open_bottom_ts()
        held = bottoms[(bottoms > self.newest - STALE_US) & (bottoms < mark)]
        return min(mark, int(held.min())) if len(held) else mark

    # ------------------------------------------------------------ the result

    def _top_tensors(self) -> list[TensorStat]:
        """The TOP_KEEP tensors with the most communication time (ties: lower pid first)."""
        rows = np.flatnonzero(self.ops > 0)
        order = np.lexsort((self.slot_pid[rows], -self.comm_us[rows]))[:TOP_KEEP]
        pool = list(self.name_pool)
        out = []
        for row in rows[order].tolist():
            k = int(self.name_idx[row])
            out.append(
                TensorStat(
                    name=pool[k] if k >= 0 else f"pid {int(self.slot_pid[row])}",
                    comm_us=int(self.comm_us[row]),
                    ops=int(self.ops[row]),
                    bytes=int(self.tbytes[row]),
                )
            )
        return out

    def summary(self, path: str, size: int, st: dict[str, Any]) -> TimelineSummary:
        """The totals as a TimelineSummary; `st` is the reader's stats (format, problems)."""
        open_begins = self.open_begin_ts()
        if len(open_begins):
            self._extend_span(int(open_begins.min()), int(open_begins.max()))
        waits_us, comm_us = self.waits.total_us(), self.by_cat[COMM].total_us()
        both_us = comm_us if self.waits_or_comm is None else self.waits_or_comm.total_us()
        # Exact while spans arrive in time order (Horovod writes them so); the bounds only hold
        # a file whose late spans were clipped apart in the unions (counted in late_spans).
        waits_in_comm_us = min(max(waits_us + comm_us - both_us, 0), waits_us, comm_us)
        collectives = {
            self.names[c]: int(n)
            for c, n in enumerate(self.op_count.tolist())
            if n and self.code_cat[c] == COMM
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
            waits_us=waits_us,
            waits_in_comm_us=waits_in_comm_us,
            ranks=self.max_rank + 1 if self.max_rank >= 0 else None,
            last_ready=dict(self.last_ready),
            ticks=self.ticks,
            cycles=self.cycles,
            tensor_stats=self._top_tensors(),
            truncated=bool(st["truncated"]),
            bad_records=int(st["bad_records"]),
            unclosed=len(open_begins),
            orphan_ends=self.orphan_ends,
            late_spans=self.late_spans,
            window_us=self.window,
            comm_intervals=self.by_cat[COMM].intervals(),
        )
