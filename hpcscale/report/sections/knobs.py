"""The sections on what a study varies at a fixed scale: where the epoch's time goes (overlap),
tensor fusion, fp16 / mixed precision, hierarchical all-reduce, batch size, CPU layouts. The
sweeps themselves are chosen by `hpcscale.analysis.sweeps`; what a knob study varies is said by
the framework owning its knobs (Framework.knob_studies), what W is in a trace by its format's
registry line (hpcscale.model.registry.TRACE_READERS)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hpcscale.analysis import sweeps, tables
from hpcscale.analysis.batch import THROUGHPUT, batch_speedups
from hpcscale.analysis.curves import run_series
from hpcscale.analysis.frame import normalise
from hpcscale.analysis.metric import command_rows
from hpcscale.analysis.overlap import WAITS_SUMMED, row_sources, sources_phrase
from hpcscale.analysis.studies import MURTHY
from hpcscale.frameworks import words_of
from hpcscale.model.registry import TRACE_READERS
from hpcscale.model.scaling_metric import BUNDLED_METRIC, ScalingMetric
from hpcscale.model.targets import TargetSpec
from hpcscale.report import figures
from hpcscale.report.figures.batch import sweep_labels
from hpcscale.report.labels import with_setting
from hpcscale.report.model import Section, Table, plot_if
from hpcscale.report.sections.noise import comparison_table
from hpcscale.report.sections.per_step import per_step_part, per_step_section
from hpcscale.report.sections.quality import mark_flagged
from hpcscale.report.sections.sources import source_sentence, with_source

# Table column -> cell column: how a knob table's rows are matched back to their cells.
OVERLAP_MATCH: dict[str, str] = {
    "Epoch time (s)": "epoch_time_s",
    "Overall communication": "comm_s",
}
FUSION_MATCH: dict[str, str] = {
    **OVERLAP_MATCH,
    "Cycle time (ms)": "cycle_time_ms",
    "Fusion buffer (MB)": "fusion_threshold_mb",
}
# What W is in each trace format (its registry line's `waits`), for the overlap section.
WAITS_TEXT = " ".join(line.waits for line in TRACE_READERS.values() if line.waits)


def study_text(key: str) -> list[str]:
    """What a knob study varies, said by the framework owning its knobs (Framework.knob_studies:
    the first in the registry's order that says it); none where no framework does."""
    said = words_of("knob_studies").get(key)
    return [said] if said else []


def _whole_run_cells(timed: pd.DataFrame) -> int:
    """Cells of a command workload whose timeline has no epoch to be cut by."""
    return int((command_rows(timed) & timed["epoch_time_s"].isna()).sum())


def _overlap_match(metric: ScalingMetric) -> dict[str, str]:
    """OVERLAP_MATCH with the time headed and keyed as `metric` heads it."""
    return {metric.time_heading: metric.time_column, "Overall communication": "comm_s"}


def overlap_section(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> Section | None:
    timed = sweeps.timed(cells)
    if timed.empty:
        return per_step_section(cells)  # a shorter trace window's cells only (or nothing)
    sources = row_sources(timed)
    text = [
        f"From {sources_phrase(sources)}, per epoch: Computation = T − C (epoch time minus "
        "overall communication), Only communication = C − W, Overlap % = W / T, where W is "
        f"the waits unioned in time inside communication. {WAITS_TEXT} The three percentages "
        "add up to 100.",
    ]
    summed = int(timed[WAITS_SUMMED].sum()) if WAITS_SUMMED in timed.columns else 0
    if summed:
        text.append(
            f"{summed} of {len(timed)} cell(s) carry the two waits only apart (no union in "
            f"the data): there W is their sum, as in {MURTHY}, an upper bound on the "
            "overlap, so Only communication is a lower bound. Where a sum exceeds C the split "
            "is left out."
        )
    whole = _whole_run_cells(timed)
    if whole:
        text.append(
            f"{whole} cell(s) ran a program of your own that gives no epoch times: their "
            "figures are the whole trace (start-up included) divided by the "
            "campaign's `epochs`, and with no epoch time T they have no computation or overlap "
            "share; the efficiency section gives their communication share of the timeline."
        )
    if "exact_compute_s" in timed.columns and timed["exact_compute_s"].notna().any():
        text.append(
            "The exact columns sweep rank 0's step spans against the timeline's communication "
            "intervals and are named by what they measure: step time outside communication, "
            "communication inside a step (on synchronous runs the all-reduce runs inside the "
            "step: this is not communication hidden behind compute), and communication "
            "between steps."
        )
    table = with_setting(
        tables.overlap_table(timed, metric),
        timed,
        _overlap_match(metric),
        ["model", "scaling", "axis_value", "batch_per_rank"],
    )
    match = {**_overlap_match(metric), "Model": "model", tables.axis_label(timed): "axis_value"}
    table = with_source(table, timed, {**match, "Batch": "batch_per_rank"}, after="Model")
    step_text, step_tables = per_step_part(cells)
    return Section(
        "overlap",
        "Compute / communication overlap",
        text + step_text,
        [Table("overlap", "Compute and communication per epoch (s, %)", table), *step_tables],
        plot_if(
            "overlap",
            "Compute, overlap and communication per run",
            figures.overlap_bars(timed),
            "Each bar is one matrix cell's epoch, split into computation only, overlap and "
            "communication only.",
        ),
    )


def fusion_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.fusion_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.fusion_table(rows), rows, FUSION_MATCH, ["fusion_threshold_mb", "cycle_time_ms"]
    )
    table = with_source(table, rows, FUSION_MATCH, after="Fusion buffer (MB)")
    return Section(
        "fusion",
        "Tensor fusion: cycle time x fusion buffer",
        [
            *study_text("fusion"),
            *source_sentence(rows),
        ],
        _with_comparisons([Table("fusion", "Cycle time x fusion buffer", table)], rows, "fusion"),
        plot_if("fusion", "Fusion heat map", figures.fusion_heatmap(rows)),
    )


def precision_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.precision_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.precision_table(rows), rows, OVERLAP_MATCH, ["fp16_allreduce", "mixed_precision"]
    )
    table = with_source(table, rows, OVERLAP_MATCH, after="Type")
    return Section(
        "precision",
        "FP16 compression and mixed precision",
        [
            *study_text("precision"),
            *source_sentence(rows),
        ],
        _with_comparisons(
            [Table("precision", "FP16 all-reduce / mixed precision", table)], rows, "precision"
        ),
    )


