"""`hpcscale status NAME` from any directory, as squeue users expect: the per-user index of
workdirs (hpcscale.state.workdirs) finds the campaign; a name in two workdirs is ambiguous and
both are listed; a mistyped name gets a did-you-mean. Real submit (local mpirun), real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"
CAMPAIGN = """\
name: crash
workload:
  command: [python, -c, "print('rate 5 samples/s')"]
  metrics: [{name: samples_per_s, pattern: 'rate ([0-9.]+)'}]
  throughput: samples_per_s
system: local
scaling: weak
matrix:
  layout: ['1x1']
  batch: 4
"""


def _run(cwd: Path, xdg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HPCSCALE_WORKDIR"}
    return subprocess.run(
        [EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**env, "COLUMNS": "200", "XDG_DATA_HOME": str(xdg)},
    )  # fmt: skip


def test_status_finds_a_campaign_from_another_directory(tmp_path: Path) -> None:
    xdg, first, second, elsewhere = (tmp_path / n for n in ("xdg", "a", "c", "b"))
    for d in (first, second, elsewhere):
        d.mkdir()
    (first / "crash.yaml").write_text(CAMPAIGN)
    sub = _run(first, xdg, "submit", "crash.yaml", "--backend", "local")
    assert sub.returncode == 0, sub.stderr

    found = _run(elsewhere, xdg, "status", "crash")
    assert found.returncode == 0, found.stderr
    assert "COMPLETED" in found.stdout, found.stdout

    typo = _run(elsewhere, xdg, "status", "crsh")
    assert typo.returncode == 2 and "did you mean 'crash'" in typo.stderr, typo.stderr

    (second / "crash.yaml").write_text(CAMPAIGN)
    assert _run(second, xdg, "submit", "crash.yaml", "--dry-run").returncode == 0
    both = _run(elsewhere, xdg, "status", "crash")
    assert both.returncode == 2 and "2 workdirs" in both.stderr, both.stderr
    for d in (first, second):
        assert str(d / "hpcscale-runs") in both.stderr

    local = _run(first, xdg, "status", "crash")  # the campaign here wins over the index
    assert local.returncode == 0 and "COMPLETED" in local.stdout, local.stderr
