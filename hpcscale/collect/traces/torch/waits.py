"""Waits for the other ranks: the k-th collective matched across ranks.

Every rank issues a process group's collectives in the same order, so the k-th one on each
rank is the same collective; the shortest of its durations is the transfer itself, and each
rank's excess over it is the time it waited for the others (a rank that came early waits).
The wait is taken as the first part of its span (arriving early, then the transfer).

Enqueue order comes from the training thread's `c10d::*` calls: gloo's worker threads take
collectives off one queue in that order but two of them may run at once, so each call is given
the first worker span that starts at or after it. The trace's `External id` of a worker span
is the worker's own counter in torch 2.13 (it names no c10d call), so no link is read from it.
A GPU trace's order is its NCCL kernels' order on their one stream.

Keys are (ProfilerStep number, index inside the step), so ranks whose windows hold the same
steps match step by step. Anything less than a sure match makes the waits unknown (None), never
guessed: a rank's trace missing, more than one process group, collectives on more than one
GPU stream, calls and spans that do not pair up, or ranks disagreeing on a step's count.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from hpcscale.collect.traces.torch.rank import Coll, RankTrace

Key = tuple[int | None, int]


@dataclass
class Waits:
    """Per rank: its collectives' waits (span, ns) by key; `why` says why unknown."""

    per_rank: dict[int, list[tuple[Coll, int]]] | None
    why: str = ""
    matched: int = 0
    shortest: dict[int, int] | None = None  # rank -> how many collectives it was shortest in


def _ordered(rt: RankTrace) -> list[tuple[Coll, int]] | str:
    """The rank's collectives in enqueue order, each with the ns time its order was fixed at
    (the c10d call's start, or the kernel's), or why no order is sure."""
    if rt.gpu:
        streams = {c.tid for c in rt.colls}
        if len(streams) > 1:
            return "NCCL kernels on more than one stream"
        return [(c, c.t0) for c in rt.colls]
    calls = rt.enqueues()
    colls = sorted(rt.colls, key=lambda c: c.t0)
    if not calls:
        if len({c.tid for c in colls}) > 1:
            return "no c10d calls on the training thread to order the workers' collectives"
        return [(c, c.t0) for c in colls]
    out: list[tuple[Coll, int]] = []
    j = 0
    for t0, _, _ in calls:
        skipped = 0
        while j < len(colls) and colls[j].t0 < t0:
            j += 1
            skipped += 1
        if skipped and out:  # a span between two calls that no call enqueued
            return "a collective span no c10d call enqueued"
        if j == len(colls):  # the last calls' spans lie past the window: their step differs
            break
        out.append((colls[j], t0))
        j += 1
    if j < len(colls):
        return "more collective spans than c10d calls"
    return out


def _keyed(rt: RankTrace, ordered: list[tuple[Coll, int]]) -> dict[Key, Coll]:
    """(step, index in step) for each collective, by where its order was fixed."""
    steps = rt.steps  # sorted by start, disjoint (finish): the step at `at` by bisection
    starts = [t0 for _, t0, _, _ in steps]
    out: dict[Key, Coll] = {}
    count: dict[int | None, int] = {}
    for c, at in ordered:
        step = None
        if steps:
            i = bisect_right(starts, at) - 1
            if i >= 0 and at < steps[i][2]:
                step = steps[i][0]
            else:  # overlapping steps (never from one profiler) or none: the slow way
                step = next((n for n, t0, t1, _ in steps if t0 <= at < t1), None)
            if step is None:
                continue  # enqueued outside every profiled step (the window's edges)
        k = count.get(step, 0)
        count[step] = k + 1
        out[(step, k)] = c
    return out


def match(ranks: dict[int, RankTrace], world: int | None) -> Waits:
    """Each rank's waits, or unknown with the reason."""
    if world is not None and len(ranks) < world:
        return Waits(None, f"traces of {len(ranks)} of {world} ranks")
    if world == 1:  # nobody to wait for: every collective is all transfer
        ((r, rt),) = ranks.items()
        return Waits({r: [(c, 0) for c in rt.colls]}, matched=len(rt.colls), shortest={})
    if len(ranks) < 2:
        return Waits(None, "one rank's trace and no world size: nothing to match")
    for rt in ranks.values():
        pgs = rt.stream.header.distributed.get("pg_count")
        if isinstance(pgs, int) and pgs > 1:
            return Waits(None, f"{pgs} process groups: collectives cannot be told apart")
    keyed: dict[int, dict[Key, Coll]] = {}
    for r, rt in ranks.items():
        ordered = _ordered(rt)
        if isinstance(ordered, str):
            return Waits(None, f"rank {r}: {ordered}")
        keyed[r] = _keyed(rt, ordered)
    keys = set(next(iter(keyed.values())))
    if any(set(k) != keys for k in keyed.values()):
        return Waits(None, "ranks differ in their collectives per step")
    per_rank: dict[int, list[tuple[Coll, int]]] = {r: [] for r in keyed}
    shortest = dict.fromkeys(keyed, 0)
    for key in sorted(keys, key=lambda k: (k[0] if k[0] is not None else -1, k[1])):
        durs = {r: keyed[r][key].t1 - keyed[r][key].t0 for r in keyed}
        transfer = min(durs.values())
        shortest[min(durs, key=lambda r: (durs[r], r))] += 1
        for r in keyed:
            per_rank[r].append((keyed[r][key], durs[r] - transfer))
    return Waits(per_rank, matched=len(keys), shortest=shortest)
