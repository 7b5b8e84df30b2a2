"""The scaling sections: throughput per cell, efficiency and overhead per strategy, and the
fitted laws' predictions beyond the largest size measured."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcscale.analysis import tables
from hpcscale.analysis.extrapolate import comm_cost, extrapolate, predict_at
from hpcscale.analysis.sweeps import scaled_groups
from hpcscale.report import figures
from hpcscale.report.labels import with_setting
from hpcscale.report.model import Plot, Section, Table, plot_if

AXIS_NAMES = {"nodes": "nodes", "ranks": "ranks", "gpus": "GPUs"}


def scaling_section(cells: pd.DataFrame) -> Section | None:
    if cells.empty:
        return None
    runs = int(cells["repeats"].sum())
    axis = AXIS_NAMES.get(str(cells["axis"].iloc[0]))
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
        plot_if(
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
    scaled = scaled_groups(cells)
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
        plot_if("efficiency", "Scaling efficiency per strategy", figures.efficiency(scaled)),
    )


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
        plots = plot_if(
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
