"""Session fixture `slurm_cluster`: a real local SLURM cluster (4 nodes) for tests.

Wire it in tests/conftest.py with `from tests.slurm_fixture import slurm_cluster  # noqa: F401`.
The cluster lives in a pytest tmp dir on a free port block (never the default 17000 block a
developer's own `hpcscale cluster up` uses), SLURM_CONF points at it for the whole session
(the only way the SLURM backend, submitit's sacct calls included, finds a cluster), and it is
stopped at session end even when tests fail or `up` itself fails half-way. Its logs stay in
the tmp dir for post-mortems.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from hpcscale.devcluster.cluster import LocalCluster
from hpcscale.devcluster.preflight import check_programs
from hpcscale.devcluster.spec import first_free_port_base
from hpcscale.devcluster.status import ClusterInfo
from hpcscale.model.errors import HpcscaleError

TEST_PORT_BASES = range(27000, 29000, 100)


def free_port_base() -> int:
    """A port block no other cluster (another test session, a developer's) is using."""
    if os.environ.get("HPCSCALE_TEST_SLURM_PORT_BASE"):
        return int(os.environ["HPCSCALE_TEST_SLURM_PORT_BASE"])
    base = first_free_port_base(TEST_PORT_BASES)
    if base is not None:
        return base
    raise RuntimeError("no free port block for the test SLURM cluster in 27000-28999")


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return (
            "the local SLURM cluster needs root (it starts munged, slurmctld, slurmd, slurmdbd "
            "and mariadbd as root): run the suite as root, e.g. in a container"
        )
    try:
        check_programs()
    except HpcscaleError as exc:
        return str(exc)
    return None


def required() -> bool:
    """Under `make test` (HPCSCALE_REQUIRE_SLURM=1) or CI, setup installed SLURM: a cluster
    that cannot start is a failure there, never a silent skip."""
    return os.environ.get("HPCSCALE_REQUIRE_SLURM") == "1" or os.environ.get("CI") == "true"


def skip_unless_available() -> None:
    """Skip (or, where SLURM is required, fail) a test that needs a local cluster here."""
    reason = skip_reason()
    if reason is None:
        return
    if required():
        pytest.fail(f"SLURM is required here (make test or CI) but: {reason}")
    pytest.skip(reason)


def start_test_cluster(state_dir: Path, **settings: object) -> LocalCluster:
    """A cluster on a free port block; a dead slurmd is noticed within ~10-20 s (fault tests)."""
    cluster = LocalCluster(state_dir)
    settings = {"slurmd_timeout_s": 10, **settings}
    cluster.up(port_base=free_port_base(), cluster_name="hpcscaletest", **settings)
    return cluster


def stop_test_cluster(cluster: LocalCluster) -> None:
    """Stop the daemons; drop the (large) database but keep logs and configs for debugging."""
    try:
        cluster.down()
    finally:
        shutil.rmtree(cluster.lay.db_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterInfo]:
    """A running 4-node cluster; `info.env` holds SLURM_CONF (also set in os.environ)."""
    skip_unless_available()
    cluster = LocalCluster(tmp_path_factory.mktemp("slurm"))
    try:
        with pytest.MonkeyPatch.context() as mp:
            start_test_cluster(cluster.lay.root)
            info = cluster.status()
            mp.setenv("SLURM_CONF", info.slurm_conf)
            yield info
    finally:
        stop_test_cluster(cluster)


# ---- small helpers for tests that use the cluster


def slurm_run(
    env: Mapping[str, str], *args: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run a SLURM client command against the test cluster; fail loudly with its stderr."""
    res = subprocess.run(
        list(args),
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if res.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def wait_for_sacct(
    env: Mapping[str, str], job_ids: list[str], timeout: float = 60
) -> dict[str, tuple[str, str]]:
    """job id -> (state, node list) once every listed job is final in sacct.

    Name array tasks one by one ("12_0", "12_1"): sacct lists a task only once it has started
    and trails squeue by a few seconds, so poll rather than sleep.
    """
    final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
    query = ",".join(sorted({j.split("_")[0] for j in job_ids}))
    deadline = time.monotonic() + timeout
    rows: dict[str, tuple[str, str]] = {}
    while time.monotonic() < deadline:
        out = slurm_run(
            env, "sacct", "-X", "-n", "-P", "-j", query, "-o", "JobID,State,NodeList"
        ).stdout
        rows = {}
        for line in out.splitlines():
            jid, state, nodelist = line.split("|")
            rows[jid] = (state.split()[0], nodelist)
        if all(rows.get(j, ("",))[0] in final for j in job_ids):
            return rows
        time.sleep(0.5)
    raise AssertionError(f"jobs {job_ids} not final in sacct after {timeout} s: {rows}")


# node states (sinfo %T, before any suffix such as `*`) that mean a job still holds the node
BUSY_STATES = ("alloc", "mix", "comp", "draining", "planned")


def wait_idle(info: ClusterInfo, timeout: float = 90) -> None:
    """Wait until no node of the shared session cluster holds a job (a previous test's job may
    still be completing), so tests that look at node states see the cluster at rest. A node
    left down or drained by a fault test holds none: waiting for it to turn idle would wait the
    whole timeout after every test (it did: 90 s per test_slurm test)."""
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = slurm_run(info.env, "sinfo", "-h", "-N", "-o", "%T").stdout.split()
        if states and not any(s.lower().startswith(BUSY_STATES) for s in states):
            return
        time.sleep(1)
    print(f"wait_idle: nodes still busy after {timeout} s: {states}", file=sys.stderr)
