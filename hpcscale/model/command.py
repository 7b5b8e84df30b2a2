"""A command workload: the user's own program, its placeholders and how its figures are read.

The campaign names `workload.command` instead of a bundled `model:`; each run substitutes its
resolved fields into the words (`{ranks}`, `{args.lr}`, ...), and the renderer quotes every word,
so a campaign value is only ever an argument, never shell. What the program prints is read by
extractors (`metrics:` a preset name or a list); which figure the scaling tables use is
`throughput:` (or `time:`)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpcscale.model import vocab
from hpcscale.model.extractors import ALL_RANKS, OUTPUT, Extractor, pattern_error
from hpcscale.model.metrics import CELL_COLUMNS, TABLE_COLUMNS, reserved_problem
from hpcscale.model.presets import MLLOG, PRESET_NAMES, PRESET_THROUGHPUT, preset_extractors
from hpcscale.model.registry import COMMAND_FRAMEWORKS, DEFAULT_COMMAND_FRAMEWORK
from hpcscale.model.scaling_metric import nature_of
from hpcscale.model.validation import did_you_mean, validate
from hpcscale.model.yamlsrc import KeyPath, Source

# The table's contract columns a program's metric may fill (its figures, learning curves).
CONTRACT = frozenset((*vocab.METRIC_COLUMNS, *vocab.LIST_COLUMNS))
# Names a program's metric may not take (model.metrics.reserved_problem).
RESERVED = frozenset(
    (*vocab.TABLE_RUN_FIELDS, *vocab.CONTENTION_COLUMNS, *vocab.QUALITY_COLUMNS,
     *vocab.TIMELINE_COLUMNS, *vocab.EXACT_COLUMNS, *vocab.EXTRA_TERMS, *TABLE_COLUMNS,
     *CELL_COLUMNS)
) - CONTRACT  # fmt: skip
# every column with interval/baseline columns beside it in a cell
FILLED = RESERVED | CONTRACT

# Fields of a run a command may take, besides `{args.NAME}`.
PLACEHOLDERS: tuple[str, ...] = (
    "nodes",
    "ranks",
    "tasks_per_node",
    "threads_per_task",
    "gpus_per_node",
    "batch_per_rank",
    "global_batch",
    "epochs",
    "repeat",
    "run_dir",
)
# Axes only a program's own code can honour: refused for a command unless it takes them itself.
PROGRAM_AXES: dict[str, str] = {
    "fp16_allreduce": "fp16 compression is set in the program's DistributedOptimizer",
    "mixed_precision": "mixed precision is a policy the program's code sets",
    "strategy": "MirroredStrategy is chosen in the program's code",
    "cross_device_ops": "cross-device ops belong to the program's MirroredStrategy",
    "bucket_cap_mb": "the bucket size is an argument of the program's DDP(...)",
    "gradient_as_bucket_view": "gradient_as_bucket_view is an argument of the program's DDP(...)",
    "static_graph": "static_graph is an argument of the program's DDP(...)",
    "fp16_compress": "a DDP communication hook is registered in the program's code",
}
ALL_PLACEHOLDERS: tuple[str, ...] = (*PLACEHOLDERS, *PROGRAM_AXES)
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
# Names the tidy table already has a column for; any other metric is an extra column.
MLLOG_FIGURES = ("images_per_s", "epoch_time_s", "fit_time_s")
COMMAND_PROGRAM = "command"  # the `program` field of a command run
COMMAND_KEYS = ("command", "cwd", "metrics", "throughput", "time", "interpreter", "framework")
# workload.framework: whose launch contract (and trace) a command follows, as the strategy of
# its cells (registry.COMMAND_FRAMEWORKS)
CommandFramework = Literal[tuple(COMMAND_FRAMEWORKS)]  # type: ignore[valid-type]
_FRAMEWORK_CHOICES = " or ".join(
    f"{name} (the default)" if name == DEFAULT_COMMAND_FRAMEWORK else name
    for name in COMMAND_FRAMEWORKS
)
AS_WRITTEN = "as-written"  # workload.interpreter: the command's own first word runs
PYTHONS = ("python", "python3")  # a leading word the profile's interpreter replaces


class ExtractorSpec(BaseModel):
    """One figure of merit as a campaign writes it (hpcscale.collect.readers.extract)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    pattern: str
    source: str = OUTPUT
    reduce: Literal["last", "first", "mean", "median", "min", "max", "sum", "series"] = "last"
    unit: str = ""
    better: Literal["higher", "lower"] | None = None
    scale: Literal["global", "per_rank"] = "global"
    required: bool = True
    ranks: Literal[0, "all"] = Field(
        default=0, description="0: rank 0's lines; all: each rank reduced, then combined"
    )
    across: Literal["sum", "mean", "min", "max"] | None = Field(
        default=None, description="how `ranks: all` combines the ranks' values (default sum)"
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        if problem := pattern_error(v):
            raise ValueError(f"pattern {v!r}: {problem}")
        return v

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if v != OUTPUT and (Path(v).is_absolute() or ".." in Path(v).parts):
            raise ValueError(f"source {v!r}: 'output' or a file inside the run directory")
        return v

    @model_validator(mode="after")
    def _ranks(self) -> ExtractorSpec:
        if self.ranks == ALL_RANKS and self.scale == "per_rank":
            raise ValueError(
                "ranks: all with scale: per_rank would count the ranks twice: `ranks: all` "
                "already combines every rank's value (across: sum by default)"
            )
        if self.ranks == ALL_RANKS and self.source != OUTPUT:
            raise ValueError("ranks: all reads each rank's own output: it needs source: output")
        if self.across is not None and self.ranks != ALL_RANKS:
            raise ValueError("across: combines the ranks of `ranks: all`; add ranks: all")
        return self

    def extractor(self) -> Extractor:
        better = self.better or default_better(self.name)
        fields = self.model_dump(exclude={"better", "across"})
        return Extractor(**fields, better=better, across=self.across or "sum")


def default_better(name: str) -> str:
    """`higher` for a rate (`*_per_s`) or an accuracy, else `lower` (times, losses)."""
    return "higher" if name.endswith("_per_s") or "accuracy" in name else "lower"


class CommandFields(BaseModel):
    """The workload keys of a command (campaign.Workload adds the bundled programs' keys)."""

    command: list[str] | None = Field(
        default=None, description="your program, one word per item (or one string, split as sh)"
    )
    cwd: str | None = Field(default=None, description="where it runs; relative to the campaign")
    metrics: Any = Field(default=None, description="a preset name, or presets and extractors")
    throughput: str | None = Field(default=None, description="the metric scaling tables use")
    time: str | None = Field(default=None, description="a time metric, for strong scaling")
    interpreter: Literal["profile", "as-written"] | None = Field(
        default=None,
        description="a leading `python`/`python3`: the profile's interpreter (profile, the "
        "default) or the one on the job's PATH (as-written: a conda or PyTorch environment)",
    )
    framework: CommandFramework | None = Field(
        default=None,
        description=f"the program's framework: {_FRAMEWORK_CHOICES}, whose launch "
        "contract it gets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT on every rank)",
    )

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                v = shlex.split(v)
            except ValueError as exc:
                raise ValueError(f"command cannot be split as a shell would: {exc}") from None
        if isinstance(v, list) and not v:
            raise ValueError("command needs at least the program to run")
        return [str(w) if isinstance(w, int | float) and not isinstance(w, bool) else w for w in v]


def fields_of(word: str) -> list[str]:
    """The placeholder names in one word (`{{`/`}}` are literal braces); ValueError on a lone
    brace or a format spec."""
    names = []
    for m in _FIELD.finditer(word):
        text = m.group(0)
        if text in ("{{", "}}"):
            continue
        if m.group(1) is None:
            raise ValueError(f"lone {text!r} in {word!r}: write {text * 2} for a literal brace")
        names.append(m.group(1))
    return names


def substitute(word: str, values: dict[str, object]) -> str:
    """One word with its placeholders replaced by `values` (bools as true/false)."""

    def repl(m: re.Match[str]) -> str:
        text = m.group(0)
        if text in ("{{", "}}"):
            return text[0]
        value = values[m.group(1)]
        return str(value).lower() if isinstance(value, bool) else str(value)

    return _FIELD.sub(repl, word)


def placeholder_values(run: Any, run_dir: str) -> dict[str, object]:
    """What every placeholder of `run` (a core.run.Run) stands for."""
    values: dict[str, object] = {n: run.value(n) for n in PLACEHOLDERS if n != "run_dir"}
    values["run_dir"] = run_dir
    for name in PROGRAM_AXES:
        values[name] = run.value(name)
    values.update({f"args.{k}": v for k, v in run.args.items()})
    return values


@lru_cache(maxsize=64)
def _template_words(command: str) -> tuple[str, ...]:
    """A campaign's command split once, not once per run rendered (shlex is slow)."""
    return tuple(shlex.split(command))


def command_words(command: str, values: dict[str, object], python: str | None) -> list[str]:
    """The run's argv: `command` (a run's shlex-joined template) with its placeholders filled;
    a leading `python`/`python3` is the profile's interpreter, as for the bundled programs."""
    words = [substitute(w, values) for w in _template_words(command)]
    if python is not None and words and words[0] in PYTHONS:
        words[0] = python
    return words


def shown_command(run: Any) -> str:
    """What `plan` shows a run executes (one rank's words; the run directory left as
    `{run_dir}`, since the workdir is chosen when rendering)."""
    words = command_words(run.command, placeholder_values(run, "{run_dir}"), "python")
    return shlex.join(words)


def label_of(words: list[str]) -> str:
    """A short name for the program (the table's `model`): the script's stem, else argv[0]'s."""
    for w in words[1:]:
        if re.search(r"\.(py|sh|jl|R|lua)$", w):
            return re.sub(r"[^A-Za-z0-9_]", "_", Path(w).stem) or COMMAND_PROGRAM
    return re.sub(r"[^A-Za-z0-9_]", "_", Path(words[0]).name) or COMMAND_PROGRAM


# ------------------------------------------------------------------ what reads the figures


def reading_of(metrics: Any, src: Source | None = None) -> tuple[list[Extractor], bool]:
    """`metrics:` -> its extractors (presets expanded) and whether the MLLOG reader runs.
    Errors are located in `src` when given (ValueError without it)."""

    def fail(key: KeyPath, msg: str) -> Exception:
        return src.error(("workload", "metrics", *key), msg) if src else ValueError(msg)

    items = metrics if isinstance(metrics, list) else [metrics]
    if metrics is None or not items:
        raise fail(
            (),
            "a command workload needs metrics: a preset "
            f"({', '.join(PRESET_NAMES)}) or a list of extractors",
        )
    extractors: list[Extractor] = []
    mllog = False
    for i, item in enumerate(items):
        key: KeyPath = (i,) if isinstance(metrics, list) else ()
        if isinstance(item, str):
            if item == MLLOG:
                mllog = True
            elif item in PRESET_NAMES:
                extractors.extend(preset_extractors(item))
            else:
                raise fail(
                    key,
                    f"unknown preset {item!r}{did_you_mean(item, PRESET_NAMES)}; "
                    f"presets: {', '.join(PRESET_NAMES)}",
                )
        elif isinstance(item, dict):
            if src is not None:
                spec = validate(ExtractorSpec, item, src, ("workload", "metrics", *key))
            else:
                spec = ExtractorSpec.model_validate(item)
            extractors.append(spec.extractor())
        else:
            raise fail(key, f"expected a preset name or an extractor mapping, got {item!r}")
    names = [e.name for e in extractors]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise fail((), f"metrics {', '.join(dup)} defined twice")
    for i, name in enumerate(names):
        if (why := reserved_problem(name, RESERVED, frozenset(names) | FILLED)) is not None:
            raise fail((i,) if isinstance(metrics, list) else (), why)
    return extractors, mllog


def figure_of(metrics: Any, throughput: str | None, time: str | None) -> tuple[str | None, str]:
    """The metric the scaling tables use and whether it is a rate or a time."""
    if throughput:
        return throughput, "throughput"
    if time:
        return time, "time"
    items = metrics if isinstance(metrics, list) else [metrics]
    for item in items:
        if isinstance(item, str) and item in PRESET_THROUGHPUT:
            return PRESET_THROUGHPUT[item], "throughput"
    return None, "throughput"


def check_command(c: Any, src: Source) -> None:
    """Every problem a command workload (of `c`, a core.campaign.Campaign) has before it runs,
    located in the campaign file: unknown placeholders, bad extractors, no figure to scale on,
    a time for weak scaling, axes it cannot honour."""
    workload, axes = c.workload, all_axes(c)
    used: set[str] = set()
    known = (*ALL_PLACEHOLDERS, *sorted(f"args.{a}" for a in arg_names(c)))
    for i, word in enumerate(workload.command):
        try:
            names = fields_of(word)
        except ValueError as exc:
            raise src.error(("workload", "command", i), str(exc)) from None
        for name in names:
            if name not in known:
                raise src.error(
                    ("workload", "command", i),
                    f"unknown placeholder {{{name}}}{did_you_mean(name, known)}; "
                    f"placeholders: {', '.join('{' + k + '}' for k in known)} "
                    "({{ and }} are literal braces)",
                )
        used.update(names)
    extractors, mllog = reading_of(workload.metrics, src)
    figure, kind = figure_of(workload.metrics, workload.throughput, workload.time)
    if figure is None:
        raise src.error(
            ("workload",),
            "a command workload needs `throughput:` (the metric the scaling tables use, e.g. "
            "images_per_s) or `time:` (a time metric, for strong scaling)",
        )
    if kind == "time" and c.scaling == "weak":
        raise src.error(
            ("workload", "time"),
            "weak scaling grows the problem with the ranks, so its time says nothing of speedup: "
            "name a `throughput:` metric, or use `time:` with scaling: strong",
        )
    offered = {e.name for e in extractors} | (set(MLLOG_FIGURES) if mllog else set())
    if not mllog and figure not in offered:
        raise src.error(
            ("workload", kind),
            f"{kind} metric {figure!r} is not among the metrics{did_you_mean(figure, offered)}; "
            f"metrics: {', '.join(sorted(offered))}",
        )
    if any(e.name == figure and e.reduce == "series" for e in extractors):
        raise src.error(
            ("workload", kind),
            f"{kind} metric {figure!r} is a `reduce: series` (a list of values): the scaling "
            "tables need one value per run; reduce it (last, mean, median, ...) or name another",
        )
    units = {e.name: e.unit for e in extractors}
    if (nature := nature_of(figure, units.get(figure, ""))) not in (None, kind):
        other = "time" if kind == "throughput" else "throughput"
        raise src.error(
            ("workload", kind),
            f"{kind} metric {figure!r} is a {nature} ({units.get(figure) or 'by its name'}): "
            f"name it under `{other}:`, or name a {kind} metric here",
        )
    for axis, why in PROGRAM_AXES.items():
        if axis in axes and axis not in used:
            raise src.error(
                ("matrix", axis),
                f"{axis} cannot be applied to a command workload ({why}); pass it to your "
                f"program yourself with a placeholder {{{axis}}} in workload.command, "
                "or sweep an args.<name> of your own",
            )


def command_metrics(workload: Any) -> list[str]:
    """The single-valued metrics a command workload extracts (not its series): each is a
    column of the results, so a reference may check it. None for a bundled program."""
    if workload.command is None:
        return []
    try:
        extractors, _ = reading_of(workload.metrics)
    except ValueError:
        return []
    return [e.name for e in extractors if e.reduce != "series"]


def command_units(workload: Any) -> dict[str, str]:
    """The unit each extractor of a command workload declares (the ones that declare one)."""
    if workload.command is None:
        return {}
    try:
        extractors, _ = reading_of(workload.metrics)
    except ValueError:
        return {}
    return {e.name: e.unit for e in extractors if e.unit}


def all_axes(c: Any) -> dict[str, Any]:
    """Every axis of a campaign's matrix (a core.campaign.Campaign), zip groups included."""
    return {**c.axes(), **{a: v for group in c.matrix.zip for a, v in group.items()}}


def arg_names(c: Any) -> set[str]:
    """The workload arguments a campaign sets, fixed or swept."""
    axes = [a.removeprefix("args.") for a in all_axes(c) if a.startswith("args.")]
    return {*c.workload.args, *axes}


def resolve_cwd(cwd: str | None, campaign_path: Path) -> str:
    """The directory the command runs in, absolute: `cwd` relative to the campaign file."""
    base = campaign_path.resolve().parent
    return str((base / cwd).resolve() if cwd else base)
