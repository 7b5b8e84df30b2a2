"""Render one sbatch script per run from Jinja templates; every printed value is shell-quoted."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import jinja2
import msgspec

from hpcscale.formats.atomic import atomic_write
from hpcscale.formats.run_record import (
    VERSIONS_DIR,
    campaign_version_of,
    encode_run_record,
    load_run_record,
)
from hpcscale.frameworks import for_run
from hpcscale.model.errors import UsageError
from hpcscale.model.names import SBATCH_SAFE
from hpcscale.model.run import Run
from hpcscale.model.system import System
from hpcscale.model.template_files import template_problem
from hpcscale.render.launch import launch_argv, needs_hostfile
from hpcscale.render.templates import environment
from hpcscale.state.paths import campaign_dir
from hpcscale.state.workdirs import remember
from hpcscale.util.forks import can_fork
from hpcscale.util.gcpause import gc_paused
from hpcscale.util.shell import Shell, join, quote
from hpcscale.version import hpcscale_version

Progress = Callable[[int, int], None]  # (runs done, runs in all)
RENDEZVOUS_VARS = ("MASTER_ADDR", "MASTER_PORT")  # set by a scheduler's `rendezvous` lines


def _template(system: System) -> jinja2.Template:
    """Called per run: the template comes from the environment's cache; the reason is worked
    out only when it cannot be had."""
    dirs = tuple(map(str, system.template_dirs()))
    try:
        return environment(dirs).get_template(system.template)
    except jinja2.TemplateError as exc:
        problem = template_problem(dirs, system.template) or f"template cannot be loaded: {exc}"
        raise UsageError(f"system {system.name!r}: {problem}") from None


class SchedulerScript(Protocol):
    """A scheduler's part of a job script (hpcscale.backends.script_for: each scheduler's
    own module): `preamble` (its header lines: #SBATCH for SLURM), `hostlist` (the line that
    writes the allocation's hosts to $HPCSCALE_HOSTFILE) and any names of its own a site's
    template may use. Handed in by the caller, so render never imports a backend."""

    def context(self, run: Run, system: System, run_dir: str, run_id: str) -> dict[str, Any]: ...

    def rendezvous(self, run: Run, system: System) -> list[Shell]:
        """Lines exporting MASTER_ADDR and MASTER_PORT: where the ranks of a framework with a
        rendezvous (torch) meet."""
        ...


@dataclass(frozen=True)
class Rendered:
    run: Run
    run_dir: Path
    script: str
    program: Shell
    launch: Shell
    env: dict[str, object]

    @classmethod
    def from_run_dir(cls, run_dir: Path) -> Rendered:
        """A run as rendered earlier, from its run.json and job.sbatch: what `resubmit` hands
        a backend again, whatever the campaign file says now. The launch line is the script's."""
        record = load_run_record(run_dir / "run.json")
        try:
            run = Run.from_record(msgspec.structs.asdict(record))
            script = (run_dir / "job.sbatch").read_text()
        except (ValueError, OSError) as exc:
            raise UsageError(f"{run_dir}: cannot be submitted again: {exc}") from None
        return cls(run, run_dir, script, Shell(""), Shell(""), {})


def render_run(
    run: Run, system: System, script: SchedulerScript, run_dir: Path, rid: str | None = None
) -> Rendered:
    dir_text = os.fspath(run_dir)  # templates get the directory as text
    fw = for_run(run)
    env: dict[str, object] = {**system.env_for(run), **fw.env(run, dir_text)}
    # every word quoted, so a campaign value (a user's command too) is never shell
    program_text = join(fw.argv(run, system, dir_text))
    # the script's own variables every rank needs too (mpirun passes only those it is told)
    meet = script.rendezvous(run, system) if fw.rendezvous else []
    passed = [*env, *RENDEZVOUS_VARS] if meet else list(env)
    # the program goes in already quoted, as one Shell word: its words are quoted once, not twice
    launch_text = join(launch_argv(run, system, [program_text], passed))
    rid = rid or run.run_id
    if not SBATCH_SAFE.fullmatch(dir_text):
        raise UsageError(
            f"run directory {run_dir} has characters #SBATCH cannot take; "
            "choose a --workdir path of plain characters (no spaces)"
        )
    context = {
        "run": run,
        "run_id": rid,
        "system": system,
        "run_dir": dir_text,
        "cwd": run.cwd or dir_text,  # where the program starts: a command's own directory
        "partition": system.partition_for(run),
        "modules": system.modules_for(run),
        "env": env,
        "launch": launch_text,
        "program": program_text,
        "needs_hostfile": needs_hostfile(run, system),
        "rendezvous": meet,
        # the user's own shell lines, printed as given: Shell, so never quoted (and a printed
        # value is never evaluated as a template, so `{{ ... }}` in them stays text)
        "setup": [Shell(line) for line in system.setup],
        "quote": quote,
        **script.context(run, system, dir_text, rid),
    }
    text = _render_template(_template(system), context)
    return Rendered(run, run_dir, text, program_text, launch_text, env)


@cache
def _globals(template: jinja2.Template) -> dict[str, Any]:
    return dict(template.globals)


def _render_template(template: jinja2.Template, context: dict[str, Any]) -> str:
    """`Template.render` without its per-call merge of the globals (a ChainMap walked for
    every run): they are merged into the context here from a per-template copy."""
    ctx = template.new_context({**_globals(template), **context}, shared=True)
    try:
        return template.environment.concat(template.root_render_func(ctx))  # type: ignore[attr-defined]
    except jinja2.UndefinedError as exc:
        raise UsageError(f"template {template.name}: {exc.message}") from None
    except Exception:
        template.environment.handle_exception()
        raise


def _files(r: Rendered, version: str | None = None) -> tuple[tuple[str, bytes, int], ...]:
    """The run's files; run.json names the campaign file `version` and the hpcscale that
    rendered it."""
    rec = r.run.as_record(r.run_dir.name)
    if version is not None:
        rec["campaign_version"] = version
    rec["hpcscale_version"] = hpcscale_version()
    record = encode_run_record(rec)
    return (("job.sbatch", r.script.encode(), 0o755), ("run.json", record, 0o644))


def write_run(r: Rendered, version: str | None = None) -> None:
    """job.sbatch and run.json, each written atomically; an identical file is left untouched."""
    r.run_dir.mkdir(parents=True, exist_ok=True)
    for name, data, mode in _files(r, version):
        path = r.run_dir / name
        if path.exists() and path.read_bytes() == data:
            continue
        atomic_write(path, data, mode)


def _write_into(rendered: list[Rendered], stage: Path, version: str | None) -> None:
    """Fresh files into a staging directory nobody else sees: no temp files, no renames."""
    base = os.open(stage, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for r in rendered:
            name = r.run_dir.name
            os.mkdir(name, dir_fd=base)
            d = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=base)
            try:
                for file, data, mode in _files(r, version):
                    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, dir_fd=d)
                    try:
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view) :]
                    finally:
                        os.close(fd)
            finally:
                os.close(d)
    finally:
        os.close(base)


