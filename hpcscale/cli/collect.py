"""timeline, collect, trace: from what runs wrote to a table (and a trace to look at)."""

from __future__ import annotations

import stat
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
from hpcscale.model.errors import HpcscaleError, UsageError
from hpcscale.util.text import plural


def _seconds(v: float) -> str:
    return f"{v:.6f}" if v < 1 else f"{v:.3f}"


def timeline(
    file: Annotated[Path, typer.Argument(help="a Horovod timeline (HOROVOD_TIMELINE output)")],
    json_out: JsonOpt = False,
    top: Annotated[int, typer.Option(help="how many tensors to list", min=0)] = 10,
    ranks: Annotated[
        int | None, typer.Option(help="ranks in the job (default: from readiness ticks)", min=1)
    ] = None,
) -> None:
    """Analyse one timeline file: time per category, top tensors, straggler hint."""
    from hpcscale.collect.traces.horovod import (
        CATEGORIES,
        NO_COLLECTIVES,
        TimelineError,
        parse_timeline,
    )

    _check_regular(file, "timeline.json")
    try:
        s = parse_timeline(file, ranks=ranks, keep_comm=False)
    except TimelineError as exc:
        raise UsageError(f"{file}: not a Horovod timeline: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"{file}: cannot read ({exc.strerror})") from exc
    if json_out:
        print_json(s.as_json(top=top))
        return
    if s.empty:
        empty = " (an empty file)" if file.stat().st_size == 0 else ""
        console.print(escape(f"{file}{empty}: {NO_COLLECTIVES}"), highlight=False)
        return
    span = s.span_us / 1e6
    t = Grid(
        f"{file} ({s.format}, {plural(s.events, 'event')}, {plural(s.tensors, 'tensor')})",
        ["category", Col("seconds", right=True), Col("% of span", right=True)],
    )
    for c in CATEGORIES:
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
        bool, typer.Option("--timeline", help="also read Horovod timelines and steps.json")
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
    from hpcscale.collect.collector import frame_of

    reports: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for res in api.collect(
        campaign,
        workdir,
        timeline=with_timeline,
        progress=not json_out,
        include_stale=include_stale,
    ):
        unreadable += [
            f"{res.campaign}/{p.run_id} ({_first_line(p.reason)})" for p in res.unreadable
        ]
        rows = res.rows if include_partial_timelines else [_hide_partial(r) for r in res.rows]
        if json_out:
            df = frame_of(rows)
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
                    "rows": df.astype(object).where(df.notna(), None).to_dict("records"),
                }
            )
            continue
        _print_collected(res, rows, with_timeline)
    if json_out:
        print_json({"campaigns": reports})
    if unreadable:
        raise HpcscaleError(
            f"{plural(len(unreadable), 'finished run')} with unreadable results, left out of "
            f"the table: {', '.join(unreadable)}"
        )


def _first_line(reason: str) -> str:
    """A reason's first line, without the "; last lines:" that the lines under it follow."""
    from hpcscale.collect.readers.command_row import LAST_LINES

    line = reason.splitlines()[0] if reason else "?"
    return line.removesuffix(f"; {LAST_LINES}:")[:200]


def _hide_partial(row: dict[str, Any]) -> dict[str, Any]:
    """A row with a truncated timeline's per-epoch figures as NaN (what the report shows)."""
    from hpcscale.analysis.quality import PARTIAL_TIMELINE_COLUMNS

    if not row.get("timeline_truncated"):
        return row
    return {**row, **{c: float("nan") for c in PARTIAL_TIMELINE_COLUMNS if c in row}}


def _print_collected(res: Any, rows: list[dict[str, Any]], with_timeline: bool) -> None:
    cols = ["run_id", "model", "nodes", "ranks", "global_batch", "epoch_time_s", "images_per_s"]
    if with_timeline:
        cols += ["comm_s", "exact_overlap_s"]
    metric = res.metric  # a command's own figure: named as the campaign names it
    shown = {} if metric.usual else {metric.column: metric.name}
    t = Grid(
        f"{res.campaign}: {plural(len(rows), 'run')}",
        [Col(shown.get(c, c), key=c == "run_id", right=c not in ("run_id", "model")) for c in cols],
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


def _check_regular(path: Path, inside: str) -> None:
    """Say what `path` is when it is no file to read: missing, a directory, a device."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        hint = f" (did you mean {path / inside}?)" if (path / inside).is_file() else ""
        raise UsageError(f"{path}: is a directory, not a file{hint}")
    if not stat.S_ISREG(mode):
        kinds = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
                 stat.S_ISFIFO: "a pipe", stat.S_ISSOCK: "a socket"}  # fmt: skip
        kind = next((k for test, k in kinds.items() if test(mode)), "a special file")
        raise UsageError(f"{path}: not a regular file ({kind}); give a timeline file")


def _find_run(run: str, wd: Path | None) -> Path:
    from hpcscale.state.paths import workdir

    p = Path(run)
    if p.is_dir():
        return p
    root = workdir(wd)
    hits = sorted(root.glob(f"*/runs/{run}*")) if root.is_dir() and len(run) >= 4 else []
    hits = [h for h in hits if h.is_dir()]
    if not hits:
        raise UsageError(f"{run}: not a run directory, nor a run id in {root}")
    if len(hits) > 1:
        listed = ", ".join(f"{h.parent.parent.name}/{h.name}" for h in hits[:5])
        raise UsageError(f"{run}: matches several runs ({listed}); give more of the id")
    return hits[0]


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
    """Merge a run's step spans and Horovod timeline into one trace (Perfetto, chrome://tracing)."""
    from hpcscale.collect.split import load_steps
    from hpcscale.collect.traces.horovod import TimelineError
    from hpcscale.collect.traces.horovod.perfetto import write_trace

    run_dir = _find_run(run, workdir)
    if out.is_dir():
        out = out / f"{run_dir.name}.trace.json"
    if out.exists() and not out.is_file():  # never replace a device or socket with a file
        raise UsageError(f"{out}: not a regular file; give a file or a directory to write into")
    tl = run_dir / "timeline.json"
    if not tl.is_file():
        raise UsageError(f"{run_dir}: no timeline.json (was the run made with timeline: true?)")
    steps = None
    if (run_dir / "steps.json").is_file():
        steps = load_steps(run_dir / "steps.json")
    else:
        err_console.print(f"[yellow]note:[/] {run_dir}: no steps.json, writing the timeline only")
    try:
        info = write_trace(tl, steps, out)
    except (TimelineError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"{exc.filename or out}: {exc.strerror or exc}") from exc
    note = " (cut final record dropped)" if info.truncated else ""
    console.print(
        escape(
            f"{info.out}: {plural(info.records, 'timeline record')}{note} + "
            f"{plural(info.steps, 'step')}; open it in https://ui.perfetto.dev or chrome://tracing"
        ),
        highlight=False,
    )
