"""Labels follow the unit: when a command workload's scaling metric is not images/s (its
`throughput:` in samples/s or tokens/s, or its `time:`), every table header, figure axis and
caption that says "Images/s" (or "Epoch time") says the metric's name and unit instead.

The analysis tables and figures keep their usual names (they are shared with the bundled
programs, and other sections are built on them); the report relabels what they produced, once,
from the `ScalingMetric` that travels in `TableContext`, so no table or figure function needs
to know which kind of workload produced its rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from hpcscale.analysis.context import TableContext
from hpcscale.model.scaling_metric import COLUMN_OF_KIND, HEADING_OF_KIND, THROUGHPUT, ScalingMetric
from hpcscale.model.vocab import term
from hpcscale.report.model import Section, Table

if TYPE_CHECKING:  # a figure (or a reused one: figures.reuse) is only relabelled
    from matplotlib.figure import Figure

# What the scaling sections say of the bundled programs' throughput.
IMAGES_TEXT = "Images/s is the global throughput"


def _pairs(metric: ScalingMetric) -> list[tuple[str, str]]:
    """(usual text, the metric's) in the order to replace them (longest first)."""
    col = COLUMN_OF_KIND[metric.kind]  # the copy the collector still makes (#30: going)
    if metric.kind == THROUGHPUT:
        return [
            (term(col).heading, metric.heading),  # figures: "Throughput (images/s)"
            (HEADING_OF_KIND[THROUGHPUT], metric.heading),
        ]
    return [
        (term(col).heading, _time_heading(metric)),  # "Epoch time (s)"
        (HEADING_OF_KIND[metric.kind], metric.name),
    ]


def _time_heading(metric: ScalingMetric) -> str:
    """A `time:` metric in the unit its extractor declares (copied, never converted)."""
    return f"{metric.name} ({metric.unit or 's'})"


def relabel_text(text: str, metric: ScalingMetric) -> str:
    for old, new in _pairs(metric):
        text = text.replace(old, new)
    return text


def relabel_frame(frame: pd.DataFrame, metric: ScalingMetric) -> pd.DataFrame:
    """Headers naming the usual figure renamed; a `Metric` column's values (predictions,
    differences) too, with the `Unit` beside them."""
    if metric.usual:
        return frame
    out = frame.rename(
        columns={c: relabel_text(c, metric) for c in frame.columns if isinstance(c, str)}
    )
    if "Metric" in out.columns:
        said = out["Metric"].astype(object)
        mine = said.isin(
            [metric.column, COLUMN_OF_KIND[metric.kind], *(old for old, _ in _pairs(metric))]
        )
        if mine.any():
            out = out.copy()
            out["Metric"] = said.where(
                ~mine, metric.name if "Unit" in out.columns else metric.heading
            )
            if "Unit" in out.columns:
                out["Unit"] = out["Unit"].where(~mine, metric.unit or "s")
    return out


def relabel_figure(fig: Figure, metric: ScalingMetric) -> Figure:
    """Axis labels and titles of a drawn figure renamed (the figure functions draw images/s)."""
    if metric.usual:
        return fig
    for ax in fig.axes:
        ax.set_ylabel(relabel_text(ax.get_ylabel(), metric))
        ax.set_xlabel(relabel_text(ax.get_xlabel(), metric))
        ax.set_title(relabel_text(ax.get_title(), metric))
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        for text in legend.get_texts() if legend is not None else []:
            text.set_text(relabel_text(text.get_text(), metric))
    return fig


def relabel_section(section: Section, metric: ScalingMetric) -> Section:
    """One section with its tables, plots and text relabelled; the scaling section says what
    the throughput column holds instead of "images per epoch / epoch time" (a command's
    images/s too: it is what the program printed, not hpcscale's division)."""
    if metric.usual and not metric.command:
        return section
    text = [
        _says(metric) if p.startswith(IMAGES_TEXT) else relabel_text(p, metric)
        for p in section.text
    ]
    tables = [
        Table(
            t.key,
            relabel_text(t.title, metric),
            relabel_frame(t.frame, metric),
            relabel_text(t.note, metric),
        )
        for t in section.tables
    ]
    plots = [
        replace(
            p,
            title=relabel_text(p.title, metric),
            figure=relabel_figure(p.figure, metric),
            caption=relabel_text(p.caption, metric),
        )
        for p in section.plots
    ]
    return replace(section, text=text, tables=tables, plots=plots)


def _says(metric: ScalingMetric) -> str:
    if metric.kind == THROUGHPUT:
        return (
            f"{metric.heading} is your program's own throughput, the metric `{metric.name}` "
            "(`workload.throughput`) as its extractors read it; speedup and efficiency are "
            "computed on it."
        )
    return (
        f"{_time_heading(metric)} is your program's own time, the metric `{metric.name}` "
        "(`workload.time`) as its extractors read it; strong-scaling speedup is T_b / T_N on it."
    )


def shared_metric(ctxs: Mapping[str, TableContext]) -> tuple[ScalingMetric, str]:
    """The scaling metric every campaign's tables hold (labels follow its unit), and a warning
    when they hold different ones (then labelled as the usual columns)."""
    metrics = {n: ctx.metric for n, ctx in ctxs.items()}
    if len(set(metrics.values())) == 1:
        return next(iter(metrics.values())), ""
    said = "; ".join(f"{n}: {m.heading}" for n, m in metrics.items())
    return ScalingMetric(), (
        f"The campaigns' scaling metrics differ ({said}): the column that holds each one is "
        "not the same quantity across them, so its differences are left out (not comparable)."
    )


def unlike_metrics(
    diffs: pd.DataFrame, ctxs: Mapping[str, TableContext], baseline: str
) -> pd.DataFrame:
    """Differences between a column that holds one campaign's own figure and the same column of
    another that holds another figure (samples/s against images/s, a `time:` metric against an
    epoch time): marked not comparable, so no change is a verdict or a regression."""
    if diffs.empty:
        return diffs
    base = ctxs[baseline].metric
    out = diffs.copy()
    for name, ctx in ctxs.items():
        if name == baseline or ctx.metric == base:
            continue
        cols = {COLUMN_OF_KIND[m.kind] for m in (base, ctx.metric) if not m.usual}
        hit = (out["campaign"] == name) & out["metric"].isin(cols)
        why = f"not comparable ({baseline}: {base.heading}, {name}: {ctx.metric.heading})"
        out.loc[hit, "noise"] = why
        out.loc[hit, "change"] = float("nan")  # no change between two different quantities
        out.loc[hit, "better"] = None
        out.loc[hit, "regressed"] = False
    return out


def relabel_each(section: Section, ctxs: Mapping[str, TableContext]) -> Section:
    """Columns headed `<campaign>: <usual heading>` relabelled by that campaign's own metric
    (when the campaigns' metrics differ, each side-by-side column says what it holds)."""
    tables = []
    for t in section.tables:
        names = {}
        for c in t.frame.columns:
            camp, sep, rest = str(c).partition(": ")
            if sep and camp in ctxs and not ctxs[camp].metric.usual:
                names[c] = f"{camp}: {relabel_text(rest, ctxs[camp].metric)}"
        tables.append(replace(t, frame=t.frame.rename(columns=names)) if names else t)
    return replace(section, tables=tables)


def metrics_heading(metrics: Mapping[str, ScalingMetric], shared: ScalingMetric) -> str:
    """The scaling metric's heading, or each campaign's when they differ."""
    if len(set(metrics.values())) > 1:
        return f"Scaling metric ({', '.join(f'{n}: {m.heading}' for n, m in metrics.items())})"
    return shared.heading
