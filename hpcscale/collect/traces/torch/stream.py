"""Reading one Kineto trace's events in bounded memory, plain or gzip, whatever its layout.

A Kineto trace is one JSON object, `{"schemaVersion": 1, ..., "baseTimeNanoseconds": N,
"traceEvents": [ {...}, {...} ], "traceName": "..."}`, which torch 2.13 writes pretty-printed
over many lines (so nothing here reads lines). The file is read in CHUNK_SIZE pieces; inside the
`traceEvents` array a batch of whole events is cut at the last `}` followed by `,` and decoded in
one msgspec call. A cut that falls inside a string or a nested array (`}, {` can occur there) makes
the batch undecodable: the batch is then split at every candidate cut and neighbouring pieces are
joined until each decodes, so a wrong cut costs time, never an event. The keys before the array
(and after it, where an older torch puts them) are small and decoded whole.

An event that is whole JSON but not an event's shape (a `ts` that is a string, say) is skipped
and counted (`bad_events`): whole JSON tells it apart from a false cut, so one bad event costs
one event and the batch around it decodes as usual (no piece grows behind it).

A killed job leaves the array unterminated (or a cut last event): what decodes is returned and
`truncated` says the rest is missing. A piece that is never whole JSON holds the rest back until
MAX_EVENT bytes pile up behind it: the file is then no trace (TraceError).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec

T = TypeVar("T")  # what one decoded event is: an Event (the reader) or a dict (the merge)

CHUNK_SIZE = 1 << 20  # 1 MB: as fast as larger pieces, and the peak stays ~15 MB above import
# No event comes near this; a file that grows a piece this long without a cut is not a trace.
MAX_EVENT = 64 << 20
HEAD_LIMIT = 16 << 20


class TraceError(Exception):
    """The file is not a Kineto trace (no `traceEvents` array, nothing decodable)."""


class Event(msgspec.Struct, gc=False):
    """One trace event; unknown keys are skipped, `args` kept raw (decoded where needed)."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = msgspec.Raw()


BATCH = msgspec.json.Decoder(list[Event])
ONE = msgspec.json.Decoder(Event)
ANY = msgspec.json.Decoder()
WHOLE = msgspec.json.Decoder(msgspec.Raw)  # checks a piece is whole JSON, builds nothing
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)
# the end of an event that another follows: `}` then `,` (whitespace between, any layout)
CUT = re.compile(rb"\}\s*,")
EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
WS = b" \t\r\n"
TOP_KEY = re.compile(r'"(baseTimeNanoseconds|distributedInfo)"\s*:\s*')


@dataclass
class Header:
    """The top-level keys a reader uses: the Unix time of ts 0 and who wrote the trace."""

    base_time_ns: int | None = None
    distributed: dict[str, Any] = field(default_factory=dict)

    def take(self, obj: dict[str, Any]) -> None:
        if isinstance(obj.get("baseTimeNanoseconds"), int):
            self.base_time_ns = obj["baseTimeNanoseconds"]
        if isinstance(obj.get("distributedInfo"), dict):
            self.distributed = obj["distributedInfo"]


@dataclass
class Stream:
    """What reading one file found besides its events."""

    header: Header = field(default_factory=Header)
    truncated: bool = False
    bad_events: int = 0
    size_bytes: int = 0


