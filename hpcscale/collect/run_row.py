"""One finished run's files -> one tidy table row (the collector's unit of work).

run.json and metrics.json give the run fields and metrics; with a timeline, timeline.json and
steps.json give the per-epoch timeline columns (see hpcscale.collect.collector for the rules).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcscale.analysis import EXACT_COLUMNS, RUN_COLUMNS, TIMELINE_COLUMNS
from hpcscale.collect.rates import throughput
from hpcscale.collect.readers.command_row import CommandProblem, read_command_run
from hpcscale.collect.split import Steps, exact_split, load_steps
from hpcscale.collect.traces import reader_for
from hpcscale.collect.traces.base import NO_COLLECTIVES, TraceSummary
from hpcscale.formats.exit_record import read_exit_record
from hpcscale.formats.metrics import Metrics, load_metrics
from hpcscale.formats.run_record import RunRecord, load_run_record
from hpcscale.launchers import implied_strategy
from hpcscale.model.errors import HpcscaleError
from hpcscale.model.registry import framework_of
from hpcscale.model.run import KNOB_DEFAULTS
from hpcscale.model.vocab import RUN_TIME_COLUMNS, TRACE_EXTRA_COLUMNS, args_as_columns

# `trace_source`: which trace a run's timeline columns came from, as the report labels them
# (the reader's `label`, hpcscale.model.registry.TRACE_READERS); "" when none was read.
NO_TRACE = ""
# A timeline that is cut or ends before the last timed step: its per-epoch figures describe
# part of the run only (hpcscale.analysis.quality leaves them out of the report).
TRUNCATION_NOTE = (
    "{name} covers {pct:.0f} % of the timed window{cut}: its per-epoch figures are left "
    "out unless --include-partial-timelines"
)
# A profiler trace whose file is cut (a killed job's .tmp, an unterminated array): a profiler
# trace is a window of steps by design, so only a cut file is partial, never a short window
TRACE_CUT_NOTE = (
    "{name} ends in a cut record (job killed?): partial timeline, its per-epoch figures are "
    "left out unless --include-partial-timelines"
)
# A profiler trace of a window of steps (collect.trace_window) shorter than the timed steps
WINDOW_NOTE = (
    "{name}: the trace window holds {traced} of the {steps} timed steps: per-step figures only, "
    "no per-epoch ones (none scaled up from a window)"
)
NAN = float("nan")
# a command's strategy column unless its launcher implies one: not run.json's default (empty,
# yet a groupable value)
NO_STRATEGY = ""
# The frameworks' own knobs (fusion, cycle time, fp16, hierarchical, DDP's buckets, ...): a
# command's row has one only where its campaign set it. Not cross_device_ops, which names a
# strategy's reduction beside `strategy` and `mpi` (analysis.strategies reads the three).
OWN_KNOBS: tuple[str, ...] = tuple(k for k in KNOB_DEFAULTS if k != "cross_device_ops")


class RunProblem(Exception):
    """A run that cannot be collected (or only partly): the reason is shown to the user."""


def _read_run_json(path: Path) -> RunRecord:
    try:
        return load_run_record(path)
    except HpcscaleError as exc:
        raise RunProblem(str(exc)) from exc


def _list(values: Iterable[float] | None) -> list[float] | None:
    return None if values is None else list(values)


def planned_row(run_dir: Path) -> dict[str, Any] | None:
    """A planned run's fields from its run.json (None when unreadable): its matrix cell."""
    try:
        rec = _read_run_json(run_dir / "run.json")
    except RunProblem:
        return None
    return run_fields(rec)


def run_fields(rec: RunRecord) -> dict[str, Any]:
    """The run's fields as table columns: run.json's fields, then each workload argument as
    `args.<name>` (what tells a run's cell apart, besides its fields)."""
    fields = {col: getattr(rec, col, None) for col in RUN_COLUMNS}
    fields["framework"] = framework_of(rec.strategy, rec.command is not None)
    if rec.command is not None:
        if implied_strategy(rec.launcher) is None:
            # run.json has the default strategy; the user's own program may use no framework
            fields["strategy"] = NO_STRATEGY
        # a framework's knobs only where the campaign set them (a command may sweep the
        # borrowed framework's): no default of a framework the program may not use
        for knob in OWN_KNOBS:
            if knob in fields and fields[knob] == KNOB_DEFAULTS[knob]:
                del fields[knob]
    return {**fields, **args_as_columns(rec.args)}


def _mean(values: Iterable[float]) -> float:
    vals = [float(v) for v in values]
    return sum(vals) / len(vals) if vals else NAN


