"""validate, plan, render: campaign commands that touch no scheduler."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table

from hpcscale import api
from hpcscale.cli.common import CampaignArg, JsonOpt, SystemOpt, WorkdirOpt, console, print_json
from hpcscale.core.vocab import KNOBS

KNOB_COLUMNS = (*KNOBS, "epochs", "repeat")


def validate(campaign: CampaignArg, system: SystemOpt = None) -> None:
    """Check a campaign (schema, system profile and its template, every cell's arithmetic);
    write nothing."""
    p = api.plan(campaign, system=system)
    console.print(
        f"[green]ok[/green] {campaign}: campaign [bold]{p.campaign.name}[/bold] on "
        f"system {p.system.name}: {len(p.runs)} runs, {len(p.excluded)} excluded"
    )


def plan(campaign: CampaignArg, json: JsonOpt = False, system: SystemOpt = None) -> None:
    """Show the runs a campaign expands to: one row per run, counts per axis, excluded cells."""
    p = api.plan(campaign, system=system)
    lc = p.loaded
    records = [r.as_record() for r in p.runs]
    if json:
        print_json(records)
        return
    swept = [a for a, v in p.axes.items() if len(v) > 1]
    table = Table(
        title=f"{lc.campaign.name}: {len(records)} runs on {lc.system.name} "
        f"({lc.campaign.scaling} scaling)"
    )
    cols = [
        "run_id",
        "model",
        "device",
        "nodes",
        "ranks",
        "layout",
        "gpus/node",
        "batch/rank",
        "global batch",
    ]
    extra = [k for k in KNOB_COLUMNS if _varies(records, k) or k in swept]
    extra += [
        f"args.{k}"
        for k in sorted({k for r in records for k in r["args"]})
        if _varies([r["args"] for r in records], k)
    ]
    for c in cols + extra:
        table.add_column(c, justify="right" if c not in ("run_id", "model", "device") else "left")
    for r in records:
        row = [
            r["run_id"],
            r["model"],
            r["device"],
            str(r["nodes"]),
            str(r["ranks"]),
            f"{r['tasks_per_node']}x{r['threads_per_task']}",
            str(r["gpus_per_node"]),
            str(r["batch_per_rank"]),
            str(r["global_batch"]),
        ]
        row += [_cell(r["args"].get(k[5:]) if k.startswith("args.") else r.get(k)) for k in extra]
        table.add_row(*row)
    console.print(table)
    counts = Table(title="values per axis", show_header=True)
    counts.add_column("axis")
    counts.add_column("runs per value")
    for axis in p.axes:
        values = Counter(_value_of(axis, r) for r in records)
        counts.add_row(axis, ", ".join(f"{v}: {n}" for v, n in values.items()))
    console.print(counts)
    if p.excluded:
        ex = Table(title=f"{len(p.excluded)} excluded cells")
        ex.add_column("cell")
        ex.add_column("excluded by")
        for e in p.excluded:
            ex.add_row(", ".join(f"{k}={v}" for k, v in e.assignment.items()), e.rule)
        console.print(ex)


def render(
    campaign: CampaignArg,
    workdir: WorkdirOpt = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="processes to render with (default: one per CPU for 1,000+ runs, else 1; "
            "or HPCSCALE_RENDER_WORKERS)",
        ),
    ] = None,
    system: SystemOpt = None,
) -> None:
    """Write DIR/<name>/runs/<run_id>/{job.sbatch,run.json} for every run (atomically)."""
    r = api.render(campaign, workdir, system=system, workers=workers)
    where = r.directory / "runs" if r.runs else "(nothing)"
    console.print(
        f"rendered {len(r.runs)} runs of [bold]{r.planned.campaign.name}[/bold] into {where}"
    )


def _value_of(axis: str, r: dict[str, Any]) -> str:
    if axis.startswith("args."):
        return _cell(r["args"].get(axis.removeprefix("args.")))
    if axis == "layout":
        return f"{r['tasks_per_node']}x{r['threads_per_task']}"
    if axis == "batch":
        return _cell(r["global_batch"] if r["scaling"] == "strong" else r["batch_per_rank"])
    return _cell(r.get(axis))


def _varies(records: list[dict[str, Any]], key: str) -> bool:
    return len({repr(r.get(key)) for r in records}) > 1


def _cell(v: Any) -> str:
    return "" if v is None else str(v)
