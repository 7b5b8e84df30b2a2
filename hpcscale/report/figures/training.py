"""Learning curves per epoch (Nelson's accuracy plots, the GANs' losses), one line per scale,
and epochs to the validation-accuracy plateau against GPUs or ranks (Nelson's last figure).

Gaps stay gaps: an epoch with no finite value is NaN in `analysis.curves`, and matplotlib
breaks the line there (markers keep an isolated epoch visible)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcscale.analysis.targets import target_lines
from hpcscale.report import labels as lbl
from hpcscale.report.figures.fold import fold_groups, with_note
from hpcscale.report.figures.style import (
    WIDTH,
    axes_grid,
    axis_title,
    colour,
    legend_below,
    line,
    log2_x,
    new_figure,
    spread,
    styled,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Panel title -> [(metric, line style, what the style means)]; panels without data are skipped.
CLASSIFIER_PANELS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Loss", (("train_loss", "-", "training"), ("loss", "-", "training"),
              ("val_loss", "--", "validation"))),
    ("Training accuracy", (("train_accuracy", "-", ""),)),
    ("Validation accuracy", (("val_accuracy", "-", ""),)),
)  # fmt: skip

ACCURACY_TITLES = {"Training accuracy", "Validation accuracy"}
LOSS_TITLES = {
    "d_loss": "Discriminator loss (d_loss)",
    "g_loss": "Generator loss (g_loss)",
    "kl_loss": "KL term (kl_loss)",
}
PER_ROW = 3
AXIS_WORDS = {"gpus": "GPU count", "ranks": "rank count"}


def scale_axis(cells: pd.DataFrame) -> str:
    """GPUs when every cell ran on GPUs, else ranks (Nelson counts GPUs)."""
    gpu = (cells["device"] == "gpu").all() and (cells["gpus"] > 0).all()
    return "gpus" if gpu else "ranks"


def scale_label(row: Mapping[str, Any], axis: str, with_nodes: bool = False) -> str:
    return _scale_text(row[axis], row["nodes"] if with_nodes else None, axis)


def scale_labels(cells: pd.DataFrame) -> dict[int, str]:
    """A label per cell id naming its scale (nodes too when the scale alone is ambiguous)."""
    axis = scale_axis(cells)
    with_nodes = bool(cells[[axis]].duplicated().any())
    return {
        int(cid): _scale_text(n, nodes if with_nodes else None, axis)
        for cid, n, nodes in zip(cells["cell"], cells[axis], cells["nodes"], strict=True)
    }


def _scale_text(n: Any, nodes: Any, axis: str) -> str:
    """ "2 ranks", or "2 ranks, 1 node" when `nodes` is given."""
    n = int(n)
    what = "GPU" if axis == "gpus" else "rank"
    text = f"{n} {what}{'s' * (n != 1)}"
    if nodes is not None:
        text += f", {int(nodes)} node{'s' * (int(nodes) != 1)}"
    return text


def panels(curves: pd.DataFrame) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The panels a group's curves fill: the classifier's three, then one per other loss."""
    have = set(curves["metric"])
    out = []
    for title, specs in CLASSIFIER_PANELS:
        found = [s for s in specs if s[0] in have]
        if found:
            out.append((title, found))
    known = {m for _, specs in CLASSIFIER_PANELS for m, _, _ in specs}
    out += [(LOSS_TITLES.get(name, name), [(name, "-", "")]) for name in sorted(have - known)]
    return out


@styled
def learning_curves(cells: pd.DataFrame, curves: pd.DataFrame) -> Figure | None:
    """Per-epoch curves of one line group (cells differing only in scale): a panel per metric,
    one colour per scale (the median over its repeats), training solid and validation dashed;
    one legend, under the first panel. Every line is labelled with its scale."""
    if curves.empty or not curves["value"].notna().any():
        return None
    cells = cells.sort_values(["gpus", "ranks", "nodes", "cell"], kind="stable")
    names = scale_labels(cells)
    colours = {cid: colour(i) for i, cid in enumerate(cells["cell"])}
    spec = panels(curves)
    ncols = min(PER_ROW, len(spec))
    nrows = math.ceil(len(spec) / ncols)
    fig = new_figure(2.9 * nrows + 0.3 * len(names), WIDTH if ncols > 1 else WIDTH * 0.6)
    axes = axes_grid(fig, nrows, ncols)
    epochs = sorted(curves["epoch"].unique())
    for ax, (title, metrics) in zip(axes, spec, strict=False):
        for cid in cells["cell"]:
            for metric, style, _ in metrics:
                sub = curves[(curves["cell"] == cid) & (curves["metric"] == metric)]
                if sub.empty:
                    continue
                sub = sub.sort_values("epoch")
                ax.plot(
                    sub["epoch"],
                    sub["value"],
                    ls=style,
                    marker="o",
                    ms=3,
                    color=colours[cid],
                    label=names[cid] if style == "-" else None,
                )
        styles = {(s, what) for _, s, what in metrics if what}
        for s, what in sorted(styles):
            ax.plot([], [], ls=s, color="0.35", label=what)
        ax.set_title(title)
        ax.set_xlabel("Epoch")
        ax.set_xticks(epochs if len(epochs) <= 12 else epochs[:: math.ceil(len(epochs) / 12)])
        ax.set_ylabel("Accuracy" if title in ACCURACY_TITLES else "Loss")
        if title in ACCURACY_TITLES:
            ax.set_ylim(-0.02, 1.02)
    legend_below(axes[0])  # the scales' colours are the same in every panel
    for ax in axes[len(spec) :]:
        ax.set_visible(False)
    return fig


@styled
def epochs_to_plateau(cells: pd.DataFrame) -> Figure | None:
    """Epochs to the validation-accuracy plateau (`targets.fold_targets` cells: median over
    repeats, min-max bars) against GPUs (ranks on CPUs), one line per `targets.target_lines`
    group. Cells that never reached a plateau are not drawn (the caption names them). Past
    MAX_LINES lines the earliest and the latest are drawn, the rest folded into a band."""
    if cells.empty or "plateau_epoch" not in cells or not cells["plateau_epoch"].notna().any():
        return None
    axis = scale_axis(cells)
    every = cells.assign(group=target_lines(cells).to_numpy())
    reached = every[every.groupby("group")["plateau_epoch"].transform("count").to_numpy() > 0]
    cells, folded = fold_groups(
        reached, "plateau_epoch", False, x=axis, unit="lines", x_name=AXIS_WORDS[axis]
    )
    names = lbl.group_labels(cells)
    fig = new_figure(3.6 + 0.25 * len(names), WIDTH * 0.75)
    (ax,) = axes_grid(fig)
    for i, (gid, g) in enumerate(cells.groupby("group", sort=True)):
        g = g[g["plateau_epoch"].notna()].sort_values(axis, kind="stable")
        if g.empty:
            continue
        yerr = spread(g, "plateau_epoch")
        line(ax, g[axis], g["plateau_epoch"], yerr, marker="o", color=colour(i), label=names[gid])
    if folded is not None:  # past MAX_LINES: the extremes drawn, the rest a band
        folded.band(ax, "plateau_epoch", x=axis)
        with_note(fig, folded.note())
    log2_x(ax, every[axis])
    ax.set_ylim(bottom=0)
    ax.set_title("Epochs to a stable validation accuracy")
    ax.set_xlabel(axis_title(axis))
    ax.set_ylabel("Plateau epoch")
    legend_below(ax)
    return fig
