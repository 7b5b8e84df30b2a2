"""validate, plan, render: campaign commands that touch no scheduler."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table

from hpcscale.cli.common import CampaignArg, JsonOpt, WorkdirOpt, console, print_json

KNOB_COLUMNS = (
    "mpi",
    "strategy",
    "cross_device_ops",
    "fusion_threshold_mb",
    "cycle_time_ms",
    "fp16_allreduce",
    "hierarchical_allreduce",
    "mixed_precision",
    "epochs",
    "repeat",
)


def validate(campaign: CampaignArg) -> None:
    """Check a campaign (schema, system profile, every cell's arithmetic); write nothing."""
    from hpcscale.api import plan_campaign

    lc, plan = plan_campaign(campaign)
    console.print(
        f"[green]ok[/green] {campaign}: campaign [bold]{lc.campaign.name}[/bold] on "
        f"system {lc.system.name}: {len(plan.runs)} runs, {len(plan.excluded)} excluded"
    )


def plan(campaign: CampaignArg, json: JsonOpt = False) -> None:
    """Show the runs a campaign expands to: one row per run, counts per axis, excluded cells."""
    from hpcscale.api import plan_campaign

    lc, p = plan_campaign(campaign)
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
) -> None:
    """Write DIR/<name>/runs/<run_id>/{job.sbatch,run.json} for every run (atomically)."""
    from hpcscale.api import render_campaign

    lc, _, rendered = render_campaign(campaign, workdir, workers=workers)
    where = rendered[0].run_dir.parent if rendered else "(nothing)"
    console.print(f"rendered {len(rendered)} runs of [bold]{lc.campaign.name}[/bold] into {where}")


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
