"""Expand a campaign's matrix into runs: product, zip groups, exclude and where rules."""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from hpcscale import launchers
from hpcscale.frameworks import Framework, for_cell, for_strategy
from hpcscale.frameworks.base import Cell
from hpcscale.model import workloads
from hpcscale.model.campaign import AXES, MAX_TIME_LIMIT_MIN, LoadedCampaign, Workload
from hpcscale.model.command import (
    AS_WRITTEN,
    COMMAND_PROGRAM,
    label_of,
    resolve_cwd,
)
from hpcscale.model.errors import InputError
from hpcscale.model.registry import COMMAND_FRAMEWORKS, DEFAULT_STRATEGY, FRAMEWORKS
from hpcscale.model.run import KNOB_DEFAULTS, Run
from hpcscale.model.scaling import ScalingError, batches
from hpcscale.model.validation import did_you_mean
from hpcscale.model.vocab import ARGS_PREFIX
from hpcscale.model.where import ConditionError, holds
from hpcscale.model.yamlsrc import KeyPath

Assignment = dict[str, Any]


@dataclass
class Excluded:
    assignment: Assignment
    rule: str


@dataclass
class Plan:
    runs: list[Run] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    axes: dict[str, list[Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # located, e.g. a rule that drops nothing


def expand(lc: LoadedCampaign) -> Plan:
    """All runs of a campaign, in a stable order, with ids unique per cell and repeat."""
    c, src = lc.campaign, lc.source
    plan = Plan()
    single: dict[str, Any] = {}
    swept: dict[str, list[Any]] = {}
    for axis, value in c.axes().items():
        values = value if isinstance(value, list) else [value]
        if not values:
            raise src.error(("matrix", axis), "an axis needs at least one value")
        (swept if len(values) > 1 else single)[axis] = values
    groups: list[list[Assignment]] = [[{a: v} for v in vals] for a, vals in swept.items()]
    for i, group in enumerate(c.matrix.zip):
        groups.append(_zip_group(lc, i, group))
        for axis, vals in group.items():
            swept[axis] = vals
    plan.axes = {**{a: v for a, v in single.items()}, **swept}
    where = _Where(lc) if c.matrix.where else None
    decl = workloads.declared(lc.system.jobs_dir)
    own = command_fields(lc)  # the same for every cell: resolved (paths, label) once
    seen: dict[str, Assignment] = {}
    hits = [0] * len(c.matrix.exclude)
    for combo in itertools.product(*groups) if groups else [()]:
        assignment: Assignment = {a: v[0] for a, v in single.items()}
        for part in combo:
            assignment.update(part)
        rule = _excluded_by(lc, assignment)
        if rule is not None:
            hits[rule] += 1
            plan.excluded.append(Excluded(assignment, _rule_text(lc, rule)))
            continue
        try:
            base = resolve(lc, assignment, tuple(swept), decl, own)
        except ScalingError as exc:
            if where and where.rejects(assignment, partial=True):
                plan.excluded.append(Excluded(assignment, f"where: {c.matrix.where}"))
                continue
            key = exc.key or _key_of(lc, exc.axis)
            raise src.error(key, f"{exc} (cell {_fmt(assignment)})") from None
        if where and where.rejects({**assignment, **base.as_record()}):
            plan.excluded.append(Excluded(assignment, f"where: {c.matrix.where}"))
            continue
        lc.system.partition_for(base)  # a run no partition admits: an error at the profile
        for r in range(c.repeats):
            run = base if r == base.repeat else base.model_copy(update={"repeat": r})
            rid = run.run_id
            if rid in seen:
                raise src.error(
                    ("matrix",),
                    f"cells {_fmt(seen[rid])} and {_fmt(assignment)} "
                    "resolve to the same run; remove one",
                )
            seen[rid] = assignment
            plan.runs.append(run)
    plan.warnings = _rule_warnings(lc, hits, bool(plan.runs))
    return plan


def resolve(
    lc: LoadedCampaign,
    a: Assignment,
    swept: tuple[str, ...] = (),
    decl: workloads.Declaration = None,
    own: dict[str, str] | None = None,
) -> Run:
    """One assignment of axis values -> a fully resolved Run (raises ScalingError); `decl`
    checks its workload arguments (workloads.declared); `own`: `command_fields(lc)`, when the
    caller has it."""
    c, s = lc.campaign, lc.system
    device = a.get("device", "gpu" if s.gpus_per_node else "cpu")
    gpus = int(a.get("gpus_per_node", s.gpus_per_node if device == "gpu" else 0))
    if device == "cpu" and gpus:
        raise ScalingError(
            "gpus_per_node", f"device: cpu runs use no GPU, but gpus_per_node is {gpus}"
        )
    if device == "gpu" and gpus < 1:
        raise ScalingError("device", f"system {s.name!r} has no GPUs (gpus_per_node: 0)")
    if device == "gpu" and gpus > max(s.gpus_per_node, 0):
        raise ScalingError(
            "gpus_per_node", f"system {s.name!r} has {s.gpus_per_node} GPUs per node"
        )
    strategy = _strategy_of(c.workload, a)
    nodes = a.get("nodes", 1)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ScalingError("nodes", f"nodes must be a positive integer, got {nodes!r}")
    if nodes > s.max_nodes:
        raise ScalingError("nodes", f"system {s.name!r} has at most {s.max_nodes} nodes")
    fw = for_cell(strategy, c.workload.command is not None)
    placed = fw.place(Cell(lc, a, device, nodes, gpus))
    _foreign_knobs(a, fw, strategy)
    layout, replicas_per_task = placed.layout, placed.replicas_per_task
    replicas = nodes * layout.tasks_per_node * replicas_per_task
    per_rank, global_batch = batches(
        c.scaling,
        replicas,
        batch=a.get("batch"),
        batch_per_rank=a.get("batch_per_rank"),
        global_batch=a.get("global_batch"),
    )
    mpi = a.get("mpi", s.mpi_default)
    if mpi not in s.mpi:
        raise ScalingError(
            "mpi",
            f"MPI flavour {mpi!r} is not offered by system {s.name!r}; it has: {', '.join(s.mpi)}",
        )
    launcher = c.launcher or s.mpi[mpi].launcher or s.launcher
    if launchers.get(launcher).rendezvous and not fw.rendezvous:
        raise ScalingError(
            "strategy",
            f"launcher {launcher} starts ranks that meet at MASTER_ADDR:MASTER_PORT: "
            f"strategy: torch_ddp (or workload.framework: torch), not {strategy}",
        )
    args = dict(c.workload.args)
    args.update({k.removeprefix("args."): v for k, v in a.items() if k.startswith("args.")})
    own = command_fields(lc) if own is None else own
    model = a.get("model", c.workload.model or own.get("model"))
    if not own and (broken := fw.workload_problem(model, args, decl)):
        raise ScalingError(*broken)
    time_limit = a.get("time_limit_min", s.time_limit_min)
    if "time_limit_min" not in a and time_limit > MAX_TIME_LIMIT_MIN:
        raise ScalingError(
            "time_limit_min",
            f"system {s.name!r} has time_limit_min {time_limit}, more than {MAX_TIME_LIMIT_MIN} "
            "(365 days); set a smaller matrix axis time_limit_min",
        )
    fields = {
        "campaign": c.name,
        "system": s.name,
        "program": own.get("program", c.workload.program),
        "model": model,
        "scaling": c.scaling,
        "device": device,
        "nodes": nodes,
        "tasks_per_node": layout.tasks_per_node,
        "threads_per_task": layout.threads_per_task,
        "gpus_per_node": gpus,
        "replicas_per_task": replicas_per_task,
        "batch_per_rank": per_rank,
        "global_batch": global_batch,
        "strategy": strategy,
        "mpi": mpi,
        "launcher": launcher,
        "knobs": placed.knobs,
        "mixed_precision": a.get("mixed_precision", False),
        "epochs": a.get("epochs", c.workload.epochs),
        "timeline": c.collect.timeline,
        "mark_cycles": c.collect.mark_cycles,
        "trace_window": (
            c.collect.trace_window.model_dump()
            if c.collect.timeline and fw.trace == "torch"
            else None
        ),
        "time_limit_min": time_limit,
        "args": args,
        "swept": tuple(swept),
        "command": own.get("command"),
        "cwd": own.get("cwd"),
        "interpreter": own.get("interpreter"),
    }
    try:
        return Run.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = str(err["loc"][0]) if err["loc"] else "matrix"
        raise ScalingError(name if name in AXES else "matrix", f"{name}: {err['msg']}") from None


def _strategy_of(workload: Workload, a: Assignment) -> str:
    """The cell's strategy: the axis, else a command's `framework:` (the registry's default
    framework's when it names none)."""
    if workload.command is None or workload.framework is None:
        return str(a.get("strategy", DEFAULT_STRATEGY))
    strategy = COMMAND_FRAMEWORKS[workload.framework]
    if a.get("strategy", strategy) != strategy:
        raise ScalingError(
            "strategy",
            f"strategy {a['strategy']} does not go with workload.framework: "
            f"{workload.framework} (its strategy is {strategy})",
        )
    return strategy


def command_fields(lc: LoadedCampaign) -> dict[str, str | None]:
    """A command workload's run fields (program, model label, command, cwd, interpreter);
    {} otherwise."""
    words = lc.campaign.workload.command
    if words is None:
        return {}
    return {
        "program": COMMAND_PROGRAM,
        "model": label_of(words),
        "command": shlex.join(words),
        "cwd": resolve_cwd(lc.campaign.workload.cwd, lc.path),
        "interpreter": AS_WRITTEN if lc.campaign.workload.interpreter == AS_WRITTEN else None,
    }


def _foreign_knobs(a: Assignment, fw: Framework, strategy: str) -> None:
    """A knob the cell's framework does not read is an error naming the strategies it belongs
    to, not a value silently dropped."""
    for name in KNOB_DEFAULTS.keys() & a.keys():
        if name in fw.knobs or a[name] == KNOB_DEFAULTS[name]:
            continue
        owners = [
            line.strategy
            for line in FRAMEWORKS.values()
            if name in for_strategy(line.strategy).knobs
        ]
        raise ScalingError(
            name,
            f"{name} is a knob of strategy: {' or '.join(owners) or '?'}, not of {strategy}",
        )


def _key_of(lc: LoadedCampaign, axis: str) -> KeyPath:
    """Where the campaign sets `axis`: the matrix, a zip group, else its workload default."""
    c = lc.campaign
    if axis in c.axes():
        return ("matrix", axis)
    for i, group in enumerate(c.matrix.zip):
        if axis in group:
            return ("matrix", "zip", i, axis)
    if axis.startswith(ARGS_PREFIX):
        return ("workload", "args", axis.removeprefix(ARGS_PREFIX))
    if axis in ("model", "epochs"):
        return ("workload", axis)
    if axis == "time_limit_min":
        return ("system",)
    return ("matrix",) if axis == "matrix" else ("matrix", axis)


def _zip_group(lc: LoadedCampaign, i: int, group: dict[str, list[Any]]) -> list[Assignment]:
    key: KeyPath = ("matrix", "zip", i)
    lengths = {a: len(v) for a, v in group.items()}
    for axis in group:
        _check_axis(lc, axis, (*key, axis))
    if len(set(lengths.values())) > 1:
        raise lc.source.error(key, f"zip axes must have equal lengths, got {lengths}")
    return [dict(zip(group, vals, strict=True)) for vals in zip(*group.values(), strict=True)]


def _check_axis(lc: LoadedCampaign, axis: str, key: KeyPath) -> None:
    if axis not in AXES and not axis.startswith(ARGS_PREFIX):
        raise lc.source.error(key, f"unknown axis {axis!r}{did_you_mean(axis, AXES)}")


def _excluded_by(lc: LoadedCampaign, a: Assignment) -> int | None:
    """The index of the first exclude rule matching this assignment."""
    for i, rule in enumerate(lc.campaign.matrix.exclude):
        for axis in rule:
            _check_axis(lc, axis, ("matrix", "exclude", i, axis))
        if all(_matches(a.get(k, _MISSING), v) for k, v in rule.items()):
            return i
    return None


def _rule_text(lc: LoadedCampaign, i: int) -> str:
    return f"exclude[{i}]: {_fmt(lc.campaign.matrix.exclude[i])}"


def _rule_warnings(lc: LoadedCampaign, hits: list[int], kept: bool) -> list[str]:
    """Rules that shape nothing: an exclude matching no cell (a typo'd value?), a where
    keeping no run."""
    src, out = lc.source, []
    for i, n in enumerate(hits):
        if not n:
            key = ("matrix", "exclude", i)
            msg = (
                f"{_rule_text(lc, i)} excludes nothing: no cell has these values "
                "(or an earlier rule excluded them)"
            )
            out.append(str(src.error(key, msg)))
    if lc.campaign.matrix.where and not kept:
        msg = f"where: {lc.campaign.matrix.where!r} keeps no run"
        out.append(str(src.error(("matrix", "where"), msg)))
    return out


_MISSING = object()


def _matches(actual: Any, wanted: Any) -> bool:
    if actual is _MISSING:
        return False
    return actual in wanted if isinstance(wanted, list) else actual == wanted


def _fmt(a: Assignment) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in a.items()) + "}"


class _Where:
    """The campaign's `where:` condition (hpcscale.model.where), with its location for errors."""

    def __init__(self, lc: LoadedCampaign) -> None:
        self.lc = lc
        self.text = lc.campaign.matrix.where or ""

    def rejects(self, names: dict[str, Any], partial: bool = False) -> bool:
        try:
            return not holds(self.text, names)
        except ConditionError as exc:
            if partial:
                return False
            raise InputError(
                str(self.lc.path),
                self.lc.source.line_of(("matrix", "where")),
                "matrix.where",
                str(exc),
            ) from None
