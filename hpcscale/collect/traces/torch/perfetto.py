"""Every rank's PyTorch profiler trace in one Chrome-trace file (Perfetto, chrome://tracing).

Each rank becomes one process, pid RANK_PID + r, named "rank r" and sorted by rank; the threads
and pseudo-processes of its trace (the training thread, gloo's workers, GPU streams, Kineto's
"Spans") become that process's threads, each its own tid across the whole file, named as its
trace named it (with the original process's name where the rank had several). Events keep every
key they had; a rank's flow ids are made its own (Kineto numbers them per process) and its global
instants become process ones.

One clock: a Kineto time stamp is µs since the trace's `baseTimeNanoseconds` (Unix ns), so each
rank's events move by its base less the earliest rank's, and the file's `baseTimeNanoseconds` is
that earliest base. An older trace without one whose stamps are Unix µs counts as base 0 (moved
onto the others'); a trace with neither stays on its own axis, and the info says so. Steps,
epochs and burn-in from the run's steps.json (Unix ns) go on the same axis as an extra
process (hpcscale.collect.traces.step_spans), as in every format's merge.

Streamed: one rank at a time, a batch of events (one CHUNK_SIZE piece of its file) at a time,
decoded into dicts with every key and written out; nothing holds a whole trace. A cut file (a
killed job's, or only its `.tmp`) gives the events it holds, and the info names the rank.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from hpcscale.collect.split import Steps
from hpcscale.collect.traces.step_spans import step_events
from hpcscale.collect.traces.torch.files import TRACE_DIR, UNIX_US, rank_files
from hpcscale.collect.traces.torch.stream import (
    CUT,
    WS,
    Stream,
    TraceError,
    _top_keys,
    cut_events,
)
from hpcscale.formats.atomic import _temp_beside as temp_beside

__all__ = ["TRACE_DIR", "RankInfo", "TorchTraceInfo", "TraceError", "write_trace"]

RANK_PID = 1  # rank r is pid 1 + r (pid 0 is the idle process to some viewers)
# a rank's flow ids: id * FLOW_SPAN + rank, unique across ranks for up to FLOW_SPAN ranks
FLOW_SPAN = 1 << 16
FLOW_PHASES = frozenset({"s", "t", "f"})
# the metadata of Kineto's own processes, replaced by the rank's
PROCESS_META = frozenset({"process_name", "process_labels", "process_sort_index"})

_BATCH = msgspec.json.Decoder(list[dict[str, Any]])
_ONE = msgspec.json.Decoder(dict[str, Any])
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)


@dataclass
class RankInfo:
    """What went in from one rank's file."""

    path: Path
    events: int = 0  # events copied (Kineto's process metadata not counted: it is replaced)
    steps: int = 0  # ProfilerStep# spans
    truncated: bool = False  # cut short (or only a .tmp): what it held went in
    bad_events: int = 0  # pieces that were JSON but no event, left out
    aligned: bool = True  # on the common clock (False: no base time, its own axis)


@dataclass
class TorchTraceInfo:
    """The merged file and what went in: per rank, and the steps.json spans added."""

    out: Path
    base_time_ns: int | None
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    steps: int = 0  # steps.json's steps added (0: none)

    @property
    def records(self) -> int:
        return sum(r.events for r in self.ranks.values())

    @property
    def truncated(self) -> bool:
        return any(r.truncated for r in self.ranks.values())

    def notes(self) -> list[str]:
        """What a user should know about the merge: cut ranks, ranks off the common clock."""
        out = []
        for r, info in sorted(self.ranks.items()):
            if info.truncated:
                out.append(
                    f"rank {r}: {info.path.name} is cut short (a killed job's?): its "
                    f"{info.events} events up to the cut merged"
                )
            if info.bad_events:
                out.append(f"rank {r}: {info.bad_events} unreadable events left out")
            if not info.aligned:
                out.append(f"rank {r}: {info.path.name} has no base time: on its own time axis")
        return out


