"""The campaign file: what to run, where, and which axes to sweep."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hpcscale.core.system import System, load_system
from hpcscale.core.validation import did_you_mean, validate
from hpcscale.core.vocab import ARGS_PREFIX, AXIS_TERMS, Scaling
from hpcscale.core.yamlsrc import Source, load_yaml

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# Axes a matrix may sweep (defined in vocab); `args.<name>` sweeps any workload argument.
AXES: dict[str, str] = {name: t.help for name, t in AXIS_TERMS.items()}
RULES = ("zip", "exclude", "where")


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    program: str = Field(
        default="train", pattern=r"^[A-Za-z0-9_]+$", description="entry point: jobs/<program>.py"
    )
    model: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    epochs: int = Field(default=1, gt=0)
    args: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("args")
    @classmethod
    def _arg_names(cls, args: dict[str, Any]) -> dict[str, Any]:
        for k in args:
            if not re.match(r"^[A-Za-z][A-Za-z0-9_]*$", k):
                raise ValueError(f"workload argument name {k!r} must be a plain identifier")
        return args


class Collect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: bool = True
    timeline: bool = False
    mark_cycles: bool = False


class Reference(BaseModel):
    """An expected value for a derived metric, with tolerances (fractions of `value`)."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    where: dict[str, str | int | float | bool] = Field(default_factory=dict)
    value: float
    lower: float | None = Field(
        default=None,
        description="how far below value may go, a fraction of value (0.2 = 20%); "
        "the sign is ignored, as in ReFrame's -0.2; null: no bound",
    )
    upper: float | None = Field(
        default=None, description="how far above value may go, a fraction of value; null: no bound"
    )
    unit: str = ""


class Matrix(BaseModel):
    """Axes are free-form (checked by expand); the rules are typed here."""

    model_config = ConfigDict(extra="allow")
    zip: list[dict[str, list[Any]]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    where: str | None = None


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    workload: Workload
    system: str
    scaling: Scaling = "none"
    matrix: Matrix = Field(default_factory=Matrix)
    repeats: int = Field(default=1, ge=1, le=100)
    collect: Collect = Field(default_factory=Collect)
    references: list[Reference] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(
                "name must be 1-64 letters, digits, '_', '.', '-' (it names a directory)"
            )
        return v

    def axes(self) -> dict[str, Any]:
        return dict(self.matrix.model_extra or {})


class LoadedCampaign(BaseModel):
    """A validated campaign with where it came from (for located errors and the resolved copy)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    campaign: Campaign
    system: System
    path: Path
    source: Source


def load_campaign(path: str | Path, system: str | Path | None = None) -> LoadedCampaign:
    """Load and validate a campaign. `system` (a profile name or path) overrides the campaign's
    `system:`, so one campaign runs on a laptop, the local cluster and a real cluster."""
    path = Path(path)
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise src.error((), "a campaign must be a YAML mapping (name:, workload:, system:, ...)")
    campaign = validate(Campaign, src.data, src)
    for axis in campaign.axes():
        if axis not in AXES and not axis.startswith(ARGS_PREFIX):
            raise src.error(
                ("matrix", axis),
                f"unknown axis {axis!r}{did_you_mean(axis, AXES)}; "
                f"axes: {', '.join(AXES)}, or args.<workload argument>",
            )
    if system is not None:  # from the command line: a path is relative to where the user is
        profile = load_system(str(system), relative_to=Path.cwd(), where=("--system", None))
        campaign = campaign.model_copy(update={"system": profile.name})
    else:
        profile = load_system(
            campaign.system, relative_to=path.parent, where=(str(path), src.line_of(("system",)))
        )
    return LoadedCampaign(campaign=campaign, system=profile, path=path, source=src)
