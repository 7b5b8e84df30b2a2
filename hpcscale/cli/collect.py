"""timeline, collect, trace: from what runs wrote to a table (and a trace to look at)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from hpcscale import api
from hpcscale.cli.common import (
    CampaignsArg,
    IncludeStaleOpt,
    JsonOpt,
    WorkdirOpt,
    console,
    err_console,
    print_json,
)
from hpcscale.cli.tables import Col, Grid
from hpcscale.model.errors import HpcscaleError
from hpcscale.model.registry import TRACE_READERS
from hpcscale.util.text import plural

# what `collect --timeline` reads: every registered trace format, in a phrase
_TRACES = " or ".join(line.phrase for line in TRACE_READERS.values())


def _seconds(v: float) -> str:
    return f"{v:.6f}" if v < 1 else f"{v:.3f}"


def timeline(
    file: Annotated[Path, typer.Argument(help=api.trace_file_words())],
    json_out: JsonOpt = False,
    top: Annotated[int, typer.Option(help="how many tensors to list", min=0)] = 10,
    ranks: Annotated[
        int | None, typer.Option(help="ranks in the job (default: from readiness ticks)", min=1)
    ] = None,
) -> None:
    """Analyse one timeline file: time per category, top tensors, straggler hint."""
    tl = api.timeline(file, ranks=ranks)
    s = tl.summary
    if json_out:
        print_json(s.as_json(top=top))
        return
    if s.empty:
        empty = " (an empty file)" if file.stat().st_size == 0 else ""
        console.print(escape(f"{file}{empty}: {tl.empty_note}"), highlight=False)
        return
    span = s.span_us / 1e6
    t = Grid(
        f"{file} ({s.format}, {plural(s.events, 'event')}, {plural(s.tensors, 'tensor')})",
        ["category", Col("seconds", right=True), Col("% of span", right=True)],
    )
    for c in tl.categories:
        v = s.seconds(c)
        t.add_row(f"{c}_s", _seconds(v), f"{100 * v / span:.1f}" if span else "-")
    for name, us in (("waits_s", s.waits_us), ("waits_in_comm_s", s.waits_in_comm_us)):
        t.add_row(name, _seconds(us / 1e6), f"{100 * us / 1e6 / span:.1f}" if span else "-")
    t.add_row("span_s", _seconds(span), "100.0")
    t.show(console)
    coll = ", ".join(f"{k} {v}" for k, v in sorted(s.collectives.items())) or "none"
    console.print(f"collectives (tensor ops): {coll}")
    if s.allreduce_tensors:
        bw = s.bus_bandwidth_gbs()
        console.print(
            f"allreduce: {s.allreduce_bytes / 1e6:.3f} MB in "
            f"{plural(s.allreduce_tensors, 'tensor op')} "
            f"({s.allreduce_bytes / s.allreduce_tensors / 1e3:.1f} kB each); bus bandwidth "
            + (f"{bw:.3f} GB/s over {plural(s.ranks, 'rank')}" if bw is not None else "n/a")
        )
    strag = s.straggler()
    if strag is not None:
        rank, times, total = strag
        console.print(
            f"straggler hint: rank {rank} was last ready in {times} of "
            f"{plural(total, 'negotiation')} "
            f"with readiness ticks"
        )
    if top and s.tensor_stats:
        tt = Grid(
            f"top {plural(top, 'tensor')} by communication time",
            [Col("tensor", key=True), *(Col(c, right=True) for c in ("comm_s", "ops", "bytes"))],
        )
        for ts in s.top_tensors(top):
            tt.add_row(ts.name, _seconds(ts.comm_us / 1e6), str(ts.ops), str(ts.bytes))
        tt.show(console)
    problems = [
        ("the last record is cut (job killed?)", s.truncated),
        (f"{plural(s.bad_records, 'unreadable record')} skipped", s.bad_records),
        (f"{plural(s.unclosed, 'span')} never closed (lost at shutdown)", s.unclosed),
        (f"{plural(s.orphan_ends, 'end')} without a begin", s.orphan_ends),
        (
            f"{plural(s.late_spans, 'span')} closed after their start was final (clipped)",
            s.late_spans,
        ),
    ]
    for text, flag in problems:
        if flag:
            err_console.print(f"[yellow]note:[/] {text}")


def collect(
    campaign: CampaignsArg = None,
    with_timeline: Annotated[
        bool,
        typer.Option("--timeline", help=f"also read each run's trace ({_TRACES}) and steps.json"),
    ] = False,
    json_out: JsonOpt = False,
    include_partial_timelines: Annotated[
        bool,
        typer.Option(
            "--include-partial-timelines",
            help="show the per-epoch timeline figures of truncated timelines (hidden by default; "
            "the saved table keeps them, marked timeline_truncated)",
        ),
    ] = False,
    include_stale: IncludeStaleOpt = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Gather finished runs' metrics (and timelines) into results.parquet and results.csv.

    Only completed runs are measurements: one that failed, was cancelled or is still running is
    kept in the files with its `state` and left out of every table (said in one line). Exit
    code 1 when runs' results are unreadable (named; the others are written)."""
    reports: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for res in api.collect(
        campaign,
        workdir,
        timeline=with_timeline,
        progress=not json_out,
        include_stale=include_stale,
        include_partial_timelines=include_partial_timelines,
    ):
        unreadable += [
            f"{res.campaign}/{p.run_id} ({api.reason_headline(p.reason)})" for p in res.unreadable
        ]
        if json_out:
            reports.append(
                {
                    "campaign": res.campaign,
                    "directory": str(res.directory),
                    "results_parquet": str(res.parquet),
                    "results_csv": str(res.csv),
                    "new": res.new,
                    "cached": res.cached,
                    "unfinished": res.unfinished,
                    "not_completed": [
                        {"run_id": r, "state": st, "reason": why}
                        for r, st, why in res.not_completed
                    ],
                    "problems": [
                        {"run_id": p.run_id, "reason": p.reason, "partial": p.partial}
                        for p in res.problems
                    ],
                    "rows": api.table_records(res.rows),
                }
            )
            continue
        _print_collected(res, res.rows, with_timeline)
    if json_out:
        print_json({"campaigns": reports})
    if unreadable:
        raise HpcscaleError(
            f"{plural(len(unreadable), 'finished run')} with unreadable results, left out of "
            f"the table: {', '.join(unreadable)}"
        )


