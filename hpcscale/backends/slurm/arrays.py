"""Grouping runs into sbatch calls: job arrays per resource shape, each at most MaxArraySize
tasks and indexed from 0 (or one job per run), the shape's wrapper script and each array's
index -> run list. Pure planning: no SLURM is called here (limits.py reads the limits)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcscale.backends.slurm.script import job_name
from hpcscale.formats.atomic import atomic_write
from hpcscale.render.render import Rendered

ARRAYS = "arrays"
DEFAULT_MAX_ARRAY_SIZE = 1001  # SLURM's default MaxArraySize: indices 0..1000
# #SBATCH options that identify or place a job rather than size it (not part of a shape).
NOT_SHAPE = ("--job-name", "--comment", "--output", "--error")
WRAPPER = """#!/bin/bash
# Written by hpcscale for the resource shape
#   {shape}
# Array task N runs the rendered job.sbatch of the run on line "N run_id run_dir" of the list
# file given as $1, with its output in that run's directory (slurm-<jobid>.out).
set -euo pipefail
line="$(awk -v i="${{SLURM_ARRAY_TASK_ID:?not a SLURM array task}}" \\
  '$1 == i {{print $2, $3; exit}}' "$1")"
if [ -z "$line" ]; then
  echo "hpcscale: no run for array index $SLURM_ARRAY_TASK_ID in $1" >&2
  exit 3
fi
run_dir="${{line#* }}"
cd "$run_dir"
exec bash ./job.sbatch > "$run_dir/slurm-$SLURM_JOB_ID.out" 2>&1
"""


def arrays_dir(cdir: Path) -> Path:
    return cdir / ARRAYS


def shape_of(r: Rendered) -> tuple[str, ...]:
    """The sizing #SBATCH options of a rendered script (nodes, tasks, cpus, gpus, time,
    partition, account, ...): runs with equal shapes can share one array."""
    opts = []
    for line in r.script.splitlines():
        if line.startswith("#SBATCH "):
            opt = line.removeprefix("#SBATCH ").strip()
            if not opt.startswith(NOT_SHAPE):
                opts.append(opt)
    return tuple(opts)


def shape_hash(shape: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(shape).encode()).hexdigest()[:10]


def index_spec(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8' (sbatch --array syntax)."""
    parts: list[str] = []
    ordered = sorted(set(indices))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass
class Batch:
    """One sbatch call: an array of runs of one shape, or one plain job. Array indices are
    local to the array (0..n-1, so below any MaxArraySize that admits n tasks); the array's
    `<token>.runs` file maps them back to runs."""

    campaign: str
    token: str  # arrays: names the job and its .runs list; plain jobs: the run id
    runs: list[tuple[int, Rendered]]  # (array index, run)
    shape: tuple[str, ...]
    array: bool
    # a job id this batch starts after (afterany): with a throttle, one submit's arrays run one
    # after another, since %N bounds only the tasks of one array (see `chained`)
    after: str | None = None

    @property
    def run_ids(self) -> list[str]:
        return [r.run.run_id for _, r in self.runs]

    def wrapper(self, cdir: Path) -> Path:
        return arrays_dir(cdir) / f"{shape_hash(self.shape)}.sh"

    def runs_file(self, cdir: Path) -> Path:
        return arrays_dir(cdir) / f"{self.token}.runs"

    def argv(self, cdir: Path, max_parallel: int | None) -> list[str]:
        dep = [f"--dependency=afterany:{self.after}"] if self.after else []
        if not self.array:
            return ["sbatch", "--parsable", *dep, str(self.runs[0][1].run_dir / "job.sbatch")]
        spec = index_spec(i for i, _ in self.runs)
        if max_parallel:
            spec += f"%{max_parallel}"
        return [
            "sbatch",
            "--parsable",
            *dep,
            f"--array={spec}",
            f"--job-name={job_name(self.campaign, self.token)}",
            f"--comment=hpcscale:{self.campaign}:{self.token}",
            *self.shape,
            f"--output={arrays_dir(cdir)}/slurm-%A_%a.out",
            str(self.wrapper(cdir)),
            str(self.runs_file(cdir)),
        ]


