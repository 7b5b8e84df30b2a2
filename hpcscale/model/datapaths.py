"""The paths a campaign hands its jobs to read (data, validation data, weights): stand-ins left in
from a template, and paths the job will not find, told before anything is written or queued.

A job that cannot read its data fails minutes (or a queue wait) later, its reason only in its
output file. What can be told here:
- a placeholder (`/path/to/...`, `<...>`, ...: core.strict.PLACEHOLDERS) is wrong everywhere;
- a relative path, or one starting with `~` or holding `$VAR`, is never the path meant: the job
  runs in its run directory and gets values shell-quoted, as written (only `weights` expands `~`);
- on a system whose jobs run on this machine (`System.jobs_run_here`), a path that does not
  exist, or is not the directory or file the job opens, fails the job.
Elsewhere a path missing on this machine may still exist on the cluster: a warning only.

`validate` (and a dry run) make the first two warnings on systems it cannot see and errors on
those it can; `submit` refuses them on every system, and ignores paths it cannot see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hpcscale.model.campaign import Campaign, LoadedCampaign
from hpcscale.model.errors import InputError
from hpcscale.model.run import Run
from hpcscale.model.strict import placeholder_of
from hpcscale.model.vocab import ARGS_PREFIX
from hpcscale.model.yamlsrc import KeyPath

Kind = Literal["dir", "file"]
# The workload arguments that name something the job reads, and what it opens there
# (jobs/tf/train.py: --data-dir and --val-dir must be directories; jobs/tf/models/stackgan.py and
# classifier.py open --stage1-weights and --weights as files).
INPUTS: dict[str, Kind] = {
    "data_dir": "dir",
    "val_dir": "dir",
    "stage1_weights": "file",
    "weights": "file",
}
# `weights` values that name no file (jobs/tf/models/classifier.py weights_path).
WEIGHTS_KEYWORDS: tuple[str, ...] = ("none", "imagenet")
# Arguments whose `~` the job itself expands (classifier.weights_path: Path(...).expanduser()).
EXPANDS_USER: frozenset[str] = frozenset({"weights"})

_VARIABLE = re.compile(r"\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class PathProblem:
    """One argument value a job would not find. `certain`: wrong wherever the job runs
    (a placeholder, a relative or unexpanded path); else only seen missing on this machine."""

    key: KeyPath
    message: str
    certain: bool


def problems(lc: LoadedCampaign, runs: Iterable[Run]) -> list[PathProblem]:
    """Every distinct (argument, value) of `runs` a job would not find, in campaign order."""
    here = lc.system.jobs_run_here
    seen: dict[tuple[str, str], None] = {}
    for run in runs:
        for name, value in run.args.items():
            if isinstance(value, str):
                seen.setdefault((name, value))
    out = []
    for name, value in seen:
        why = _problem(name, value, here, lc.system.name)
        if why is not None:
            message, certain = why
            out.append(PathProblem(_key_of(lc.campaign, name, value), message, certain))
    return sorted(out, key=lambda p: lc.source.line_of(p.key) or 0)


def check(lc: LoadedCampaign, runs: Iterable[Run], *, submitting: bool) -> list[str]:
    """The problems of `runs` as located warnings; raise the errors (InputError naming file,
    line and key; every further one on its own line). Errors: anything on a system whose
    jobs run here; when `submitting`, anything certain on any system. Not submitting, the rest
    are warnings; submitting, a path missing only on this machine is the cluster's business."""
    here = lc.system.jobs_run_here
    errors: list[InputError] = []
    warnings: list[str] = []
    for p in problems(lc, runs):
        located = lc.source.error(p.key, p.message)
        if here or (submitting and p.certain):
            errors.append(located)
        elif not submitting:
            warnings.append(str(located))
    if errors:
        raise PathErrors(errors[0].file, errors[0].line, errors[0].key, errors[0].message,
                         tuple(errors[1:]))  # fmt: skip
    return warnings


@dataclass
class PathErrors(InputError):
    """The first located error, and the others on their own lines (all are fixed at once)."""

    others: tuple[InputError, ...] = ()

    def __str__(self) -> str:
        return "\n".join([super().__str__(), *map(str, self.others)])


def _problem(name: str, value: str, here: bool, system: str) -> tuple[str, bool] | None:
    """(message, certain) for one argument value, or None when the job will find it."""
    shown = f"{name} {value!r}"
    kind = INPUTS.get(name)  # other arguments are the program's own (`todo` may be a value)
    if kind is None or (name == "weights" and value in WEIGHTS_KEYWORDS):
        return None
    if marker := placeholder_of(value):
        return f"{shown} is a placeholder ({marker}): set it to the real path first", True
    if name not in EXPANDS_USER and value.startswith("~"):
        return (
            f"{shown}: the job does not expand `~` (values reach it quoted, as written); "
            "give the absolute path",
            True,
        )
    if _VARIABLE.search(value):
        return (
            f"{shown}: `$` variables are never expanded (values reach the job shell-quoted, "
            "as written); give the path itself",
            True,
        )
    path = Path(value).expanduser() if name in EXPANDS_USER else Path(value)
    if not path.is_absolute():
        return (
            f"{shown} is a relative path, but the job opens it from its own run directory; "
            "give an absolute path",
            True,
        )
    wrong = _not_found(path, kind, name)
    if wrong is None:
        return None
    if here:
        return f"{shown} {wrong} (system {system!r} runs its jobs on this machine)", False
    return (
        f"{shown} {wrong} on this machine; system {system!r} runs its jobs elsewhere, so this "
        "is not checked: make sure it exists there",
        False,
    )


def _not_found(path: Path, kind: Kind, name: str) -> str | None:
    """Why the job would not open `path` as a `kind` (None: it would)."""
    if kind == "dir":
        if path.is_dir():
            return None
        return "is not a directory" if path.exists() else "does not exist"
    if path.is_file() or (name == "weights" and Path(f"{path}.index").is_file()):
        return None  # a TF checkpoint is `<prefix>.index` + data files (classifier.weights_path)
    if path.exists():
        return "is not a file"
    return "does not exist"


def _key_of(c: Campaign, name: str, value: str) -> KeyPath:
    """Where the campaign sets this value of argument `name`: the matrix axis `args.<name>` (at
    the value's own list item), a zip group's, else `workload.args`."""
    axis = ARGS_PREFIX + name
    places: list[tuple[KeyPath, object]] = []
    if axis in c.axes():
        places.append((("matrix", axis), c.axes()[axis]))
    places += [
        (("matrix", "zip", i, axis), g[axis]) for i, g in enumerate(c.matrix.zip) if axis in g
    ]
    for key, values in places:
        if isinstance(values, list) and value in values:
            return (*key, values.index(value))
        if values == value:
            return key
    return ("workload", "args", name)