def iter_event_dicts(
    path: Path, st: Stream, chunk_size: int | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The events of `path` as dicts with every key, a batch at a time, in file order: the
    stream module's cutting (stream.cut_events), decoded whole instead of into its Event.
    Raises TraceError for a file that is no Kineto trace, OSError when unreadable."""
    return cut_events(path, st, _decode, _tail, chunk_size)


def _tail(buf: bytes, st: Stream) -> Iterator[list[dict[str, Any]]]:
    """The file's last events; a file whose array never closed after them was cut."""
    events, closed = _last(buf, st)
    st.truncated |= not closed  # an unterminated array or a cut last event
    if events:
        yield events


def _decode(body: bytes, st: Stream) -> tuple[list[dict[str, Any]], bytes]:
    """Whole events `{...}, ..., {...}` in one decode, else piece by piece (a cut that fell
    inside an event joins the next piece); what does not decode yet goes back."""
    try:
        return [e for e in _BATCH.decode(b"[" + body + b"]") if _counted(e, st)], b""
    except _DECODE_ERRORS:
        pass
    out: list[dict[str, Any]] = []
    start = 0
    for m in CUT.finditer(body):
        if _one(body[start : m.start() + 1], out, st):
            start = m.end()
    if _one(body[start:], out, st):
        return out, b""
    return out, body[start:]


def _last(buf: bytes, st: Stream) -> tuple[list[dict[str, Any]], bool]:
    """The file's last events and whether the array closed after them (`] , "key": ...}`,
    whose keys go to the header); not closed: the file was cut."""
    out: list[dict[str, Any]] = []
    start = 0
    for m in CUT.finditer(buf):
        if _one(buf[start : m.start() + 1], out, st):
            start = m.end()
    rest = buf[start:]
    end = rest.rfind(b"]")
    while end >= 0:  # the array's `]`: the last one after which the events before decode
        head = rest[:end].rstrip(WS + b",")
        if not head.strip() or _one(head, out, st):
            _top_keys(rest[end + 1 :], st.header)
            return out, True
        end = rest.rfind(b"]", 0, end)
    return out, False


def _one(piece: bytes, out: list[dict[str, Any]], st: Stream) -> bool:
    try:
        e = _ONE.decode(piece)
    except _DECODE_ERRORS:
        return False
    if _counted(e, st):
        out.append(e)
    return True


def _counted(e: Any, st: Stream) -> bool:
    if isinstance(e, dict):
        return True
    st.bad_events += 1
    return False


def _probe(path: Path) -> tuple[int | None, int | None]:
    """The Unix ns of the trace's ts 0 (its baseTimeNanoseconds, 0 for Unix-µs stamps, None
    where neither) and the rank it says it is, from the header and the first batch only."""
    st = Stream()
    batches = iter_event_dicts(path, st)
    try:
        first = next(batches, [])
    finally:
        batches.close()
    rank = st.header.distributed.get("rank")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else None
    if st.header.base_time_ns is not None:
        return st.header.base_time_ns, rank
    ts = next((e["ts"] for e in first if isinstance(e.get("ts"), (int, float))), None)
    return (0 if ts is not None and ts >= UNIX_US else None), rank


class _Rank:
    """Rewrites one rank's events onto its process and the common clock."""

    def __init__(self, rank: int, offset_ns: int, next_tid: list[int]) -> None:
        self.rank = rank
        self.pid = RANK_PID + rank
        self.offset_ns = offset_ns
        self.next_tid = next_tid  # shared across ranks: tids unique in the whole file
        self.tids: dict[tuple[Any, Any], int] = {}
        self.thread_names: dict[int, str] = {}
        self.process_names: dict[Any, str] = {}

    def tid(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        new = self.tids.get(key)
        if new is None:
            new = self.tids[key] = self.next_tid[0]
            self.next_tid[0] += 1
        return new

    def rewrite(self, e: dict[str, Any]) -> bool:
        """Rewrite `e` in place; False for metadata that the rank's own replaces."""
        pid, tid = e.get("pid"), e.get("tid")
        if e.get("ph") == "M":
            name = e.get("name")
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if name in PROCESS_META:
                if name == "process_name" and isinstance(args.get("name"), str):
                    self.process_names[pid] = args["name"]
                return False
            if name == "thread_name" and isinstance(args.get("name"), str):
                self.thread_names[self.tid(pid, tid)] = args["name"]
                return False  # written once per thread at the end, with its process's name
        e["pid"] = self.pid
        e["tid"] = self.tid(pid, tid)
        ts = e.get("ts")
        if isinstance(ts, (int, float)) and self.offset_ns:
            e["ts"] = round(ts + self.offset_ns / 1000, 3)  # Kineto's ns, no float dust
        if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
            e["id"] = e["id"] * FLOW_SPAN + self.rank
        if e.get("s") == "g":
            e["s"] = "p"  # a rank's "Record Window End" is the rank's, not the whole file's
        return True

    def metadata(self) -> list[dict[str, Any]]:
        """The rank's process, and a name for each of its threads."""
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": self.pid,
             "args": {"name": f"rank {self.rank}"}},
            {"name": "process_sort_index", "ph": "M", "pid": self.pid,
             "args": {"sort_index": self.rank}},
        ]  # fmt: skip
        pids = {p for p, _ in self.tids}
        for (pid, tid), new in self.tids.items():
            name = self.thread_names.get(new) or _label(tid, "thread")
            if len(pids) > 1 and (where := self.process_names.get(pid) or _label(pid, "pid")):
                name = f"{where}: {name}" if name else where
            out.append(
                {"name": "thread_name", "ph": "M", "pid": self.pid, "tid": new,
                 "args": {"name": name or "trace"}}
            )  # fmt: skip
        return out