def plan(
    rendered: Sequence[Rendered],
    indices: Mapping[str, int] | None = None,
    *,
    array: bool,
    stamp: str,
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE,
) -> list[Batch]:
    """Group runs into sbatch calls: per shape, arrays of at most `max_array_size` tasks
    (indices 0..n-1), or one job per run. `indices` (run id -> position, e.g. the ledger's
    order) orders the runs; `max_array_size` < 1 (arrays disabled) means one job per run."""
    ordered = list(rendered)
    if indices is not None:
        ordered.sort(key=lambda r: indices.get(r.run.run_id, len(indices)))
    if not array or max_array_size < 1:
        return [Batch(r.run.campaign, r.run.run_id, [(0, r)], shape_of(r), False) for r in ordered]
    groups: dict[tuple[str, ...], list[Rendered]] = {}
    for r in ordered:
        groups.setdefault(shape_of(r), []).append(r)
    out = []
    for shape, runs in groups.items():
        for k, start in enumerate(range(0, len(runs), max_array_size)):
            chunk = runs[start : start + max_array_size]
            token = f"a-{shape_hash(shape)}-{stamp}-{k}"
            out.append(Batch(chunk[0].run.campaign, token, list(enumerate(chunk)), shape, True))
    return out


def chained(batch: Batch, max_parallel: int | None, earlier: Sequence[str]) -> Batch:
    """`batch` set to start after a job of the same submit (`earlier`: its job ids so far, in
    order, over every round of `--follow`) when a throttle is asked for, so that at most
    `max_parallel` runs go at once across all its sbatch calls, not only within one array (the
    local cluster's 1-node and 2-node arrays would otherwise run together on one machine).
    An array (itself throttled to %N) starts after the last job; a plain job after the one
    `max_parallel` jobs back, which makes N lanes of one job at a time: N at once."""
    lag = 1 if batch.array else (max_parallel or 0)
    batch.after = earlier[-lag] if max_parallel and len(earlier) >= lag else None
    return batch


def describe(
    rendered: Sequence[Rendered],
    *,
    array: bool,
    max_parallel: int | None,
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE,
) -> list[str]:
    """The sbatch command lines a submit would run (for `submit --dry-run`). The arrays/ files
    they name are written by a submit just before its sbatch: each array says so, since a dry
    run writes only the run directories."""
    if not rendered:
        return []
    cdir = rendered[0].run_dir.parent.parent
    batches = plan(rendered, array=array, stamp="<stamp>", max_array_size=max_array_size)
    out = []
    for n, b in enumerate(batches, start=1):
        chained(b, max_parallel, [f"<job of sbatch {k}>" for k in range(1, n)])
        if b.array:
            out.append(
                f"# array {n}/{len(batches)}: {len(b.runs)} run(s), indices "
                f"{index_spec(i for i, _ in b.runs)}: {' '.join(b.run_ids)}"
            )
            out.append(
                f"# would write (not written by a dry run): {b.wrapper(cdir)} (wrapper), "
                f"{b.runs_file(cdir)} (index -> run)"
            )
        out.append(" ".join(b.argv(cdir, max_parallel)))
    return out


def write_array_files(cdir: Path, batch: Batch) -> None:
    """The shape's wrapper script and this array's index -> run list (durable: repair reads it)."""
    wrapper = batch.wrapper(cdir)
    text = WRAPPER.format(shape=" ".join(batch.shape))
    if not wrapper.exists() or wrapper.read_text() != text:
        atomic_write(wrapper, text, mode=0o755)
    lines = "".join(f"{i} {r.run.run_id} {r.run_dir}\n" for i, r in batch.runs)
    atomic_write(batch.runs_file(cdir), lines, durable=True)


def read_runs(path: Path) -> dict[int, str]:
    """index -> run id from an array's .runs file."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            out[int(parts[0])] = parts[1]
    return out
