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

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

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
from hpcscale.backends.fit import backend_for
from hpcscale.backends.outputs import RunLog, run_log, run_outputs
from hpcscale.backends.slurm.backend import with_throttle
from hpcscale.doctor import Check, Diagnosis
from hpcscale.doctor_campaign import check_program, doctor
from hpcscale.model import datapaths
from hpcscale.model.campaign import LoadedCampaign, load_campaign
from hpcscale.model.errors import UsageError
from hpcscale.plan.expand import Plan, expand
from hpcscale.render.render import Rendered
from hpcscale.results import CampaignStatus, Cancelled, Planned, RenderedCampaign
from hpcscale.starter import Example, Initialised, examples, init
from hpcscale.state.ledger import Ledger
from hpcscale.state.paths import select_campaigns, submitted_campaigns
from hpcscale.state.paths import workdir as resolve_workdir
from hpcscale.state.select import select_rows as select
from hpcscale.state.states import DEFAULT_RESUBMIT, TERMINAL, RunState
from hpcscale.util.gcpause import gc_paused
from hpcscale.writing import write_campaign

if TYPE_CHECKING:
    import pandas as pd

    from hpcscale.collect.collector import Collected
    from hpcscale.report.build import BuildResult
    from hpcscale.report.compare import CompareResult

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
    "Submission",
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
    "validate",
]


# ---------------------------------------------------------------- plan, render


def plan(campaign: PathLike, *, system: PathLike | None = None) -> Planned:
    """Validate a campaign and expand it into runs; writes nothing. `system` (a profile name
    or path) overrides the campaign's `system:`."""
    lc = load_campaign(campaign, system)
    with gc_paused():
        return Planned(lc, expand(lc))


def validate(campaign: PathLike, *, system: PathLike | None = None) -> Planned:
    """`plan`, then the data and weights paths the jobs would read (hpcscale.model.datapaths):
    a placeholder or a path the job cannot find is an error (InputError, located) on a system
    whose jobs run on this machine, else a warning, added to `expansion.warnings`."""
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
) -> list[Collected]:
    """Gather finished runs' metrics (and timelines) into each campaign's results table; runs
    no longer in the campaign's matrix (stale) are left out unless `include_stale`."""
    from hpcscale.collect.collector import collect_campaign

    return [
        collect_campaign(d, timeline=timeline, progress=progress, include_stale=include_stale)
        for d in select_campaigns(campaign, workdir)
    ]


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