def _label(value: Any, kind: str) -> str:
    """A Kineto process or thread id as a name: its own words ("Spans"), else `kind N`."""
    if value is None or value == "":
        return ""
    return value if isinstance(value, str) else f"{kind} {value}"


def write_trace(trace_dir: Path, steps: Steps | None, out: Path) -> TorchTraceInfo:
    """Merge every rank's trace under `trace_dir` into `out` (atomically: a temp file renamed at
    the end, with the mode a plain open() gives). Raises TraceError when no file is a trace."""
    files = rank_files(trace_dir) if trace_dir.is_dir() else {}
    if not files:
        raise TraceError(f"no rank<r>.json[.gz] under {trace_dir}")
    origins: dict[int, int | None] = {}
    found: dict[int, tuple[Path, bool]] = {}  # the rank a trace says it is, else its name's
    for r, (p, tmp) in files.items():
        try:
            origin, said = _probe(p)
        except TraceError as exc:
            if not tmp:
                raise TraceError(f"{p.name}: {exc}") from exc
            origin, said = None, None  # a .tmp cut before its first event: merged as empty
        rank = said if said is not None and said not in found else r
        if rank in found:  # two files say the same rank: keep both, the second after the rest
            rank = max(max(found), max(files)) + 1
        origins[rank], found[rank] = origin, (p, tmp)
    # the earliest base; Unix-µs ranks (origin 0) move onto it, unless every rank is one
    known = [o for o in origins.values() if o is not None]
    base = min((o for o in known if o > 0), default=0 if known else None)
    info = TorchTraceInfo(out=out, base_time_ns=base)
    enc = msgspec.json.Encoder()
    fd, tmp_out = temp_beside(out, None)
    next_tid = [1]
    try:
        with os.fdopen(fd, "wb") as fh:
            head: dict[str, Any] = {"displayTimeUnit": "ms"}
            if base is not None:
                head["baseTimeNanoseconds"] = base
            head["otherData"] = {"merged_by": "hpcscale trace", "ranks": sorted(found)}
            fh.write(enc.encode(head)[:-1] + b',\n"traceEvents": [\n')
            first = True

            def put(events: list[dict[str, Any]]) -> None:
                nonlocal first
                if events:
                    fh.write((b"" if first else b",\n") + b",\n".join(map(enc.encode, events)))
                    first = False

            if steps is not None and base is not None:
                put(step_events(steps, base // 1000))  # type: ignore[arg-type]
                info.steps = len(steps.start_unix_ns)
            for r, (p, tmp) in sorted(found.items()):
                origin = origins[r]
                ri = info.ranks[r] = RankInfo(path=p, truncated=tmp, aligned=origin is not None)
                rank = _Rank(r, 0 if origin is None or base is None else origin - base, next_tid)
                st = Stream()
                try:
                    for batch in iter_event_dicts(p, st):
                        kept = [e for e in batch if rank.rewrite(e)]
                        ri.events += len(kept)
                        ri.steps += sum(
                            1 for e in kept
                            if e.get("ph") == "X" and str(e.get("name", "")).startswith(
                                "ProfilerStep#")
                        )  # fmt: skip
                        put(kept)
                except TraceError:
                    if not tmp:
                        raise
                ri.truncated |= st.truncated
                ri.bad_events = st.bad_events
                put(rank.metadata())
            fh.write(b"\n]}\n")
        os.replace(tmp_out, out)
    except BaseException:
        Path(tmp_out).unlink(missing_ok=True)
        raise
    return info
