"""The workloads a campaign can run, read from their declaration (jobs/tf/manifest.py): programs,
models and the job's own arguments with their types, ranges and rules.

The manifest is loaded by its path, standard library only, so a campaign's `model:` and `args:` are
checked by `validate` exactly as the job's parser would check them, without TensorFlow and before
anything is queued. Which manifest: the one of the jobs directory the runs use, i.e. a system
profile's `jobs_dir` (the jobs root: the TensorFlow programs and their manifest in its tf/) when it
is a directory here (a directory without tf/manifest.py declares nothing, so its programs'
arguments go unchecked), else the bundled jobs/ (hpcscale.model.resources; a `jobs_dir` that only
exists on the cluster holds a copy of it). Names hpcscale itself sets (its
job flags, run fields, axes) are always refused as workload arguments: the job would take the
campaign's value while the plan, run.json and the report showed hpcscale's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from hpcscale.model.errors import UsageError
from hpcscale.model.job_cli import JOB_FLAGS, flag_of
from hpcscale.model.resources import jobs_dir as bundled_jobs_dir
from hpcscale.model.validation import did_you_mean
from hpcscale.model.vocab import AXIS_TERMS, RUN_TERMS

TF_PROGRAMS = "tf"  # the TensorFlow programs' folder in a jobs root (jobs/tf/; jobs/torch/ beside)
MANIFEST = bundled_jobs_dir() / TF_PROGRAMS / "manifest.py"
_MODULE = "hpcscale_workload_manifest"  # not `jobs.tf.manifest`: `jobs` stays unimported
Declaration = ModuleType | None  # a loaded manifest; None: a jobs directory that declares nothing

# Names hpcscale sets on the job or records for the run: never a workload argument.
RESERVED: frozenset[str] = frozenset({*JOB_FLAGS, *RUN_TERMS, *AXIS_TERMS})


@dataclass(frozen=True)
class ArgInfo:
    name: str  # the campaign's `args:` key
    flag: str  # the job's option
    type: str  # int | float | path | switch
    default: Any
    range: str
    help: str
    models: tuple[str, ...]  # the models that use it (empty: every model)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    min_image_size: int
    help: str
    args: list[ArgInfo]


def declared(jobs_dir: str | None) -> Declaration:
    """The manifest of the jobs directory a system's runs use (see the module)."""
    if jobs_dir and Path(jobs_dir).is_dir():
        own = Path(jobs_dir) / TF_PROGRAMS / "manifest.py"
        if not own.is_file() and (Path(jobs_dir) / "manifest.py").is_file():
            # a copy of the bundled jobs/ from before they moved into jobs/tf/: its programs are
            # not where the scripts will look, and its checks would silently be skipped
            raise UsageError(
                f"{jobs_dir} holds the bundled programs in the old flat layout "
                f"(manifest.py at its top, no {TF_PROGRAMS}/): the TensorFlow programs now live "
                f"in {TF_PROGRAMS}/ beside torch/; copy hpcscale's jobs/ there again"
            )
        return manifest(own.absolute()) if own.is_file() else None
    return manifest()


@lru_cache(maxsize=8)
def manifest(path: Path = MANIFEST) -> ModuleType:
    """A manifest, loaded once by path (no `jobs` import, no TensorFlow)."""
    if not path.is_file():
        why = " (hpcscale's bundled programs are missing: reinstall hpcscale)"
        raise UsageError(f"no workload manifest at {path}{why if path == MANIFEST else ''}")
    name = _MODULE if path == MANIFEST else f"{_MODULE}_{_digest(path)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module while it executes
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(f"{path}: cannot load the workload manifest: {exc}") from None
    return module


def _digest(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:12]


def program_problem(program: str, decl: Declaration) -> str | None:
    if decl is None or program in decl.PROGRAMS:
        return None
    return (
        f"unknown program {program!r}{did_you_mean(program, decl.PROGRAMS)} (jobs/tf/manifest.py "
        f"declares no jobs/tf/{program}.py); programs: {', '.join(decl.PROGRAMS)}"
    )