def contention_columns(m: Metrics) -> dict[str, Any]:
    """When and where the run ran and the machine's load (hpcscale.analysis.contention's
    inputs); load columns are NaN in files from before runs recorded it."""
    out: dict[str, Any] = {
        "started_unix_s": m.started_unix_s,
        "finished_unix_s": m.finished_unix_s,
        "hostnames": ",".join(m.provenance.hostnames),
        "machines": None if m.load is None else ",".join(m.load.machines),
    }
    for when in ("start", "end"):
        sample = None if m.load is None else getattr(m.load, when)
        for key in ("load_1m", "others_cpus", "other_jobs"):
            value = None if sample is None else getattr(sample, key)
            out[f"{key}_{when}"] = NAN if value is None else value
    out["cpus"] = NAN if m.load is None else m.load.start.cpus
    return out


def sample_grids(run_dir: Path) -> list[str]:
    """The run's sample grids, oldest epoch first (a StackGAN stage-2 epoch has its stage-1
    grid `epoch_NNN_stage1.png` right after it): paths relative to the run directory."""
    return sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "samples").glob("*.png"))


def run_row(run_dir: Path, timeline: bool) -> tuple[dict[str, Any], list[str]]:
    """One table row from a finished run's files, and notes on what is missing from it.

    Raises RunProblem when the run cannot be collected at all (no or bad run.json/metrics)."""
    rec = _read_run_json(run_dir / "run.json")
    if rec.command is not None:
        return _command_row(run_dir, rec, timeline)
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.exists():
        raise RunProblem("no metrics.json: not run yet, still running, or failed")
    try:
        m = load_metrics(metrics_path)
    except HpcscaleError as exc:
        raise RunProblem(str(exc)) from exc
    row: dict[str, Any] = run_fields(rec)
    # images of the timed epochs / their time (hpcscale.collect.rates), not a mean of rates
    rate = throughput(m.epoch_time_s, m.images_per_s, m.global_batch * m.steps_per_epoch, m.epochs)
    row.update(
        epoch_time_s=_mean(m.epoch_time_s),
        images_per_s=rate.value,
        fit_time_s=m.fit_time_s,
        param_count=m.param_count,
        dataset_size=m.dataset_size,
        epoch_times_s=list(m.epoch_time_s),
        losses={k: list(v) for k, v in m.losses.items()},
        train_accuracy=_list(m.train_accuracy if m.train_accuracy is not None else m.accuracy),
        val_accuracy=_list(m.val_accuracy),
        train_loss=_list(m.train_loss),
        val_loss=_list(m.val_loss),
        input_images_per_s=NAN if m.input_images_per_s is None else m.input_images_per_s,
        params={name: c.total for name, c in m.params.items()},
        sample_grids=sample_grids(run_dir),
        system=rec.system,
        program=rec.program,
        model_family=m.workload,
        steps_per_epoch=m.steps_per_epoch,
        timeline=rec.timeline,
        step_time_p50_ms=m.step_time.p50_ms,
        run_dir=str(run_dir),
        campaign_version=rec.campaign_version,
    )
    for col in (*TIMELINE_COLUMNS, *RUN_TIME_COLUMNS, *EXACT_COLUMNS, *TRACE_EXTRA_COLUMNS):
        row[col] = NAN
    row["trace_source"] = NO_TRACE
    row["timeline_truncated"] = False
    row["timeline_coverage"] = NAN
    row.update(contention_columns(m))
    notes: list[str] = [] if rate.problem is None else [rate.problem]
    if timeline:
        notes += _timeline_columns(run_dir, row, rec, m.epochs, m.epochs * m.steps_per_epoch)
    return row, notes


def _command_row(run_dir: Path, rec: RunRecord, timeline: bool) -> tuple[dict[str, Any], list]:
    """A command workload's row: its figures read from its output (collect.readers)."""
    try:
        figures, notes = read_command_run(run_dir, rec)
    except CommandProblem as exc:
        raise RunProblem(str(exc)) from None
    row: dict[str, Any] = run_fields(rec)
    for col in (*TIMELINE_COLUMNS, *RUN_TIME_COLUMNS, *EXACT_COLUMNS, *TRACE_EXTRA_COLUMNS):
        row[col] = NAN
    row["trace_source"] = NO_TRACE
    row.update(timeline_truncated=False, timeline_coverage=NAN, sample_grids=[])
    row.update(figures, system=rec.system, program=rec.program, timeline=rec.timeline)
    row.update(run_dir=str(run_dir), campaign_version=rec.campaign_version)
    for key, value in exit_contention_columns(run_dir).items():  # what its output gave wins
        row.setdefault(key, value)
    if timeline:
        notes += _timeline_columns(run_dir, row, rec, epochs_run(row), steps_run(row))
    return row, notes


def epochs_run(row: dict[str, Any]) -> int | None:
    """The epochs a command run reports having run: its MLLOG epochs or its epoch-time series
    (one value an epoch); None when its output gives no count (a scalar epoch time, none at
    all): never the campaign's `epochs`, which the program may not follow."""
    times = row.get("epoch_times_s")
    return len(times) if isinstance(times, list) and times else None


