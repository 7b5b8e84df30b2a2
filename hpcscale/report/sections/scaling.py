"""The scaling sections: throughput per cell, efficiency and overhead per strategy, and the
fitted laws' predictions beyond the largest size measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.baseline import group_ids
from hpcscale.analysis.extrapolate import comm_cost, extrapolate, predict_at, refusals
from hpcscale.analysis.frame import normalise
from hpcscale.analysis.intervals import note
from hpcscale.analysis.metric import command_rows, compared_on, strong_rule
from hpcscale.analysis.overlap import row_sources, sources_phrase
from hpcscale.analysis.strategies import strategy_names
from hpcscale.analysis.studies import AHMAD_CAI
from hpcscale.analysis.sweeps import scaled_groups
from hpcscale.model.errors import HpcscaleError
from hpcscale.model.registry import TRACE_READERS
from hpcscale.model.scaling_metric import BUNDLED_METRIC, THROUGHPUT, ScalingMetric
from hpcscale.model.system import load_system
from hpcscale.report import figures
from hpcscale.report.labels import group_labels, with_setting
from hpcscale.report.model import Plot, Section, Table, plot_if
from hpcscale.report.sections.noise import comparison_table, method_text
from hpcscale.report.sections.sources import FROM, with_source
from hpcscale.state.claim import file_dir

AXIS_NAMES = {"nodes": "nodes", "ranks": "ranks", "gpus": "GPUs"}
KARP_FLATT = "Karp–Flatt serial fraction"
KARP_FLATT_TEXT = (
    "Karp–Flatt serial fraction e = (1/S − 1/N) / (1 − 1/N), from the measured speedup S, with "
    "N = scale relative to the baseline (the axis value ÷ the group's baseline value, not a "
    "processor count): strong scaling beyond the baseline only (a dash elsewhere; weak scaling "
    "grows the problem, so it does not apply). A constant e means a fixed serial part explains "
    "the loss (Amdahl); e growing with N means overhead (communication) grows with the scale."
)


# Without a trace there is no communication figure: where each framework's trace comes from
# (each trace format's `of_runs`, hpcscale.model.registry.TRACE_READERS).
NO_SHARE_TEXT = (
    " No communication share is measured without a trace ("
    + ", ".join(line.of_runs for line in TRACE_READERS.values() if line.of_runs)
    + "): record it with `collect: {timeline: true}` in the campaign and read it with "
    "`collect --timeline`."
)
COMM_ANY = "_comm_measured"  # a cell's communication figure, per epoch or over its span
STRATEGY, SHARE = "_strategy_name", "_comm_share_pct"  # the overhead table's, per cell
SPAN_SHARE_TEXT = (
    "A program without epoch times (your own, with no steps.json) has no epoch to divide by: its "
    "share is communication over its trace's span, from its first recorded event to "
    "its last, start-up included, in a column of its own."
)


def scaling_section(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> Section | None:
    """The scaling table and the throughput (or time) figure, headed by the campaign's metric."""
    if cells.empty:
        return None
    runs = int(cells["repeats"].sum())
    axis = AXIS_NAMES.get(str(cells["axis"].iloc[0]))
    text = [
        f"{runs} run(s) in {len(cells)} matrix cell(s); repeats are folded into their median "
        "(min and max shown). Speedup and efficiency are relative to each group's baseline: "
        f"the cell with the fewest {axis} among cells that share every other setting "
        "(workload arguments and epochs included: a swept argument is a column of its own).",
        metric_text(metric),
        *filter(None, [method_text(cells, metric)]),
    ]
    note_of = interval_note(cells, (metric.throughput_column, "speedup", "efficiency"), metric)
    tabs = [Table("scaling", _scaling_title(cells), _scaling_table(cells, metric), note_of)]
    compare = comparison_table(cells, metric)
    if compare is not None:
        tabs.append(compare)
    column, higher = compared_on(cells, metric)  # a `time:` campaign's time: no throughput
    drawn = "throughput" if higher else "time"
    ideal = "linear scaling" if higher else "time (the baseline's time / scale)"
    return Section(
        "scaling",
        "Scaling results",
        text,
        tabs,
        plot_if(
            "throughput",
            f"{drawn.capitalize()} against scale",
            figures.throughput(cells, column, metric),
            f"Measured {drawn} (solid) and the ideal {ideal} from each group's baseline "
            "(dashed); error bars: " + _bars(cells, column, metric),
        ),
    )