def model_problem(model: Any, decl: Declaration) -> str | None:
    if decl is None:
        return None if isinstance(model, str) else f"expected a model name, got {model!r}"
    if isinstance(model, str) and model in decl.MODELS:
        return None
    return (
        f"unknown model {model!r}{did_you_mean(str(model), decl.MODELS)}; "
        f"models: {', '.join(decl.MODELS)} (`hpcscale models` lists them)"
    )


def arg_name_problem(name: str, decl: Declaration) -> str | None:
    """Why `name` cannot be a workload argument (hpcscale sets it, or the job has no such
    argument), or None."""
    if name in RESERVED:
        return f"{name!r} is set by hpcscale, not a workload argument: {_instead(name)}"
    if decl is None:
        return None
    declared = decl.ARGS
    if name not in declared:
        return (
            f"unknown workload argument {name!r}{did_you_mean(name, declared)} (the job would "
            f"reject {flag_of(name)}); arguments: {', '.join(declared)} (`hpcscale models`)"
        )
    return None


_HINTS = {
    "seed": "each repeat runs with seed = its repeat number; use `repeats:` for more seeds",
    "threads": "use the matrix axis `threads_per_task` (or `layout`)",
    "devices": "use the matrix axis `gpus_per_node` (GPUs) or `replicas_per_task` (CPU) "
    "with strategy: mirrored",
    "timeline": "use `collect: {timeline: true}`",
    "mark_cycles": "use `collect: {mark_cycles: true}`",
    "run_dir": "hpcscale gives each run its own directory",
}


def _instead(name: str) -> str:
    if name in _HINTS:
        return _HINTS[name]
    if name in AXIS_TERMS:
        return f"give it as the matrix axis `{name}` (`where:` sees the run's value)"
    return "it is a run field (run.json, `where:` and the report name it)"


def args_problem(model: str, args: dict[str, Any], decl: Declaration) -> tuple[str, str] | None:
    """(argument, why) for the first value or rule the job would reject, or None. Values are
    checked as the job parses them (`--flag str(value)`); names are checked at load."""
    if decl is None:
        return None
    # the type is part of the key: 1, 1.0 and True are equal, but not to the job's parser
    return _args_problem(decl, model, tuple(sorted((k, type(v), v) for k, v in args.items())))


@lru_cache(maxsize=4096)  # a matrix repeats few (model, args) pairs over many cells
def _args_problem(
    m: ModuleType, model: str, items: tuple[tuple[str, type, Any], ...]
) -> tuple[str, str] | None:
    values: dict[str, Any] = {}
    for name, _, value in items:
        arg = m.ARGS.get(name)
        if arg is None:
            continue
        if arg.type == "switch":
            if not isinstance(value, bool):
                return name, f"{arg.flag} is a switch: give true or false, not {value!r}"
            continue
        if isinstance(value, bool):
            return name, f"{arg.flag} takes a {arg.type} value, not {str(value).lower()}"
        try:
            values[name] = arg.convert(str(value))
        except ValueError as exc:
            return name, f"{arg.flag}: {exc}"
    if model not in m.MODELS:
        return None  # reported as an unknown model
    broken = m.rule_problem(model, values)
    return None if broken is None else (broken[0], f"{m.ARGS[broken[0]].flag}: {broken[1]}")


def arguments() -> list[ArgInfo]:
    """Every argument of the manifest, in its order."""
    return [
        ArgInfo(a.name, a.flag, a.type, a.default, a.range, a.help, tuple(a.models))
        for a in manifest().ARGS.values()
    ]


def models() -> list[ModelInfo]:
    """Every model of the manifest with the arguments it takes (`hpcscale models`)."""
    args = arguments()
    return [
        ModelInfo(
            m.name,
            m.family,
            m.min_image_size,
            m.help,
            [a for a in args if not a.models or m.name in a.models],
        )
        for m in manifest().MODELS.values()
    ]