def steps_run(row: dict[str, Any]) -> int | None:
    """The steps a command run reports having run: its `steps` extractor (a count, or a series
    of one match a step); None without one."""
    value = row.get("steps")
    if isinstance(value, list):
        return len(value) or None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return int(value) if value >= 1 else None
    return None


def exit_contention_columns(run_dir: Path) -> dict[str, Any]:
    """A command run's shared-machine inputs (hpcscale.analysis.contention), from its exit
    record: the job script's start and end, its host and the load average at both ends (the
    other processes' CPU time is measured by bundled programs only: NaN here)."""
    rec = read_exit_record(run_dir)
    out: dict[str, Any] = {"machines": None}
    for when in ("start", "end"):
        for key in ("others_cpus", "other_jobs"):
            out[f"{key}_{when}"] = NAN
    if rec is None:
        out.update(started_unix_s=NAN, finished_unix_s=NAN, hostnames="", cpus=NAN)
        out.update(load_1m_start=NAN, load_1m_end=NAN)
        return out
    out.update(
        started_unix_s=rec.started_unix_s,
        finished_unix_s=rec.ended_unix_s,
        hostnames=rec.hostname,
        load_1m_start=rec.load_1m_start,
        load_1m_end=rec.load_1m_end,
        cpus=rec.cpus,
    )
    return out


def _timeline_columns(
    run_dir: Path, row: dict[str, Any], rec: RunRecord, epochs: int | None, steps: int | None
) -> list[str]:
    """The timeline columns: per epoch over `epochs`, per step over `steps` (steps.json's
    counts when the run wrote one); a count that is None (not known) leaves its columns NaN,
    never a guessed divisor: the per-run figures (span, events, span share) stay."""
    trace = reader_for(rec.strategy, command=rec.command is not None)
    if trace is None:
        said = f"strategy {rec.strategy} writes no trace: no timeline columns"
        return [said] if row["timeline"] else []
    path, name = trace.path(run_dir), trace.file_name
    if not path.exists():
        return [f"{name} missing (run without --timeline?)"] if row["timeline"] else []
    notes: list[str] = []
    steps_file = None
    if (run_dir / "steps.json").exists():
        try:
            steps_file = load_steps(run_dir / "steps.json")
        except HpcscaleError as exc:
            notes.append(f"steps.json ignored: {exc}")
    window = steps_file.window_unix_us() if steps_file is not None else None
    try:
        s = trace.summarise(path, ranks=row.get("ranks"), window_unix_us=window)
    except trace.errors as exc:
        return [*notes, f"{name} unreadable: {exc}"]
    row["trace_source"] = trace.label  # the figures below are this trace's
    notes += [f"{name}: {n}" for n in s.notes]  # what the reader left out
    counts = steps_file  # its counts of epochs and steps hold even where it cannot be placed
    if window is not None and s.window_us is None and not s.empty:
        notes.append("timeline has no start time: whole timeline used, no exact view")
        steps_file = None
    if counts is not None:
        epochs, steps = counts.epochs, len(counts.start_unix_ns)
    elif row.get("command"):  # the user's own program writes no steps.json: say what follows
        notes.append("timeline figures cover the whole run, start-up included (no steps.json)")
        if epochs is None:
            notes.append(
                "timeline: the output gives no count of epochs (MLLOG epochs or an epoch-time "
                "series): no per-epoch figures, the span share only"
            )
    else:
        notes.append("no steps.json: per-epoch figures include start-up")
    traced = _traced_steps(s)
    windowed = traced is not None and steps is not None and traced < steps
    if windowed:
        notes.append(WINDOW_NOTE.format(name=name, traced=traced, steps=steps))
        epochs, steps = None, traced
    if s.empty:
        notes.append(f"{name}: {NO_COLLECTIVES}")
    _coverage(row, s, steps_file)
    if row["timeline_truncated"] and s.steps is not None:  # a profiler's: a window of steps
        notes.append(TRACE_CUT_NOTE.format(name=name))
    elif row["timeline_truncated"]:
        cov = row["timeline_coverage"]
        cut = " and ends in a cut record (job killed?)" if s.truncated else ""
        notes.append(
            TRUNCATION_NOTE.format(name=name, pct=100 * cov, cut=cut)
            if cov == cov
            else f"{name} ends in a cut record (job killed?)"
        )
    _per_step(row, s)
    per_epoch = NAN if epochs is None else max(epochs, 1)
    # a category the format cannot know (another framework's own, in a profiler trace): unknown,
    # not 0
    for key in ("comm", "negotiate", "wait_for_data", "wait_for_other_tensor_data"):
        row[f"{key}_s"] = NAN if key in s.UNKNOWN_CATEGORIES else s.seconds(key) / per_epoch
    for key in ("transport", "queue", "memcpy"):
        row[f"{key}_s"] = NAN if key in s.UNKNOWN_CATEGORIES else s.seconds(key) / per_epoch
    # the two waits unioned in time, inside communication (hpcscale.analysis.overlap)
    row["waits_in_comm_s"] = s.waits_in_comm_us / 1e6 / per_epoch
    if not s.waits_known:  # a profiler trace without a reliable match
        for key in ("wait_for_data_s", "wait_for_other_tensor_data_s", "waits_in_comm_s"):
            row[key] = NAN
        notes.append(f"{name}: waits unknown ({s.waits_unknown_why}): wait columns left empty")
    elif s.waits_us > s.waits_in_comm_us:
        notes.append(
            f"{name}: {(s.waits_us - s.waits_in_comm_us) / 1e6:.6g} s of waiting for data "
            "outside any closed collective (never closed?): left out of the overlap"
        )
    row["span_s"] = s.span_us / 1e6
    row["comm_span_share"] = _span_share(s, name, notes) if steps_file is None else NAN
    row["allreduce_bytes_per_step"] = (  # bytes unknown: some allreduce had no size
        NAN if steps is None or not s.bytes_known else s.allreduce_bytes / max(steps, 1)
    )
    bw = s.bus_bandwidth_gbs()
    row["bus_bandwidth_gbs"] = NAN if bw is None else bw
    row["timeline_events"] = s.events
    strag = s.straggler()
    row["straggler_rank"] = NAN if strag is None else strag[0]
    # the exact split pairs rank 0's steps.json with the figures' communication: not with
    # another rank's (rank 0's trace missing), whose clock and steps are its own
    rank0 = s.figures_rank == 0
    if (
        steps_file is not None
        and s.start_time_since_epoch_us is not None
        and not windowed
        and rank0
    ):
        x = exact_split(steps_file, s.comm_intervals, s.start_time_since_epoch_us)
        row.update(
            exact_compute_s=x.compute_s,
            exact_overlap_s=x.overlap_s,
            exact_exposed_comm_s=x.exposed_comm_s,
        )
    return notes


