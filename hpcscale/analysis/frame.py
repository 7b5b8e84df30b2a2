"""The input contract: check a run frame and fill the optional columns, so every analysis
function can rely on the same columns and dtypes (and notebook users can pass small frames)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from hpcscale.analysis import (
    AXES,
    EXACT_COLUMNS,
    LIST_COLUMNS,
    METRIC_COLUMNS,
    TIMELINE_COLUMNS,
)
from hpcscale.analysis.memo import FrameMemo
from hpcscale.model import vocab
from hpcscale.model.errors import UsageError
from hpcscale.model.registry import DEFAULT_STRATEGY

REQUIRED: tuple[str, ...] = ("model", "scaling", "device", "nodes")
COMPLETED = "COMPLETED"  # hpcscale.state.states.RunState.COMPLETED: the one measured state
SCALINGS = frozenset(vocab.SCALINGS)
DEVICES = frozenset(vocab.DEVICES)
FLAG_KNOBS = tuple(k for k in vocab.KNOBS if vocab.term(k).type == "bool")
NUMBER_KNOBS = tuple(k for k in vocab.KNOBS if vocab.term(k).type == "float")
NUMERIC = (*METRIC_COLUMNS, *TIMELINE_COLUMNS, *EXACT_COLUMNS)
# Optional columns and the value a run without them has (None: unknown, the same for every row
# of a frame without the column). Every cell field (vocab.CELL_FIELDS) is here or derived.
_DEFAULTS: dict[str, Any] = {
    "campaign": "",
    "system": None,
    "program": "train",
    "tasks_per_node": 1,
    "replicas_per_task": 1,
    "launcher": None,
    "epochs": None,
    "timeline": None,
    "mark_cycles": False,
    "time_limit_min": None,
    "threads_per_task": 1,
    "strategy": DEFAULT_STRATEGY,
    "cross_device_ops": None,
    "mpi": "openmpi",
    "fusion_threshold_mb": np.nan,
    "cycle_time_ms": np.nan,
    "fp16_allreduce": False,
    "hierarchical_allreduce": False,
    "bucket_cap_mb": np.nan,
    "gradient_as_bucket_view": False,
    "static_graph": False,
    "fp16_compress": False,
    "mixed_precision": False,
    "repeat": 0,
    "command": None,
    "cwd": None,
    "interpreter": None,
}


class FrameError(UsageError):
    """The run table does not follow the contract (a missing column, an unknown scaling...)."""


def require(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Fail with every missing column named at once, not the first KeyError."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise FrameError(f"{what} needs column(s) {', '.join(missing)} in the run table")


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that are measurements: a run whose `state` is given and is not COMPLETED
    (FAILED, CANCELLED, TIMEOUT, still RUNNING, UNKNOWN, ...) is not one, whatever its output
    printed. The one filter every way in uses (the collector's table, `load_results`,
    `normalise` and so every analysis function); a frame without the column, or a row without
    a state (a notebook's own), is taken as it is."""
    if "state" not in df.columns:
        return df
    state = df["state"]
    keep = state.isna().to_numpy() | (state.astype(str) == COMPLETED).to_numpy()
    return df if keep.all() else df[keep].reset_index(drop=True)


_NORMALISED: FrameMemo[pd.DataFrame] = FrameMemo(lambda frame: frame.copy())


def normalise(df: pd.DataFrame) -> pd.DataFrame:
    """A copy that follows the contract (measured runs only, see `measured`): defaults for
    optional columns, numeric metrics, derived `ranks`, `gpus`, `batch_per_rank` and
    `global_batch`; raises FrameError on bad values. Computed once per unchanged frame (a
    report's sections each normalise the same run table: analysis.memo)."""
    return _NORMALISED.get(df, None, lambda: _normalise(df))


