"""PyTorch profiler traces as a trace reader (hpcscale.collect.traces.base.TraceReader).

The summary is every format's shape (hpcscale.collect.traces.summary) with the same meanings,
from rank 0's trace (the rank whose steps.json the exact split uses): `category_us["comm"]` the
union of its collective spans, `comm_intervals` that union on its axis (µs since
`start_time_since_epoch_us`, Kineto's `baseTimeNanoseconds`), waits from the cross-rank match
(`waits`); the extra fields say what only a profiler trace knows: compute, overlap and exposed
communication, per step and per rank.
The categories other than communication (negotiate, wait_for_data, queue, memcpy, transport:
UNKNOWN_CATEGORIES) have no counterpart in a profiler trace: they are unknown (None in JSON, NaN
in the table), never 0.

What is damaged or missing is said in `notes` (the collector adds them to the row's notes),
and left out where the arithmetic cannot support it:
- rank 0's trace missing: the figures are the lowest rank present's, said so and `figures_rank`
  names it; the exact split (rank 0's steps.json against the figures' communication) is left
  out by the collector, as it would pair one rank's steps with another's clock.
- two files for one rank (`rank1.json` and `rank1.json.gz`, a `.tmp` beside a finished file, or
  two files whose `distributedInfo.rank` agree): one is read, the finished one, else the first
  by name; the others are named in a note. Files of ranks the run does not have (`ranks`, or a
  `distributedInfo.world_size` other than the run's: an earlier, larger attempt's) are ignored,
  named in a note.
- an allreduce span without a size: the bytes (and so the bus bandwidth) are left out, with a
  note of how many were sized; never a partial sum.
- no time of ts 0 in a rank's trace (no `baseTimeNanoseconds`, no Unix time stamps): the timed
  window cannot be placed on it, so its figures cover its whole trace (the profiler's own
  window), said so; for rank 0 `window_us` stays None and the collector says the same.
- events that are not an event's shape are skipped and counted (`bad_records`), said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hpcscale.collect import intervals as iv
from hpcscale.collect.split import load_steps
from hpcscale.collect.traces.base import Merged, MergeError, TraceSummary
from hpcscale.collect.traces.summary import Summary
from hpcscale.collect.traces.torch.files import TRACE_DIR, UNIX_US, trace_files
from hpcscale.collect.traces.torch.measure import Compute
from hpcscale.collect.traces.torch.measure import clip as _clip
from hpcscale.collect.traces.torch.perfetto import write_trace
from hpcscale.collect.traces.torch.rank import RankTrace, op_of, read_rank
from hpcscale.collect.traces.torch.stream import TraceError
from hpcscale.collect.traces.torch.waits import match
from hpcscale.model.registry import TRACE_READERS


def _us(ns: int) -> int:
    return (ns + 500) // 1000


@dataclass
class TorchTraceSummary(Summary):
    """Summary plus what a profiler trace alone says (µs unless named otherwise).

    `waits_known` False: `waits_us`, `waits_in_comm_us` are 0 only as placeholders and
    `rank_waits_us` holds None (see `waits_unknown_why`)."""

    UNKNOWN_CATEGORIES: ClassVar[tuple[str, ...]] = (
        "negotiate", "wait_for_data", "wait_for_other_tensor_data", "queue", "memcpy",
        "transport", "other",
    )  # fmt: skip

    device: str = "cpu"
    files: int = 0
    # TraceSummary's optional parts, all set by `summarise` (fields, so each summary has its
    # own): notes, whose trace the figures are (0 unless rank 0's is missing), whether every
    # allreduce span in the window has a size, whether the waits are known, and the steps ([]
    # for a trace without ProfilerStep markers: still a window of steps, never a whole run)
    notes: list[str] = field(default_factory=list)
    figures_rank: int = 0
    bytes_known: bool = True
    allreduce_sized: int = 0  # how many allreduce spans have a size
    compute_us: int = 0
    overlap_us: int = 0
    exposed_comm_us: int = 0
    waits_known: bool = False
    waits_unknown_why: str = ""
    rank_waits_us: dict[int, int | None] = field(default_factory=dict)
    per_rank: dict[int, dict[str, int | None]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def bus_bandwidth_gbs(self) -> float | None:
        """None unless every allreduce's size is known (no bandwidth from a partial count)."""
        return super().bus_bandwidth_gbs() if self.bytes_known else None

    def as_json(self, top: int = 10) -> dict[str, Any]:
        out = super().as_json(top)
        out.update({f"{c}_s": None for c in self.UNKNOWN_CATEGORIES})
        if not self.bytes_known:
            out["allreduce_bytes"] = out["bytes_per_allreduce"] = None
        out.update(
            source=TorchProfilerTrace.label,
            device=self.device,
            notes=self.notes,
            figures_rank=self.figures_rank,
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


def _base_ns(rt: RankTrace) -> int | None:
    """The Unix time of the rank's ts 0, ns: Kineto's baseTimeNanoseconds, or 0 where its ts
    are Unix µs (older traces); None where the trace does not say."""
    base = rt.base_time_ns
    if base is None and rt.first_ns is not None and rt.first_ns >= UNIX_US * 1000:
        base = 0
    return base


def _window(rt: RankTrace, window_unix_us: tuple[int, int] | None) -> tuple[int, int] | None:
    """A Unix-epoch µs window on the rank's own axis (ns), None without a window or a known
    time of ts 0 (Kineto's baseTimeNanoseconds, or Unix µs time stamps in older traces)."""
    base = _base_ns(rt)
    if window_unix_us is None or base is None:
        return None
    return window_unix_us[0] * 1000 - base, window_unix_us[1] * 1000 - base


def _world_of(rt: RankTrace) -> int | None:
    world = rt.stream.header.distributed.get("world_size")
    return world if isinstance(world, int) and not isinstance(world, bool) else None


def _foreign(rt: RankTrace, rank: int, ranks: int | None) -> str | None:
    """Why a trace is not of this run's world (None: it is): a rank or world size the run
    does not have (an earlier attempt's file)."""
    world = _world_of(rt)
    if ranks is not None and world is not None and world != ranks:
        return f"written by a world of {world} ranks, the run has {ranks}"
    if ranks is not None and rank >= ranks:
        return f"rank {rank} but the run has {ranks} ranks"
    return None


def _found(trace_dir: Path, shown: int = 5) -> str:
    """What the directory holds instead (a trace copied in under another name is the usual
    cause), for the error that finds no rank file."""
    try:
        names = sorted(p.name for p in trace_dir.iterdir())
    except OSError:
        return ""
    if not names:
        return " (it is empty)"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f" (it holds {', '.join(names[:shown])}{more})"


def summarise(
    trace_dir: Path, *, ranks: int | None = None, window_unix_us: tuple[int, int] | None = None
) -> TorchTraceSummary:
    """Every rank's trace under `trace_dir`, folded; the figures are rank 0's (the lowest
    rank present, said so in `notes`), the waits every rank's. `ranks`: the run's world size,
    where known (files of other ranks are left out). Raises TraceError where no file is a
    trace."""
    files, notes = trace_files(trace_dir, ranks)
    if not files:
        raise TraceError(f"no rank<r>.json[.gz] under {trace_dir}{_found(trace_dir)}")
    traces: dict[int, RankTrace] = {}
    per_rank: dict[int, dict[str, int | None]] = {}
    first: tuple[int, Compute] | None = None  # the lowest rank's compute, for its steps
    tmp_any = False
    # finished files first: a rank two files claim (distributedInfo.rank) keeps the finished one
    for r, (p, tmp) in sorted(files.items(), key=lambda kv: (kv[1][1], kv[0])):
        try:
            rt = read_rank(p)
        except TraceError as exc:
            if tmp:  # a .tmp cut before its first event holds nothing: a killed job's
                tmp_any = True
                continue
            raise TraceError(f"{p.name}: {exc}") from exc
        rt.stream.truncated |= tmp
        rank = rt.rank if rt.rank is not None else r
        why = _foreign(rt, rank, ranks)
        if why is not None:
            notes.append(f"{p.name}: {why} (an earlier attempt's?): ignored")
            continue
        if rank in traces:
            notes.append(f"{p.name} and {traces[rank].path.name} both hold rank {rank}: "
                         f"{traces[rank].path.name} read")  # fmt: skip
            continue
        traces[rank] = rt
        if window_unix_us is not None and _base_ns(rt) is None:
            notes.append(
                f"{p.name}: no baseTimeNanoseconds (nor Unix time stamps): the timed window "
                "cannot be placed on it, its figures cover its whole trace"
            )
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
    if not traces or first is None:  # what was left out, and why, is the whole answer
        raise TraceError("; ".join(["no readable rank trace", *notes]))
    r0, compute0 = first
    t0 = traces[r0]
    if r0 != 0:
        notes.append(
            f"no trace of rank 0: the figures are rank {r0}'s (its own clock and steps), "
            "no exact split"
        )
    base_ns = _base_ns(t0)
    start_us = None if base_ns is None else base_ns // 1000
    window_ns = _window(t0, window_unix_us)
    world = ranks if ranks is not None else _world_of(t0)
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
        files=len(traces),
        start_time_since_epoch_us=start_us,
    )
    s.figures_rank = r0
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
    if not s.bytes_known:
        notes.append(
            f"{s.allreduce_sized} of {s.allreduce_tensors} allreduce spans carry a size: "
            "allreduce bytes and bus bandwidth left out"
        )
    s.waits_known = waits.per_rank is not None
    s.waits_unknown_why = waits.why
    if s.waits_known:
        s.waits_us = _us(iv.sum_lengths(waits0))
        s.waits_in_comm_us = _us(iv.sum_lengths(iv.intersection(waits0, comm0)))
        s.last_ready = {r: n for r, n in (waits.shortest or {}).items() if n}
        s.ticks = waits.matched
    s.rank_waits_us = {r: d["waits_us"] for r, d in sorted(per_rank.items())}
    s.per_rank = dict(sorted(per_rank.items()))
    s.steps = _steps(t0, compute0, comm0, window_ns, waits0 if s.waits_known else None)
    s.ranks = ranks if ranks is not None else (world or len(traces))
    s.truncated = any(rt.stream.truncated for rt in traces.values()) or tmp_any
    s.bad_records = sum(rt.stream.bad_events for rt in traces.values())
    if s.bad_records:
        notes.append(f"{s.bad_records} events not of an event's shape: skipped")
    s.window_us = (
        None if window_ns is None or start_us is None
        else (window_unix_us[0] - start_us, window_unix_us[1] - start_us)  # type: ignore[index]
    )  # fmt: skip
    s.notes = notes
    return s