def _span_share(s: TraceSummary, name: str, notes: list[str]) -> float:
    """Communication over the timeline's span: the only share a run without epoch times can
    have. Collectives are unioned in time, so more than the span is a damaged timeline."""
    if s.span_us <= 0 or s.empty:
        return NAN
    share = s.seconds("comm") / (s.span_us / 1e6)
    if share > 1.0 + 1e-9:
        notes.append(f"{name}: communication exceeds its span ({share:.3g}x): no share")
        return NAN
    return share


PER_STEP = {
    "compute_per_step_s": "compute_us",
    "comm_per_step_s": "comm_us",
    "overlap_per_step_s": "overlap_us",
    "exposed_comm_per_step_s": "exposed_comm_us",
}


def _per_step(row: dict[str, Any], s: TraceSummary) -> None:
    """A profiler trace's figures per traced step (the mean over the steps with anything in
    them, as `_traced_steps` counts them): what a window shorter than the run can say, where
    its per-epoch columns must stay empty. A trace without step markers leaves them empty."""
    steps = [x for x in s.steps or () if x.get("compute_us") or x.get("comm_us")]
    if not steps:
        return
    row["traced_steps"] = len(steps)
    for col, key in PER_STEP.items():
        values = [x.get(key) for x in steps]
        known = [float(v) for v in values if v is not None]
        row[col] = sum(known) / len(known) / 1e6 if len(known) == len(values) else NAN


def _traced_steps(s: TraceSummary) -> int | None:
    """How many steps a profiler trace holds inside the timed window (its ProfilerStep
    markers with anything in them: those outside the window are empty); None for a trace
    without step markers (a timeline covering the whole run)."""
    if not s.steps:
        return None
    return sum(1 for x in s.steps if x.get("compute_us") or x.get("comm_us"))


def _coverage(row: dict[str, Any], s: TraceSummary, steps: Steps | None) -> None:
    """`timeline_coverage`: the fraction of the timed window (steps.json) up to the timeline's
    last time stamp; `timeline_truncated`: a cut last record, or an end before the last timed
    step began. Without steps.json only a cut record can tell, nor for a profiler trace (step
    markers): a window of steps by design, it ends where its window does."""
    row["timeline_truncated"] = bool(s.truncated)
    if steps is None or s.window_us is None or s.start_time_since_epoch_us is None:
        return
    lo, hi = s.window_us
    end = s.last_ts_us if s.last_ts_us is not None else lo
    row["timeline_coverage"] = min(max((end - lo) / max(hi - lo, 1), 0.0), 1.0)
    last_step_us = int(steps.start_unix_ns.max() // 1000) - s.start_time_since_epoch_us
    if end < last_step_us and s.steps is None:
        row["timeline_truncated"] = True
