"""Issue 32's report labels on a real run: the shared 2-rank DDP campaign of
test_torch_timeline (`traced`, no training of its own) is collected with `trace_source:
PyTorch profiler`, and the report's overlap section names that trace, not a Horovod timeline."""

from __future__ import annotations

from typing import Any

import pandas as pd

from hpcscale.report.sections import campaign_report
from tests.integration.test_torch_timeline import traced  # noqa: F401  (the shared run)
from tests.torch_fixture import needs_torch

pytestmark = needs_torch


def test_a_real_ddp_runs_figures_say_they_came_from_the_profiler(
    traced: dict[int, dict[str, Any]],  # noqa: F811
) -> None:
    rows = list(traced.values())
    assert [r["trace_source"] for r in rows] == ["PyTorch profiler"] * 2
    assert rows[0]["negotiate_s"] != rows[0]["negotiate_s"]  # Horovod's own: unknown (NaN)
    report = campaign_report(pd.DataFrame(rows), "ddp_traced")
    overlap = next(s for s in report.sections if s.key == "overlap")
    assert overlap.text[0].startswith("From the PyTorch profiler traces, per epoch")
    assert "From" not in overlap.tables[0].frame.columns  # one source: said in the text
