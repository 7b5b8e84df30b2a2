"""`hpcscale compare`'s figure: each metric against the shared axis, the campaigns overlaid."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from hpcscale.analysis import compare as cmp
from hpcscale.analysis.intervals import method_of, short_label
from hpcscale.model.scaling_metric import ScalingMetric
from hpcscale.report.figures.fold import MAX_LINES, Folded, fold_groups, with_note
from hpcscale.report.figures.style import (
    WIDTH,
    axes_grid,
    axis_title,
    bars_entry,
    colour,
    interval_bounds,
    line,
    log2_x,
    new_figure,
    styled,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEADINGS: dict[str, str] = {
    "images_per_s": "Images/s",
    "speedup": "Speedup",
    "efficiency": "Efficiency",
    "epoch_time_s": "Epoch time (s)",
}
LINESTYLES = ("-", "--", ":", "-.")


def headings(metrics: Iterable[ScalingMetric] = ()) -> dict[str, str]:
    """HEADINGS with each campaign's own throughput and time headed by its scaling metric."""
    out = dict(HEADINGS)
    for m in metrics:
        out.setdefault(m.throughput_column, m.throughput_heading)
        out.setdefault(m.time_column, m.time_heading)
    return out


MARKERS = ("o", "s", "^", "D", "v")


@styled
def overlay(
    aligned: pd.DataFrame,
    names: Sequence[str],
    axis: str,
    keys: Sequence[str],
    measures: Mapping[str, bool] = cmp.HIGHER_IS_BETTER,
    heads: Mapping[str, str] = HEADINGS,
) -> Figure | None:
    """Each metric against the axis, one colour per campaign (one line style per knob
    combination matched), so the curves lie on top of each other. Past the lines a reader
    tells apart (MAX_LINES in all, one line style per combination) the knob combinations with
    the best and the worst first metric in the first campaign are drawn, the note says so.
    `measures` (analysis.compare.measures) are the columns drawn, headed by `heads`."""
    shown = [m for m in measures if m in aligned.columns and aligned[m].notna().any()]
    if not shown:
        return None
    found = cmp.combos(aligned, keys)  # once: per combination it made the overlay quadratic
    code = {c: i for i, c in enumerate(dict.fromkeys(found))}
    aligned = aligned.assign(_combo=[code[c] for c in found])
    chosen, folded = _combos_drawn(aligned, names, shown[0], measures[shown[0]], heads)
    combos = [c for c in code if code[c] in chosen]
    lines = dict(iter(aligned.groupby(["campaign", "_combo"], sort=False)))
    fig = new_figure(3.2 * math.ceil(len(shown) / 2) + 0.3 * len(names) * len(combos), WIDTH)
    axes = axes_grid(fig, math.ceil(len(shown) / 2), 2 if len(shown) > 1 else 1)
    for ax, m in zip(axes, shown, strict=False):
        for i, n in enumerate(names):
            for j, combo in enumerate(combos):
                # NaN rows stay in: a missing cell breaks the line instead of being bridged
                sel = lines.get((n, code[combo]))
                if sel is None or not sel[m].notna().any():
                    continue
                sel = sel.sort_values("axis_value")
                what = ", ".join(
                    f"{k}={cmp.fmt_value(cmp.plain(v))}" for k, v in zip(keys, combo, strict=True)
                )
                line(
                    ax,
                    sel["axis_value"].to_numpy(float),
                    sel[m].to_numpy(float),
                    None,
                    interval_bounds(sel, m),
                    color=colour(i),
                    ls=LINESTYLES[j % len(LINESTYLES)],
                    marker=MARKERS[i % len(MARKERS)],
                    label=f"{n}: {what}" if what else n,
                )
        log2_x(ax, aligned["axis_value"].dropna())
        ax.set_xlabel(axis_title(axis))
        ax.set_ylabel(heads[m])
        ax.set_title(heads[m])
        ax.set_ylim(bottom=0)  # every metric is >= 0: a cut axis would magnify a 2 % gap
    if folded is not None:
        with_note(fig, folded.note(band=False, where=ALIGNED_TABLE))
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    handles, texts = axes[0].get_legend_handles_labels()
    for method in dict.fromkeys(method_of(m) for m in shown):  # what the error bars are
        ms = [m for m in shown if method_of(m) == method]
        said = short_label(aligned, ms[0])
        if said:
            handles.append(bars_entry(""))
            texts.append(f"{' and '.join(heads[m] for m in ms)} error bars: {said}")
    fig.legend(handles, texts, loc="outside lower center", ncols=min(3, len(texts)), frameon=False)
    return fig


ALIGNED_TABLE = "every one is in the table of aligned cells (Campaigns side by side)"


def _combos_drawn(
    aligned: pd.DataFrame,
    names: Sequence[str],
    metric: str,
    higher: bool = True,
    heads: Mapping[str, str] = HEADINGS,
) -> tuple[set[int], Folded | None]:
    """The knob combinations (`_combo` codes) the overlay draws: all when campaigns x
    combinations fit MAX_LINES (and the line styles), else as many as fit, the best and the
    worst by `metric` at their largest size in the first campaign (`fold.fold_groups`)."""
    fit = max(1, min(len(LINESTYLES), MAX_LINES // max(1, len(names))))
    first = aligned[aligned["campaign"] == names[0]]
    name = heads[metric]  # "Images/s", or a command's own metric, as the tables head it
    _, folded = fold_groups(
        first, metric, higher, fit, key="_combo", unit="knob combinations", score_name=name
    )
    if folded is None:
        return set(aligned["_combo"]), None
    folded = replace(folded, rule=f"{folded.rule}, in {names[0]}")
    return set(first["_combo"]) - set(folded.rows["_combo"]), folded
