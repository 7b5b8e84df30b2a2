"""Reading a Horovod timeline's records: the format, the chunked reader, the typed decode.

Both engines and the trace writer read the file through here, so they split it into records and
judge a record bad or cut the same way.

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
  along the file.
- `B`/`E` nest per pid: top-level = the negotiation (`NEGOTIATE_*`) or the collective
  (`ALLREDUCE`, ...), inside it activities (`MEMCPY_*`, `MPI_*`, `WAIT_FOR_DATA`, ...). `E` has no
  name; the collective's `E` carries `args.dtype` and `args.shape`.
- `X` with `dur: 0` named by a rank number: a rank reported ready during negotiation. `i`
  `CYCLE_START` marks a background-loop cycle (HOROVOD_TIMELINE_MARK_CYCLES=1).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

CHUNK_SIZE = 4 << 20
# A record never comes near this; more without a boundary means the file is not a timeline.
MAX_RECORD = 64 << 20

Phase = Literal["B", "E", "X", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"]


# What a decoder raises for a record it cannot read (bad UTF-8 surfaces as UnicodeDecodeError).
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)


class TimelineError(Exception):
    """The file is not a Horovod timeline (wrong start, no parseable record)."""


# ts and pid beyond int64 make a record bad (as the compiled scanner judges), not a crash.
Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class EventArgs(msgspec.Struct, gc=False, omit_defaults=True):
    name: str | None = None
    start_time_since_epoch_in_micros: int | None = None
    sort_index: int | None = None
    dtype: str | None = None
    shape: str | None = None


class Event(msgspec.Struct, gc=False):
    """One trace record; unknown keys are skipped by the decoder, `args` is kept raw (decoded
    only where needed: a collective's closing E, metadata)."""

    ph: Phase
    name: str = ""
    ts: Int64 = -1
    pid: Int64 = -1
    args: msgspec.Raw = msgspec.Raw()


ARGS_DECODER = msgspec.json.Decoder(EventArgs)


def decode_args(raw: bytes | msgspec.Raw) -> EventArgs | None:
    """A record's raw `args`, decoded; None when absent or not an object of known fields."""
    if not raw:
        return None
    try:
        return ARGS_DECODER.decode(raw)
    except DECODE_ERRORS:
        return None


_CHUNK_DECODER = msgspec.json.Decoder(list[Event])
ONE_DECODER = msgspec.json.Decoder(Event)
BOUNDARY = re.compile(rb"\}\s*,\s*\{")


_RAW_CHUNK_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_RAW_ONE_DECODER = msgspec.json.Decoder(msgspec.Raw)


def _decode_array(buf: bytes, raw: bool = False) -> tuple[list[Any], int]:
    """Decode `[rec,rec,...]`; on a bad record fall back to one record at a time. Returns the
    records and how many could not be decoded."""
    whole, one = (_RAW_CHUNK_DECODER, _RAW_ONE_DECODER) if raw else (_CHUNK_DECODER, ONE_DECODER)
    try:
        return whole.decode(buf), 0
    except DECODE_ERRORS:
        pass
    body = buf.strip()[1:-1].strip()
    pieces = BOUNDARY.split(body) if body else []
    records: list[Any] = []
    bad = 0
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        rec = (b"" if i == 0 else b"{") + piece + (b"" if i == last else b"}")
        try:
            value = one.decode(rec)
            if raw and not bytes(value).startswith(b"{"):
                raise msgspec.DecodeError("not an object")
            records.append(value)
        except DECODE_ERRORS:
            bad += 1
    return records, bad


def _format_of(head: bytes | bytearray) -> str:
    """0.20.1+ appends events to one line ("},{"); older versions write one record per line."""
    if b"},{" in head:
        return "horovod>=0.20.1"
    return "horovod<0.20.1" if head.count(b"},\n{") > 4 else "unknown"


def iter_events(
    path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE, stats: dict[str, Any] | None = None
) -> Iterator[list[Event]]:
    """Decoded records, one list per chunk of the file. `stats` (if given) receives
    `bad_records`, `truncated` and `format` as they become known."""
    return _iter_records(path, chunk_size, stats, raw=False)


def iter_raw_records(
    path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE, stats: dict[str, Any] | None = None
) -> Iterator[list[msgspec.Raw]]:
    """Each whole record's bytes, untouched (for rewriting a trace); a cut one is dropped."""
    return _iter_records(path, chunk_size, stats, raw=True)


def _iter_records(
    path: str | os.PathLike[str], chunk_size: int, stats: dict[str, Any] | None, raw: bool
) -> Iterator[list[Any]]:
    """Decoded records of each chunk from iter_chunks; a final record that cannot be decoded
    is a cut one (`truncated`)."""
    st = stats if stats is not None else {}
    one = _RAW_ONE_DECODER if raw else ONE_DECODER
    for kind, data in iter_chunks(path, chunk_size, st):
        if kind == "chunk":
            events, bad = _decode_array(data, raw)
            st["bad_records"] += bad
            yield events
            continue
        try:
            yield [one.decode(data)]
        except DECODE_ERRORS:
            st["truncated"] = True
            st["cut_record"] = data.startswith(b"{")


def iter_chunks(
    path: str | os.PathLike[str], chunk_size: int, stats: dict[str, Any], copy: bool = True
) -> Iterator[tuple[Literal["chunk", "tail"], bytes | memoryview]]:
    """The file as ("chunk", `[rec,...,rec]`) pieces of whole records, then ("tail", bytes)
    for whatever follows the last boundary (a final record, or a cut one), if anything.

    One buffer, read into in place, always starts with `[`: after each read the records up to
    the last boundary are yielded as one JSON array (the boundary's `,` briefly overwritten by
    `]`) and what follows the boundary moves to the front for the next read. With copy=False a
    chunk is a read-only view into that buffer, valid only until the next chunk is asked for
    (no 4 MB copy and fresh pages per chunk); keep nothing that refers into it."""
    st = stats
    st.setdefault("bad_records", 0)
    st.setdefault("truncated", False)
    st.setdefault("format", "empty")
    area = bytearray(1 + chunk_size)
    area[0] = ord("[")
    filled = 1
    first = True
    with open(path, "rb") as fh:
        while True:
            if len(area) - filled < chunk_size:  # a record longer than a chunk: grow
                if len(area) > MAX_RECORD:
                    raise TimelineError(f"no record boundary in the first {filled} bytes")
                bigger = bytearray(2 * len(area))
                bigger[:filled] = memoryview(area)[:filled]
                area = bigger
            with memoryview(area) as view:
                n = fh.readinto(view[filled : filled + chunk_size])
            if not n:
                break
            filled += n
            if first:
                head = bytes(area[1:filled]).lstrip()
                if not head:
                    filled = 1
                    continue  # only whitespace so far
                if head[0] != ord("["):
                    raise TimelineError("does not start with '[' (not a Chrome-trace JSON array)")
                area[1 : 1 + len(head) - 1] = head[1:]
                filled = len(head)
                st["format"] = _format_of(area[: min(filled, 1 << 20)])
                first = False
            cut = area.rfind(b"},", 0, filled)
            # "}]" ends the file: look for it only after the last "}," (not through the buffer)
            cut = max(cut, area.rfind(b"}]", max(cut, 0), filled))
            if cut < 0:
                continue
            saved = area[cut + 1]
            area[cut + 1] = ord("]")
            with memoryview(area) as view:
                # A copy unless asked otherwise: raw `args` keep a reference to their buffer.
                chunk = bytes(view[: cut + 2]) if copy else view[: cut + 2].toreadonly()
                yield "chunk", chunk
                if not copy:
                    chunk.release()
            area[cut + 1] = saved
            rest = filled - (cut + 2)
            area[1 : 1 + rest] = area[cut + 2 : filled]
            filled = 1 + rest
    # After the last boundary: nothing, a final record without separator, or a cut record.
    tail = bytes(area[1:filled]).strip().lstrip(b",").rstrip(b"],").strip()
    if tail:
        yield "tail", tail


def read_start_time(path: str | os.PathLike[str]) -> int | None:
    """pid 0's `start_time_since_epoch_in_micros` (the first record), without reading the rest."""
    st: dict[str, Any] = {}
    for events in iter_events(path, 64 << 10, st):
        for ev in events:
            if ev.ph != "M":
                return None
            args = decode_args(ev.args) if ev.pid == 0 else None
            if args is not None and args.start_time_since_epoch_in_micros is not None:
                return args.start_time_since_epoch_in_micros
    return None
