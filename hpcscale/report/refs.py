"""Campaign `references:` into the analysis' reference checks.

The campaign schema (hpcscale.core.campaign.Reference) names the cell filter `where`; the
analysis calls it `selector`. Both mean "column: value" over the derived table, so the mapping
is a rename; an empty unit (the schema's default) means "not stated".

Tolerances: the campaign schema describes `lower` as "allowed fraction below value" (so
`lower: 0.9` = down to 10 % of value), while ReFrame and the analysis write the same bound as
-0.9. A tolerance is a magnitude either way, so lower becomes -|lower| and upper |upper|, and
both spellings mean the same thing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from hpcscale.analysis.references import (
    Reference,
    ReferenceResult,
    check_references,
    parse_reference,
)


def as_item(ref: Any) -> dict[str, Any]:
    """A campaign reference (pydantic model or mapping) as an analysis reference item."""
    data = ref.model_dump() if hasattr(ref, "model_dump") else dict(ref)
    if "where" in data:
        data["selector"] = data.pop("where")
    if not data.get("unit"):
        data["unit"] = None
    for side, sign in (("lower", -1.0), ("upper", 1.0)):
        value = data.get(side)
        if isinstance(value, int | float) and not isinstance(value, bool):
            data[side] = sign * abs(float(value))
    return data


def to_references(items: Iterable[Any]) -> list[Reference]:
    return [parse_reference(as_item(item), i) for i, item in enumerate(items)]


def check(cells: pd.DataFrame, items: Iterable[Mapping[str, Any] | Any]) -> list[ReferenceResult]:
    refs = to_references(items)
    return check_references(cells, refs) if refs else []
