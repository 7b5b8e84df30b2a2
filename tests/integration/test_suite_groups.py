"""`make test` runs the suite on two pytest-xdist workers (tests/xdist_groups.py): tests that
share a real run or the SLURM cluster must be in one xdist group, or each worker builds its own.
Checked on the real collection of a few files, through the printout a developer reads."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

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


def test_a_group_runs_on_one_worker() -> None:
    """Scheduled for real on two workers: test_cli_help's four tests of its module-scoped help
    texts share one worker (pytest-xdist's own xdist_group marks were silently ignored under
    pytest 9.2, tests/xdist_groups.py)."""
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed (pip install -e '.[dev]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "HPCSCALE_X"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
         "no:cacheprovider", "tests/integration/test_cli_help.py"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    passed = re.findall(r"^\[(gw\d)\] .*?PASSED \S+::(\w+)", proc.stdout, re.M)
    ran = {name: worker for worker, name in passed}
    free = "test_shell_completion_offers_campaign_example_and_system_names"  # no module fixture
    grouped = [n for n in ran if n != free]
    assert len(grouped) == 4 and len({ran[n] for n in grouped}) == 1, proc.stdout
