"""The references section: each campaign reference checked against the derived cells."""

from __future__ import annotations

from collections.abc import Sequence

from hpcscale.analysis import tables
from hpcscale.analysis.references import ReferenceResult
from hpcscale.report.model import Section, Table


def references_section(results: Sequence[ReferenceResult]) -> Section:
    failed = sum(not r.passed for r in results)
    text = [
        f"{len(results) - failed} of {len(results)} check(s) passed. Tolerances are fractions "
        "of the reference value, their sign ignored: allowed = value − |lower|·|value| .. "
        "value + |upper|·|value|."
    ]
    return Section(
        "references",
        "References",
        text,
        [Table("references", "Reference checks", tables.references_table(results))],
    )
