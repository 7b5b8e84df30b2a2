"""The whole Python API: every command of the CLI is one call here, returning typed objects.

    import hpcscale.api as hs
    hs.init("my-study", system="local")                        # starter campaign + profile copy
    hs.doctor("local").ok                                      # can this host run it?
    planned = hs.plan("campaigns/quickstart.yaml")            # runs, excluded cells, axes
    sub = hs.submit("campaigns/quickstart.yaml")              # render + run (local) / sbatch
    [st] = hs.status("quickstart")                            # ledger rows, refreshed
    hs.collect("quickstart", timeline=True)
    hs.report("quickstart")
    df = hs.load_results("quickstart")

The CLI (hpcscale.cli) only parses options and draws these results with rich.
"""

from __future__ import annotations

import importlib
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcscale.backends import REGISTRY, backend_class
from hpcscale.backends.base import (
    Backend,
    BackendOptions,
    QuietReporter,
    Refreshed,
    Reporter,
    Submission,
    raise_for,
)
from hpcscale.backends.outputs import RunLog, run_log, run_outputs
from hpcscale.collect.traces import file_format, file_reader, reader, reader_for, reader_in
from hpcscale.formats.run_record import load_run_record
from hpcscale.frameworks import for_strategy
from hpcscale.model.campaign import LoadedCampaign, load_campaign
from hpcscale.model.errors import HpcscaleError, UsageError
from hpcscale.model.registry import DEFAULT_STRATEGY, STRATEGIES, TRACE_READERS
from hpcscale.state.ledger import Ledger
from hpcscale.state.paths import find_campaigns, select_campaigns, submitted_campaigns
from hpcscale.state.paths import workdir as resolve_workdir
from hpcscale.state.select import find_run
from hpcscale.state.select import select_rows as select
from hpcscale.state.states import DEFAULT_RESUBMIT, TERMINAL, RunState
from hpcscale.state.workdirs import known_workdirs
from hpcscale.util.gcpause import gc_paused

if TYPE_CHECKING:
    import pandas as pd

    from hpcscale.collect.collector import Collected
    from hpcscale.collect.traces.base import MergeInfo
    from hpcscale.collect.traces.summary import Summary
    from hpcscale.doctor import Check, Diagnosis
    from hpcscale.doctor_campaign import doctor
    from hpcscale.plan.expand import Plan
    from hpcscale.render.render import Rendered
    from hpcscale.report.build import BuildResult
    from hpcscale.report.compare import CompareResult
    from hpcscale.results import CampaignStatus, Cancelled, Planned, RenderedCampaign
    from hpcscale.starter import Example, Initialised, examples, init

PathLike = str | Path

__all__ = [
    "CampaignStatus",
    "Cancelled",
    "Check",
    "Diagnosis",
    "Example",
    "Initialised",
    "Planned",
    "RenderedCampaign",
    "RunState",
    "Submission",
    "Timeline",
    "Traced",
    "cancel",
    "collect",
    "compare",
    "doctor",
    "examples",
    "init",
    "load_results",
    "logs",
    "plan",
    "render",
    "report",
    "resubmit",
    "status",
    "submit",
    "timeline",
    "trace",
    "validate",
]