def _render_slice(
    runs: list[Run],
    system: System,
    script: SchedulerScript,
    runs_dir: Path,
    stage: Path | None,
    version: str | None = None,
    tick: Callable[[int], None] | None = None,
) -> list[Rendered]:
    rendered = []
    for run in runs:
        rid = run.run_id  # hashed once per run here
        rendered.append(render_run(run, system, script, runs_dir / rid, rid))
        if tick is not None and len(rendered) % PROGRESS_EVERY == 0:
            tick(len(rendered))
    if stage is not None:  # only once every run of the slice rendered: an error writes nothing
        _write_into(rendered, stage, version)
    return rendered


def render_workers(n_runs: int, requested: int | None = None) -> int:
    """Processes to render with: forked workers pay off only for big campaigns, need fork, and
    must not fork a process that runs threads (their locks would be copied mid-use)."""
    env = os.environ.get("HPCSCALE_RENDER_WORKERS", "").strip()
    if requested is None and env:
        if not env.isdigit() or int(env) < 1:
            raise UsageError(f"HPCSCALE_RENDER_WORKERS={env!r}: give a whole number, 1 or more")
        requested = int(env)
    if requested is None:
        if n_runs < PARALLEL_MIN_RUNS:
            return 1
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        requested = min(cpus or 1, MAX_WORKERS)
    if requested <= 1 or not can_fork():
        return 1
    return max(1, min(requested, n_runs))


PARALLEL_MIN_RUNS = 1000  # below this, forking costs about what it saves
PROGRESS_EVERY = 500  # runs between two calls of render_all's `progress`
MAX_WORKERS = 8
_RESULTS = msgspec.msgpack.Encoder(enc_hook=str)  # Shell text crosses the pipe as plain str


