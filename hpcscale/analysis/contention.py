"""Runs that did not have their machine to themselves, and efficiencies that say so.

Pure functions of the tidy run table (collector columns, see hpcscale.model.vocab's
CONTENTION_TERMS); hpcscale.analysis.quality turns their findings into flags.

- Overlap: two runs whose [started_unix_s, finished_unix_s] intervals intersect on a shared
  machine. The times are the job's own (metrics.json, taken on the machine itself, the same
  clock for runs on one machine) rather than the ledger's: the ledger has times only for SLURM
  runs, they include queueing and start-up, and its node names are SLURM's, which on the local
  cluster are four names for one machine. A machine is the kernel boot id every rank records
  (`machines`): virtual nodes and containers on one host share it; files from before it fall
  back to the hostnames.
- Busy: just before the timed epochs (and after them) every rank sleeps for half a second while
  rank 0 measures the CPU time other processes take (`others_cpus_*`, jobs/load.py). The run
  needs `own` CPUs (its ranks on that machine x threads per rank, at most the machine's CPUs);
  it was measured on a busy machine when the others took more than the rest:
  others > cpus - own + BUSY_SLACK_CPUS, at the start or the end. (The load average is
  recorded too, but it lags a minute and still holds the previous run's load.)
- Superlinear: a cell whose scaling efficiency is above 1, with its likely causes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

BUSY_SLACK_CPUS = 0.5  # daemons, the measuring itself, and sampling noise
BUSY_RULE = (
    "busy: during 0.5 s before or after the timed epochs, with this run's ranks asleep, other "
    "processes used more CPUs than the machine's CPUs minus this run's (ranks x threads), "
    f"+ {BUSY_SLACK_CPUS}"
)


@dataclass(frozen=True)
class Finding:
    """One run and why it is flagged (`others`: the runs it is flagged because of)."""

    run_id: str
    reason: str
    others: tuple[str, ...] = ()
    count: int = 0  # overlap: how many other runs (`others` names them when few)
    peak: int = 0  # overlap: the most runs at once on its machine while it ran


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _names(value: Any) -> set[str]:
    return {v for v in str(value).split(",") if v} if isinstance(value, str) else set()


def shared_machine(a: pd.Series | dict[str, Any], b: pd.Series | dict[str, Any]) -> bool:
    """Whether two runs had a machine in common: by boot id when both recorded it, else by
    hostname."""
    ma, mb = _names(a.get("machines")), _names(b.get("machines"))
    if ma and mb:
        return bool(ma & mb)
    return bool(_names(a.get("hostnames")) & _names(b.get("hostnames")))


def overlap_seconds(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Length of the intersection of two [start, end] intervals (0 when disjoint)."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@dataclass(frozen=True)
class Overlap:
    """How one run shared its machine: `others`, how many other runs ran on a machine it ran
    on while it ran; `peak`, the most runs (it included) running at once on one of its machines
    during it; `named`, (other run id, seconds both ran) for each of them when they are at most
    NAMED_OTHERS (else empty: naming hundreds helps no one and costs a pair per name)."""

    others: int
    peak: int
    named: tuple[tuple[str, float], ...] = ()


NAMED_OTHERS = 3


def overlaps(runs: pd.DataFrame) -> dict[str, Overlap]:
    """run id -> its Overlap, for runs that overlapped any other on a shared machine (see
    `shared_machine`); runs without both times are left out. A sweep line per machine, in
    numpy (sorted starts and ends): O(n log n) in the runs, where comparing every pair of a
    1,000-run campaign on one host took 27 s."""
    spans = _spans(runs)
    if spans is None:
        return {}
    ids, start, end, groups, multi, of_run = spans
    n = len(ids)
    others = np.zeros(n, np.int64)
    peak = np.ones(n, np.int64)
    for g in groups:
        count, top = _sweep(start, end, g)
        np.add.at(others, g.members, count)
        np.maximum.at(peak, g.members, top)
    out: dict[str, Overlap] = {}
    for i in np.flatnonzero(others > 0):  # a run on several machines may be counted twice
        found = (
            _pairs(int(i), start, end, of_run[i]) if multi[i] or others[i] <= NAMED_OTHERS else None
        )
        count = int(others[i]) if found is None else len(found)
        if count == 0:
            continue
        named = (
            ()
            if found is None or count > NAMED_OTHERS
            else tuple((str(ids[j]), secs) for j, secs in found)
        )
        out[str(ids[i])] = Overlap(count, int(peak[i]), named)
    return out


@dataclass(frozen=True)
class _Group:
    """The runs on one machine (a boot id, or a hostname for files without boot ids): each
    member is compared with every member when `full`, else with the full members only (see
    `_spans`). Members are in order of start, and `longest` bounds how far back an overlapping
    run can have started."""

    members: np.ndarray  # run positions, by start
    full: np.ndarray  # bool per member: compared with every member, else with full ones only
    starts: np.ndarray
    longest: float

    @classmethod
    def of(cls, members: list[int], full: list[bool], start: np.ndarray, end: np.ndarray) -> _Group:
        m = np.array(members, np.int64)
        order = np.argsort(start[m], kind="stable")
        m = m[order]
        return cls(m, np.array(full, bool)[order], start[m], float(np.max(end[m] - start[m])))


# run ids, starts, ends, machine groups, multi-machine runs, each run's (group, full member)
_Spans = tuple[
    np.ndarray, np.ndarray, np.ndarray, list[_Group], np.ndarray, list[list[tuple[_Group, bool]]]
]


def _spans(runs: pd.DataFrame) -> _Spans | None:
    """(run ids, starts, ends, machine groups, whether a run is on several machines of one kind,
    each run's groups) of the runs with a positive [start, end]. Runs with boot ids meet by
    boot id; runs without meet any run by hostname, so runs with boot ids are also (not-full)
    members of their hostnames' groups when some run lacks them."""
    if not {"run_id", "started_unix_s", "finished_unix_s"} <= set(runs.columns):
        return None
    start = pd.to_numeric(runs["started_unix_s"], errors="coerce").to_numpy(float)
    end = pd.to_numeric(runs["finished_unix_s"], errors="coerce").to_numpy(float)
    ids = runs["run_id"].astype(str).to_numpy()
    keep = np.isfinite(start) & np.isfinite(end) & (end > start) & ~pd.Series(ids).duplicated()
    keep = keep.to_numpy(bool)
    if not keep.any():
        return None
    col = {
        c: runs[c].to_numpy(object)[keep] if c in runs.columns else [None] * int(keep.sum())
        for c in ("machines", "hostnames")
    }
    machines = [_names(v) for v in col["machines"]]
    hosts = [_names(v) for v in col["hostnames"]]
    any_old = any(not m for m in machines)
    keyed: dict[str, tuple[list[int], list[bool]]] = {}
    for i, (ms, hs) in enumerate(zip(machines, hosts, strict=True)):
        keys = [(f"m:{m}", True) for m in ms] if ms else [(f"h:{h}", True) for h in hs]
        if ms and any_old:
            keys += [(f"h:{h}", False) for h in hs]
        for key, full in keys:
            members, roles = keyed.setdefault(key, ([], []))
            members.append(i)
            roles.append(full)
    start, end = start[keep], end[keep]
    groups = [_Group.of(m, r, start, end) for m, r in keyed.values()]
    of_run: list[list[tuple[_Group, bool]]] = [[] for _ in machines]
    for g in groups:
        for i, full in zip(g.members, g.full, strict=True):
            of_run[i].append((g, bool(full)))
    multi = np.array(
        [
            len(ms) > 1 or (len(hs) > 1 and (not ms or any_old))
            for ms, hs in zip(machines, hosts, strict=True)
        ],
        bool,
    )
    return ids[keep], start, end, groups, multi, of_run


def _sweep(start: np.ndarray, end: np.ndarray, g: _Group) -> tuple[np.ndarray, np.ndarray]:
    """Per member of `g`: how many runs it is compared with overlapped it, and the most of
    them (it included) running at once during it."""
    s, e = start[g.members], end[g.members]
    count = np.zeros(len(s), np.int64)
    top = np.ones(len(s), np.int64)
    for against, mine in ((np.ones(len(s), bool), g.full), (g.full, ~g.full)):
        if not mine.any() or not against.any():
            continue
        ss, es = np.sort(s[against]), np.sort(e[against])
        qs, qe = s[mine], e[mine]
        self_in = against[mine].astype(np.int64)
        # overlapping = started before it ended, less those that ended before it started
        count[mine] = np.searchsorted(ss, qe, "left") - np.searchsorted(es, qs, "right") - self_in
        # running at once peaks at its start or at a later start before its end
        at = np.searchsorted(ss, ss, "right") - np.searchsorted(es, ss, "right")
        at_start = np.searchsorted(ss, qs, "right") - np.searchsorted(es, qs, "right")
        lo, hi = np.searchsorted(ss, qs, "right"), np.searchsorted(ss, qe, "left")
        top[mine] = np.maximum(at_start, _range_max(at, lo, hi)) + (1 - self_in)
    return count, top


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo:hi]) per query (0 for an empty range), by a sparse table."""
    out = np.zeros(len(lo), np.int64)
    if len(values) == 0:
        return out
    table = [values]
    while 2 ** len(table) <= len(values):
        prev, w = table[-1], 2 ** (len(table) - 1)
        table.append(np.maximum(prev[:-w], prev[w:]))
    ok = hi > lo
    width = hi[ok] - lo[ok]
    k = np.floor(np.log2(width)).astype(np.int64)
    a, b = lo[ok], hi[ok] - 2**k
    got = np.empty(len(width), np.int64)
    for level in np.unique(k):
        sel = k == level
        got[sel] = np.maximum(table[level][a[sel]], table[level][b[sel]])
    out[ok] = got
    return out


def _pairs(
    i: int, start: np.ndarray, end: np.ndarray, groups: list[tuple[_Group, bool]]
) -> list[tuple[int, float]]:
    """The runs that overlapped run `i` on a machine it shares with them (`groups`: its groups
    and whether it is a full member), each once, with the seconds both ran, in order of start:
    one run's pairs, for runs on several machines (a run on two of them counts once) and for
    naming a run's few others. Only the members that started within `longest` before it."""
    found: dict[int, float] = {}
    for g, full in groups:
        lo = np.searchsorted(g.starts, start[i] - g.longest, "left")
        hi = np.searchsorted(g.starts, end[i], "left")
        against = g.members[lo:hi] if full else g.members[lo:hi][g.full[lo:hi]]
        s, e = start[against], end[against]
        hit = (e > start[i]) & (against != i)
        for j, secs in zip(
            against[hit], np.minimum(e[hit], end[i]) - np.maximum(s[hit], start[i]), strict=True
        ):
            found[int(j)] = float(secs)
    return sorted(found.items(), key=lambda js: (start[js[0]], js[0]))


