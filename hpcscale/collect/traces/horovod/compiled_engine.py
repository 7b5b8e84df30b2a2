"""The compiled engine: hpcscale.collect.traces.horovod._scan reads each chunk's records into
columns and pairs B/E events in C; the folding after that (classification, unions, per-tensor
sums) is the same NumPy code the Python engine ends in (`SpanFolder.fold_spans`).

Importing this module needs the built extension; `parse_timeline` imports it only when the
compiled engine is chosen.

A chunk the scanner does not accept whole (a bad record, or something only a full JSON decoder
reads, like an escaped key) is split into records as the Python engine does; each record is then
scanned alone, or decoded by msgspec, or counted bad. So both engines count the same records.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import numpy as np

from hpcscale.collect.traces.horovod._scan import Scanner
from hpcscale.collect.traces.horovod.classify import tensor_bytes
from hpcscale.collect.traces.horovod.folding import NEGOTIATE, SpanFolder
from hpcscale.collect.traces.horovod.records import (
    BOUNDARY,
    DECODE_ERRORS,
    ONE_DECODER,
    Event,
    decode_args,
    iter_chunks,
)

# Columns as Scanner.tokenize returns them: phase byte, name code, ts, pid, args code.
Columns = tuple[bytes, bytes, bytes, bytes, bytes]
_B, _E, _X, _M, _SMALL_I, _BIG_I = (ord(c) for c in "BEXMiI")


class CompiledFolder(SpanFolder):
    """SpanFolder whose B/E stacks live in the C scanner. Name codes of the scanner map to the
    folder's own codes through `remap` (the same name can reach the scanner spelt two ways);
    each distinct raw `args` value is decoded once, into the per-args-code arrays."""

    def __init__(self, keep_comm: bool, window_unix: tuple[int, int] | None) -> None:
        super().__init__(keep_comm=keep_comm, window_unix=window_unix)
        self.scanner = Scanner(msgspec.json.decode)
        self.c_names: list[str] = []
        self.remap = np.empty(0, dtype=np.int64)
        self.negotiate = bytearray()
        self.process_name: list[int] = []  # scanner codes spelling "process_name"
        self.cycle_start: list[int] = []  # ... and "CYCLE_START"
        self.arg_size = np.empty(0, dtype=np.int64)  # tensor bytes (dtype, shape), -1: none
        self.arg_start: list[int | None] = []  # start_time_since_epoch_in_micros
        self.arg_tensor: list[str | None] = []  # a process_name record's tensor name
        self.arg_pool = np.empty(0, dtype=np.int64)  # its index in name_pool, -1: not yet

    def _sync(self) -> None:
        """Take the names and args the scanner met for the first time."""
        new = self.scanner.take_names()
        if new:
            codes = []
            for k, name in enumerate(new, start=len(self.c_names)):
                code = self.codes.get(name)
                codes.append(self._code(name) if code is None else code)
                if name == "process_name":
                    self.process_name.append(k)
                elif name == "CYCLE_START":
                    self.cycle_start.append(k)
            self.c_names += new
            self.remap = np.concatenate((self.remap, np.asarray(codes, dtype=np.int64)))
            self.negotiate += bytes(int(self.code_cat[c] == NEGOTIATE) for c in codes)
        raws = self.scanner.take_args()
        if raws:
            sizes = []
            for raw in raws:
                args = decode_args(raw)
                size = None if args is None else tensor_bytes(args.dtype, args.shape)
                sizes.append(-1 if size is None else size)
                self.arg_start.append(
                    None if args is None else args.start_time_since_epoch_in_micros
                )
                self.arg_tensor.append(None if args is None else args.name)
            self.arg_size = np.concatenate((self.arg_size, np.asarray(sizes, dtype=np.int64)))
            self.arg_pool = np.concatenate((self.arg_pool, np.full(len(raws), -1, np.int64)))

    def fold_chunk(self, chunk: bytes | memoryview) -> int:
        """Fold one `[rec,...]` chunk (kept only while folding it); returns how many records
        were bad."""
        cols = self.scanner.tokenize(chunk)
        if cols is not None:
            self._fold_columns(cols)
            return 0
        body = bytes(chunk).strip()[1:-1].strip()
        pieces = BOUNDARY.split(body) if body else []
        last = len(pieces) - 1
        records = [
            (b"" if i == 0 else b"{") + piece + (b"" if i == last else b"}")
            for i, piece in enumerate(pieces)
        ]
        return len(records) - self._fold_records(records)

    def fold_tail(self, record: bytes) -> bool:
        """The record after the last boundary; False if it cannot be read (a cut record)."""
        return self._fold_records([record]) == 1

    def _fold_records(self, records: list[bytes]) -> int:
        """Records one by one: scanned alone, else decoded by msgspec, else skipped. Returns how
        many were read."""
        parts: list[Columns] = []
        for rec in records:
            cols = self.scanner.tokenize(b"[" + rec + b"]")
            if cols is not None and len(cols[0]) == 1:
                parts.append(cols)
                continue
            try:
                ev: Event = ONE_DECODER.decode(rec)
            except DECODE_ERRORS:
                continue
            code = self.scanner.code(msgspec.json.encode(ev.name)[1:-1])
            acode = self.scanner.args_code(bytes(ev.args)) if ev.args else -1
            parts.append(
                (
                    ev.ph.encode(),
                    np.int32(code).tobytes(),
                    np.int64(ev.ts).tobytes(),
                    np.int64(ev.pid).tobytes(),
                    np.int32(acode).tobytes(),
                )
            )
        if parts:
            self._fold_columns(tuple(b"".join(col) for col in zip(*parts, strict=True)))  # type: ignore[arg-type]
        return len(parts)

    def _fold_columns(self, cols: Columns) -> None:
        self._sync()
        ph = np.frombuffer(cols[0], dtype=np.uint8)
        ccode = np.frombuffer(cols[1], dtype=np.int32)
        ts = np.frombuffer(cols[2], dtype=np.int64)
        pid = np.frombuffer(cols[3], dtype=np.int64)
        acode = np.frombuffer(cols[4], dtype=np.int32)
        n_meta = self._fold_rare_columns(ph, ccode, ts, pid, acode)
        self.metadata += n_meta
        self.events += len(ph) - n_meta
        pc, t0, t1, end, parent, ready, orphans = self.scanner.pair(
            cols[0], cols[1], cols[2], cols[3], bytes(self.negotiate)
        )
        self.orphan_ends += orphans
        if not len(t0):
            return
        code = self.remap[np.frombuffer(pc, dtype=np.int32)]
        end_a = np.frombuffer(end, dtype=np.int64)
        parent_a = np.frombuffer(parent, dtype=np.int32)
        ready_a = np.frombuffer(ready, dtype=np.int32)
        neg_rows = np.flatnonzero(self.code_cat[code] == NEGOTIATE)
        names = self.c_names
        ready_names = [names[r] if r >= 0 else None for r in ready_a[neg_rows].tolist()]
        allreduce, remap, arg_size = self.allreduce_code, self.remap, self.arg_size

        def end_sizes(rows: list[int]) -> np.ndarray:
            a = acode[end_a[rows]]
            if not len(arg_size):  # no record so far had `args` (a valid timeline may not)
                return np.full(len(a), -1, dtype=np.int64)
            return np.where(a >= 0, arg_size[np.maximum(a, 0)], -1)

        def under_allreduce(rows: list[int]) -> np.ndarray:
            p = parent_a[rows]
            return (p >= 0) & (remap[np.maximum(p, 0)] == allreduce)

        self.fold_spans(
            code,
            np.frombuffer(t0, dtype=np.int64),
            np.frombuffer(t1, dtype=np.int64),
            pid[end_a],
            ready_names,
            end_sizes,
            under_allreduce,
        )

    def _fold_rare_columns(
        self,
        ph: np.ndarray,
        ccode: np.ndarray,
        ts: np.ndarray,
        pid: np.ndarray,
        acode: np.ndarray,
    ) -> int:
        """Metadata, readiness ticks and cycle markers, as PythonFolder._fold_rare counts them."""
        rare = np.flatnonzero((ph != _B) & (ph != _E))
        if not len(rare):
            return 0
        rph = ph[rare]
        meta = rare[rph == _M]
        if len(meta):  # first: pid 0's start time may set the window
            self._fold_meta(ccode[meta], pid[meta], acode[meta])
        names = self.c_names
        point = []
        ticks = rare[rph == _X]
        if len(ticks):
            self.ticks += len(ticks)
            point.append(ts[ticks])
            for c in np.unique(ccode[ticks]).tolist():
                if names[c].isdigit():
                    self.max_rank = max(self.max_rank, int(names[c]))
        marks = rare[(rph == _SMALL_I) | (rph == _BIG_I)]
        if len(marks):
            if self.cycle_start:
                self.cycles += int(np.isin(ccode[marks], self.cycle_start).sum())
            mts = ts[marks]
            point.append(mts[mts >= 0])
        if point:
            all_ts = np.concatenate(point)
            if len(all_ts):
                self._extend_span(int(all_ts.min()), int(all_ts.max()))
        return len(meta)

    def _fold_meta(self, ccode: np.ndarray, pid: np.ndarray, acode: np.ndarray) -> None:
        """process_name records, as PythonFolder._meta reads them one by one."""
        keep = np.isin(ccode, self.process_name) & (pid >= 0) & (acode >= 0)
        pid, acode = pid[keep], acode[keep]
        if not len(pid):
            return
        starts = [self.arg_start[a] for a in acode.tolist()]
        has_start = np.fromiter((s is not None for s in starts), dtype=bool, count=len(starts))
        for start in starts:
            if start is not None:
                self._note_start_time(start)
        rows = ~has_start & (pid > 0)
        rows &= np.fromiter(
            (self.arg_tensor[a] is not None for a in acode.tolist()), dtype=bool, count=len(pid)
        )
        if not rows.any():
            return
        pid, acode = pid[rows], acode[rows]
        pool = self.name_pool
        for a in np.unique(acode[self.arg_pool[acode] < 0]).tolist():
            name = self.arg_tensor[a]
            assert name is not None
            self.arg_pool[a] = pool.setdefault(name, len(pool))
        slots = self.slots(pid)  # first: it may grow name_idx
        self.name_idx[slots] = self.arg_pool[acode]

    def open_bottom_ts(self) -> np.ndarray:
        return np.frombuffer(self.scanner.open_spans()[0], dtype=np.int64)

    def open_begin_ts(self) -> np.ndarray:
        return np.frombuffer(self.scanner.open_spans()[1], dtype=np.int64)


def fold_file(
    path: str | os.PathLike[str],
    chunk_size: int,
    st: dict[str, Any],
    keep_comm: bool,
    window_unix: tuple[int, int] | None,
) -> CompiledFolder:
    """Fold the whole file; `st` receives the reader's stats (format, problems)."""
    folder = CompiledFolder(keep_comm, window_unix)
    for kind, data in iter_chunks(path, chunk_size, st, copy=False):
        if kind == "chunk":
            st["bad_records"] += folder.fold_chunk(data)
        elif not folder.fold_tail(bytes(data)):
            st["truncated"] = True
            st["cut_record"] = data.startswith(b"{")
    return folder
