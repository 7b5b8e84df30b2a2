"""`make test` runs the suite on two pytest-xdist workers (tests/xdist_groups.py): tests that
share a real run or the SLURM cluster must be in one xdist group, or each worker builds its own.
Checked on the real collection of a few files, through the printout a developer reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import REPO

FILES = [
    "tests/integration/test_quality.py",  # quickstart_copy -> finished_quickstart -> the wheel
    "tests/integration/test_packaging.py",  # installed_hpcscale
    "tests/integration/test_browser.py",  # getfixturevalue: pytest.mark.shares
    "tests/integration/test_contention.py",  # quickstart, SLURM and plain tests in one file
    "tests/integration/test_slurm.py",  # pytestmark slurm, module fixture
    "tests/integration/test_cluster.py",  # its own clusters (slurm marker)
    "tests/integration/test_jobs.py",  # module-scoped fixtures only
    "tests/integration/test_arrays.py",  # nothing shared
]
QUICKSTART = "finished_quickstart+installed_hpcscale"


def groups() -> dict[str, set[str]]:
    """group name -> the files of its tests, as HPCSCALE_TEST_SHOW_GROUPS=1 prints them."""
    env = {**os.environ, "HPCSCALE_TEST_SHOW_GROUPS": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)  # the printout is the controller's (or a plain run's)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-s", "-p", "no:cacheprovider",
         *FILES],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.findall(r"^  (\S+): \d+ tests in (.+)$", proc.stdout, re.M)
    return {name: set(files.split(", ")) for name, files in found}


def test_shared_fixtures_and_slurm_each_make_one_group() -> None:
    got = groups()
    assert got[QUICKSTART] == {
        "test_quality.py", "test_packaging.py", "test_browser.py", "test_contention.py"
    }  # fmt: skip
    assert got["slurm"] == {"test_slurm.py", "test_cluster.py", "test_contention.py"}
    assert got["test_jobs"] == {"test_jobs.py"}
    # test_arrays.py shares nothing: its tests go wherever a worker is free
    assert not any("test_arrays.py" in files for files in got.values()), got