def overlap_findings(runs: pd.DataFrame) -> list[Finding]:
    found = overlaps(runs)
    out = []
    for rid in runs["run_id"].astype(str):
        if rid not in found:
            continue
        o = found[rid]
        if o.named:
            who = ", ".join(f"{other} ({s:.1f} s)" for other, s in o.named)
        else:
            who = f"{o.others} other runs (up to {o.peak} runs at once)"
        out.append(
            Finding(
                rid,
                f"ran at the same time as {who} on the same machine: they shared its CPUs, "
                "so its times include the other runs' load",
                tuple(other for other, _ in o.named),
                o.others,
                o.peak,
            )
        )
    return out


def own_cpus(row: pd.Series | dict[str, Any]) -> float:
    """CPUs the run itself uses on rank 0's machine: its ranks there x threads per rank."""
    machines = str(row.get("machines") or "").split(",")
    here = machines.count(machines[0]) if machines[0] else _num(row.get("tasks_per_node"))
    threads = _num(row.get("threads_per_task"))
    here = here if math.isfinite(here) and here > 0 else 1.0
    return here * (threads if math.isfinite(threads) and threads > 0 else 1.0)


def is_busy(others_cpus: float, cpus: float, own: float) -> bool:
    """The busy rule (BUSY_RULE): others took more than the CPUs this run left free."""
    if not (math.isfinite(others_cpus) and math.isfinite(cpus)):
        return False
    return others_cpus > max(cpus - min(own, cpus), 0.0) + BUSY_SLACK_CPUS


