"""`hpcscale doctor`: what a campaign on one system needs, checked here, each check with the
command that fixes it. The launchers the profile uses on PATH; for a SLURM system sbatch, sacct
and the cluster answering; the profile's Python (its version, TensorFlow, Horovod and the
controllers it was built with, mpi4py), asked in a subprocess since it need not be the
interpreter running hpcscale; the compiled timeline scanner of this hpcscale. For a campaign,
what its frameworks import (Framework.python_modules: PyTorch for `strategy: torch_ddp`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from hpcscale.model.system import System, load_system, python_of

HOROVOD_VERSION = "0.28.1"
# Horovod from source against TensorFlow, MPI and Gloo (the Makefile's HOROVOD_ENV; a test holds
# the two together). NCCL is added for profiles whose GPU runs reduce with it.
HOROVOD_ENV = (
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 "
    "HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1"
)
JOBS_EXTRA_FALLBACK = (  # pyproject [jobs]
    "tensorflow-cpu==2.15.1",
    "mpi4py>=3.1",
    "numpy<2",
    "msgspec>=0.18",
)
# PyTorch for jobs/torch/ and `workload.framework: torch` (the Makefile's TORCH; a test holds
# the two together). Unpinned, pip pulls a CUDA build of several GB; torchvision does not
# import beside this CPU build.
TORCH_VERSION = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# what a profile-only doctor (no campaign) probes: the bundled TensorFlow programs' needs
TF_PROBES = ("tensorflow", "msgspec", "horovod", "mpi4py")
MIN_JOB_PYTHON = (3, 9)  # what the bundled programs (jobs/) are written for
PROBE_TIMEOUT_S = 300  # importing TensorFlow on a loaded login node takes a while
SLURM_TIMEOUT_S = 30
# launcher -> (program on PATH, where it comes from); horovodrun runs as the job's
# `python -m horovod.runner.launch`, so Horovod's check covers it
LAUNCHER_PROGRAMS = {
    "srun": ("srun", "SLURM's client commands: run this on the cluster's login node"),
    "mpirun": ("mpirun", "Open MPI (apt-get install openmpi-bin) or your MPI module"),
    "mpiexec": ("mpiexec", "an MPI library (apt-get install openmpi-bin) or your MPI module"),
    "mpirun_rsh": ("mpirun_rsh", "MVAPICH2: load its module (the profile's mpi flavour)"),
}
PROBE_MARK = "HPCSCALE_DOCTOR "

# Run by the profile's Python, which may be old or bare: standard library only, 3.6 syntax.
PROBE = r"""
import importlib.util, json, sys
out = {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable}
def probe(name, fn):
    try:
        out[name] = fn()
    except BaseException as exc:
        out[name] = {"error": "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300]
                                          if str(exc) else "")}
def tensorflow():
    import tensorflow as tf
    return {"version": tf.__version__}
def horovod():
    import horovod
    import horovod.tensorflow as hvd
    return {"version": horovod.__version__, "mpi": bool(hvd.mpi_built()),
            "gloo": bool(hvd.gloo_built()), "nccl": bool(hvd.nccl_built()),
            "runner": importlib.util.find_spec("horovod.runner.launch") is not None}
def mpi4py():
    import mpi4py
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI
    return {"version": mpi4py.__version__,
            "library": " ".join(MPI.Get_library_version().replace("\0", " ").split())[:120]}
def msgspec():
    import msgspec
    return {"version": msgspec.__version__}
def torch():
    import torch
    import torch.distributed as dist
    ok = bool(dist.is_available())
    return {"version": torch.__version__, "distributed": ok,
            "gloo": ok and bool(dist.is_gloo_available()), "cuda": bool(torch.cuda.is_available())}
def module(name):
    def fn():
        importlib.import_module(name)
        top = sys.modules[name.split(".")[0]]
        return {"version": str(getattr(top, "__version__", "unknown"))}
    return fn
known = {"tensorflow": tensorflow, "msgspec": msgspec, "horovod": horovod, "mpi4py": mpi4py,
         "torch": torch}
for name in sys.argv[1:] or TF_PROBES:
    probe(name, known.get(name) or module(name))
sys.stdout.write("\n%s%s\n" % (MARK, json.dumps(out)))
""".replace("MARK", repr(PROBE_MARK)).replace("TF_PROBES", repr(list(TF_PROBES)))


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer; `fix` is what to do when it failed."""

    name: str
    passed: bool
    detail: str
    fix: str = ""


@dataclass
class Diagnosis:
    system: str
    profile: str  # the profile file
    python: str  # the interpreter the jobs run with
    checks: list[Check] = field(default_factory=list)
    campaign: str | None = None  # the campaign checked (`doctor CAMPAIGN`), else a profile only

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "profile": self.profile,
            "python": self.python,
            "campaign": self.campaign,
            "ok": self.ok,
            "checks": [c.__dict__ for c in self.checks],
        }


