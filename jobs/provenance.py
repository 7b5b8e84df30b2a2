"""Where a number came from: software versions, MPI library, environment knobs, git revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

ENV_PREFIXES = ("HOROVOD_", "MV2_", "NCCL_", "OMPI_")
REPO = Path(__file__).resolve().parents[1]


def knob_env(environ: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def mpi_library_version() -> Optional[str]:
    """MPI_Get_library_version may be called without MPI_Init, so mpi4py must not init MPI
    (Horovod owns it); fall back to `ompi_info` when mpi4py is missing."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        return " ".join(MPI.Get_library_version().replace("\0", " ").split()) or None
    except Exception:
        pass
    try:
        out = subprocess.run(
            ["ompi_info", "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()
    return first[0].strip() if out.returncode == 0 and first else None


def git_revision(repo: Path = REPO) -> tuple[Optional[str], Optional[bool]]:
    """(commit, dirty) of the checkout the job ran from, or (None, None) outside git. Only a
    checkout's own root counts: an installed hpcscale's jobs/ (hpcscale/_data/) has no .git,
    and a repository around the environment (a venv in the user's project) is not its code."""
    if not (repo / ".git").exists():
        return None, None
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        if head.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip(), dirty


def provenance(
    tf_version: str,
    keras_version: str,
    horovod_version: Optional[str],
    hostnames: list[str],
    argv: list[str],
) -> dict[str, object]:
    rev, dirty = git_revision()
    return {
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "tensorflow": tf_version,
        "keras": keras_version,
        "horovod": horovod_version,
        "mpi": mpi_library_version(),
        "hostnames": hostnames,
        "env": knob_env(),
        "git_revision": rev,
        "git_dirty": dirty,
        "argv": argv,
    }
