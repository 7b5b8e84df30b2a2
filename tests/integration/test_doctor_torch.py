"""`hpcscale doctor CAMPAIGN` checks PyTorch in the profile's Python when the campaign needs it:
a cell with `strategy: torch_ddp`, or a user's command with `workload.framework: torch`. The fix
is the pinned CPU build, never torchvision. Real interpreters: a bare venv (no torch) and the
project's venv (torch 2.13.0)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"

BUNDLED = """\
name: t
workload:
  model: dcgan
  epochs: 1
  args: {{image_size: 32, dataset_size: 64}}
system: {system}
scaling: weak
matrix:
  strategy: {strategies}
  layout: ["1x1"]
  batch: 8
"""
COMMAND = """\
name: mine
workload:
  command: [python, train.py]
  metrics: mllog
  throughput: samples_per_s
{framework}system: {system}
scaling: weak
matrix:
  layout: ["1x1"]
  batch: 8
"""


@pytest.fixture(scope="module")
def bare_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped local profile with `python:` a venv that has nothing installed."""
    tmp = tmp_path_factory.mktemp("bare")
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True
    )
    python = venv / "bin" / "python"
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True, check=False)
    assert probe.returncode != 0, "the bare venv imports torch"
    text = (REPO / "hpcscale" / "systems" / "local.yaml").read_text()
    profile = tmp / "bare.yaml"
    profile.write_text(text.replace("python: auto", f"python: {python}"))
    return profile


def _doctor(campaign: Path) -> tuple[int, dict[str, dict]]:
    proc = subprocess.run(
        [EXE, "doctor", str(campaign), "--json"], cwd=campaign.parent, capture_output=True,
        text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.stdout, proc.stderr
    report = json.loads(proc.stdout)
    return proc.returncode, {c["name"]: c for c in report["checks"]}


def _campaign(tmp_path: Path, text: str) -> Path:
    (tmp_path / "train.py").write_text("print('rate 1 samples/s')\n")
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    return path


def _assert_torch_fix(check: dict) -> None:
    assert not check["passed"], check
    assert "PyTorch does not import" in check["detail"], check
    fix = check["fix"]
    assert "-m pip install torch==2.13.0" in fix, fix
    assert "--index-url https://download.pytorch.org/whl/cpu" in fix, fix
    assert "not torchvision" in fix, fix


def test_torch_beside_horovod_without_torch_fails_with_the_fix(
    tmp_path: Path, bare_profile: Path
) -> None:
    """Both strategies on a Python without anything: TensorFlow's checks and torch's fail."""
    campaign = _campaign(
        tmp_path, BUNDLED.format(system=bare_profile, strategies="[horovod, torch_ddp]")
    )
    code, checks = _doctor(campaign)
    assert code == 1
    _assert_torch_fix(checks["torch"])
    names = list(checks)
    assert names.index("tensorflow") < names.index("mpi4py") < names.index("torch"), names
    assert not checks["tensorflow"]["passed"] and not checks["horovod"]["passed"]


def test_torch_only_campaign_is_not_asked_for_tensorflow(
    tmp_path: Path, bare_profile: Path
) -> None:
    """strategy: torch_ddp alone: PyTorch (and msgspec and NumPy, which jobs/torch/ imports),
    no TensorFlow, Horovod or mpi4py."""
    campaign = _campaign(tmp_path, BUNDLED.format(system=bare_profile, strategies="torch_ddp"))
    code, checks = _doctor(campaign)
    assert code == 1
    _assert_torch_fix(checks["torch"])
    assert not checks["msgspec"]["passed"] and not checks["numpy"]["passed"]
    assert checks["numpy"]["fix"].endswith("-m pip install numpy"), checks["numpy"]
    assert not {"tensorflow", "horovod", "mpi4py"} & set(checks), list(checks)


def test_horovod_campaign_is_not_asked_for_torch(tmp_path: Path, bare_profile: Path) -> None:
    campaign = _campaign(tmp_path, BUNDLED.format(system=bare_profile, strategies="horovod"))
    _, checks = _doctor(campaign)
    assert "torch" not in checks and "tensorflow" in checks


def test_command_with_framework_torch_is_asked_for_torch(
    tmp_path: Path, bare_profile: Path
) -> None:
    """A user's command asking for the torch launch contract needs torch where it runs
    (`python` -> the profile's interpreter); without `framework:` it is not asked."""
    torch = _campaign(
        tmp_path, COMMAND.format(system=bare_profile, framework="  framework: torch\n")
    )
    code, checks = _doctor(torch)
    assert code == 1
    assert checks["program"]["passed"] and checks["python"]["passed"]
    _assert_torch_fix(checks["torch"])
    plain = _campaign(tmp_path, COMMAND.format(system=bare_profile, framework=""))
    code, checks = _doctor(plain)
    assert code == 0 and "torch" not in checks, checks


def test_the_projects_venv_passes(tmp_path: Path) -> None:
    """The shipped torch_vs_horovod campaign on the local profile (python: auto, this venv,
    torch 2.13.0 CPU), and a torch command on it: the torch check passes."""
    code, checks = _doctor(REPO / "campaigns" / "torch_vs_horovod.yaml")
    assert checks["torch"]["passed"], checks["torch"]
    assert checks["torch"]["detail"].startswith("PyTorch 2.13.0"), checks["torch"]
    assert "gloo" in checks["torch"]["detail"]
    assert code == 0, [c for c in checks.values() if not c["passed"]]
    local = REPO / "hpcscale" / "systems" / "local.yaml"
    campaign = _campaign(tmp_path, COMMAND.format(system=local, framework="  framework: torch\n"))
    code, checks = _doctor(campaign)
    assert code == 0 and checks["torch"]["passed"], checks


def test_doctor_torch_pin_is_the_makefiles() -> None:
    """The torch doctor prints is the one `make jobs` installs (one pin)."""
    from hpcscale.doctor import TORCH_VERSION, torch_command

    [pin] = re.findall(r"^TORCH \?= (.+)$", (REPO / "Makefile").read_text(), re.M)
    assert pin.strip() == f"torch=={TORCH_VERSION}" == "torch==2.13.0"
    assert torch_command("/opt/py/bin/python").startswith(
        "/opt/py/bin/python -m pip install torch==2.13.0 "
    )