def _normalise(df: pd.DataFrame) -> pd.DataFrame:
    require(df, REQUIRED, "the analysis")
    out = measured(df).copy().reset_index(drop=True)
    for col, default in _DEFAULTS.items():
        if col not in out.columns:
            out[col] = [default] * len(out)
        elif default is not None:  # a column some rows left empty (rows from mixed sources)
            out[col] = out[col].astype(object).where(out[col].notna(), default)
    for col in FLAG_KNOBS:
        out[col] = out[col].astype(bool)
    if "run_id" not in out.columns:
        out["run_id"] = [f"row{i}" for i in range(len(out))]
    for col in ("nodes", "tasks_per_node", "threads_per_task", "repeat"):
        out[col] = _positive_int(out[col], col, allow_zero=col == "repeat")
    one_per_rank = pd.Series(np.where(out["device"] == "gpu", out["tasks_per_node"], 0))
    if "gpus_per_node" not in out.columns:
        out["gpus_per_node"] = one_per_rank
    out["gpus_per_node"] = out["gpus_per_node"].fillna(one_per_rank)
    out["gpus_per_node"] = _positive_int(out["gpus_per_node"], "gpus_per_node", allow_zero=True)
    if "ranks" not in out.columns:
        out["ranks"] = out["nodes"] * out["tasks_per_node"]
    out["ranks"] = out["ranks"].fillna(out["nodes"] * out["tasks_per_node"])
    out["ranks"] = _positive_int(out["ranks"], "ranks")
    out["gpus"] = out["nodes"] * out["gpus_per_node"]
    _fill_batches(out)
    for col in NUMERIC:
        out[col] = pd.to_numeric(out[col], errors="coerce") if col in out.columns else np.nan
        out[col] = out[col].astype(float)
    for col in NUMBER_KNOBS:
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    for col in LIST_COLUMNS:
        if col not in out.columns:
            out[col] = [None] * len(out)
    _check_values(out, "scaling", SCALINGS)
    _check_values(out, "device", DEVICES)
    return out


def default_axis(df: pd.DataFrame) -> str:
    """The axis that actually varies: nodes, else GPUs (one-node MirroredStrategy), else ranks."""
    for axis in AXES if "gpus" in df.columns else ("nodes", "ranks"):
        if axis in df.columns and df[axis].nunique() > 1:
            return axis
    return "nodes"


def check_axis(axis: str) -> str:
    if axis not in AXES:
        raise FrameError(f"unknown scaled axis {axis!r}; use one of {', '.join(AXES)}")
    return axis


def _fill_batches(out: pd.DataFrame) -> None:
    has_b, has_g = "batch_per_rank" in out.columns, "global_batch" in out.columns
    if not has_b and not has_g:
        raise FrameError("the run table needs batch_per_rank or global_batch")
    # MirroredStrategy runs one process over several GPUs: the replicas are the GPUs.
    replicas = np.where(
        (out["strategy"] == "mirrored") & (out["gpus"] > 0), out["gpus"], out["ranks"]
    )
    replicas = pd.Series(replicas, index=out.index)
    if not has_g:
        out["global_batch"] = np.nan
    if not has_b:
        out["batch_per_rank"] = np.nan
    out["global_batch"] = out["global_batch"].fillna(out["batch_per_rank"] * replicas)
    out["batch_per_rank"] = out["batch_per_rank"].fillna(out["global_batch"] // replicas)
    for col in ("batch_per_rank", "global_batch"):
        out[col] = _positive_int(out[col], col)


def _positive_int(col: pd.Series, name: str, allow_zero: bool = False) -> pd.Series:
    values = pd.to_numeric(col, errors="coerce")
    low = 0 if allow_zero else 1
    bad = values.isna() | (values < low) | (values != values.round())
    if bad.any():
        first = col[bad].iloc[0]
        kind = "a non-negative" if allow_zero else "a positive"
        raise FrameError(f"column {name} must hold {kind} integer, found {first!r}")
    return values.astype(np.int64)


def _check_values(out: pd.DataFrame, col: str, allowed: frozenset[str]) -> None:
    bad = sorted({str(v) for v in out[col] if v not in allowed})
    if bad:
        raise FrameError(
            f"column {col} holds {', '.join(map(repr, bad))}; allowed: {', '.join(sorted(allowed))}"
        )
