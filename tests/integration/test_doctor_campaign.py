"""`hpcscale doctor [CAMPAIGN]` checks what that campaign needs, as a newcomer meets it: the
profile `init` wrote beside the campaign (not the shipped one), and for the user's own command
its directory, interpreter and program file, never TensorFlow or Horovod."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"

CAMPAIGN = """\
name: mine
workload:
  command: {command}
  metrics: mllog
  throughput: samples_per_s
system: local.yaml
scaling: weak
matrix:
  layout: ["1x1"]
  batch: 8
"""


def _doctor(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [EXE, "doctor", *args, "--json"], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _project(tmp_path: Path, command: str) -> Path:
    """An `init`ed directory whose campaign runs the user's own program."""
    subprocess.run([EXE, "init", str(tmp_path)], check=True, capture_output=True)
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN.format(command=command))
    (tmp_path / "train.py").write_text("print('rate 1 samples/s')\n")
    return tmp_path


def test_doctor_checks_the_campaign_here_on_the_profile_init_wrote(tmp_path: Path) -> None:
    """No argument: the campaign init wrote, on ./local.yaml; the program's checks, no TF."""
    home = _project(tmp_path, "[python, train.py]")
    code, report = _doctor(home)
    assert Path(report["profile"]) == home / "local.yaml"
    assert Path(report["campaign"]) == home / "campaign.yaml"
    names = [c["name"] for c in report["checks"]]
    assert names == ["launcher mpirun", "cwd", "python", "program"], names
    assert code == 0 and report["ok"], report
    assert Path(report["checks"][-1]["detail"]) == home / "train.py"


def test_doctor_names_a_mistyped_program_file(tmp_path: Path) -> None:
    home = _project(tmp_path, "[python, trian.py]")
    code, report = _doctor(home, "campaign.yaml")
    program = {c["name"]: c for c in report["checks"]}["program"]
    assert code == 1 and not program["passed"]
    assert "trian.py: no such file" in program["detail"]
    assert "did you mean 'train.py'" in program["detail"]


def test_doctor_names_a_mistyped_interpreter(tmp_path: Path) -> None:
    home = _project(tmp_path, "[pythn, train.py]")
    code, report = _doctor(home, str(home / "campaign.yaml"))
    program = {c["name"]: c for c in report["checks"]}["program"]
    assert code == 1 and not program["passed"]
    assert "pythn: not found on PATH; did you mean 'python'" in program["detail"]


def test_doctor_names_a_missing_cwd(tmp_path: Path) -> None:
    home = _project(tmp_path, "[python, train.py]\n  cwd: ../nowhere")
    code, report = _doctor(home)
    cwd = {c["name"]: c for c in report["checks"]}["cwd"]
    assert code == 1 and not cwd["passed"] and "nowhere" in cwd["detail"]


def test_doctor_system_alone_still_checks_a_profile(tmp_path: Path) -> None:
    """`--system NAME` without a campaign keeps today's meaning: that profile's needs."""
    home = _project(tmp_path, "[python, train.py]")
    _, report = _doctor(home, "--system", str(home / "local.yaml"))
    assert report["campaign"] is None
    assert "tensorflow" in [c["name"] for c in report["checks"]]