# What the scaling section says of the bundled programs' throughput.
IMAGES_TEXT = "Images/s is the global throughput: images processed per epoch / epoch time."


def metric_text(metric: ScalingMetric) -> str:
    """What the throughput (or time) column holds: the bundled programs' images/s, or the
    metric a command declared, as its extractors read it (its images/s too: what the program
    printed, not hpcscale's division)."""
    if metric.usual and not metric.command:
        return IMAGES_TEXT
    if metric.kind == THROUGHPUT:
        return (
            f"{metric.heading} is your program's own throughput, the metric `{metric.name}` "
            "(`workload.throughput`) as its extractors read it; speedup and efficiency are "
            "computed on it."
        )
    return (
        f"{metric.axis_label} is your program's own time, the metric `{metric.name}` "
        "(`workload.time`) as its extractors read it; strong-scaling speedup is T_b / T_N on it."
    )


def interval_note(
    cells: pd.DataFrame,
    metrics: tuple[str, ...] = (BUNDLED_METRIC.throughput_column, "speedup", "efficiency"),
    metric: ScalingMetric = BUNDLED_METRIC,
) -> str:
    """What the table's interval columns (`metrics`) are: method and level, or that there are
    none (no repeats); the campaign's own `metric` named by its heading."""
    said = note(cells, metrics, scaling_metric=metric)
    if said:
        return said + " The baseline cell's speedup and efficiency are 1 by definition."
    return "No interval: each cell ran once (set `repeats:` in the campaign)."


def _bars(
    cells: pd.DataFrame,
    column: str = BUNDLED_METRIC.throughput_column,
    metric: ScalingMetric = BUNDLED_METRIC,
) -> str:
    """What a figure's error bars are: the column's interval (method, level) or none."""
    return note(cells, (column,), scaling_metric=metric) or "none (no interval without repeats)."


