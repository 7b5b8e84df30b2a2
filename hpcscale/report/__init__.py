"""The report: the analysis' tables and figures for one or more campaigns, as index.md (figures
beside it), a self-contained index.html, and CSV / Parquet of the tidy tables.

Modules: data (finding campaigns, the collector's table), sections (which sections the data
supports, their tables and figures; a package, one module per section family), figures
(matplotlib, drawn for print; one module per figure family), labels (short names for groups
and cells), model (what a report is made of), fmt (numbers in tables), markdown / html
(writers), export (CSV, Parquet), provenance (versions, MPI, knobs, system profile), build (all
of it, written atomically). The numbers and choices come from `hpcscale.analysis`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_report"]


def __getattr__(name: str) -> Any:
    # Lazy, so importing a light submodule (e.g. fmt) does not pull in matplotlib via build.
    if name == "build_report":
        return importlib.import_module("hpcscale.report.build").build_report
    raise AttributeError(name)
