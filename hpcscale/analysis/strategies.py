"""How a run's strategy is named in tables, labels and legends (Ahmad & Cai's names): each
framework's `display_name` (hpcscale.frameworks), a user's program's by the Command framework."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from hpcscale.frameworks import Framework, for_cell
from hpcscale.model.registry import DEFAULT_STRATEGY, STRATEGIES


def _framework(strategy: object, own: bool) -> Framework:
    """The run's framework. A strategy the registry does not know (a command's empty one, a
    notebook frame's missing value) is the default's, as analysis.frame fills a missing one."""
    return for_cell(strategy if strategy in STRATEGIES else DEFAULT_STRATEGY, own)


def strategy_name(
    strategy: str, cross_device_ops: object, mpi: str, command: object = None, launcher: object = ""
) -> str:
    """The run's framework's `display_name`; a command (the user's own program) is named by
    hpcscale.frameworks.command.Command."""
    own = isinstance(command, str) and bool(command)
    fields = {
        "strategy": strategy,
        "cross_device_ops": cross_device_ops,
        "mpi": mpi,
        "command": command,
        "launcher": launcher,
    }
    return _framework(strategy, own).display_name(fields)


def strategy_of(row: Mapping[str, object]) -> str:
    """`strategy_name` of one run or cell (a row or a dict with the run fields)."""
    return strategy_name(
        str(row["strategy"]),
        row["cross_device_ops"],
        str(row["mpi"]),
        row.get("command"),
        row.get("launcher", ""),
    )


def strategy_names(rows: pd.DataFrame) -> list[str]:
    """`strategy_name` of each row of a frame of runs or cells."""
    none = [None] * len(rows)
    cols = [rows.get(c, none) for c in ("command", "launcher")]
    return [
        strategy_name(s, c, m, cmd, la)
        for s, c, m, cmd, la in zip(
            rows["strategy"], rows["cross_device_ops"], rows["mpi"], *cols, strict=True
        )
    ]
