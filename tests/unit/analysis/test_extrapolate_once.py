"""Issue 28: the extrapolation of a 1,000-run sweep grouped the table again for every question
(`refusals`, `extrapolate`) and ran the byte models once per row. What it gives is unchanged:
each row here is computed by hand from the table the test builds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from hpcscale.analysis import extrapolate as ex


def _table() -> pd.DataFrame:
    """Three weak groups at 1, 2 and 4 nodes (2 ranks per node): 1M parameters, 4 bytes each;
    3M parameters with fp16 all-reduce (2 bytes); and one without a parameter count."""
    rows: list[dict[str, Any]] = []
    groups = (("a", 1_000_000.0, False), ("b", 3_000_000.0, True), ("c", np.nan, False))
    bandwidth = {1: 2.0, 2: 4.0, 4: np.nan}  # none measured at 4 nodes: 2 nodes' is used
    for model, params, fp16 in groups:
        for n in (1, 2, 4):
            rows.append(
                {
                    "model": model,
                    "scaling": "weak",
                    "device": "cpu",
                    "nodes": n,
                    "tasks_per_node": 2,
                    "batch_per_rank": 32,
                    "fp16_allreduce": fp16,
                    "epoch_time_s": 10.0 / n**0.5,
                    "images_per_s": 100.0 * n**0.9,
                    "param_count": params,
                    "bus_bandwidth_gbs": bandwidth[n],
                    "allreduce_bytes_per_step": 1e6 * n,
                }
            )
    return pd.DataFrame(rows)


def test_comm_cost_rows_are_the_byte_models_of_each_group_and_size() -> None:
    cost = ex.comm_cost(_table(), at=(16,))
    assert list(cost["model"]) == ["a"] * 4 + ["b"] * 4  # c has no parameter count
    assert list(cost["axis_value"]) == [1.0, 2.0, 4.0, 16.0] * 2
    assert list(cost["kind"]) == (["measured-bandwidth"] * 3 + ["prediction"]) * 2
    for i, (params, bpp) in enumerate(((1e6, 4.0), (3e6, 2.0))):
        for j, nodes in enumerate((1.0, 2.0, 4.0, 16.0)):
            row = cost.iloc[4 * i + j]
            p = nodes * 2  # ranks
            assert row["participants"] == p
            assert row["bytes_per_param"] == bpp
            assert row["ring_bytes"] == 2.0 * (params * bpp) * (p - 1.0) / p
            assert row["ps_bytes"] == 2.0 * (params * bpp) * (p - 1.0)
            bw = 2.0 if nodes == 1.0 else 4.0  # 4 and 16 nodes: the last measured (2 nodes)
            assert row["bandwidth_gbs"] == bw
            assert row["ring_time_s"] == pytest.approx(row["ring_bytes"] / (bw * 1e9))
            assert row["ps_time_s"] == pytest.approx(row["ps_bytes"] / (bw * 1e9))
    assert cost["ring_bytes"].dtype == cost["ps_bytes"].dtype == np.float64
    assert cost.columns[-2:].tolist() == ["kind", "beyond_system"]
    assert ex.comm_cost(_table().iloc[0:0]).empty


def test_the_fits_and_the_limits_group_the_table_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    group_ids = ex.group_ids

    def counted(df: pd.DataFrame, axis: str) -> pd.Series:
        calls.append(len(df))
        return group_ids(df, axis)

    monkeypatch.setattr(ex, "group_ids", counted)
    ex._FITTED.clear()
    table = _table()
    refused = ex.refusals(table, axis="nodes")
    predicted = ex.extrapolate(table, axis="ranks", max_nodes=8)
    again = ex.extrapolate(table, axis="ranks", max_nodes=8)
    # one grouping per (table, axis) fitted: the limits use the fits' groups
    assert calls == [9, 9]
    assert refused.empty  # every group is fitted at 1, 2 and 4 nodes
    assert set(predicted["model"]) == {"a", "b", "c"}
    assert list(predicted["axis_value"]) == [16.0, 32.0] * 3
    # 8 nodes of 2 ranks: 16 ranks fit on the system, 32 do not
    assert list(predicted["beyond_system"]) == [False, True] * 3
    assert list(predicted["system_limit"]) == [16.0] * 6
    pd.testing.assert_frame_equal(predicted, again)