def hierarchical_section(cells: pd.DataFrame) -> Section | None:
    rows = sweeps.hierarchical_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.hierarchical_table(rows),
        rows,
        {**OVERLAP_MATCH, "Fusion buffer (MB)": "fusion_threshold_mb"},
        ["hierarchical_allreduce", "fusion_threshold_mb"],
    )
    table = with_source(
        table, rows, {**OVERLAP_MATCH, "Fusion buffer (MB)": "fusion_threshold_mb"}, "Hierarchical?"
    )
    return Section(
        "hierarchical",
        "Hierarchical all-reduce",
        [
            *study_text("hierarchical"),
            *source_sentence(rows),
        ],
        _with_comparisons(
            [Table("hierarchical", "Hierarchical all-reduce", table)], rows, "hierarchical"
        ),
    )


def batch_section(
    cells: pd.DataFrame,
    runs: pd.DataFrame | None = None,
    specs: Sequence[TargetSpec] = (),
    metric: ScalingMetric = BUNDLED_METRIC,
) -> Section | None:
    """The batch sweep's throughput, and its speedup over the smallest batch (Ahmad & Cai's Fig. 5)
    on throughput and, where `runs` reached a target (`specs`, else the default), on time to
    it."""
    rows = sweeps.batch_sweep(cells)
    if rows.empty:
        return None
    table = with_setting(
        tables.batch_sweep_table(rows, metric),
        rows,
        {"Model": "model", "Batch size": "batch_per_rank", metric.time_heading: metric.time_column},
        ["model", "device", "batch_per_rank"],
    )
    speed = batch_speedups(cells, runs, specs, metric)
    targets = [m for m in dict.fromkeys(speed["measure"]) if m != THROUGHPUT]
    text = [
        "Throughput against the per-rank batch size, CPU and GPU.",
        "Speedup is relative to the smallest batch of each sweep (cells equal in everything but "
        f"the batch): on throughput, {_per_s(metric)} ÷ the smallest batch's {_per_s(metric)}"
        + _target_text(bool(targets), specs, runs),
    ]
    # flagged cells (e.g. input-bound) marked, matched among the sweep's cells only
    tabs = [
        mark_flagged(
            Table("batch", "Batch-size sweep", table),
            rows,
            {"Model": "model", "Batch size": "batch_per_rank", **_throughput(metric)},
        ),
        mark_flagged(
            Table(
                "batch_speedup", "Speedup over the smallest batch", _speedup_table(speed, metric)
            ),
            rows,
            {"Model": "model", "Batch/rank": "batch_per_rank", **_throughput(metric)},
        ),
    ]
    return Section(
        "batch",
        "Batch size",
        text,
        tabs,
        [
            *plot_if(
                "batch",
                "Batch-size curves",
                figures.batch_curves(rows, metric),
                "Median over repeats; error bars, where a cell was repeated: min to max of the "
                "repeats (a range, not an interval).",
            ),
            *plot_if(
                "batch_speedup",
                "Speedup against batch size",
                figures.batch_speedup(speed),
                f"Baseline (speedup 1): the smallest batch of each sweep ({_bases(speed)}).",
            ),
        ],
    )


