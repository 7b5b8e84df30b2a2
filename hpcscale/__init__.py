"""hpcscale: distributed deep-learning scaling studies, from a campaign YAML to a report.

The core imports no training framework; only the bundled programs (`jobs/`) need one. The
Python API is `hpcscale.api` (plan, render, submit, status, cancel, resubmit, collect, report,
compare, load_results); its functions are also reachable here, imported on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = frozenset(
    {
        "plan",
        "render",
        "submit",
        "status",
        "cancel",
        "resubmit",
        "collect",
        "report",
        "compare",
        "load_results",
        "load_campaign",
        "expand",
        "render_campaign",
    }
)


def __getattr__(name: str) -> Any:
    # Keep `import hpcscale` cheap: the API (pydantic, jinja2, ...) is imported on first use.
    if name in _API:
        from hpcscale import api
        from hpcscale.model.campaign import load_campaign
        from hpcscale.plan.expand import expand

        return {"load_campaign": load_campaign, "expand": expand}.get(name) or getattr(api, name)
    raise AttributeError(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
