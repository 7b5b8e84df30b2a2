"""Every trace format's summary: totals (µs) per category, collectives, tensors, waits, with
the few figures derived from them (bus bandwidth, straggler hint, top tensors) and its JSON form,
so the CLI, the collector and the tests read one shape whatever the format and engine. A format
fills what it knows; what it cannot know keeps the defaults (no ticks: no straggler hint) or is
named in its UNKNOWN_CATEGORIES (hpcscale.collect.traces.base.TraceSummary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcscale.collect import intervals as iv
from hpcscale.collect.traces.base import NO_COLLECTIVES, TraceSummary

# The categories time is split into, in display order: the table's timeline columns
# (`<category>_s`, hpcscale.model.vocab.TIMELINE_TERMS); a reader classifies its format's spans
# into them. JSON key of each; values are seconds (union across all tensors).
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


@dataclass
class TensorStat:
    """One tensor's communication: time in its collectives (µs), op count, allreduce bytes."""

    name: str
    comm_us: int = 0
    ops: int = 0
    bytes: int = 0


@dataclass
class Summary(TraceSummary):
    """What one trace says. Times in µs internally; `as_json` reports seconds. What a format
    cannot say beyond this (`steps`, `notes`, `figures_rank`, `bytes_known`, `waits_known`,
    `UNKNOWN_CATEGORIES`) keeps TraceSummary's defaults unless its subclass says otherwise: no
    step markers, every category, size and wait known, rank 0's figures."""

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
    # the two waits unioned in time (they overlap), and the part of that union inside
    # communication (the two differ only where a wait's collective never closed, e.g. in a
    # killed run's trace)
    waits_us: int = 0
    waits_in_comm_us: int = 0
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
        out["waits_s"] = self.waits_us / 1e6
        out["waits_in_comm_s"] = self.waits_in_comm_us / 1e6
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