def _scaling_table(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    match = {
        "Model": "model",
        tables.axis_label(cells): "axis_value",
        metric.time_heading: metric.time_column,
        metric.throughput_heading: metric.throughput_column,
    }
    identity = [
        "model",
        "scaling",
        "device",
        "axis_value",
        "global_batch",
        "strategy",
        "cross_device_ops",
        "mpi",
        *tables.swept_args(cells),  # columns of their own
    ]
    return with_setting(tables.scaling_table(cells, metric), cells, match, identity)


def _scaling_title(cells: pd.DataFrame) -> str:
    modes = [m for m in ("weak", "strong") if (cells["scaling"] == m).any()]
    if not modes:
        return "Runs (no scaling mode: speedup relative to the smallest size)"
    return " and ".join(modes).capitalize() + " scaling"


def efficiency_section(
    cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC
) -> Section | None:
    scaled = scaled_groups(cells)
    if scaled.empty:
        return None
    overhead = tables.overhead_table(scaled, metric)
    table = with_karp_flatt(overhead, scaled)
    span = tables.COMM_SPAN_SHARE_LABEL
    axis = tables.axis_label(scaled)
    table = with_source(
        table,
        _comm_rows(scaled, metric),
        {
            "Model": "model",
            "Strategy": STRATEGY,
            axis: "axis_value",
            "Efficiency": "efficiency",
            tables.COMM_SHARE_LABEL: SHARE,
        },
        after=span if span in table.columns else tables.COMM_SHARE_LABEL,
        measured=COMM_ANY,
    )
    text = [
        strong_rule(scaled) + " Weak scaling is judged on throughput: efficiency = "
        "X_N / (N·X₁), with N the scale relative to the baseline.",
        f'Scaling loss is the "communication overhead" of {AHMAD_CAI}, kept for comparison '
        "with it: 1/efficiency − 1 = (N·T_N − T₁)/T₁ (8.70 % goes with an efficiency of 0.92). "
        "It counts all scaling loss, not only communication."
        + _comm_share_text(overhead, scaled, metric),
        *([SPAN_SHARE_TEXT] if tables.COMM_SPAN_SHARE_LABEL in overhead.columns else []),
        *([KARP_FLATT_TEXT] if _has_karp_flatt(scaled) else []),
    ]
    return Section(
        "efficiency",
        "Scaling efficiency and communication overhead",
        text,
        [
            Table(
                "overhead",
                "Scaling loss (Ahmad & Cai's overhead), measured communication and efficiency"
                if _comm_measured(overhead)
                else "Scaling loss (Ahmad & Cai's overhead) and efficiency",
                table,
                interval_note(scaled, ("speedup", "efficiency"), metric),
            )
        ],
        plot_if(
            "efficiency",
            "Scaling efficiency per strategy",
            figures.efficiency(scaled),
            "Error bars: "
            + _bars(scaled, "efficiency", metric)
            + (
                " Below: the Karp–Flatt serial fraction of the strong-scaling groups."
                if _has_karp_flatt(scaled)
                else ""
            ),
        ),
    )


def _comm_measured(overhead: pd.DataFrame) -> bool:
    """Whether the overhead table has a measured communication share (a timeline was read)."""
    cols = (tables.COMM_SHARE_LABEL, tables.COMM_SPAN_SHARE_LABEL)
    return any(c in overhead.columns and overhead[c].notna().any() for c in cols)


def _comm_share_text(
    overhead: pd.DataFrame, cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC
) -> str:
    """What the measured communication share is, or, with none, where one would come from: a
    user's own program is not told of the bundled frameworks' traces (NO_SHARE_TEXT)."""
    if tables.COMM_SHARE_LABEL in overhead and overhead[tables.COMM_SHARE_LABEL].notna().any():
        said = sources_phrase(row_sources(_comm_rows(cells, metric), COMM_ANY))
        return (
            " The measured communication share beside it is communication per epoch from "
            f"{said} / {_lower(metric.time_name)}."
        )
    if _comm_measured(overhead) or bool(command_rows(cells).all()):  # span share: its own text
        return ""
    return NO_SHARE_TEXT


def _comm_rows(cells: pd.DataFrame, metric: ScalingMetric = BUNDLED_METRIC) -> pd.DataFrame:
    """The cells with COMM_ANY (a measured communication figure, per epoch or over the span),
    and the overhead table's Strategy and share as it computes them (to match its rows)."""
    span = cells.get("comm_span_share", pd.Series(np.nan, index=cells.index))
    return cells.assign(
        **{
            COMM_ANY: cells["comm_s"].fillna(span),
            STRATEGY: strategy_names(cells),
            SHARE: 100.0 * cells["comm_s"] / cells[metric.time_column],
        }
    )


def with_karp_flatt(table: pd.DataFrame, scaled: pd.DataFrame) -> pd.DataFrame:
    """The overhead table with the Karp–Flatt serial fraction after its efficiency columns:
    defined for strong scaling beyond the baseline only (elsewhere NaN, shown as a dash)."""
    if table.empty or "karp_flatt" not in scaled.columns:
        return table
    by = tables.overhead_order(scaled)  # the rows of overhead_table, in its order
    ordered = scaled.sort_values(by, kind="stable", na_position="first")
    axis = tables.axis_label(scaled)
    if list(ordered["axis_value"]) != list(table[axis]):  # never put a value on the wrong row
        return table
    out = table.copy()
    at = list(out.columns).index("Efficiency") + 1
    at += int(tables.EFFICIENCY_CI in out.columns)
    out.insert(at, KARP_FLATT, ordered["karp_flatt"].to_numpy(float))
    # it is defined for strong scaling only: say which rows are, when the table holds both
    if ordered["scaling"].nunique() > 1:
        out.insert(2, "Scaling", ordered["scaling"].map({"strong": "S", "weak": "W"}).to_numpy())
    if ordered["device"].nunique() > 1:
        out.insert(2, "CPU/GPU", ordered["device"].str.upper().to_numpy())
    return out


def _has_karp_flatt(scaled: pd.DataFrame) -> bool:
    return "karp_flatt" in scaled.columns and bool(np.isfinite(scaled["karp_flatt"]).any())


def extrapolation_section(
    runs: pd.DataFrame,
    cells: pd.DataFrame,
    notes: list[str],
    max_nodes: int | None = None,
    metric: ScalingMetric = BUNDLED_METRIC,
) -> Section | None:
    """Fitted laws' predictions, only from physical, over-determined fits; sizes past the
    system's `max_nodes` are marked (unknown system: nothing is marked, and the text says so)."""
    if cells.empty:
        return None
    axis = str(cells["axis"].iloc[0])
    at = predict_at(cells)
    points = extrapolate(runs, axis=axis, at=at, max_nodes=max_nodes, metric=metric)
    refused = refusals(runs, axis=axis, metric=metric)
    cost = comm_cost(runs, axis=axis, at=at, max_nodes=max_nodes)
    if points.empty and cost.empty and refused.empty:
        notes.append("extrapolation: no weak/strong group measured at two sizes or more")
        return None
    text = [
        "Predictions, not measurements. Strong scaling: Amdahl's law T(N) = T₁·(s + (1 − s)/N) "
        f"fitted to every run's {_lower(metric.time_name)}; weak scaling: Gustafson's law on "
        f"{_throughput_name(metric)}. A fit "
        "predicts only with more measurements than its two parameters (sizes × repeats ≥ 3) "
        "and a serial fraction s within 0..1."
    ]
    names = group_labels(cells) if len(cells) else {}
    for r in refused.to_dict("records"):  # a dict per row, not a Series
        text.append(
            f"No prediction for {names.get(r['group'], r['model'])} "
            f"({str(r['law']).capitalize()}): {r['reason']}."
        )
    if max_nodes is None:
        text.append("The system profile could not be loaded: sizes beyond it are not marked.")
    frames = [f for f in (points, cost) if "beyond_system" in f.columns]
    if any(bool(f["beyond_system"].any()) for f in frames):
        text.append(
            f'Sizes marked "beyond max_nodes" exceed what the system profile\'s max_nodes '
            f"({max_nodes} node(s)) holds: they could not be measured on it."
        )
    tabs = []
    plots: list[Plot] = []
    if not points.empty:
        text.append(
            f"The interval is a {points['interval'].iloc[0]}; a lower end below zero is shown as 0."
        )

        tabs.append(
            Table("predictions", "Extrapolated (prediction)", tables.predictions_table(points))
        )
        lo = float(cells["axis_value"].min())
        dense = np.unique(np.concatenate([np.geomspace(lo, max(at), 48), at]))
        curve = extrapolate(runs, axis=axis, at=dense, max_nodes=max_nodes, metric=metric)
        plots = plot_if(
            "extrapolation",
            "Extrapolation (prediction)",
            figures.extrapolation(cells, curve, points, metric),
            "Filled markers: measured; dashed: fitted law; open markers and band: predictions.",
        )
    if not cost.empty:
        bw_from = bandwidth_sources(runs, cost, axis)
        text.append(
            "Communication cost model: per step, a ring all-reduce sends 2M(P−1)/P bytes per "
            "process and a parameter server moves 2M(P−1) bytes through its link (M = model "
            "bytes from the parameter count); times use the bus bandwidth measured from "
            f"{sources_phrase(bw_from, per='row')} (the largest measured size's bandwidth "
            "beyond it)."
        )
        table = tables.comm_cost_table(cost)
        if len({s for s in bw_from if s}) > 1:  # rows in the cost frame's order
            table.insert(list(table.columns).index("Bandwidth (GB/s)") + 1, FROM, bw_from)
        tabs.append(Table("comm_cost", "Ring all-reduce vs parameter server", table))
    return Section("extrapolation", "Extrapolation (predictions)", text, tabs, plots)


def _lower(name: str) -> str:
    """ "Epoch time" as a sentence says it; a metric's own name as it is."""
    return name[0].lower() + name[1:] if name[:1].isupper() else name


def _throughput_name(metric: ScalingMetric) -> str:
    """How a sentence names the throughput: "throughput", or a command's own metric."""
    return "throughput" if metric.kind != THROUGHPUT or metric.usual else f"`{metric.name}`"


def bandwidth_sources(runs: pd.DataFrame, cost: pd.DataFrame, axis: str) -> list[str]:
    """Per cost row, the trace its bus bandwidth came from: its group's runs that measured one
    (comm_cost's groups: group_ids of the normalised runs); "" where the row has none."""
    norm = normalise(runs)
    gid = group_ids(norm, axis)
    per_group: dict[int, list[str]] = {}
    for g, src in zip(gid, row_sources(norm, "bus_bandwidth_gbs"), strict=True):
        per_group.setdefault(int(g), []).append(src)
    said = {g: " + ".join(dict.fromkeys(s for s in v if s)) for g, v in per_group.items()}
    bw = cost["bandwidth_gbs"].to_numpy(float)
    return [
        said.get(int(g), "") if np.isfinite(b) else ""
        for g, b in zip(cost["group"], bw, strict=True)
    ]


def system_max_nodes(system: str | None, campaign_dir: Path) -> int | None:
    """The system profile's max_nodes, or None when the profile cannot be loaded here (a
    report must not need the cluster's profile)."""
    if not system:
        return None

    try:
        return int(load_system(system, relative_to=file_dir(campaign_dir)).max_nodes)
    except (HpcscaleError, OSError):
        return None
