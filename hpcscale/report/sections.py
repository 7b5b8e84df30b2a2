"""Which sections a campaign's data supports, and their tables and figures.

A section appears only when the data has what it shows (a quickstart has no fusion sweep), and
then it has at least one non-empty table. Everything here is computed from the collector's
tidy run table; nothing is read from disk (provenance is read by build.py and passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.baseline import CELL_KEYS
from hpcscale.analysis.derive import derive
from hpcscale.analysis.extrapolate import comm_cost, extrapolate
from hpcscale.analysis.frame import FrameError, normalise
from hpcscale.analysis.targets import loss_series, targets
from hpcscale.report import figures, refs
from hpcscale.report import labels as lbl
from hpcscale.report.model import CampaignReport, Plot, Section, Table

PREDICT_AT: tuple[int, ...] = (16, 32)


def campaign_report(
    runs: pd.DataFrame,
    name: str,
    description: str = "",
    references: Sequence[Any] = (),
    provenance: Section | None = None,
) -> CampaignReport:
    """Every applicable section for one campaign's runs (one row per run, collector columns)."""
    cells = derive(runs)
    notes: list[str] = []
    results = refs.check(cells, references) if references else []
    builders: list[Callable[[], Section | None]] = [
        lambda: scaling_section(cells),
        lambda: efficiency_section(cells),
        lambda: overlap_section(cells),
        lambda: fusion_section(cells),
        lambda: precision_section(cells),
        lambda: hierarchical_section(cells),
        lambda: batch_section(cells),
        lambda: layout_section(cells),
        lambda: target_section(runs, notes),
        lambda: extrapolation_section(runs, cells, notes),
    ]
    sections = [s for s in (b() for b in builders) if s is not None]
    if references:
        sections.append(references_section(results))
    if provenance is not None:
        sections.append(provenance)
    return CampaignReport(name, description, sections, runs, cells, results, notes)


# -- helpers ----------------------------------------------------------------------------------


def swept(cells: pd.DataFrame, cols: Sequence[str], free: Sequence[str] = ()) -> pd.DataFrame:
    """Cells of the sweeps over `cols`: groups of cells equal in everything else (but `free`)
    that hold more than one combination of `cols`."""
    if cells.empty:
        return cells
    keys = [k for k in CELL_KEYS if k not in cols and k not in free]
    key = cells[keys].map(str).agg("|".join, axis=1)
    combo = cells[list(cols)].map(str).agg("|".join, axis=1)
    counts = combo.groupby(key).transform("nunique")
    return cells[counts > 1]


OVERLAP_MATCH: dict[str, str] = {
    "Epoch time (s)": "epoch_time_s",
    "Overall communication": "comm_s",
}


def with_setting(
    table: pd.DataFrame, rows: pd.DataFrame, match: Mapping[str, str], identity: Sequence[str]
) -> pd.DataFrame:
    """Add a "Setting" column naming the knobs that tell rows apart when the columns the table
    shows (`identity`, as cell columns) do not, e.g. fp16 on/off in a plain scaling table.

    The analysis tables sort their rows; each table row is matched back to its cell on the
    `match` columns (table column -> cell column), whose values the tables copy unchanged."""
    parts = _needed(rows, [c for c in identity if c in rows.columns])
    if not parts or table.empty:
        return table
    names = [lbl.describe(r, parts) for _, r in rows.iterrows()]
    keys = [tuple(r[c] for c in match.values()) for _, r in rows.iterrows()]
    left = list(range(len(rows)))
    settings = []
    for _, trow in table.iterrows():
        want = tuple(trow[c] for c in match)
        hit = next((k for k in left if all(map(_same, keys[k], want))), None)
        if hit is None:  # cannot happen with the analysis' tables; never mislabel a row
            return table
        left.remove(hit)
        settings.append(names[hit])
    out = table.copy()
    out.insert(1, "Setting", settings)
    return out


def _needed(rows: pd.DataFrame, identity: list[str]) -> list[str]:
    """The fewest knob parts that, with the identity columns, tell every cell apart."""

    def distinct(parts: Sequence[str]) -> int:
        cols = identity + [c for p in parts for c in lbl.PARTS[p][0]]
        return len(rows[list(dict.fromkeys(cols))].map(str).drop_duplicates()) if cols else 1

    parts = lbl.varying(rows, lbl.KNOB_PARTS)
    full = distinct(parts)
    if distinct([]) == full:
        return []
    for part in reversed(list(parts)):
        trial = [p for p in parts if p != part]
        if distinct(trial) == full:
            parts = trial
    return parts