# what busy_findings reads of a run
BUSY_FIELDS = (
    "run_id",
    "cpus",
    "others_cpus_start",
    "others_cpus_end",
    "other_jobs_start",
    "machines",
    "tasks_per_node",
    "threads_per_task",
)


def busy_findings(runs: pd.DataFrame) -> list[Finding]:
    out = []
    fields = [c for c in BUSY_FIELDS if c in runs.columns]
    for r in runs[fields].to_dict("records"):  # the fields read, not a Series per run
        cpus, own = _num(r.get("cpus")), own_cpus(r)
        busy = [
            (when, _num(r.get(f"others_cpus_{when}")))
            for when in ("start", "end")
            if is_busy(_num(r.get(f"others_cpus_{when}")), cpus, own)
        ]
        if not busy:
            continue
        seen = "; ".join(f"{v:.1f} CPUs at the {w}" for w, v in busy)
        jobs = _num(r.get("other_jobs_start"))
        also = f"; {int(jobs)} other SLURM job(s) on the node" if jobs > 0 else ""
        out.append(
            Finding(
                str(r["run_id"]),
                f"measured on a busy machine: other processes used {seen} of {cpus:.0f} "
                f"(this run needs {min(own, cpus):.0f}){also} [{BUSY_RULE}]",
            )
        )
    return out


