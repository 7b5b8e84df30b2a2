"""The doctor checks a framework's own library through the framework (issue #30, G7): the
generic doctor holds no framework's probe or check; the registry's frameworks bring them
(Framework.doctor_probes, doctor_check, doctor_words) and their lines keep their text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hpcscale import doctor
from hpcscale.cli.doctor import doctor as doctor_command
from hpcscale.frameworks import for_strategy
from hpcscale.frameworks.horovod_tf_doctor import PROBES
from hpcscale.model.system import load_system

PY = "/opt/site/py/bin/python"  # a profile's interpreter: only quoted into the fixes
BUILD = (  # the Makefile's Horovod build for PY, written out by hand
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 "
    "HOROVOD_WITHOUT_MXNET=1 /opt/site/py/bin/python -m pip install --no-cache-dir "
    "--no-build-isolation horovod==0.28.1"
)


def test_the_default_framework_brings_its_probe_and_check() -> None:
    """`strategy: horovod`'s framework owns the `horovod` probe; the shipped local profile's
    flavours (openmpi and gloo) need MPI and Gloo, so a build with MPI alone fails with the
    rebuild, and one with both passes."""
    fw = for_strategy("horovod")
    assert doctor.own_probes() == {"horovod": fw}
    local = load_system("local", relative_to=Path.cwd())
    mpi_only = {"version": "0.28.1", "mpi": True, "gloo": False, "nccl": False}
    failed = fw.doctor_check("horovod", local, PY, mpi_only)
    assert (failed.name, failed.passed) == ("horovod", False)
    assert failed.detail == "Horovod 0.28.1 built with MPI; the profile's flavours need Gloo"
    assert failed.fix == f"rebuild it: {BUILD}"
    both = fw.doctor_check("horovod", local, PY, {**mpi_only, "gloo": True})
    assert (both.passed, both.detail, both.fix) == (True, "Horovod 0.28.1 built with MPI, Gloo", "")
    missing = fw.doctor_check("horovod", local, PY, {"error": "ModuleNotFoundError: x"})
    assert missing.detail == "Horovod does not import: ModuleNotFoundError: x"
    assert missing.fix == f"after TensorFlow: {BUILD}"


def test_a_profile_alone_is_checked_in_the_order_it_always_was() -> None:
    """The framework's line sits where it always did: after msgspec, before mpi4py."""
    local = load_system("local", relative_to=Path.cwd())
    found = {
        "python": "3.11.7",
        "executable": PY,
        "tensorflow": {"version": "2.15.1"},
        "msgspec": {"version": "0.18.6"},
        "horovod": {"version": "0.28.1", "mpi": True, "gloo": True, "nccl": False},
        "mpi4py": {"version": "3.1.6"},
    }
    assert doctor.tf_probes() == ("tensorflow", "msgspec", "horovod", "mpi4py")
    checks = doctor.python_checks(local, PY, found)
    assert [(c.name, c.passed) for c in checks] == [
        ("python", True),
        ("tensorflow", True),
        ("msgspec", True),
        ("horovod", True),
        ("mpi4py", True),
    ]
    # a PyTorch-only campaign is not asked for the TensorFlow set, nor for Horovod
    assert doctor.probes_for(("torch",)) == ["msgspec", "numpy", "torch"]


def test_the_probe_script_carries_the_frameworks_probes() -> None:
    """The script the profile's Python runs holds the framework's probe function; run bare (no
    site-packages), it answers for it with the import error."""
    script = doctor.probe_script()
    assert PROBES["horovod"] in script
    out = subprocess.run(
        [sys.executable, "-S", "-c", script, "horovod"], capture_output=True, text=True, check=True
    ).stdout
    answer = json.loads(out.splitlines()[-1][len(doctor.PROBE_MARK) :])
    assert answer["horovod"] == {"error": "ModuleNotFoundError: No module named 'horovod'"}


def test_the_help_names_the_frameworks_libraries_as_before() -> None:
    """cli/doctor.py's help is built from the registry and reads as it did."""
    words = " ".join((doctor_command.__doc__ or "").split())
    assert "for a bundled TensorFlow program TensorFlow, Horovod (built with MPI, Gloo, NCCL) " in (
        words
    )
    assert "and mpi4py; for strategy: torch_ddp" in words