def _print_collected(res: Any, rows: list[dict[str, Any]], with_timeline: bool) -> None:
    metric = res.metric  # a command's own figure: its own column, named as the campaign names it
    cols = ["run_id", "model", "nodes", "ranks", "global_batch"]
    cols += [metric.time_column, metric.throughput_column]
    if with_timeline:
        cols += ["comm_s", "exact_overlap_s"]
    t = Grid(
        f"{res.campaign}: {plural(len(rows), 'run')}",
        [Col(c, key=c == "run_id", right=c not in ("run_id", "model")) for c in cols],
    )
    for row in sorted(rows, key=lambda r: (str(r.get("model")), r.get("ranks") or 0)):
        t.add_row(*(_cell(row.get(c)) for c in cols))
    t.show(console)
    console.print(
        escape(
            f"{res.new} read, {res.cached} unchanged since the last collect"
            + (f", {len(res.unfinished)} not finished" if res.unfinished else "")
            + f" -> {res.parquet} and {res.csv.name}"
        ),
        highlight=False,
    )
    for p in res.problems:
        style = "yellow" if p.partial else "red"
        err_console.print(f"[{style}]{p.run_id}:[/] {escape(p.reason)}", highlight=False)
    if (line := res.left_out()) is not None:  # one line: how many, and why
        err_console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def trace(
    run: Annotated[str, typer.Argument(help="a run directory, or a run id (or its prefix)")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="merged Chrome-trace JSON to write (a directory: DIR/<run>.trace.json)",
        ),
    ],
    workdir: WorkdirOpt = None,
) -> None:
    """Merge a run's trace into one file (Perfetto, chrome://tracing), in the format its
    framework writes: one timeline with the step spans, or every rank's profiler trace, one
    process per rank."""
    traced = api.trace(run, out, workdir)
    for warning in traced.warnings:
        err_console.print(f"[yellow]note:[/] {escape(warning)}", highlight=False)
    info = traced.info
    ranks = getattr(info, "ranks", None)  # a PyTorch run's traces, one process per rank
    if ranks is not None:
        what = (
            f"{plural(len(ranks), 'rank')}, {plural(info.records, 'trace event')}"
            f"{' (cut short: see the notes)' if info.truncated else ''}"
        )
    else:
        note = " (cut final record dropped)" if info.truncated else ""
        what = f"{plural(info.records, 'timeline record')}{note}"
    console.print(
        escape(
            f"{info.out}: {what} + {plural(info.steps, 'step')}; open it in "
            "https://ui.perfetto.dev or chrome://tracing"
        ),
        highlight=False,
    )
