"""Render one sbatch script per run from Jinja templates; every printed value is shell-quoted."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2
import msgspec

from hpcscale.core.launchers import horovod_env, launch_argv, program_argv
from hpcscale.core.paths import atomic_write, campaign_dir
from hpcscale.core.run import Run
from hpcscale.core.shell import Shell, finalize, join, quote
from hpcscale.core.system import ENV_NAME, SBATCH_SAFE, System
from hpcscale.errors import UsageError

TEMPLATE_DIRS = [Path(__file__).resolve().parents[2] / "templates"]


@cache
def environment(extra_dir: str | None = None) -> jinja2.Environment:
    dirs = ([extra_dir] if extra_dir else []) + [str(d) for d in TEMPLATE_DIRS]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        autoescape=False,
        auto_reload=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sbatch"] = _sbatch_value
    env.filters["envname"] = _env_name
    return env


def _sbatch_value(value: object) -> Shell:
    """#SBATCH lines are parsed by sbatch, not a shell: allow only values needing no quotes."""
    text = str(value)
    if not SBATCH_SAFE.match(text):
        raise UsageError(
            f"value {text!r} cannot go on an #SBATCH line (use plain characters, no spaces)"
        )
    return Shell(text)


def _env_name(name: str) -> Shell:
    if not ENV_NAME.match(name):
        raise UsageError(f"{name!r} is not a valid environment variable name")
    return Shell(name)


def slurm_time(minutes: int) -> str:
    d, rem = divmod(minutes, 24 * 60)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def job_name(campaign: str, run_id: str) -> str:
    """Carries campaign and run id, so a lost ledger write can be repaired from squeue/sacct."""
    return f"hpcscale.{campaign}.{run_id}"


@dataclass(frozen=True)
class Rendered:
    run: Run
    run_dir: Path
    script: str
    program: Shell
    launch: Shell
    env: dict[str, object]


def render_run(run: Run, system: System, run_dir: Path, rid: str | None = None) -> Rendered:
    flavour = system.flavour(run.mpi)
    env: dict[str, object] = {**system.env, **flavour.env, **horovod_env(run)}
    program = program_argv(run, system, run_dir)
    launch = launch_argv(run, system, program, list(env))
    launch_text, program_text = join(launch), join(program)
    rid = rid or run.run_id
    if not SBATCH_SAFE.match(str(run_dir)):
        raise UsageError(
            f"run directory {run_dir} has characters #SBATCH cannot take; "
            "choose a --workdir path of plain characters (no spaces)"
        )
    context = {
        "run": run,
        "run_id": rid,
        "system": system,
        "job_name": job_name(run.campaign, rid),
        "run_dir": run_dir,
        "time": slurm_time(run.time_limit_min),
        "modules": [*system.modules, *flavour.modules],
        "env": env,
        "launch": launch_text,
        "program": program_text,
        "needs_hostfile": run.launcher in ("mpirun_rsh", "horovodrun")
        and system.scheduler == "slurm",
        "quote": quote,
    }
    try:
        script = environment().get_template(system.template).render(context)
    except jinja2.TemplateNotFound as exc:
        raise UsageError(
            f"system {system.name!r}: template {exc.name!r} not found in "
            f"{', '.join(map(str, TEMPLATE_DIRS))}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise UsageError(f"template {system.template}: {exc.message}") from None
    return Rendered(run, run_dir, script, program_text, launch_text, env)


def _files(r: Rendered) -> tuple[tuple[str, bytes, int], ...]:
    record = msgspec.json.format(msgspec.json.encode(r.run.as_record(r.run_dir.name)), indent=2)
    record += b"\n"
    return (("job.sbatch", r.script.encode(), 0o755), ("run.json", record, 0o644))


def write_run(r: Rendered) -> None:
    """job.sbatch and run.json, each written atomically; an identical file is left untouched."""
    r.run_dir.mkdir(parents=True, exist_ok=True)
    for name, data, mode in _files(r):
        path = r.run_dir / name
        if path.exists() and path.read_bytes() == data:
            continue
        atomic_write(path, data, mode)


def _write_new(rendered: list[Rendered], runs_dir: Path) -> None:
    """A campaign's first render: write everything into a staging directory, then rename it
    into place, so the runs appear all at once or not at all (and fast: no per-file renames)."""
    stage = runs_dir.with_name(f".runs.staging-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        stage.mkdir(parents=True)
        base = str(stage)
        for r in rendered:
            d = os.path.join(base, r.run_dir.name)
            os.mkdir(d)
            for name, data, mode in _files(r):
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
        os.rename(stage, runs_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def render_all(
    runs: list[Run], system: System, workdir: Path | None, campaign_yaml: str
) -> list[Rendered]:
    """Render every run in memory first (so an error writes nothing), then write them all."""
    if not runs:
        return []
    cdir = campaign_dir(runs[0].campaign, workdir)
    runs_dir = cdir / "runs"
    rendered = []
    for run in runs:
        rid = run.run_id  # hashed once per run here
        rendered.append(render_run(run, system, runs_dir / rid, rid))
    atomic_write(cdir / "campaign.yaml", campaign_yaml, 0o644)
    if not runs_dir.exists():
        try:
            _write_new(rendered, runs_dir)
            return rendered
        except OSError as exc:  # another render created it meanwhile: merge run by run
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    for r in rendered:
        write_run(r)
    return rendered
