"""The results table on disk: its columns, how rows become a frame, how the frame is written
(`results.parquet`, `results.csv`) and read back (`load_results`).

Every row the collector makes is kept in the files, with its run's `state`; what is loaded for
analysis is the measured runs only (hpcscale.analysis.frame.measured), so no reader can take a
failed run's figures for a measurement. A row Parquet cannot store (an integer past 64 bits in
a damaged run.json) is found here, before the write, and its run named: one bad run never
stops the others' table.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcscale.analysis import (
    EXACT_COLUMNS,
    LIST_COLUMNS,
    METRIC_COLUMNS,
    RUN_COLUMNS,
    TIMELINE_COLUMNS,
)
from hpcscale.analysis.frame import measured
from hpcscale.collect.run_row import OWN_KNOBS
from hpcscale.formats.atomic import atomic_write
from hpcscale.model.errors import UsageError
from hpcscale.model.registry import framework_of
from hpcscale.model.scaling_metric import COLUMN_OF_KIND, KINDS, THROUGHPUT
from hpcscale.model.vocab import (
    CONTENTION_COLUMNS,
    QUALITY_COLUMNS,
    RUN_EXTRA_COLUMNS,
    RUN_TIME_COLUMNS,
    TRACE_EXTRA_COLUMNS,
    arg_columns,
)
from hpcscale.state.paths import campaign_dir, select_campaigns

RESULTS_PARQUET = "results.parquet"
RESULTS_CSV = "results.csv"
COLUMNS: tuple[str, ...] = (
    *RUN_COLUMNS,
    *METRIC_COLUMNS,
    *LIST_COLUMNS,
    *TIMELINE_COLUMNS,
    *RUN_TIME_COLUMNS,
    *EXACT_COLUMNS,
    *TRACE_EXTRA_COLUMNS,
    *QUALITY_COLUMNS,
    *RUN_EXTRA_COLUMNS,
    *CONTENTION_COLUMNS,
)
NAN = float("nan")
INT64 = (-(2**63), 2**63 - 1)


def unstorable(row: Mapping[str, Any]) -> str | None:
    """Why Parquet cannot store this row (an integer past 64 bits, anywhere in it), or None."""

    def bad(value: Any) -> bool:
        if isinstance(value, int) and not isinstance(value, bool):
            return not INT64[0] <= value <= INT64[1]
        if isinstance(value, Mapping):
            return any(bad(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(bad(v) for v in value)
        return False

    for key, value in row.items():
        if bad(value):
            return f"{key}: a value past a 64-bit integer ({str(value)[:40]}), not storable"
    return None


def frame_of(rows: list[dict[str, Any]]):  # -> pd.DataFrame
    """Rows as a DataFrame with the contract's columns first (missing ones as NaN/None), then
    the workload arguments (`args.<name>`, None where a run has no such argument)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    cols = [c for c in COLUMNS if c not in df.columns]
    if rows and all(r.get("command") for r in rows):  # a framework's knobs none of them set
        cols = [c for c in cols if c not in OWN_KNOBS]
    for c in cols:
        df[c] = None if c in LIST_COLUMNS else NAN
    args = list(arg_columns(df.columns))
    for c in args:
        df[c] = _one_type(df[c])
    rest = [c for c in df.columns if c not in COLUMNS and c not in args]
    return df[[*(c for c in COLUMNS if c in df.columns), *args, *rest]]


def _one_type(values):  # pd.Series -> pd.Series
    """An argument column Parquet can store: numbers (bools apart) or text as they are, a mix
    of kinds as text (`1` and `'auto'` -> '1', 'auto'); missing values stay None."""

    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    kinds = {
        "bool" if isinstance(v, bool) else "number" if isinstance(v, int | float) else "text"
        for v in values
        if not missing(v)
    }
    if len(kinds) <= 1:
        return values
    return values.map(lambda v: None if missing(v) else str(v)).astype(object)


