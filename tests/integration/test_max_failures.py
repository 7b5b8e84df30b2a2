"""`submit --max-failures N` (local backend, real mpirun): a campaign whose runs all fail the
same way stops after N of them, says why and how many were not started, and the next submit
after the fix resumes; failures that differ never stop it, nor does `--max-failures 0`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import hpcscale

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"
CAMPAIGN = """\
name: {name}
workload:
  command: [python, {program}, "{{batch_per_rank}}"]
  metrics: [{{name: samples_per_s, pattern: 'rate ([0-9.]+)'}}]
  throughput: samples_per_s
system: local
scaling: weak
matrix:
  layout: ['1x1']
  batch: [1, 2, 3, 4, 5]
"""
DIFFERENT = """\
import sys
b = int(sys.argv[1])
raise [KeyError, ValueError, TypeError][b % 3](f"run {b}")
"""


def _hs(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HPCSCALE_WORKDIR": str(cwd / "runs")}  # COLUMNS=200 as hpcscale() sets it
    return hpcscale(*args, env=env, cwd=cwd, timeout=600)


def _states(cwd: Path, name: str) -> list[str]:
    rows = json.loads(_hs(cwd, "status", name, "--json").stdout)[name]
    return sorted(r["state"] for r in rows)


def test_same_failure_stops_after_n_and_resumes_after_the_fix(tmp_path: Path) -> None:
    (tmp_path / "needs.py").write_text("import sys\nimport a_module_not_installed\n")
    (tmp_path / "c.yaml").write_text(CAMPAIGN.format(name="typo", program="needs.py"))
    first = _hs(tmp_path, "submit", "c.yaml", "--backend", "local")
    assert first.returncode == 1
    assert "0 completed, 3 failed, 0 skipped, 2 not started" in first.stdout, first.stdout
    said = " ".join(first.stderr.split())
    assert "3 runs failed the same way" in said, said
    assert "No module named 'a_module_not_installed'" in said, said
    assert _states(tmp_path, "typo") == ["FAILED"] * 3 + ["RENDERED"] * 2

    (tmp_path / "needs.py").write_text("import sys\nprint('rate', 10 * int(sys.argv[1]))\n")
    again = _hs(tmp_path, "submit", "c.yaml", "--backend", "local")
    assert again.returncode == 0, again.stderr
    assert "5 completed, 0 failed, 0 skipped" in again.stdout
    assert _states(tmp_path, "typo") == ["COMPLETED"] * 5


def test_different_failures_and_zero_never_stop(tmp_path: Path) -> None:
    (tmp_path / "differ.py").write_text(DIFFERENT)
    (tmp_path / "c.yaml").write_text(CAMPAIGN.format(name="differ", program="differ.py"))
    proc = _hs(tmp_path, "submit", "c.yaml", "--backend", "local", "--max-failures", "2")
    # reasons by batch % 3: Value, Type, Key, Value, Type -> twice each for Value and Type
    # only after the 4th and 5th run; the 4th (Value, twice) stops it with one left
    assert "0 completed, 4 failed, 0 skipped, 1 not started" in proc.stdout, proc.stdout
    (tmp_path / "c.yaml").write_text(CAMPAIGN.format(name="differ0", program="differ.py"))
    zero = _hs(tmp_path, "submit", "c.yaml", "--backend", "local", "--max-failures", "0")
    assert "0 completed, 5 failed, 0 skipped" in zero.stdout, zero.stdout
    assert "not started" not in zero.stdout
