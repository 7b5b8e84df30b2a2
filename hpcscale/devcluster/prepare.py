"""The files `up` writes before any daemon starts: directories, slurm.conf and slurmdbd.conf,
the munge key, and (first up only) the MariaDB datadir."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from hpcscale.devcluster.conffiles import render_slurm_conf, render_slurmdbd_conf
from hpcscale.devcluster.daemons import MARIADB_TUNING, Progress
from hpcscale.devcluster.layout import Layout
from hpcscale.devcluster.logs import excerpt
from hpcscale.devcluster.spec import ClusterSpec
from hpcscale.formats.atomic import atomic_write
from hpcscale.model.errors import BackendError


def prepare_files(lay: Layout, spec: ClusterSpec, exe: dict[str, str], say: Progress) -> None:
    """Idempotent: configs are rewritten every time, the key and database made only once."""
    lay.root.chmod(0o755)  # munged wants its socket's directories reachable by all
    for d, mode in (
        (lay.etc, 0o755),
        (lay.run, 0o755),
        (lay.munge_dir, 0o700),
        (lay.ctld_dir, 0o700),
        (lay.log, 0o755),
        (lay.pids, 0o755),
        (lay.nodes_dir, 0o755),
    ):
        d.mkdir(exist_ok=True)
        d.chmod(mode)
    for node in spec.node_names:
        for sub in ("spool", "tmp"):
            (lay.node_dir(node) / sub).mkdir(parents=True, exist_ok=True)
    atomic_write(lay.slurm_conf, render_slurm_conf(spec, lay), mode=0o644)
    atomic_write(lay.slurmdbd_conf, render_slurmdbd_conf(spec, lay), mode=0o600)
    atomic_write(lay.etc / "plugstack.conf", "", mode=0o644)
    if not lay.munge_key.exists():
        run_checked(
            [exe["mungekey"], "--create", f"--keyfile={lay.munge_key}"], "mungekey", lay.log
        )
        lay.munge_key.chmod(0o400)
    if not (lay.db_dir / "mysql").is_dir():
        say("initialising the accounting database (first up only)")
        _install_db(lay, exe)


def _install_db(lay: Layout, exe: dict[str, str]) -> None:
    # Into a temporary dir renamed at the end, so a crash never leaves a half-made datadir.
    tmp = lay.root / "db.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(lay.db_dir, ignore_errors=True)
    run_checked(
        [
            exe["mariadb-install-db"],
            "--no-defaults",
            f"--datadir={tmp}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
            "--user=root",
            *MARIADB_TUNING,
        ],
        "mariadb-install-db",
        lay.log,
        timeout=120,
    )
    tmp.chmod(0o700)
    os.replace(tmp, lay.db_dir)


def run_checked(argv: list[str], what: str, log_dir: Path, timeout: float = 30) -> None:
    """Run a one-off setup tool, its output in `<log_dir>/<what>.out`; fail with its last lines."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{what}.out"
    with log.open("wb") as out:
        try:
            res = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"{what} did not finish in {timeout:.0f} s; see {log}") from exc
    if res.returncode != 0:
        raise BackendError(f"{what} failed (exit {res.returncode}); {log}:\n{excerpt(log)}")