def _same(a: Any, b: Any) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return bool(a == b)


def _plot(key: str, title: str, fig: Any, caption: str = "") -> list[Plot]:
    return [] if fig is None else [Plot(key, title, fig, caption)]


def _axis_name(cells: pd.DataFrame) -> str:
    return {"nodes": "nodes", "ranks": "ranks", "gpus": "GPUs"}.get(str(cells["axis"].iloc[0]))


# -- sections ---------------------------------------------------------------------------------


def scaling_section(cells: pd.DataFrame) -> Section | None:
    if cells.empty:
        return None
    runs = int(cells["repeats"].sum())
    axis = _axis_name(cells)
    text = [
        f"{runs} run(s) in {len(cells)} matrix cell(s); repeats are folded into their median "
        "(min and max shown). Speedup and efficiency are relative to each group's baseline: "
        f"the cell with the fewest {axis} among cells that share every other setting.",
        "Images/s is the global throughput: images processed per epoch / epoch time.",
    ]
    return Section(
        "scaling",
        "Scaling results",
        text,
        [Table("scaling", _scaling_title(cells), _scaling_table(cells))],
        _plot(
            "throughput",
            "Throughput against scale",
            figures.throughput(cells),
            "Measured throughput (solid) and the ideal linear scaling from each group's baseline "
            "(dashed).",
        ),
    )


def _scaling_table(cells: pd.DataFrame) -> pd.DataFrame:
    match = {
        "Model": "model",
        tables.axis_label(cells): "axis_value",
        "Epoch time (s)": "epoch_time_s",
        "Images/s": "images_per_s",
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
    ]
    return with_setting(tables.scaling_table(cells), cells, match, identity)


def _scaling_title(cells: pd.DataFrame) -> str:
    modes = [m for m in ("weak", "strong") if (cells["scaling"] == m).any()]
    if not modes:
        return "Runs (no scaling mode: speedup relative to the smallest size)"
    return " and ".join(modes).capitalize() + " scaling"


def efficiency_section(cells: pd.DataFrame) -> Section | None:
    scaled = figures.scaled_groups(cells)
    if scaled.empty:
        return None
    text = [
        "Strong scaling is judged on time: efficiency = T₁ / (N·T_N). Weak scaling is judged on "
        "throughput: efficiency = X_N / (N·X₁), with N the scale relative to the baseline. "
        "Communication overhead = 1/efficiency − 1 = (N·T_N − T₁)/T₁ (an overhead of 8.70 % "
        "goes with an efficiency of 0.92)."
    ]
    return Section(
        "efficiency",
        "Scaling efficiency and communication overhead",
        text,
        [
            Table(
                "overhead",
                "Communication overhead and efficiency per strategy",
                tables.overhead_table(scaled),
            )
        ],
        _plot("efficiency", "Scaling efficiency per strategy", figures.efficiency(scaled)),
    )


def overlap_section(cells: pd.DataFrame) -> Section | None:
    timed = cells[cells["comm_s"].notna()]
    if timed.empty:
        return None
    text = [
        "From the Horovod timeline, per epoch: Computation = T − C (epoch time minus overall "
        "communication), Only communication = C − wait for data − wait for other tensor data, "
        "Overlap % = the two waits / T. The three percentages add up to 100. CPU timelines "
        "record no waits, so there Only communication = C.",
    ]
    if "exact_compute_s" in timed.columns and timed["exact_compute_s"].notna().any():
        text.append(
            "The exact columns sweep the job's own step spans against the timeline's "
            "communication intervals: compute outside communication, their overlap, and "
            "communication outside compute (exposed)."
        )
    return Section(
        "overlap",
        "Compute / communication overlap",
        text,
        [
            Table(
                "overlap",
                "Compute and communication per epoch (s, %)",
                with_setting(
                    tables.overlap_table(timed),
                    timed,
                    OVERLAP_MATCH,
                    ["model", "scaling", "axis_value", "batch_per_rank"],
                ),
            )
        ],
        _plot(
            "overlap",
            "Compute, overlap and communication per run",
            figures.overlap_bars(timed),
            "Each bar is one matrix cell's epoch, split into computation only, overlap and "
            "communication only.",
        ),
    )


