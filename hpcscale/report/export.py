"""The tidy tables as CSV and Parquet, for users' own notebooks."""

from __future__ import annotations

import io
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hpcscale.model.errors import HpcscaleError


class ParquetUnavailable(HpcscaleError):
    """Parquet was asked for but pyarrow cannot write it here; other formats are unaffected."""


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """CSV with list and dict cells (per-epoch times, losses) as JSON, so they survive a
    round trip through `json.loads` instead of becoming Python reprs."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object and out[col].map(_nested).any():
            out[col] = out[col].map(lambda v: _json(v) if _nested(v) else v)
    return out.to_csv(index=False).encode("utf-8")


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    try:
        import pyarrow  # noqa: F401
    except Exception as exc:  # a broken binary raises more than ImportError
        raise ParquetUnavailable(
            f"parquet output needs pyarrow, which does not import here ({type(exc).__name__}: "
            f"{exc}); install a pyarrow built for this NumPy, or use --format csv"
        ) from None
    import pyarrow as pa

    buf = io.BytesIO()
    try:
        frame.to_parquet(buf, index=False)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise ParquetUnavailable(f"could not write parquet: {exc}") from None
    return buf.getvalue()


def _nested(value: Any) -> bool:
    return isinstance(value, list | tuple | dict | np.ndarray)


def _json(value: Any) -> str:
    return msgspec.json.encode(value, enc_hook=_enc).decode("utf-8")


def _enc(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise NotImplementedError(type(obj))
