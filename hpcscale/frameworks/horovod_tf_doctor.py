"""What `hpcscale doctor` checks for TensorFlow + Horovod (HorovodTF's doctor hooks): Horovod
importing in the jobs' Python, built with the controllers and operations the profile's MPI
flavours use, and the source build that fixes it."""

from __future__ import annotations

import shlex
from typing import Any

from hpcscale.frameworks.checks import Check, said
from hpcscale.model.system import System

HOROVOD_VERSION = "0.28.1"
# Horovod from source against TensorFlow, MPI and Gloo (the Makefile's HOROVOD_ENV; a test holds
# the two together). NCCL is added for profiles whose GPU runs reduce with it.
HOROVOD_ENV = (
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 "
    "HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1"
)
# the doctor's probe (run by the profile's Python: standard library only, 3.6 syntax); the
# horovodrun launcher runs as the job's `python -m horovod.runner.launch`, so `runner` covers it
PROBES = {
    "horovod": r"""
def horovod():
    import horovod
    import horovod.tensorflow as hvd
    return {"version": horovod.__version__, "mpi": bool(hvd.mpi_built()),
            "gloo": bool(hvd.gloo_built()), "nccl": bool(hvd.nccl_built()),
            "runner": importlib.util.find_spec("horovod.runner.launch") is not None}
"""
}


def horovod_needs(profile: System) -> list[str]:
    """The controllers/operations Horovod must be built with for this profile's flavours."""
    needs: list[str] = []
    for flavour in profile.mpi.values():
        envs = [profile.env, flavour.env, profile.gpu.env, flavour.gpu.env]
        values = {str(v).lower() for e in envs for k, v in e.items() if k.startswith("HOROVOD_")}
        args = flavour.launcher_args if flavour.launcher_args is not None else profile.launcher_args
        gloo = "gloo" in values or "--gloo" in args
        needs.append("gloo" if gloo else "mpi")
        if "nccl" in values:
            needs.append("nccl")
    return list(dict.fromkeys(needs))


def horovod_command(python: str, nccl: bool = False) -> str:
    """The source build of Horovod for the profile's Python (with NCCL for GPU profiles)."""
    env = HOROVOD_ENV + (" HOROVOD_GPU_OPERATIONS=NCCL" if nccl else "")
    return (
        f"{env} {shlex.quote(python)} -m pip install --no-cache-dir --no-build-isolation "
        f"horovod=={HOROVOD_VERSION}"
    )


def horovod_check(profile: System, hvd: dict[str, Any], python: str) -> Check:
    """Horovod imports and has the controllers the profile's flavours need."""
    needs = horovod_needs(profile)
    fix = horovod_command(python, nccl="nccl" in needs)
    if "version" not in hvd:
        return Check("horovod", False, said(hvd, "Horovod"), f"after TensorFlow: {fix}")
    built = [name for name in ("mpi", "gloo", "nccl") if hvd.get(name)]
    missing = [n for n in needs if n not in built]
    names = {"mpi": "MPI", "gloo": "Gloo", "nccl": "NCCL"}
    detail = f"Horovod {hvd['version']} built with " + (
        ", ".join(names[n] for n in built) or "no controller"
    )
    if missing:
        detail += f"; the profile's flavours need {', '.join(names[n] for n in missing)}"
        return Check("horovod", False, detail, f"rebuild it: {fix}")
    return Check("horovod", True, detail)