def fusion_section(cells: pd.DataFrame) -> Section | None:
    rows = swept(cells, ["fusion_threshold_mb", "cycle_time_ms"])
    if rows.empty:
        return None
    text = ["Horovod tensor fusion: HOROVOD_CYCLE_TIME (ms) x HOROVOD_FUSION_THRESHOLD (MB)."]
    return Section(
        "fusion",
        "Tensor fusion: cycle time x fusion buffer",
        text,
        [
            Table(
                "fusion",
                "Cycle time x fusion buffer",
                with_setting(
                    tables.fusion_table(rows),
                    rows,
                    {
                        **OVERLAP_MATCH,
                        "Cycle time (ms)": "cycle_time_ms",
                        "Fusion buffer (MB)": "fusion_threshold_mb",
                    },
                    ["fusion_threshold_mb", "cycle_time_ms"],
                ),
            )
        ],
        _plot("fusion", "Fusion heat map", figures.fusion_heatmap(rows)),
    )


def precision_section(cells: pd.DataFrame) -> Section | None:
    rows = swept(cells, ["fp16_allreduce", "mixed_precision"])
    if rows.empty:
        return None
    return Section(
        "precision",
        "FP16 compression and mixed precision",
        ["FP16 = Horovod fp16 compression of the gradients; MP = Keras mixed precision."],
        [
            Table(
                "precision",
                "FP16 all-reduce / mixed precision",
                with_setting(
                    tables.precision_table(rows),
                    rows,
                    OVERLAP_MATCH,
                    ["fp16_allreduce", "mixed_precision"],
                ),
            )
        ],
    )


def hierarchical_section(cells: pd.DataFrame) -> Section | None:
    rows = swept(cells, ["hierarchical_allreduce"], free=["fusion_threshold_mb"])
    rows = swept(rows, ["hierarchical_allreduce", "fusion_threshold_mb"]) if len(rows) else rows
    if rows.empty:
        return None
    return Section(
        "hierarchical",
        "Hierarchical all-reduce",
        ["HOROVOD_HIERARCHICAL_ALLREDUCE=1 reduces within a node first, then across nodes."],
        [
            Table(
                "hierarchical",
                "Hierarchical all-reduce",
                with_setting(
                    tables.hierarchical_table(rows),
                    rows,
                    {**OVERLAP_MATCH, "Fusion buffer (MB)": "fusion_threshold_mb"},
                    ["hierarchical_allreduce", "fusion_threshold_mb"],
                ),
            )
        ],
    )


def batch_section(cells: pd.DataFrame) -> Section | None:
    rows = swept(cells, ["batch_per_rank", "global_batch"])
    if rows.empty:
        return None
    return Section(
        "batch",
        "Batch size",
        ["Throughput against the per-rank batch size, CPU and GPU."],
        [
            Table(
                "batch",
                "Batch-size sweep",
                with_setting(
                    tables.batch_sweep_table(rows),
                    rows,
                    {
                        "Model": "model",
                        "Batch size": "batch_per_rank",
                        "Epoch time (s)": "epoch_time_s",
                    },
                    ["model", "device", "batch_per_rank"],
                ),
            )
        ],
        _plot("batch", "Batch-size curves", figures.batch_curves(rows)),
    )


def layout_section(cells: pd.DataFrame) -> Section | None:
    cpu = cells[cells["device"] == "cpu"]
    free = ["ranks", "gpus", "batch_per_rank", "global_batch"]
    rows = swept(cpu, ["tasks_per_node", "threads_per_task"], free=free)
    rows = swept(rows, ["threads_per_task"], free=[*free, "tasks_per_node"]) if len(rows) else rows
    if rows.empty:
        return None
    return Section(
        "layouts",
        "CPU layouts",
        ["Ranks per node x threads per rank on the same nodes (e.g. 1x28, 2x14, 4x7)."],
        [Table("layouts", "CPU layouts", tables.layout_table(rows))],
    )


def choose_loss(losses: pd.Series) -> str | None:
    """'loss' when recorded, else the first name in alphabetical order (GANs: d_loss)."""
    names: set[str] = set()
    for value in losses:
        if isinstance(value, Mapping):
            names |= {k for k, v in value.items() if v is not None and len(v)}
        elif isinstance(value, list | tuple | np.ndarray) and len(value):
            first = value[0]
            names |= set(first) if isinstance(first, Mapping) else {"loss"}
    if not names:
        return None
    return "loss" if "loss" in names else sorted(names)[0]


def common_target(losses: pd.Series, key: str) -> float | None:
    """The worst run's best value: the lowest loss every run reaches."""
    bests = []
    for value in losses:
        try:
            series = loss_series(value, key)
        except (FrameError, KeyError):
            continue
        if series.size and np.isfinite(series).any():
            bests.append(float(np.nanmin(series)))
    return max(bests) if bests else None


