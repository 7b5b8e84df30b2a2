"""hpcscale: distributed deep-learning scaling studies, from a campaign YAML to a report.

The core imports neither TensorFlow nor Horovod; only `jobs/` needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def load_results(campaign: str, workdir: str | None = None) -> pd.DataFrame:
    """The tidy table (one row per run) that `hpcscale collect` gathers, for notebooks."""
    from hpcscale.collect.collector import load_results as _load

    return _load(campaign, workdir=workdir)


def __getattr__(name: str) -> Any:
    # Keep `import hpcscale` cheap: the API is imported on first use.
    if name in {"load_campaign", "expand", "render_campaign"}:
        from hpcscale import api

        return getattr(api, name)
    raise AttributeError(name)