def open_trace(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed where it is gzip (by its magic, so `.tmp` works too)."""
    f = path.open("rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    return f


def _top_keys(text: bytes, header: Header) -> None:
    """The keys a reader uses, each value decoded where its key stands (the text around the
    array is a fragment of the top-level object, not JSON by itself)."""
    s = text.decode("utf-8", "replace")
    dec = json.JSONDecoder()
    for m in TOP_KEY.finditer(s):
        try:
            value, _ = dec.raw_decode(s, m.end())
        except ValueError:
            continue
        header.take({m.group(1): value})


def _read(f: IO[bytes], n: int, st: Stream) -> bytes:
    """Up to n bytes; a gzip stream cut short (a killed job's) ends the file, flagged."""
    parts, got = [], 0
    while got < n:  # read1: what one read gives stays ours if the next one fails
        try:
            piece = f.read1(n - got)  # type: ignore[attr-defined]
        except EOFError:
            st.truncated = True
            break
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def iter_batches(path: Path, st: Stream, chunk_size: int | None = None) -> Iterator[list[Event]]:
    """The events of `path` in file order, a batch at a time; `st` gets the header and the
    problems. Raises TraceError for a file that is no Kineto trace, OSError when unreadable."""
    return cut_events(path, st, _decode, _tail, chunk_size)


def cut_events(
    path: Path,
    st: Stream,
    decode: Callable[[bytes, Stream], tuple[list[T], bytes]],
    tail: Callable[[bytes, Stream], Iterator[list[T]]],
    chunk_size: int | None = None,
) -> Iterator[list[T]]:
    """The one cutting of a trace's event array into runs of whole events, in bounded memory:
    `decode` turns a run `{...}, ..., {...}` into events (and gives back what does not decode
    yet), `tail` the file's last bytes after the final cut (its `]` and closing keys, or a cut
    file). The reader decodes into `Event`, the merge (perfetto.py) into whole dicts."""
    st.size_bytes = path.stat().st_size
    chunk_size = chunk_size or CHUNK_SIZE
    with open_trace(path) as f:
        buf = b""
        while True:  # the header, up to the array
            chunk = _read(f, chunk_size, st)
            buf += chunk
            m = EVENTS_KEY.search(buf)
            if m:
                _top_keys(buf[: m.start()], st.header)
                buf = buf[m.end() :]
                break
            if not chunk or len(buf) > HEAD_LIMIT:
                raise TraceError("no traceEvents array (not a Kineto trace)")
        eof = False
        while True:
            if not eof:
                chunk = _read(f, chunk_size, st)
                eof = not chunk
                buf += chunk
            buf = buf.lstrip(WS + b",")
            if buf.startswith(b"]"):
                _top_keys(buf[1:] + (b"" if eof else _read(f, HEAD_LIMIT, st)), st.header)
                return
            if eof:
                yield from tail(buf, st)
                return
            cut = _last_cut(buf)
            if cut is None:
                if len(buf) > MAX_EVENT:
                    raise TraceError(f"no event boundary in {MAX_EVENT} bytes")
                continue
            events, back = decode(buf[: cut + 1], st)
            buf = back + buf[cut + 1 :]
            if len(back) > MAX_EVENT:
                raise TraceError(f"no decodable event in {MAX_EVENT} bytes")
            if events:
                yield events


def _last_cut(buf: bytes) -> int | None:
    """The position of the last `}` that a `,` follows (a candidate end of an event)."""
    pos = buf.rfind(b",")
    while pos > 0:
        j = pos - 1
        while j >= 0 and buf[j] in WS:
            j -= 1
        if j >= 0 and buf[j] == ord("}"):
            return j
        pos = buf.rfind(b",", 0, pos)
    return None


def _decode(body: bytes, st: Stream) -> tuple[list[Event], bytes]:
    """A run of whole events `{...}, ..., {...}`: one decode, or piece by piece when a cut
    fell inside an event or an event is not an event's shape (skipped, counted in `st`); what
    does not decode yet (an event cut by a false cut) goes back."""
    try:
        return BATCH.decode(b"[" + body + b"]"), b""
    except DECODE_ERRORS:
        pass
    out: list[Event] = []
    start = 0
    for m in CUT.finditer(body):
        if _one(body[start : m.start() + 1], out, st):
            start = m.end()
        # else a cut inside the event: join it with the next piece
    if _one(body[start:], out, st):
        return out, b""
    return out, body[start:]


def _one(piece: bytes, out: list[Event], st: Stream) -> bool:
    """Decode one piece into `out`; False where it is no whole JSON value (a false cut). A
    whole value that is not an event's shape is skipped and counted: it is done with."""
    try:
        out.append(ONE.decode(piece))
        return True
    except DECODE_ERRORS:
        pass
    try:  # msgspec checks types as it parses: a cut piece can fail on a type before its end
        WHOLE.decode(piece)
    except DECODE_ERRORS:
        return False
    st.bad_events += 1
    return True


def _tail(buf: bytes, st: Stream) -> Iterator[list[Event]]:
    """The last events, then `]` and the closing keys; anything else is a cut file."""
    dec = json.JSONDecoder()
    text = buf.decode("utf-8", "replace")
    pos, events = 0, []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            st.truncated = True  # the array never closed
            break
        if text[pos] == "]":
            _top_keys(text[pos + 1 :].encode(), st.header)
            break
        try:
            _, end = dec.raw_decode(text, pos)
        except ValueError:
            st.truncated = True  # a cut last event
            break
        try:
            events.append(ONE.decode(text[pos:end].encode()))
        except DECODE_ERRORS:
            st.bad_events += 1
        pos = end
    if events:
        yield events