def superlinear_findings(
    cells: pd.DataFrame, contaminated: dict[str, str] | None = None
) -> list[Finding]:
    """Cells (hpcscale.analysis.derive's output) with efficiency above 1. `contaminated`:
    run id -> why (overlap, busy) for runs already flagged, to name the cause when the
    group's baseline is one of them."""
    contaminated = contaminated or {}
    if cells.empty or "efficiency" not in cells.columns:
        return []
    ordered = cells.sort_values(["group", "axis_value", "nodes"], kind="stable")
    base_ids = ordered.groupby("group")["run_ids"].first()
    out = []
    effs = [_num(v) for v in ordered["efficiency"].tolist()]
    above = [i for i, eff in enumerate(effs) if math.isfinite(eff) and eff > 1.0]
    for i in above:  # a row read only where the efficiency is above 1 (not a Series per cell)
        c, eff = ordered.iloc[i], effs[i]
        base = [str(b) for b in base_ids[c["group"]]]
        bad = [f"{b} {contaminated[b]}" for b in base if b in contaminated]
        if bad:
            cause = (
                "its baseline is contaminated: baseline run "
                + "; ".join(bad)
                + ", so the baseline is too slow and the ratio too high"
            )
        else:
            cause = (
                "likely causes: a contaminated baseline (its run slowed by other work on the "
                "machine), cache effects (in strong scaling, a rank's smaller share of the work "
                "fitting a faster cache), or measurement noise"
            )
        reason = (
            f"efficiency {eff:.2f} is above 1 at {c['axis']} = {c['axis_value']} "
            f"(baseline {c['axis']} = {c['base_axis_value']}): {cause}"
        )
        out += [Finding(str(rid), reason, tuple(base)) for rid in c["run_ids"]]
    return out


def contaminated_runs(findings: Iterable[tuple[str, Finding]]) -> dict[str, str]:
    """run id -> a short "(why)" for runs flagged overlap or busy, for superlinear_findings."""
    out: dict[str, str] = {}
    for kind, f in findings:
        why = (
            (
                f"ran alongside {', '.join(f.others)}"
                if f.others or not f.count
                else f"ran alongside {f.count} other runs (up to {f.peak} at once)"
            )
            if kind == "overlap"
            else "was measured on a busy machine"
        )
        out[f.run_id] = f"{out[f.run_id]} and {why}" if f.run_id in out else why
    return out
