"""Grouping runs into sbatch calls: one job array per resource shape (or one job per run), the
array's wrapper script and its index -> run list. Pure planning: no SLURM is called here."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcscale.core.render import Rendered, job_name
from hpcscale.formats.atomic import atomic_write

ARRAYS = "arrays"
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
    """One sbatch call: an array of runs of one shape, or one plain job."""

    campaign: str
    token: str  # arrays: names the job and its .runs list; plain jobs: the run id
    runs: list[tuple[int, Rendered]]  # (array index, run)
    shape: tuple[str, ...]
    array: bool

    @property
    def run_ids(self) -> list[str]:
        return [r.run.run_id for _, r in self.runs]

    def argv(self, cdir: Path, max_parallel: int | None) -> list[str]:
        if not self.array:
            return ["sbatch", "--parsable", str(self.runs[0][1].run_dir / "job.sbatch")]
        spec = index_spec(i for i, _ in self.runs)
        if max_parallel:
            spec += f"%{max_parallel}"
        adir = arrays_dir(cdir)
        return [
            "sbatch",
            "--parsable",
            f"--array={spec}",
            f"--job-name={job_name(self.campaign, self.token)}",
            f"--comment=hpcscale:{self.campaign}:{self.token}",
            *self.shape,
            f"--output={adir}/slurm-%A_%a.out",
            str(adir / f"{shape_hash(self.shape)}.sh"),
            str(adir / f"{self.token}.runs"),
        ]


def plan(
    rendered: Sequence[Rendered], indices: dict[str, int], *, array: bool, stamp: str
) -> list[Batch]:
    """Group runs into sbatch calls: one array per shape, or one job per run."""
    if not array:
        return [
            Batch(r.run.campaign, r.run.run_id, [(indices[r.run.run_id], r)], shape_of(r), False)
            for r in rendered
        ]
    groups: dict[tuple[str, ...], list[tuple[int, Rendered]]] = {}
    for r in rendered:
        groups.setdefault(shape_of(r), []).append((indices[r.run.run_id], r))
    return [
        Batch(runs[0][1].run.campaign, f"a-{shape_hash(shape)}-{stamp}", runs, shape, True)
        for shape, runs in groups.items()
    ]


def describe(rendered: Sequence[Rendered], *, array: bool, max_parallel: int | None) -> list[str]:
    """The sbatch command lines a submit would run (for `submit --dry-run`)."""
    if not rendered:
        return []
    cdir = rendered[0].run_dir.parent.parent
    indices = {r.run.run_id: i for i, r in enumerate(rendered)}
    out = []
    for b in plan(rendered, indices, array=array, stamp="<stamp>"):
        if b.array:
            out.append(f"# {len(b.runs)} run(s): {' '.join(b.run_ids)}")
        out.append(" ".join(b.argv(cdir, max_parallel)))
    return out


def write_array_files(cdir: Path, batch: Batch) -> None:
    """The shape's wrapper script and this array's index -> run list (durable: repair reads it)."""
    adir = arrays_dir(cdir)
    wrapper = adir / f"{shape_hash(batch.shape)}.sh"
    text = WRAPPER.format(shape=" ".join(batch.shape))
    if not wrapper.exists() or wrapper.read_text() != text:
        atomic_write(wrapper, text, mode=0o755)
    lines = "".join(f"{i} {r.run.run_id} {r.run_dir}\n" for i, r in batch.runs)
    atomic_write(adir / f"{batch.token}.runs", lines, durable=True)


def read_runs(path: Path) -> dict[int, str]:
    """index -> run id from an array's .runs file."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            out[int(parts[0])] = parts[1]
    return out
