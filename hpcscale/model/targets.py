"""A training target as a campaign or `report --target` writes it: `metric<=value` (a loss) or
`metric>=value` (an accuracy). The syntax is checked where a campaign is read; reaching a target
is analysis's business (hpcscale.analysis.targets)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Goal = Literal["min", "max"]
TARGET_SYNTAX = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$"
)
TARGET_HELP = "METRIC<=VALUE (a loss) or METRIC>=VALUE (an accuracy), e.g. 'g_loss<=1.2'"
PLACEHOLDER_MARK = "[placeholder]"  # beside a target the campaign marks `placeholder: true`


@dataclass(frozen=True)
class TargetSpec:
    """One training target and where it was set (printed with the results)."""

    metric: str
    op: Literal["<=", ">="]
    value: float
    source: str = ""
    placeholder: bool = False  # a stand-in value (the campaign's `placeholder: true`)

    @property
    def goal(self) -> Goal:
        return "min" if self.op == "<=" else "max"

    @property
    def text(self) -> str:
        """How every table, figure and caption names the target: a placeholder says so."""
        mark = f" {PLACEHOLDER_MARK}" if self.placeholder else ""
        return f"{self.metric} {self.op} {self.value:g}{mark}"


def parse_target(text: str, source: str = "", placeholder: bool = False) -> TargetSpec:
    """'g_loss<=1.2' -> TargetSpec; ValueError naming the syntax otherwise."""
    m = TARGET_SYNTAX.match(str(text))
    if not m:
        raise ValueError(f"target {text!r} is not {TARGET_HELP}")
    try:
        value = float(m.group(3))
    except ValueError:
        raise ValueError(f"target {text!r}: {m.group(3)!r} is not a number") from None
    op: Literal["<=", ">="] = "<=" if m.group(2) == "<=" else ">="
    return TargetSpec(m.group(1), op, value, source, placeholder)