def parquet_bytes(df) -> bytes:  # df: pd.DataFrame
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def unwritable(rows: list[dict[str, Any]]) -> dict[int, str]:
    """Index -> reason of the rows Parquet refuses, each tried alone (only after the table as
    a whole was refused: a type no check above foresaw)."""
    out = {}
    for i, row in enumerate(rows):
        try:
            parquet_bytes(frame_of([row]))
        except Exception as exc:  # whatever pyarrow raises names the row
            out[i] = f"not storable in results.parquet: {type(exc).__name__}: {exc}"[:300]
    return out


def write_table(df, parquet: Path, csv: Path) -> None:
    """`results.parquet` (native list/dict columns) and `results.csv` (those as JSON text)."""
    data = parquet_bytes(df)
    flat = df.copy()
    for c in LIST_COLUMNS:
        flat[c] = [None if v is None else json.dumps(v) for v in flat[c]]
    text = flat.to_csv(index=False)
    atomic_write(parquet, data)
    atomic_write(csv, text)


def load_results(
    campaign: str | os.PathLike[str],
    workdir: str | os.PathLike[str] | None = None,
    measured_only: bool = True,
):
    """The table `hpcscale collect` saved for a campaign, named as the CLI takes it (a name in
    the workdir, its campaign YAML file, or a directory), with list and dict columns as plain
    Python lists and dicts: its measured runs (COMPLETED), unless `measured_only` is False
    (then every run it read, each with its `state`)."""
    import pandas as pd

    p = Path(campaign)
    if (p / RESULTS_PARQUET).exists():
        cdir = p
    elif p.suffix in (".yaml", ".yml") or p.is_file() or p.is_dir():
        (cdir,) = select_campaigns(str(campaign), workdir)
    else:
        cdir = campaign_dir(str(campaign), workdir)
    path = cdir / RESULTS_PARQUET
    if not path.exists():
        raise UsageError(f"{path}: no results yet; run `hpcscale collect {campaign}` first")
    df = _upgrade(pd.read_parquet(path))
    for c in LIST_COLUMNS:
        if c in df.columns:
            df[c] = [_plain(v) for v in df[c]]
    return measured(df) if measured_only else df


def _upgrade(df):  # pd.DataFrame -> pd.DataFrame
    """A table written by a collector before version 17 (it has no `framework` column) as
    today's reads it: a command run's figure copied into `images_per_s` (or, for a `time:`
    metric, `epoch_time_s`) is only under its own name, and every row names its framework. A
    current table is returned as it is."""
    if df.empty or "framework" in df.columns:
        return df
    out = df.copy()
    command = out["command"].notna() if "command" in out.columns else _false(out)
    strategy = out["strategy"] if "strategy" in out.columns else [None] * len(out)
    out["framework"] = [framework_of(s, bool(c)) for s, c in zip(strategy, command, strict=True)]
    if "figure_metric" not in out.columns:
        return out
    kind = out.get("figure_kind", _false(out)).where(lambda k: k.isin(KINDS), THROUGHPUT)
    for k, copy in COLUMN_OF_KIND.items():
        if copy not in out.columns:
            continue
        mine = command & out["figure_metric"].notna() & (kind == k) & (out["figure_metric"] != copy)
        for name in dict.fromkeys(out.loc[mine, "figure_metric"]):
            rows = mine & (out["figure_metric"] == name)
            if name not in out.columns:
                out[name] = NAN
            out.loc[rows, name] = out.loc[rows, name].fillna(out.loc[rows, copy])
            out.loc[rows, copy] = NAN  # the copy; what the program printed there was lost to it
    return out


def _false(df):  # pd.DataFrame -> pd.Series
    """False for every row of `df` (a column the old table lacked)."""
    import pandas as pd

    return pd.Series(False, index=df.index)


def _plain(value: Any) -> Any:
    """pyarrow hands back numpy arrays and structs padded with None keys: undo both."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
