"""The GANs' sample grids (Ahmad & Cai and Murthy showed them by hand): the last grid of each
run, and for StackGAN Stage-II its Stage-I grid of the same epoch beside it.

Unlike every other figure module this one reads files: `read_grids` decodes the PNGs the jobs
wrote (`read_png`: as matplotlib.image.imread reads them) so the sections stay free of disk
access and the report shows what is on disk now. A file that is gone or does not decode is
returned as a problem, for the report's notes, never dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hpcscale.report.figures.style import WIDTH, new_figure, styled

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EPOCH_GRID = re.compile(r"(?:^|/)epoch_(\d+)(_stage1)?\.png$")
PANEL_IN = 2.2  # inches per grid panel
PER_ROW = 4  # panels per row
MIN_HEIGHT_IN = 2.4  # wide grids still print at a readable height


@dataclass
class GridPanel:
    """One image of the figure: a run's last grid (or its Stage-I grid) and its title."""

    title: str
    path: Path
    image: np.ndarray | None = None


@dataclass
class LastGrids:
    """A run's last sample grid(s): `epoch` and its files (Stage-I first, relative to the run
    directory), or nothing when the run listed none."""

    epoch: int | None
    files: list[str] = field(default_factory=list)


def last_grids(grids: list[str] | None) -> LastGrids:
    """The grid files of the run's last epoch from the collector's `sample_grids` list: the
    epoch's grid, and for StackGAN Stage-II its `_stage1` grid first (drawn on the left)."""
    by_epoch: dict[int, list[tuple[bool, str]]] = {}
    for rel in grids or []:
        m = EPOCH_GRID.search(str(rel))
        if m:
            by_epoch.setdefault(int(m.group(1)), []).append((not m.group(2), str(rel)))
    if not by_epoch:
        return LastGrids(None)
    epoch = max(by_epoch)
    return LastGrids(epoch, [rel for _, rel in sorted(by_epoch[epoch])])


def read_grids(panels: list[GridPanel]) -> list[str]:
    """Decode each panel's PNG in place; the problems (file named, with the reason)."""
    problems = []
    for panel in panels:
        if not panel.path.is_file():
            problems.append(f"sample grid {panel.path} is missing")
            continue
        try:
            panel.image = read_png(panel.path)
        except (OSError, ValueError, SyntaxError) as exc:
            problems.append(f"sample grid {panel.path} is unreadable ({exc})")
    return problems


def read_png(path: Path) -> np.ndarray:
    """A PNG as 0-1 float32s, as `matplotlib.image.imread(path, format="png")` reads it (its
    `_pil_png_to_float_array`), through Pillow alone: importing matplotlib.image imports most
    of matplotlib, which a report whose figures are all reused does not need."""
    from PIL import PngImagePlugin

    with PngImagePlugin.PngImageFile(path) as png:
        mode, rawmode = png.mode, png.png.im_rawmode  # type: ignore[union-attr]
        if rawmode == "1":
            return np.asarray(png, np.float32)
        scale = {"L;2": 2**2 - 1, "L;4": 2**4 - 1, "L": 2**8 - 1, "I;16B": 2**16 - 1}
        if rawmode in scale:
            return np.divide(png, scale[rawmode], dtype=np.float32)
        if mode in ("RGB", "RGBA"):
            return np.divide(png, 2**8 - 1, dtype=np.float32)
        if mode in ("P", "LA"):
            return np.divide(png.convert("RGBA"), 2**8 - 1, dtype=np.float32)
        raise ValueError(f"Unknown PIL rawmode: {rawmode}")


@styled
def sample_grids(runs: list[list[GridPanel]], per_row: int = PER_ROW) -> Figure | None:
    """One entry per run, each its panels (Stage-I then Stage-II for StackGAN). Runs of one
    grid are packed `per_row` to a row; runs of two get a row each, Stage-I beside Stage-II,
    with a panel saying "missing" where a file did not decode. None when nothing decoded."""
    if not any(p.image is not None for run in runs for p in run):
        return None
    width = max(len(run) for run in runs)
    if width <= 1:
        rows = [[p] for run in runs for p in run if p.image is not None]
        flat = [p for row in rows for p in row]
        ncols = min(per_row, len(flat))
        rows = [flat[i : i + ncols] for i in range(0, len(flat), ncols)]
    else:
        rows = [run for run in runs if any(p.image is not None for p in run)]
        ncols = width
    width_in = min(WIDTH, PANEL_IN * ncols + 0.4)
    aspect = max(
        p.image.shape[0] / p.image.shape[1] for r in rows for p in r if p.image is not None
    )
    height_in = max(MIN_HEIGHT_IN, len(rows) * (width_in / ncols * aspect + 0.35) + 0.2)
    fig = new_figure(height_in, width_in)
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    for r, row in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            ax.set_axis_off()
            if c >= len(row):
                ax.set_visible(False)
                continue
            panel = row[c]
            ax.set_title(panel.title, fontsize=8)
            if panel.image is None:
                ax.text(0.5, 0.5, "missing", ha="center", va="center", transform=ax.transAxes)
            else:
                ax.imshow(panel.image, interpolation="nearest")
    return fig