def _per_s(metric: ScalingMetric) -> str:
    """How a sentence names the throughput: images/s, or a command's own metric."""
    return "images/s" if metric.throughput_heading == "Images/s" else metric.throughput_heading


def _throughput(metric: ScalingMetric) -> dict[str, str]:
    """The throughput's heading -> its column, for matching a table's rows to their cells."""
    return {metric.throughput_heading: metric.throughput_column}


def _target_text(
    reached: bool, specs: Sequence[TargetSpec], runs: pd.DataFrame | None = None
) -> str:
    """How the time-to-target speedup was measured, or why there is none (a metric never
    recorded is said as such, not as "not reached")."""
    if reached:
        return (
            "; to a target, the smallest batch's wall time to it ÷ the cell's, every batch timed "
            "to the same absolute target (" + ", ".join(s.text for s in specs) + "), as Ahmad "
            "& Cai timed each batch to the same target loss."
        )
    how = (
        "set an absolute one with `targets:` in the campaign or `--target` (e.g. "
        "`val_accuracy>=0.8`, `g_loss<=1.2`) to time every batch to the same target, as Ahmad "
        "& Cai did with a target loss."
    )
    unrecorded = _unrecorded(specs, runs)
    if unrecorded:
        return (
            ". No time to a target: no run recorded "
            + ", ".join(unrecorded)
            + ", so "
            + ", ".join(s.text for s in specs)
            + " was not measured."
        )
    if specs:
        return ". No time to a target: no run reached " + ", ".join(s.text for s in specs) + "."
    return (
        ". No speedup on time to a target: no absolute target was set, and a run's own plateau "
        "(the classifiers' default) is not a common target (a batch plateauing at a worse "
        "accuracy sooner would look faster); " + how
    )


def _unrecorded(specs: Sequence[TargetSpec], runs: pd.DataFrame | None) -> list[str]:
    """The target metrics no run recorded per epoch (a missing metric is not "not reached")."""
    if not specs or runs is None or runs.empty:
        return []
    seen = {name for _, r in normalise(runs).iterrows() for name in run_series(r)}
    if "train_loss" in seen:
        seen.add("loss")  # the classifier's Keras "loss" is kept as train_loss
    return sorted({s.metric for s in specs} - seen)


def _speedup_table(speed: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    """One row per batch-sweep cell: throughput and its speedup, then per target the time to
    it and its speedup; "vs previous batch" is the gain over the next smaller batch."""
    thr = speed[speed["measure"] == THROUGHPUT].reset_index(drop=True)
    names = sweep_labels(thr)
    out = pd.DataFrame(
        {
            "Model": thr["model"],
            "Sweep": [names[s] for s in thr["sweep"]],
            "CPU/GPU": thr["device"].str.upper(),
            "Ranks": thr["ranks"],
            "Batch/rank": thr["batch_per_rank"],
            "Global batch": thr["global_batch"],
            metric.throughput_heading: thr[metric.throughput_column],
            "Speedup (throughput)": thr["speedup"],
            "vs previous batch (%)": 100.0 * thr["vs_previous"],
        }
    )
    if thr["sweep"].nunique() < 2:
        out = out.drop(columns="Sweep")
    for measure, sub in speed[speed["measure"] != THROUGHPUT].groupby("measure", sort=False):
        sub = sub.reset_index(drop=True)
        what = str(measure).removeprefix("time to ")
        out[f"Time to {what} (s)"] = sub["value"]
        out[f"Speedup (to {what})"] = sub["speedup"]
        out[f"vs previous batch, to {what} (%)"] = 100.0 * sub["vs_previous"]
    return out


def _bases(speed: pd.DataFrame) -> str:
    thr = speed[speed["measure"] == THROUGHPUT]
    firsts = thr.groupby("sweep").head(1)
    pairs = zip(firsts["batch_per_rank"], firsts["global_batch"], strict=True)
    return "; ".join(sorted({f"batch {int(b)}/rank, global {int(g)}" for b, g in pairs}))


def layout_section(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> Section | None:
    rows = sweeps.layout_sweep(cells)
    if rows.empty:
        return None
    return Section(
        "layouts",
        "CPU layouts",
        ["Ranks per node x threads per rank on the same nodes (e.g. 1x28, 2x14, 4x7)."],
        _with_comparisons(
            [Table("layouts", "CPU layouts", tables.layout_table(rows, metric))],
            rows,
            "layouts",
            metric,
        ),
    )


def _with_comparisons(
    tabs: list[Table], rows: pd.DataFrame, key: str, metric: ScalingMetric = BUNDLED_METRIC
) -> list[Table]:
    """A knob section's tables plus which setting is faster, only where the intervals say so."""
    compare = comparison_table(rows, metric, key=f"{key}_comparisons")
    return tabs if compare is None else [*tabs, compare]