def _collectives(
    s: TorchTraceSummary,
    rt: RankTrace,
    window_ns: tuple[int, int] | None,
    waits: list[tuple[Any, int]] | None,
) -> None:
    """Counts by span name, per-name unions, allreduce bytes and time; the transfer part of
    the allreduces (their spans less the waits) stands for the transport category."""
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
    s.allreduce_tensors, s.allreduce_sized = len(ar), len(known)
    # a partial sum would under-count the bytes and the bandwidth: none unless all are sized
    s.bytes_known = len(known) == len(ar)
    s.allreduce_bytes = sum(known) if s.bytes_known else 0
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
    label: ClassVar[str] = TRACE_READERS[name].label
    file_name: ClassVar[str] = f"{TRACE_DIR}/rank<r>.json[.gz]"
    errors: ClassVar[tuple[type[Exception], ...]] = (TraceError, OSError)

    def path(self, run_dir: Path) -> Path:
        return run_dir / TRACE_DIR

    def summarise(
        self, path: Path, *, ranks: int | None, window_unix_us: tuple[int, int] | None
    ) -> TraceSummary:
        return summarise(path, ranks=ranks, window_unix_us=window_unix_us)

    def summarise_file(self, path: Path, *, ranks: int | None) -> TraceSummary:
        raise TraceError(
            f"{path}: a profiler trace is one file per rank (RUN_DIR/{self.file_name}): "
            "`hpcscale trace RUN` merges them"
        )

    def merge(self, run_dir: Path, out: Path) -> Merged:
        """Every rank's trace in one file, one process per rank on one clock, with steps.json's
        spans where the run wrote one (a user's program writes none)
        (hpcscale.collect.traces.torch.perfetto)."""
        steps = load_steps(run_dir / "steps.json") if (run_dir / "steps.json").is_file() else None
        traces = self.path(run_dir)
        if not traces.is_dir():
            raise MergeError(
                f"{run_dir}: no {TRACE_DIR}/ (was the run made with collect: {{timeline: true}}?)"
            )
        try:
            info = write_trace(traces, steps, out)
        except TraceError as exc:
            raise MergeError(f"{traces}: {exc}") from exc
        warnings = info.notes()
        if steps is not None and info.base_time_ns is None:
            warnings.append("the traces have no base time: steps.json's steps left out")
        return Merged(info, warnings)