def target_section(runs: pd.DataFrame, notes: list[str]) -> Section | None:
    runs = normalise(runs)
    key = choose_loss(runs["losses"])
    target = common_target(runs["losses"], key) if key else None
    per_run = targets(runs, target_loss=target, loss_key=key if target is not None else None)
    found = [c for c in ("time_to_target_s", "time_to_plateau_s") if c in per_run.columns]
    if not found or not per_run[found].notna().any().any():
        notes.append("time to target: no per-epoch losses or validation accuracies recorded")
        return None
    text = []
    if target is not None:
        text.append(
            f"Target: {key} ≤ {target:.4g}, the worst run's best {key}, so every run reaches "
            "it; the time is the wall time of the epochs up to the first one at or below it."
        )
    if per_run["time_to_plateau_s"].notna().any():
        text.append(
            "Plateau: the first epoch opening 3 epochs all within 0.01 of the run's best "
            "validation accuracy."
        )
    return Section(
        "targets",
        "Time to target",
        text,
        [
            Table(
                "time_to_target",
                "Time to target (median over repeats)",
                tables.time_to_target_table(per_run),
            )
        ],
        _plot(
            "time_to_target",
            "Time to target against ranks",
            figures.time_to_target(per_run, key or "loss", target),
        ),
    )


def predict_at(cells: pd.DataFrame) -> list[float]:
    """16 and 32 (what users ask for) plus 2x and 4x the largest size measured."""
    top = float(cells["axis_value"].max())
    return sorted({float(v) for v in (*PREDICT_AT, 2 * top, 4 * top) if v > top})


def extrapolation_section(
    runs: pd.DataFrame, cells: pd.DataFrame, notes: list[str]
) -> Section | None:
    if cells.empty:
        return None
    axis = str(cells["axis"].iloc[0])
    at = predict_at(cells)
    points = extrapolate(runs, axis=axis, at=at)
    cost = comm_cost(runs, axis=axis, at=at)
    if points.empty and cost.empty:
        notes.append("extrapolation: no weak/strong group measured at two sizes or more")
        return None
    text = ["Predictions, not measurements."]
    if not points.empty:
        text[0] += (
            " Strong scaling: Amdahl's law T(N) = T₁·(s + (1 − s)/N) fitted to every run's "
            "epoch time; weak scaling: Gustafson's law on throughput. The band is the prediction "
            "interval of a new measurement; with only two sizes the fit is exact and has no "
            "interval."
        )
    tabs = []
    plots: list[Plot] = []
    odd = (
        points[(points["serial_fraction"] < 0) | (points["serial_fraction"] > 1)]
        if len(points)
        else points
    )
    if not odd.empty:
        text.append(
            "Warning: for some groups the fitted serial fraction lies outside 0..1 (e.g. "
            f"{odd['serial_fraction'].iloc[0]:.3g}): the measurements scale super-linearly or slow "
            "down with scale, which neither law describes, so their predictions are not meaningful."
        )
    if not points.empty:
        tabs.append(
            Table("predictions", "Extrapolated (prediction)", tables.predictions_table(points))
        )
        lo = float(cells["axis_value"].min())
        dense = np.unique(np.concatenate([np.geomspace(lo, max(at), 48), at]))
        curve = extrapolate(runs, axis=axis, at=dense)
        plots = _plot(
            "extrapolation",
            "Extrapolation (prediction)",
            figures.extrapolation(cells, curve, points),
            "Filled markers: measured; dashed: fitted law; open markers and band: predictions.",
        )
    if not cost.empty:
        text.append(
            "Communication cost model: per step, a ring all-reduce sends 2M(P−1)/P bytes per "
            "process and a parameter server moves 2M(P−1) bytes through its link (M = model "
            "bytes from the parameter count); times use the bus bandwidth measured from the "
            "timeline (the largest measured size's bandwidth beyond it)."
        )
        tabs.append(
            Table("comm_cost", "Ring all-reduce vs parameter server", tables.comm_cost_table(cost))
        )
    return Section("extrapolation", "Extrapolation (predictions)", text, tabs, plots)


def references_section(results: Sequence[Any]) -> Section:
    failed = sum(not r.passed for r in results)
    text = [
        f"{len(results) - failed} of {len(results)} check(s) passed. Tolerances are fractions "
        "of the reference value: allowed = value + lower·|value| .. value + upper·|value|."
    ]
    return Section(
        "references",
        "References",
        text,
        [Table("references", "Reference checks", tables.references_table(results))],
    )
