"""The pure-Python engine: msgspec decodes each chunk into small typed records, and a Python
loop pairs each `E` with its `B`. It runs where the compiled scanner was not built, and it is
the reference the compiled engine must agree with (tests/integration/test_timeline_engines.py).
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from hpcscale.collect.traces.horovod.classify import tensor_bytes
from hpcscale.collect.traces.horovod.folding import NEGOTIATE, SpanFolder
from hpcscale.collect.traces.horovod.records import Event, decode_args, iter_events

_NAME, _TS, _PID = attrgetter("name"), attrgetter("ts"), attrgetter("pid")


def args_bytes(raw: bytes) -> int | None:
    """Tensor bytes from a closing E's raw `args` (dtype and shape), None when not there."""
    args = decode_args(raw)
    return None if args is None else tensor_bytes(args.dtype, args.shape)


class PythonFolder(SpanFolder):
    """SpanFolder fed by decoded records. The B/E stacks per pid live here, across chunks.

    The per-record loop only pairs each `E` with its `B` (and notes readiness ticks); the rest
    runs vectorised per chunk in SpanFolder.fold_spans."""

    def __init__(self, keep_comm: bool, window_unix: tuple[int, int] | None = None) -> None:
        super().__init__(keep_comm=keep_comm, window_unix=window_unix)
        self.stacks: dict[int, list[Event]] = {}
        # id() of an open NEGOTIATE_* B event -> the last rank that reported ready in it
        self.ready_in: dict[int, str] = {}
        self.size_cache: dict[bytes, int | None] = {}

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

    def _meta(self, name: str, pid: int, raw_args: bytes | msgspec.Raw) -> None:
        """A process_name record: pid 0's start time, or the tensor name of a pid."""
        args = decode_args(raw_args) if name == "process_name" and pid >= 0 else None
        if args is None:
            return
        if args.start_time_since_epoch_in_micros is not None:
            self._note_start_time(args.start_time_since_epoch_in_micros)
        elif args.name is not None and pid > 0:
            slot = int(self.slots(np.array([pid], dtype=np.int64))[0])
            self.name_idx[slot] = self.name_pool.setdefault(args.name, len(self.name_pool))

    def _fold_pairs(
        self, begins: list[Event], ends: list[Event], parents: list[Event | None]
    ) -> None:
        """The chunk's pairs as the arrays SpanFolder.fold_spans takes."""
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
        negotiations = np.flatnonzero(self.code_cat[code] == NEGOTIATE).tolist()
        pop = self.ready_in.pop
        ready = [pop(id(begins[i]), None) for i in negotiations] if self.ready_in else []

        def under_allreduce(rows: list[int]) -> list[bool]:
            return [(p := parents[i]) is not None and p.name == "ALLREDUCE" for i in rows]

        self.fold_spans(
            code,
            t0,
            t1,
            pids,
            ready,
            end_sizes=lambda rows: self._sizes([bytes(ends[i].args) for i in rows]),
            under_allreduce=under_allreduce,
        )

    def _sizes(self, keys: list[bytes]) -> np.ndarray:
        """Tensor bytes per raw `args` of a closing E (-1: unknown), one decode per distinct."""
        cache = self.size_cache
        for key in set(keys) - cache.keys():
            cache[key] = args_bytes(key)
        return np.fromiter(
            (-1 if (b := cache[k]) is None else b for k in keys), dtype=np.int64, count=len(keys)
        )

    def open_bottom_ts(self) -> np.ndarray:
        return np.fromiter((stk[0].ts for stk in self.stacks.values() if stk), dtype=np.int64)

    def open_begin_ts(self) -> np.ndarray:
        return np.fromiter((b.ts for stk in self.stacks.values() for b in stk), dtype=np.int64)


def fold_file(
    path: str | os.PathLike[str],
    chunk_size: int,
    st: dict[str, Any],
    keep_comm: bool,
    window_unix: tuple[int, int] | None,
) -> PythonFolder:
    """Fold the whole file; `st` receives the reader's stats (format, problems)."""
    folder = PythonFolder(keep_comm, window_unix)
    for events in iter_events(path, chunk_size, st):
        folder.fold(events)
    return folder