# What this module offers from others that only some commands need, imported on first use
# (#28): `report` needs neither the SLURM backend (it imports submitit and asyncio), the doctor,
# the planner nor the renderer, and paid for them. name -> (module, attribute; None: the module)
_LAZY: dict[str, tuple[str, str | None]] = {
    "backend_for": ("hpcscale.backends.fit", "backend_for"),
    "with_throttle": ("hpcscale.backends.slurm.backend", "with_throttle"),
    "Check": ("hpcscale.doctor", "Check"),
    "Diagnosis": ("hpcscale.doctor", "Diagnosis"),
    "check_program": ("hpcscale.doctor_campaign", "check_program"),
    "doctor": ("hpcscale.doctor_campaign", "doctor"),
    "datapaths": ("hpcscale.model.datapaths", None),
    "Plan": ("hpcscale.plan.expand", "Plan"),
    "expand": ("hpcscale.plan.expand", "expand"),
    "Rendered": ("hpcscale.render.render", "Rendered"),
    **{n: ("hpcscale.results", n) for n in (
        "CampaignStatus", "Cancelled", "Planned", "RenderedCampaign")},
    **{n: ("hpcscale.starter", n) for n in ("Example", "Initialised", "examples", "init")},
    "write_campaign": ("hpcscale.writing", "write_campaign"),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """`hpcscale.api.NAME` of a `_LAZY` name: imported now, then kept as a module attribute."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# ---------------------------------------------------------------- plan, render


def doctor_words() -> list[str]:
    """What each framework's own doctor check is called (Framework.doctor_words), in the
    registry's order: `doctor`'s help names them."""
    return [words for s in STRATEGIES if (words := for_strategy(s).doctor_words)]


def starter_knob_words() -> str:
    """The knob a starter campaign sweeps, as the default framework names it ("" when its
    starter sweeps none): `init`'s help names it."""
    starter = for_strategy(DEFAULT_STRATEGY).starter
    return starter.knob_words if starter else ""


def trace_file_words() -> str:
    """What `timeline FILE` reads, as its help names it: a trace of the default framework's
    format (its TRACE_READERS line's label, and what writes it)."""
    line = TRACE_READERS[file_format()]
    return f"a {line.label}" + (f" ({line.made_by})" if line.made_by else "")


def plan(campaign: PathLike, *, system: PathLike | None = None) -> Planned:
    """Validate a campaign and expand it into runs; writes nothing. `system` (a profile name
    or path) overrides the campaign's `system:`."""
    from hpcscale.plan.expand import expand
    from hpcscale.results import Planned

    lc = load_campaign(campaign, system)
    with gc_paused():
        return Planned(lc, expand(lc))


def validate(campaign: PathLike, *, system: PathLike | None = None) -> Planned:
    """`plan`, then the data and weights paths the jobs would read (hpcscale.model.datapaths):
    a placeholder or a path the job cannot find is an error (InputError, located) on a system
    whose jobs run on this machine, else a warning, added to `expansion.warnings`."""
    from hpcscale.doctor_campaign import check_program
    from hpcscale.model import datapaths

    planned = plan(campaign, system=system)
    planned.expansion.warnings += datapaths.check(planned.loaded, planned.runs, submitting=False)
    check_program(planned.loaded)
    return planned


def render(
    campaign: PathLike,
    workdir: PathLike | None = None,
    *,
    system: PathLike | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RenderedCampaign:
    """Validate, expand and write every run's job.sbatch and run.json (a first render: all or
    nothing). `workers`: processes to render with (None: by campaign size and CPUs);
    `progress(done, total)`: called about every 500 runs rendered."""
    from hpcscale.writing import write_campaign

    return write_campaign(plan(campaign, system=system), workdir, workers, progress)


def plan_campaign(path: PathLike, system: PathLike | None = None) -> tuple[LoadedCampaign, Plan]:
    """`plan` as a (campaign, expansion) pair."""
    p = plan(path, system=system)
    return p.loaded, p.expansion


def render_campaign(
    path: PathLike,
    workdir: PathLike | None = None,
    *,
    workers: int | None = None,
    system: PathLike | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[LoadedCampaign, Plan, list[Rendered]]:
    """`render` as a (campaign, expansion, rendered runs) triple."""
    r = render(path, workdir, system=system, workers=workers, progress=progress)
    return r.planned.loaded, r.planned.expansion, r.runs


# ---------------------------------------------------------------- submit


def open_backend(name: str, cdir: Path, reporter: Reporter | None = None) -> Backend:
    return backend_class(name)(cdir, reporter)


def submit(
    campaign: PathLike,
    workdir: PathLike | None = None,
    *,
    backend: str | None = None,
    system: PathLike | None = None,
    options: BackendOptions | None = None,
    dry_run: bool = False,
    reporter: Reporter | None = None,
    check: bool = True,
) -> Submission:
    """Render a campaign and submit what is not yet submitted or done. `backend`: slurm, local
    or dry (default: by the system's scheduler); `dry_run`: describe through that backend and
    submit nothing. With `check`, rejected or failed runs raise after everything else ran.
    A backend that does not fit the system is refused before anything is written, and so is
    a run whose data or weights path is a placeholder or one its job cannot find
    (hpcscale.model.datapaths)."""
    from hpcscale.backends.fit import backend_for
    from hpcscale.backends.slurm.backend import with_throttle
    from hpcscale.doctor_campaign import check_program
    from hpcscale.model import datapaths
    from hpcscale.writing import write_campaign

    planned = plan(campaign, system=system)
    queues = not (dry_run or backend == "dry")  # a dry run warns where `validate` does
    for warning in datapaths.check(planned.loaded, planned.runs, submitting=queues):
        (reporter or QuietReporter()).warn(warning)
    if queues:  # the backend's fit first, then what it can check before anything is written
        check_program(planned.loaded, backend_for(planned.system, backend), planned.runs)
    sys_ = planned.system
    throttle = (planned.loaded.campaign.max_parallel, sys_.max_parallel)  # SLURM's array %N
    if dry_run or backend == "dry":
        target_name = sys_.scheduler if backend in (None, "dry") else backend
        if target_name != sys_.scheduler:
            backend_for(sys_, target_name)  # the fit check: a dry run shows what would run
        rc = write_campaign(planned, workdir, dry=True, force=bool(options and options.force))
        target = open_backend(target_name, rc.directory, reporter)
        dry = backend_class("dry")(rc.directory, reporter, target=target)  # type: ignore[call-arg]
        opts = with_throttle(dry.options(options), *throttle)
        return dry.submit(rc.runs, None, opts)  # type: ignore[arg-type]
    name = backend_for(sys_, backend)
    rc = write_campaign(planned, workdir, force=bool(options and options.force))
    chosen = open_backend(name, rc.directory, reporter)
    opts = with_throttle(chosen.options(options), *throttle)
    with Ledger(rc.directory) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rc.runs)
        out = chosen.submit(rc.runs, ledger, opts)
    if check:
        raise_for(out)
    return out


# ---------------------------------------------------------------- status, cancel, resubmit


def refresh(cdir: Path, ledger: Ledger, reporter: Reporter | None = None) -> Refreshed:
    """Bring the ledger up to date with every backend that has runs in it."""
    rows = ledger.rows()
    out = Refreshed()
    for name in REGISTRY:
        b = open_backend(name, cdir, reporter)
        if b.in_use(rows):
            out += b.refresh(ledger)
    return out


def status(
    campaign: str | None = None, workdir: PathLike | None = None, *, include_stale: bool = False
) -> list[CampaignStatus]:
    """Each submitted campaign's runs (all in the workdir when `campaign` is None). Stale runs
    (no longer in the campaign's matrix) are left out unless `include_stale`, except those
    still queued or running: those are shown, with a warning saying how to stop them."""
    from hpcscale.results import CampaignStatus

    out = []
    for cdir in submitted_campaigns(campaign, workdir):
        with Ledger(cdir) as ledger:
            r = refresh(cdir, ledger)
            rows = ledger.rows()
            outputs = run_outputs(cdir, ledger, rows)
        live = [row.run_id for row in rows if row.stale and row.backend and not row.terminal]
        warnings = list(r.warnings)
        if live:
            warnings.append(
                f"{len(live)} stale run(s) (no longer in the campaign's matrix) still queued or "
                f"running: {', '.join(live)}; `hpcscale cancel {cdir.name} --where stale` "
                "stops them"
            )
        if not include_stale and (hidden := sum(r.stale and r.run_id not in live for r in rows)):
            rows = [row for row in rows if not row.stale or row.run_id in live]
            warnings.append(f"{hidden} stale run(s) hidden (not in the campaign file's matrix "
                            "any more); --include-stale shows them")  # fmt: skip
        out.append(CampaignStatus(cdir.name, cdir, rows, r.changes, warnings, outputs))
    return out


def logs(run: str, workdir: PathLike | None = None) -> RunLog:
    """The output files of the run whose id is `run` or starts with it, in any submitted
    campaign of the workdir (read as they are: no scheduler is asked)."""
    return run_log(run, submitted_campaigns(None, workdir), str(resolve_workdir(workdir)))


def cancel(
    campaign: str,
    where: str | None = None,
    workdir: PathLike | None = None,
    *,
    reporter: Reporter | None = None,
) -> list[Cancelled]:
    """Cancel a campaign's queued and running runs (those matching `where`)."""
    from hpcscale.results import Cancelled

    out = []
    for cdir in submitted_campaigns(campaign, workdir):
        with Ledger(cdir) as ledger:
            warnings = refresh(cdir, ledger, reporter).warnings
            rows = ledger.rows()
            select(rows[:1], where)  # a bad condition is an error even with nothing to cancel
            chosen = select([r for r in rows if not r.terminal and r.backend], where)
            jobs: list[str] = []
            for name in sorted({r.backend for r in chosen if r.backend}):
                ids = [r.run_id for r in chosen if r.backend == name]
                jobs += open_backend(name, cdir, reporter).cancel(ledger, ids)
        out.append(Cancelled(cdir.name, [r.run_id for r in chosen], jobs, warnings))
    return out


def resubmit(
    campaign: str,
    workdir: PathLike | None = None,
    *,
    states: Sequence[RunState | str] = DEFAULT_RESUBMIT,
    options: BackendOptions | None = None,
    reporter: Reporter | None = None,
    check: bool = True,
) -> list[Submission]:
    """Submit again the runs that ended in one of `states`, each through the backend that ran
    it, from the scripts in their run directories (same run ids, same directories)."""
    from hpcscale.render.render import Rendered

    wanted = {RunState.parse(str(s)) for s in states}
    unknown = {str(s) for s in states} - {str(s) for s in TERMINAL}
    if unknown:
        raise UsageError(
            f"--state: {', '.join(sorted(unknown))} not an end state "
            f"(one of {', '.join(sorted(map(str, TERMINAL)))})"
        )
    (cdir,) = submitted_campaigns(campaign, workdir)
    say = reporter or QuietReporter()
    out = []
    with Ledger(cdir) as ledger:
        for w in refresh(cdir, ledger, reporter).warnings:
            say.warn(w)
        rows = [r for r in ledger.rows() if r.state in wanted and r.backend]
        if stale := [r.run_id for r in rows if r.stale]:
            say.info(f"{len(stale)} stale run(s), no longer in the campaign's matrix, left as is")
            rows = [r for r in rows if not r.stale]
        if rows:
            said = ", ".join(sorted(map(str, wanted)))
            say.info(f"resubmitting {len(rows)} run(s) in state {said}")
        for name in sorted({r.backend for r in rows if r.backend}):
            b = open_backend(name, cdir, reporter)
            todo = [Rendered.from_run_dir(Path(r.run_dir)) for r in rows if r.backend == name]
            out.append(b.submit(todo, ledger, replace(b.options(options), force=True)))
    if check:
        for sub in out:
            raise_for(sub)
    return out


# ---------------------------------------------------------------- collect, report, results


def collect(
    campaign: str | None = None,
    workdir: PathLike | None = None,
    *,
    timeline: bool = False,
    progress: bool = False,
    include_stale: bool = False,
    include_partial_timelines: bool = True,
) -> list[Collected]:
    """Gather finished runs' metrics (and timelines) into each campaign's results table; runs
    no longer in the campaign's matrix (stale) are left out unless `include_stale`. Without
    `include_partial_timelines`, a truncated timeline's per-epoch figures are NaN in the
    returned rows (as the report shows them); the saved table keeps them either way."""
    from hpcscale.analysis.quality import PARTIAL_TIMELINE_COLUMNS
    from hpcscale.collect.collector import collect_campaign

    out = [
        collect_campaign(d, timeline=timeline, progress=progress, include_stale=include_stale)
        for d in select_campaigns(campaign, workdir)
    ]
    if include_partial_timelines:
        return out
    nan = float("nan")
    hidden = {c: nan for c in PARTIAL_TIMELINE_COLUMNS}
    return [
        replace(res, rows=[
            {**r, **{c: v for c, v in hidden.items() if c in r}} if r.get("timeline_truncated")
            else r
            for r in res.rows
        ])
        for res in out
    ]  # fmt: skip


def table_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collected rows as the saved table types them (the contract's columns, NaN as None):
    what `collect --json` prints."""
    from hpcscale.collect.collector import frame_of

    df = frame_of(rows)
    return df.astype(object).where(df.notna(), None).to_dict("records")


def reason_headline(reason: str) -> str:
    """A problem's reason in one line: its first, without the "; last lines:" that the run's
    output lines follow."""
    from hpcscale.collect.readers.command_row import LAST_LINES

    line = reason.splitlines()[0] if reason else "?"
    return line.removesuffix(f"; {LAST_LINES}:")[:200]


def report(
    campaign: str | None = None,
    workdir: PathLike | None = None,
    *,
    out: PathLike | None = None,
    formats: Sequence[str] | None = None,
    include_stale: bool = False,
    targets: Sequence[str] = (),
    include_partial_timelines: bool = False,
) -> BuildResult:
    """Write the scaling report (index.md, index.html, figures; CSV/Parquet on request) of one
    campaign, or of every campaign in the workdir; reference results are in the return value.
    Stale runs are left out unless `include_stale`, truncated timelines' per-epoch figures
    unless `include_partial_timelines`; `targets` ('g_loss<=1.2') replace the file's `targets:`."""
    from hpcscale.report.build import DEFAULT_FORMATS, build
    from hpcscale.report.data import report_inputs

    dirs, out_dir, sources, specs = report_inputs(campaign, workdir, out, targets)
    return build(dirs, out_dir, list(formats or DEFAULT_FORMATS), sources=sources,
                 include_stale=include_stale, targets=specs,
                 include_partial_timelines=include_partial_timelines)  # fmt: skip


def compare(
    campaigns: Sequence[str],
    workdir: PathLike | None = None,
    *,
    on: str | None = None,
    out: PathLike | None = None,
    tolerance: float = 0.05,
    include_stale: bool = False,
    allow_missing: bool = False,
) -> CompareResult:
    """Campaigns side by side on their shared axis (`on`), the first the baseline; `passed` fails
    on a regression beyond `tolerance`, a `missing` cell (unless `allow_missing`), no comparison."""
    from hpcscale.report.compare import compare_campaigns

    return compare_campaigns(campaigns, workdir, on=on, out=out, tolerance=tolerance,
                             include_stale=include_stale, allow_missing=allow_missing)  # fmt: skip


def load_results(campaign: str, workdir: PathLike | None = None) -> pd.DataFrame:
    """The tidy table (one row per run) that `collect` gathers, for notebooks."""
    from hpcscale.collect.collector import load_results as _load

    return _load(campaign, workdir=workdir)


def cell(value: Any) -> str:
    """A table value as the report prints it (hpcscale.report.fmt)."""
    from hpcscale.report.fmt import cell as fmt_cell

    return fmt_cell(value)


def cell_labels(cells: pd.DataFrame) -> list[str]:
    """One label per matrix cell naming only what differs between them, as the report does."""
    from hpcscale.report.labels import CELL_PARTS, labels

    return labels(cells, CELL_PARTS)


# ---------------------------------------------------------------- one timeline, one run's trace


@dataclass(frozen=True)
class Timeline:
    """One timeline file analysed: its summary, the categories its time is split into (in
    the order to show them), and what an empty one says."""

    file: Path
    summary: Summary
    categories: tuple[str, ...]
    empty_note: str


def timeline(file: PathLike, *, ranks: int | None = None) -> Timeline:
    """Analyse one trace file of the default framework's format (its timeline: time per
    category, tensors, straggler hint; `ranks`: ranks in the job, default from its readiness
    ticks; hpcscale.collect.traces.file_reader). A path that is no readable regular file, or a
    file that is no such trace, is a UsageError saying which."""
    from hpcscale.collect.traces.base import NO_COLLECTIVES
    from hpcscale.collect.traces.summary import CATEGORIES

    rd = file_reader()
    path = Path(file)
    _check_regular(path, rd.file_name)
    try:
        summary = rd.summarise_file(path, ranks=ranks)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from exc
    except rd.errors as exc:
        raise UsageError(f"{path}: not a {rd.label}: {exc}") from exc
    return Timeline(path, summary, CATEGORIES, NO_COLLECTIVES)


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


@dataclass(frozen=True)
class RunDir:
    """A run directory found on disk: rendered, submitted or copied from a cluster (no
    ledger needed)."""

    run_id: str
    path: Path


def find_run_dir(run: PathLike, workdir: PathLike | None = None) -> Path:
    """`run` when it is a run directory, else the run whose id is `run` or starts with it in
    any campaign of the workdir: the rules of `logs` (hpcscale.state.select.find_run), over
    the run directories on disk."""
    if Path(run).is_dir():
        return Path(run)
    root = resolve_workdir(workdir)
    found = {
        c.name: [RunDir(d.name, d) for d in sorted((c / "runs").glob("*")) if d.is_dir()]
        for c in find_campaigns(root)
    }
    return find_run(str(run), found, str(root))[1].path


@dataclass(frozen=True)
class Traced:
    """A merged trace written: the run it is of, what went in, and what was missing."""

    run_dir: Path
    info: MergeInfo
    warnings: list[str]


def _trace_format(run_dir: Path) -> str | None:
    """The trace format the run's framework writes (its run.json's strategy, or a command's
    framework): a TRACE_READERS name, or None; a run.json that cannot be read: the first
    registered format whose trace the directory holds (hpcscale.collect.traces.reader_in)."""
    try:
        rec = load_run_record(run_dir / "run.json")
    except (HpcscaleError, OSError):
        return reader_in(run_dir).name
    found = reader_for(rec.strategy, command=rec.command is not None)
    return None if found is None else found.name


def trace(run: PathLike, out: PathLike, workdir: PathLike | None = None) -> Traced:
    """Merge a run's trace into one Chrome-trace JSON file (`out`, or `out`/<run>.trace.json
    when `out` is a directory) to open in Perfetto, by the reader of the format its framework
    writes (hpcscale.collect.traces.base.TraceReader.merge): a single-file timeline with its
    step spans (steps.json), or per-rank profiler traces (traces/rank<r>.json[.gz]), one
    process per rank on one clock, with the step spans where it wrote steps.json. The run: a
    run directory, or a run id (or its prefix) in the workdir."""
    run_dir = find_run_dir(run, workdir)
    dest = Path(out)
    if dest.is_dir():
        dest = dest / f"{run_dir.name}.trace.json"
    if dest.exists() and not dest.is_file():  # never replace a device or socket with a file
        raise UsageError(f"{dest}: not a regular file; give a file or a directory to write into")
    kind = _trace_format(run_dir)
    if kind is None:
        raise UsageError(f"{run_dir}: its framework writes no trace to merge")
    from hpcscale.collect.traces.base import MergeError

    try:
        merged = reader(kind).merge(run_dir, dest)
    except MergeError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"{exc.filename or dest}: {exc.strerror or exc}") from exc
    return Traced(run_dir, merged.info, merged.warnings)


# ---------------------------------------------------------------- names, for shell completion


def campaign_names(workdir: PathLike | None = None, *, elsewhere: bool = True) -> list[str]:
    """The campaigns in the workdir, then (with `elsewhere`: no workdir was named) those in
    every other workdir hpcscale has used, as `status NAME` finds them; directory listings
    only, so a completion is instant."""
    here = resolve_workdir(workdir)
    named = [d.name for d in find_campaigns(here)]
    if elsewhere:
        named += [d.name for w in known_workdirs() if w != here for d in find_campaigns(w)]
    return list(dict.fromkeys(named))