def _worker(
    conn: Connection,
    runs: list[Run],
    system: System,
    script: SchedulerScript,
    runs_dir: Path,
    stage: Path | None,
    version: str | None = None,
) -> None:
    """Runs in a forked child: everything it needs was inherited, only results are sent."""
    try:
        rendered = _render_slice(runs, system, script, runs_dir, stage, version)
        out = [(r.script, r.program, r.launch, r.env) for r in rendered]
        conn.send_bytes(_RESULTS.encode(("ok", out)))
    except UsageError as exc:
        conn.send_bytes(msgspec.msgpack.encode(("usage", str(exc))))
    except BaseException as exc:  # reported to the parent, which raises it there
        conn.send_bytes(msgspec.msgpack.encode(("error", f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


def _render_parallel(
    runs: list[Run],
    system: System,
    script: SchedulerScript,
    runs_dir: Path,
    stage: Path | None,
    workers: int,
    version: str | None = None,
    progress: Progress | None = None,
) -> list[Rendered]:
    """The first slice renders here while forked children render the others (`progress`
    counts this slice's runs as they render, a child's when its results arrive)."""
    ctx = mp.get_context("fork")
    bounds = [len(runs) * k // workers for k in range(workers + 1)]
    slices = [runs[bounds[k] : bounds[k + 1]] for k in range(workers)]
    _template(system)  # compiled once, before the fork, not once per child
    for stream in (sys.stdout, sys.stderr):  # or a child would print the parent's buffer again
        stream.flush()
    procs: list[tuple[mp.process.BaseProcess, Connection]] = []
    try:
        for part in slices[1:]:
            recv, send = ctx.Pipe(duplex=False)
            args = (send, part, system, script, runs_dir, stage, version)
            p = ctx.Process(target=_worker, args=args, daemon=True)
            p.start()
            send.close()
            procs.append((p, recv))
        tick = None if progress is None else (lambda done: progress(done, len(runs)))
        rendered = _render_slice(slices[0], system, script, runs_dir, stage, version, tick)
        for k, ((p, recv), part) in enumerate(zip(procs, slices[1:], strict=True), start=2):
            try:
                status, payload = msgspec.msgpack.decode(recv.recv_bytes())
            except EOFError:
                p.join()
                raise RuntimeError(
                    f"render worker {k}/{workers} died (exit code {p.exitcode})"
                ) from None
            if status == "usage":
                raise UsageError(payload)
            if status != "ok":
                raise RuntimeError(f"render worker {k}/{workers}: {payload}")
            for run, (script, program, launch, env) in zip(part, payload, strict=True):
                rid = run.run_id
                rendered.append(
                    Rendered(run, runs_dir / rid, script, Shell(program), Shell(launch), env)
                )
            if progress is not None:
                progress(len(rendered), len(runs))
    finally:
        for p, recv in procs:
            recv.close()
            if p.is_alive():
                p.terminate()  # our own child, by its pid: only on error or Ctrl-C
            p.join()
    return rendered


def render_all(
    runs: list[Run],
    system: System,
    script: SchedulerScript,
    workdir: Path | None,
    campaign_yaml: str,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    record: bool = True,
) -> list[Rendered]:
    """Render every run, then make its files appear: a campaign's first render goes into a
    staging directory renamed into place (all runs or none), a re-render merges run by run.
    Big campaigns render in forked workers (`workers`, `HPCSCALE_RENDER_WORKERS`).
    `progress(done, total)` is called in this process about every PROGRESS_EVERY runs.

    The campaign file is kept as campaign.yaml (the latest) and versions/<id>.yaml (every
    version, never overwritten); each run.json names the version that rendered it."""
    if not runs:
        return []
    cdir = campaign_dir(runs[0].campaign, workdir)
    runs_dir = cdir / "runs"
    stage = None if runs_dir.exists() else runs_dir.with_name(f".runs.staging-{os.getpid()}")
    n = render_workers(len(runs), workers)
    version = campaign_version_of(campaign_yaml)
    # what a failed first render must not leave behind: its directories (empty, but still a
    # campaign) and the campaign file it kept, unless another render made the campaign meanwhile
    made = [d for d in (cdir.parent, cdir, cdir / VERSIONS_DIR) if not d.exists()]
    kept: list[Path] = []
    with gc_paused():
        try:
            if stage is not None:
                shutil.rmtree(stage, ignore_errors=True)
                stage.mkdir(parents=True)
            if n > 1:
                rendered = _render_parallel(
                    runs, system, script, runs_dir, stage, n, version, progress
                )
            else:
                tick = None if progress is None else (lambda done: progress(done, len(runs)))
                rendered = _render_slice(runs, system, script, runs_dir, stage, version, tick)
            if progress is not None:
                progress(len(runs), len(runs))
            if keep_version(cdir, version, campaign_yaml):
                kept.append(cdir / VERSIONS_DIR / f"{version}.yaml")
            if not (cdir / "campaign.yaml").exists():
                kept.append(cdir / "campaign.yaml")
            elif not record:  # a dry run: the latest render's campaign file stays the latest
                campaign_yaml = (cdir / "campaign.yaml").read_text(encoding="utf-8")
            atomic_write(cdir / "campaign.yaml", campaign_yaml, 0o644)
            remember(cdir.parent)  # `hpcscale status NAME` finds it from anywhere
            if stage is not None:
                try:
                    os.rename(stage, runs_dir)
                    return rendered
                except OSError as exc:  # another render created it meanwhile: merge instead
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
        except BaseException:
            if stage is not None:
                shutil.rmtree(stage, ignore_errors=True)
                for path in kept if not runs_dir.exists() else []:
                    path.unlink(missing_ok=True)
            for d in reversed(made):
                with contextlib.suppress(OSError):  # not empty: another render's, keep it
                    d.rmdir()
            raise
        finally:
            if stage is not None:
                shutil.rmtree(stage, ignore_errors=True)
        for r in rendered:
            write_run(r, version)
    return rendered


def keep_version(cdir: Path, version: str, text: str) -> bool:
    """versions/<version>.yaml, written once: complete (a temp file, then a hard link, which
    fails rather than replace) and never overwritten, so the runs naming it keep their file.
    True when this call wrote it."""
    path = cdir / VERSIONS_DIR / f"{version}.yaml"
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:  # another render kept the same text meanwhile
            return False
        except OSError:  # no hard links here: same name, same text, so a rename is as good
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True