def doctor(system: str = "local") -> Diagnosis:
    """Check this host for campaigns on `system` (a profile name or path)."""
    profile = load_system(system, relative_to=Path.cwd(), where=("--system", None))
    python = python_of(profile)
    source = profile._source.path if profile._source else system
    out = Diagnosis(profile.name, str(source), python)
    out.checks += launcher_checks(profile)
    if profile.scheduler == "slurm":
        out.checks += slurm_checks(profile)
    out.checks += python_checks(profile, python, run_probe(profile, python))
    out.checks.append(scanner_check())
    return out


def launchers_of(profile: System) -> list[str]:
    """Every launcher the profile's MPI flavours start ranks with, in order."""
    names = [profile.launcher] + [f.launcher for f in profile.mpi.values() if f.launcher]
    return list(dict.fromkeys(names))


def launcher_checks(profile: System) -> list[Check]:
    checks = []
    for name in launchers_of(profile):
        if name not in LAUNCHER_PROGRAMS:
            continue
        program, source = LAUNCHER_PROGRAMS[name]
        found = shutil.which(program)
        fix = f"put {program} on PATH: {source}"
        checks.append(
            Check(
                f"launcher {name}",
                found is not None,
                found or f"{program} is not on PATH",
                "" if found else fix,
            )
        )
    return checks


def slurm_checks(profile: System) -> list[Check]:
    """sbatch and sacct on PATH, and the controller and the accounting answering."""
    where = (
        'start it: eval "$(hpcscale cluster up)"'
        if profile.name == "slurm-local"
        else "run this on the cluster's login node (SLURM_CONF naming the cluster)"
    )
    checks = []
    for program in ("sbatch", "sacct"):
        found = shutil.which(program)
        checks.append(
            Check(program, found is not None, found or f"{program} is not on PATH",
                  "" if found else where)
        )  # fmt: skip
    answers = [
        ("cluster", ["sinfo", "--noheader", "--format=%P %a %D"], "slurmctld"),
        ("accounting", ["sacct", "--noheader", "-X", "--starttime=now", "--format=JobID"],
         "slurmdbd"),
    ]  # fmt: skip
    for name, argv, daemon in answers:
        if shutil.which(argv[0]) is None:
            checks.append(Check(name, False, f"{argv[0]} is not on PATH", where))
            continue
        ok, said = _run(argv, SLURM_TIMEOUT_S)
        last = said.splitlines()[-1] if said else "no answer"  # the fatal line comes last
        detail = f"{daemon} answers" if ok else f"{shlex.join(argv)}: {last}"
        checks.append(Check(name, ok, detail, "" if ok else where))
    return checks


def run_probe(profile: System, python: str, modules: Sequence[str] = ()) -> dict[str, Any]:
    """What the profile's Python can import (see PROBE): `modules` (names of PROBE's probes or
    any importable module), else TF_PROBES; {"error": ...} when it cannot run."""
    env = {**os.environ, **{k: str(v) for k, v in profile.env.items()}}
    _, said = _run([python, "-c", PROBE, *modules], PROBE_TIMEOUT_S, env)
    for line in reversed(said.splitlines()):
        if line.startswith(PROBE_MARK):
            result: dict[str, Any] = json.loads(line[len(PROBE_MARK) :])
            return result
    return {"error": said.strip().splitlines()[-1] if said.strip() else "no output"}


def probes_for(needs: Sequence[str] | None) -> list[str]:
    """What to probe for the bundled programs of frameworks importing `needs` (their
    python_modules; None: a profile alone, the TensorFlow programs' needs): the TensorFlow
    set when any of them is TensorFlow's or Horovod's, else msgspec and NumPy (which every
    bundled program imports; TensorFlow brings NumPy), then the others."""
    if needs is None:
        return list(TF_PROBES)
    tf = any(_is_tf(m) for m in needs)
    names = list(TF_PROBES) if tf else ["msgspec", "numpy"]
    return list(dict.fromkeys(names + [m for m in needs if not _is_tf(m)]))


def _is_tf(module: str) -> bool:
    return module.split(".")[0] in ("tensorflow", "horovod", "keras")


def python_checks(
    profile: System, python: str, probe: dict[str, Any], needs: Sequence[str] | None = None
) -> list[Check]:
    """The interpreter the jobs run with, and what it imports: what probes_for(needs) named."""
    names = probes_for(needs)
    if "error" in probe:
        hint = f" (load the profile's modules first: {' '.join(profile.modules)})"
        what = "TensorFlow" if "tensorflow" in names else "PyTorch" if "torch" in names else ""
        return [
            Check(
                "python",
                False,
                f"{python} does not run here: {probe['error']}",
                f"set `python:` in the profile to an interpreter >= 3.9"
                f"{f' with {what}' if what else ''}{hint if profile.modules else ''}",
            )
        ]
    version = tuple(int(p) for p in probe["python"].split("."))
    old = version < MIN_JOB_PYTHON
    checks = [
        Check(
            "python",
            not old,
            f"{probe['executable']} is Python {probe['python']}"
            + (" (the bundled programs need 3.9 or newer)" if old else ""),
            "set `python:` in the profile to a Python 3.9 or newer" if old else "",
        )
    ]
    pip = f"{shlex.quote(python)} -m pip install"
    if "tensorflow" in names:
        tf = probe["tensorflow"]
        checks.append(
            Check("tensorflow", "version" in tf, _said(tf, "TensorFlow"),
                  "" if "version" in tf else f"{pip} {shlex.join(jobs_requirements(profile))}")
        )  # fmt: skip
    msg = probe.get("msgspec", {"error": "not probed"})
    checks.append(
        Check("msgspec", "version" in msg, _said(msg, "msgspec"),
              "" if "version" in msg else f"{pip} 'msgspec>=0.18' (the jobs read and write "
              "hpcscale's result files with it)")
    )  # fmt: skip
    if "horovod" in names:
        checks.append(horovod_check(profile, probe["horovod"], python))
    if "mpi4py" in names:
        mpi = probe["mpi4py"]
        checks.append(
            Check("mpi4py", "version" in mpi, _said(mpi, "mpi4py"),
                  "" if "version" in mpi else f"{pip} mpi4py (needs the MPI library's compiler "
                  "wrapper mpicc: apt-get install libopenmpi-dev, or load your MPI module)")
        )  # fmt: skip
    extra = [n for n in names if n not in TF_PROBES]
    return checks + module_checks(profile, python, probe, extra)


