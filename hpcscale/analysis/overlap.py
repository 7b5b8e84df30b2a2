"""Seed 001's compute / communication split, kept so users can compare with published tables.

With epoch time T, overall communication C and the two Horovod waits (all per epoch, s):
    Computation            = T - C
    Only communication     = C - wait_for_data - wait_for_other_tensor_data
    Only computation %     = Computation / T
    Overlap %              = (wait_for_data + wait_for_other_tensor_data) / T
    Only communication %   = Only communication / T
The three percentages always add up to 100. CPU timelines have no waits, so there Only
communication = C. The exact view (step spans swept against the timeline) comes from the collector
as exact_* columns and is only carried along here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

OVERLAP_COLUMNS: tuple[str, ...] = (
    "compute_s",
    "only_comm_s",
    "only_compute_pct",
    "overlap_pct",
    "only_comm_pct",
)


@dataclass(frozen=True)
class Split:
    """Arrays (or scalars) of the seed's five derived quantities; percentages in 0..100."""

    compute_s: np.ndarray
    only_comm_s: np.ndarray
    only_compute_pct: np.ndarray
    overlap_pct: np.ndarray
    only_comm_pct: np.ndarray


def split(
    epoch_time_s: npt.ArrayLike,
    comm_s: npt.ArrayLike,
    wait_for_data_s: npt.ArrayLike = 0.0,
    wait_for_other_s: npt.ArrayLike = 0.0,
) -> Split:
    """The seed's arithmetic; missing waits (NaN) count as zero, as on CPU timelines."""
    t = np.asarray(epoch_time_s, dtype=float)
    c = np.asarray(comm_s, dtype=float)
    waits = np.nan_to_num(np.asarray(wait_for_data_s, dtype=float)) + np.nan_to_num(
        np.asarray(wait_for_other_s, dtype=float)
    )
    compute = t - c
    only_comm = c - waits
    with np.errstate(divide="ignore", invalid="ignore"):
        return Split(
            compute_s=compute,
            only_comm_s=only_comm,
            only_compute_pct=100.0 * compute / t,
            overlap_pct=np.where(np.isnan(c), np.nan, 100.0 * waits / t),
            only_comm_pct=100.0 * only_comm / t,
        )


def with_overlap(df: pd.DataFrame) -> pd.DataFrame:
    """Add OVERLAP_COLUMNS; rows without a timeline (comm_s NaN) get NaN throughout."""
    out = df.copy()
    parts = split(
        out["epoch_time_s"],
        out["comm_s"],
        out["wait_for_data_s"],
        out["wait_for_other_tensor_data_s"],
    )
    for name in OVERLAP_COLUMNS:
        out[name] = getattr(parts, name)
    return out
