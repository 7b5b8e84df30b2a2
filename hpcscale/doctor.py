"""`hpcscale doctor`: what a campaign on one system needs, checked here, each check with the
command that fixes it. The launchers the profile uses on PATH; for a SLURM system sbatch, sacct
and the cluster answering; the profile's Python (its version, what the bundled TensorFlow
programs import, mpi4py), asked in a subprocess since it need not be the interpreter running
hpcscale; the compiled part of this hpcscale's default trace reader. For a campaign, what its
frameworks import (Framework.python_modules: PyTorch for `strategy: torch_ddp`). What only one
framework knows how to check (its distribution library and how it was built) it probes and
checks itself (Framework.doctor_probes, Framework.doctor_check).
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from hpcscale.frameworks import Framework, for_strategy
from hpcscale.frameworks.checks import Check
from hpcscale.frameworks.checks import said as _said
from hpcscale.model.registry import FRAMEWORKS, TRACE_READERS
from hpcscale.model.system import System, load_system, python_of

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
# the top-level modules of TensorFlow itself (a framework importing one runs the bundled
# TensorFlow programs)
TF_MODULES = ("tensorflow", "keras")
MIN_JOB_PYTHON = (3, 9)  # what the bundled programs (jobs/) are written for
PROBE_TIMEOUT_S = 300  # importing TensorFlow on a loaded login node takes a while
SLURM_TIMEOUT_S = 30
# launcher -> (program on PATH, where it comes from); a launcher that runs as a Python module
# of the job (not here) is its framework's to check (Framework.doctor_probes)
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
FRAMEWORK_PROBES
known = {"tensorflow": tensorflow, "msgspec": msgspec, "mpi4py": mpi4py, "torch": torch}
known.update({FRAMEWORK_KNOWN})
for name in sys.argv[1:]:
    probe(name, known.get(name) or module(name))
sys.stdout.write("\n%s%s\n" % (MARK, json.dumps(out)))
""".replace("MARK", repr(PROBE_MARK))


@cache
def frameworks() -> tuple[Framework, ...]:
    """Every registered framework, in the registry's order."""
    return tuple(for_strategy(line.strategy) for line in FRAMEWORKS.values())


@cache
def own_probes() -> dict[str, Framework]:
    """The probes a framework brings (Framework.doctor_probes) -> that framework."""
    return {name: fw for fw in frameworks() for name in fw.doctor_probes}


@cache
def probe_script() -> str:
    """PROBE with the frameworks' own probes in it."""
    sources = [fw.doctor_probes[name] for name, fw in own_probes().items()]
    known = ", ".join(f"{name!r}: {name}" for name in own_probes())
    return PROBE.replace("FRAMEWORK_PROBES", "".join(sources)).replace("FRAMEWORK_KNOWN", known)


def _tf_frameworks() -> list[Framework]:
    return [fw for fw in frameworks() if any(_root(m) in TF_MODULES for m in fw.python_modules)]


@cache
def tf_probes() -> tuple[str, ...]:
    """What a profile checked alone (no campaign) is probed for: the bundled TensorFlow
    programs' needs, TensorFlow, msgspec, the own probes of every framework running them (the
    programs import each framework's library whichever strategy a run uses), mpi4py."""
    own = [name for fw in _tf_frameworks() for name in fw.doctor_probes]
    return tuple(dict.fromkeys(["tensorflow", "msgspec", *own, "mpi4py"]))


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
    out.checks += python_checks(profile, python, run_probe(profile, python, tf_probes()))
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
    """What the profile's Python can import (see PROBE): `modules` (names of PROBE's probes,
    the frameworks' own, or any importable module), else tf_probes(); {"error": ...} when it
    cannot run."""
    env = {**os.environ, **{k: str(v) for k, v in profile.env.items()}}
    argv = [python, "-c", probe_script(), *(modules or tf_probes())]
    _, answer = _run(argv, PROBE_TIMEOUT_S, env)
    for line in reversed(answer.splitlines()):
        if line.startswith(PROBE_MARK):
            result: dict[str, Any] = json.loads(line[len(PROBE_MARK) :])
            return result
    return {"error": answer.strip().splitlines()[-1] if answer.strip() else "no output"}


def probes_for(needs: Sequence[str] | None) -> list[str]:
    """What to probe for the bundled programs of frameworks importing `needs` (their
    python_modules; None: a profile alone, the TensorFlow programs' needs): the TensorFlow
    set when any of them is TensorFlow's or a TensorFlow framework's, else msgspec and NumPy
    (which every bundled program imports; TensorFlow brings NumPy), then the others."""
    if needs is None:
        return list(tf_probes())
    tf = any(_is_tf(m) for m in needs)
    names = list(tf_probes()) if tf else ["msgspec", "numpy"]
    return list(dict.fromkeys(names + [m for m in needs if not _is_tf(m)]))


def _root(module: str) -> str:
    return module.split(".")[0]


def _is_tf(module: str) -> bool:
    roots = {_root(m) for fw in _tf_frameworks() for m in fw.python_modules}
    return _root(module) in roots | set(TF_MODULES)


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
    for name, fw in own_probes().items():  # a framework's own: its library and its build
        if name in names:
            checks.append(fw.doctor_check(name, profile, python, probe[name]))
    if "mpi4py" in names:
        mpi = probe["mpi4py"]
        checks.append(
            Check("mpi4py", "version" in mpi, _said(mpi, "mpi4py"),
                  "" if "version" in mpi else f"{pip} mpi4py (needs the MPI library's compiler "
                  "wrapper mpicc: apt-get install libopenmpi-dev, or load your MPI module)")
        )  # fmt: skip
    extra = [n for n in names if n not in tf_probes() and n not in own_probes()]
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


def scanner_check() -> Check:
    """The compiled engine of a trace reader (TraceLine.compiled; collect --timeline's fast
    engine), imported by the name the registry gives it."""
    module = next((line.compiled for line in TRACE_READERS.values() if line.compiled), "")
    if not module:
        return Check("timeline scanner", True, "no trace reader has a compiled engine")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return Check(
            "timeline scanner",
            False,
            f"{module} is missing ({exc}); collect falls back to "
            "the pure-Python engine (same results, 3-4x slower)",
            "install a C compiler (apt-get install gcc python3-dev) and reinstall hpcscale: "
            "pip install --force-reinstall --no-deps --no-binary hpcscale hpcscale",
        )
    return Check("timeline scanner", True, f"compiled ({module})")


def jobs_requirements(profile: System) -> list[str]:
    """What `pip install 'hpcscale[jobs]'` adds (this hpcscale's own metadata), with the GPU
    build of TensorFlow for a profile with GPUs. Never a framework's library that its own
    check installs from source (the default framework's)."""
    try:
        reqs = metadata.requires("hpcscale") or []
    except metadata.PackageNotFoundError:
        reqs = []
    extra = [r.split(";")[0].strip() for r in reqs if 'extra == "jobs"' in r]
    own = tuple(own_probes())
    extra = [r for r in extra or JOBS_EXTRA_FALLBACK if not r.startswith(own)]
    if profile.gpus_per_node:
        extra = [r.replace("tensorflow-cpu", "tensorflow[and-cuda]") for r in extra]
    return extra


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