def module_checks(
    profile: System, python: str, probe: dict[str, Any], modules: Sequence[str]
) -> list[Check]:
    """One check per module a framework needs beyond the TensorFlow set (PyTorch: its version,
    torch.distributed and gloo built in)."""
    checks = []
    for name in modules:
        said = probe.get(name, {"error": "not probed"})
        if name == "torch":
            checks.append(torch_check(profile, said, python))
            continue
        ok = "version" in said
        fix = f"{shlex.quote(python)} -m pip install {name.split('.')[0]}"
        checks.append(Check(name, ok, _said(said, name), "" if ok else fix))
    return checks


def torch_command(python: str, gpu: bool = False) -> str:
    """PyTorch for the profile's Python: the CPU build pinned (the CUDA build for GPUs)."""
    pip = f"{shlex.quote(python)} -m pip install torch=={TORCH_VERSION}"
    if gpu:
        return f"{pip} (the CUDA build, PyPI's default); not torchvision (never needed)"
    return (
        f"{pip} (the CPU build: where pip would pull a CUDA build of several GB, add "
        f"--index-url {TORCH_CPU_INDEX}); not torchvision: it does not import beside this build"
    )


def torch_check(profile: System, said: dict[str, Any], python: str) -> Check:
    fix = torch_command(python, gpu=bool(profile.gpus_per_node))
    if "version" not in said:
        return Check("torch", False, _said(said, "PyTorch"), fix)
    detail = f"PyTorch {said['version']}"
    if not said.get("distributed") or not said.get("gloo"):
        what = "torch.distributed" if not said.get("distributed") else "its gloo backend"
        return Check("torch", False, f"{detail} without {what} (DDP needs it)", fix)
    built = ["gloo"] + (["CUDA"] if said.get("cuda") else [])
    return Check("torch", True, f"{detail} with {', '.join(built)}")


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
    needs = horovod_needs(profile)
    fix = horovod_command(python, nccl="nccl" in needs)
    if "version" not in hvd:
        return Check("horovod", False, _said(hvd, "Horovod"), f"after TensorFlow: {fix}")
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


def scanner_check() -> Check:
    """The compiled timeline scanner of this hpcscale (collect --timeline's fast engine)."""
    try:
        from hpcscale.collect.traces.horovod import _scan  # noqa: F401
    except ImportError as exc:
        return Check(
            "timeline scanner",
            False,
            f"hpcscale.collect.traces.horovod._scan is missing ({exc}); collect falls back to "
            "the pure-Python engine (same results, 3-4x slower)",
            "install a C compiler (apt-get install gcc python3-dev) and reinstall hpcscale: "
            "pip install --force-reinstall --no-deps --no-binary hpcscale hpcscale",
        )
    return Check("timeline scanner", True, "compiled (hpcscale.collect.traces.horovod._scan)")


def jobs_requirements(profile: System) -> list[str]:
    """What `pip install 'hpcscale[jobs]'` adds (this hpcscale's own metadata), with the GPU
    build of TensorFlow for a profile with GPUs. Never Horovod: it needs the source build."""
    try:
        reqs = metadata.requires("hpcscale") or []
    except metadata.PackageNotFoundError:
        reqs = []
    extra = [r.split(";")[0].strip() for r in reqs if 'extra == "jobs"' in r]
    extra = [r for r in extra or JOBS_EXTRA_FALLBACK if not r.startswith("horovod")]
    if profile.gpus_per_node:
        extra = [r.replace("tensorflow-cpu", "tensorflow[and-cuda]") for r in extra]
    return extra


def _said(result: dict[str, Any], what: str) -> str:
    if "version" in result:
        return f"{what} {result['version']}"
    return f"{what} does not import: {result.get('error', 'unknown error')}"


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[bool, str]:
    """(exit 0, stdout + stderr) of a command that may hang or be missing."""
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except FileNotFoundError:
        return False, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout:.0f} s"
    except OSError as exc:
        return False, f"{argv[0]}: {exc}"
    said = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0, said
