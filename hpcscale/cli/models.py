"""models: the models campaigns can run and the workload arguments they take (the TensorFlow
programs' jobs/tf/manifest.py)."""

from __future__ import annotations

from dataclasses import asdict

from hpcscale.cli.common import JsonOpt, console, print_json
from hpcscale.cli.tables import Grid
from hpcscale.model.workloads import arguments
from hpcscale.model.workloads import models as declared_models


def models(json: JsonOpt = False) -> None:
    """List the models (`workload.model`) and their arguments (`workload.args`, or a matrix
    axis `args.<name>`) with defaults and allowed values, as `validate` checks them."""
    found = declared_models()
    if json:
        print_json([asdict(m) for m in found])
        return
    table = Grid("models", ["model", "family", "min image px", "about"])
    for m in found:
        table.add_row(m.name, m.family, str(m.min_image_size), m.help)
    table.show(console)
    grid = Grid(
        "arguments (workload.args: {name: value}, or a matrix axis args.<name>; "
        "a switch takes true or false)",
        ["name", "type", "default", "range", "models", "help"],
    )
    for a in arguments():
        default = "" if a.default is None else str(a.default)
        grid.add_row(a.name, a.type, default, a.range, ", ".join(a.models) or "all", a.help)
    console.print()
    grid.show(console)
