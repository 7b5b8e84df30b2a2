"""Runs that did not have their machine to themselves, and efficiencies that say so.

Pure functions of the tidy run table (collector columns, see hpcscale.core.vocab's
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


def overlaps(runs: pd.DataFrame) -> dict[str, list[tuple[str, float]]]:
    """run id -> [(other run id, seconds both ran on a shared machine)], for runs that have
    any; runs without both times are left out."""
    rows = [
        r
        for _, r in runs.iterrows()
        if math.isfinite(_num(r.get("started_unix_s")))
        and math.isfinite(_num(r.get("finished_unix_s")))
    ]
    rows.sort(key=lambda r: float(r["started_unix_s"]))
    out: dict[str, list[tuple[str, float]]] = {}
    for i, a in enumerate(rows):
        span_a = (float(a["started_unix_s"]), float(a["finished_unix_s"]))
        for b in rows[i + 1 :]:
            span_b = (float(b["started_unix_s"]), float(b["finished_unix_s"]))
            if span_b[0] >= span_a[1]:
                break  # sorted by start: no later run can overlap a
            secs = overlap_seconds(span_a, span_b)
            if secs > 0 and a["run_id"] != b["run_id"] and shared_machine(a, b):
                out.setdefault(str(a["run_id"]), []).append((str(b["run_id"]), secs))
                out.setdefault(str(b["run_id"]), []).append((str(a["run_id"]), secs))
    return out


def overlap_findings(runs: pd.DataFrame) -> list[Finding]:
    found = overlaps(runs)
    out = []
    for rid in runs["run_id"].astype(str):
        if rid not in found:
            continue
        others = ", ".join(f"{o} ({s:.1f} s)" for o, s in found[rid])
        out.append(
            Finding(
                rid,
                f"ran at the same time as {others} on the same machine: they shared its CPUs, "
                "so its times include the other runs' load",
                tuple(o for o, _ in found[rid]),
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


def busy_findings(runs: pd.DataFrame) -> list[Finding]:
    out = []
    for _, r in runs.iterrows():
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
    for _, c in ordered.iterrows():
        eff = _num(c.get("efficiency"))
        if not (math.isfinite(eff) and eff > 1.0):
            continue
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
            f"ran alongside {', '.join(f.others)}"
            if kind == "overlap"
            else "was measured on a busy machine"
        )
        out[f.run_id] = f"{out[f.run_id]} and {why}" if f.run_id in out else why
    return out
