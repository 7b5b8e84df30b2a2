"""validate, plan, render: campaign commands that touch no scheduler."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from operator import methodcaller
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import (
    CampaignArg,
    JsonOpt,
    SystemOpt,
    WorkdirOpt,
    console,
    err_console,
    print_json,
    warn_if_large,
)
from hpcscale.cli.progress import Activity
from hpcscale.cli.tables import Col, Grid, emit
from hpcscale.model.command import AS_WRITTEN, PYTHONS, shown_command
from hpcscale.model.system import python_of
from hpcscale.model.vocab import KNOBS
from hpcscale.util.text import plural

KNOB_COLUMNS = (*KNOBS, "epochs", "repeat")


def validate(campaign: CampaignArg, system: SystemOpt = None) -> None:
    """Check a campaign (schema, system profile and its template, every cell's arithmetic, the
    data and weights paths its jobs read); write nothing."""
    with Activity(f"validate {Path(campaign).name}", thread=True):
        p = api.validate(campaign, system=system)
    warn_if_large(p.campaign.name, len(p.runs))
    for w in p.expansion.warnings:  # rules that drop or keep nothing; paths it cannot see
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    console.print(
        f"[green]ok[/green] {escape(campaign)}: campaign [bold]{escape(p.campaign.name)}[/bold] "
        f"on system {escape(p.system.name)}: {plural(len(p.runs), 'run')}, "
        f"{len(p.excluded)} excluded"
    )


def plan(campaign: CampaignArg, json: JsonOpt = False, system: SystemOpt = None) -> None:
    """Show the runs a campaign expands to: one row per run, counts per axis, excluded cells.
    Piped, the table is plain text in aligned columns, every run id whole."""
    with Activity(f"plan {Path(campaign).name}", thread=True) as bar:
        bar.step("expanding the matrix")
        p = api.plan(campaign, system=system)
        records = [r.as_record() for r in p.runs]
        if not json:
            bar.step("writing the table")
            runs, *others = _plan_grids(p, records)
            parts = [runs.prepare(console, bar), *(g.prepare(console) for g in others)]
    warn_if_large(p.campaign.name, len(records))
    for w in p.expansion.warnings:  # rules that drop nothing, or keep nothing
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    if json:
        print_json(records)
    else:
        emit(parts, console)
        if note := interpreter_note(p):
            console.print(escape(note), highlight=False)


def interpreter_note(p: api.Planned) -> str | None:
    """What a leading `python` in a command becomes (the dry run shows it; plan says it)."""
    run = next((r for r in p.runs if r.command), None)
    first = shlex.split(run.command)[0] if run is not None and run.command else ""
    if run is None or first not in PYTHONS or run.interpreter == AS_WRITTEN:
        return None
    return (
        f"note: `{first}` in workload.command runs as the profile's interpreter "
        f"{python_of(p.system)} (`workload.interpreter: as-written` runs the `{first}` on the "
        "job's PATH instead)"
    )


def _plan_grids(p: api.Planned, records: list[dict[str, Any]]) -> list[Grid]:
    """The runs, the values per axis and the excluded cells; built a column at a time (fast
    enough for 100,000 runs)."""
    lc = p.loaded
    swept = [a for a, v in p.axes.items() if len(v) > 1]
    title = (
        f"{lc.campaign.name}: {plural(len(records), 'run')} on {lc.system.name} "
        f"({lc.campaign.scaling} scaling)"
    )
    extra = [k for k in KNOB_COLUMNS if k in swept or _varies(records, k)]
    extra += [
        f"args.{k}"
        for k in sorted({k for r in records for k in r["args"]})
        if _varies([r["args"] for r in records], k)
    ]
    fixed = {
        "run_id": "run_id",
        "model": "model",
        "device": "device",
        "nodes": "nodes",
        "ranks": "ranks",
        "layout": "layout",
        "gpus/node": "gpus_per_node",
        "batch/rank": "batch_per_rank",
        "global_batch": "global_batch",
    }
    if any(run.command for run in p.runs):  # the user's program: what each run executes
        for rec, run in zip(records, p.runs, strict=True):
            rec["command_line"] = shown_command(run) if run.command else ""
        extra.append("command_line")
    names = [*fixed, *extra]
    left = ("run_id", "model", "device")
    runs = Grid(title, [Col(c, right=c not in left, key=c == "run_id") for c in names])
    cells: dict[str, list[str]] = {}  # field or axis -> its text, run by run
    for k, field in enumerate([*fixed.values(), *extra]):
        runs.set_column(k, cells.setdefault(field, _cells(_values(field, records))))
    counts = Grid("values per axis", ["axis", "runs per value"])
    for axis in p.axes:
        values = Counter(cells.get(axis) or _cells(_values(axis, records)))
        counts.add_row(axis, ", ".join(f"{v}: {n}" for v, n in values.items()))
    grids = [runs, counts]
    if p.excluded:
        ex = Grid(f"{plural(len(p.excluded), 'excluded cell')}", ["cell", "excluded by"])
        for e in p.excluded:
            ex.add_row(", ".join(f"{k}={v}" for k, v in e.assignment.items()), e.rule)
        grids.append(ex)
    return grids


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
    with Activity(f"render {Path(campaign).name}", thread=False) as bar:
        r = api.render(campaign, workdir, system=system, workers=workers, progress=bar)
    warn_if_large(r.planned.campaign.name, len(r.runs))
    where = r.directory / "runs" if r.runs else "(nothing)"
    console.print(
        f"rendered {plural(len(r.runs), 'run')} of [bold]{escape(r.planned.campaign.name)}"
        f"[/bold] into {escape(str(where))}"
    )


def _values(axis: str, records: list[dict[str, Any]]) -> Iterable[Any]:
    """Each record's value of an axis or run field (`args.NAME`, `layout` and `batch` too)."""
    if axis.startswith("args."):
        name = axis.removeprefix("args.")
        return (r["args"].get(name) for r in records)
    if axis == "layout":
        return (f"{r['tasks_per_node']}x{r['threads_per_task']}" for r in records)
    if axis == "batch":
        return (
            r["global_batch"] if r["scaling"] == "strong" else r["batch_per_rank"] for r in records
        )
    return map(methodcaller("get", axis), records)


def _varies(records: list[dict[str, Any]], key: str) -> bool:
    values = list(map(methodcaller("get", key), records))
    return bool(values) and (
        values.count(values[0]) != len(values) or len(set(map(type, values))) > 1
    )


def _cells(values: Iterable[Any]) -> list[str]:
    return [_cell(v) for v in values]


def _cell(v: Any) -> str:
    """A value as the campaign would write it: `64` for a whole float (display only: run ids
    hash the resolved values, unchanged), nothing for None."""
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
