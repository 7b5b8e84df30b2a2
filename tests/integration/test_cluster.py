"""The local SLURM cluster (`hpcscale cluster up|down|status`) against real daemons.

Everything marked `slurm` uses the session cluster from tests/slurm_fixture.py; the test that
brings it down brings it back up, so later tests find it running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpcscale.cli.cluster import app
from hpcscale.devcluster import procs
from hpcscale.devcluster.cluster import LocalCluster
from hpcscale.devcluster.logs import excerpt
from hpcscale.devcluster.preflight import check_programs
from hpcscale.devcluster.probes import listening
from hpcscale.devcluster.spec import ClusterSpec
from hpcscale.devcluster.status import ClusterInfo
from hpcscale.model.errors import HpcscaleError, UsageError
from tests.slurm_fixture import (
    skip_unless_available,
    slurm_run,
    start_test_cluster,
    stop_test_cluster,
    wait_for_sacct,
    wait_idle,
)

PY = sys.executable


def _sinfo(info: ClusterInfo) -> dict[str, str]:
    out = slurm_run(info.env, "sinfo", "-h", "-N", "-o", "%N|%T").stdout
    return dict(line.split("|") for line in out.splitlines())


# ---------------------------------------------------------------- no daemons needed


def test_missing_programs_name_packages_and_make_setup(tmp_path: Path) -> None:
    with pytest.raises(HpcscaleError) as exc:
        check_programs(search_path=str(tmp_path))
    msg = str(exc.value)
    assert "make setup" in msg
    for package in ("munge", "mariadb-server", "slurmctld", "slurmd", "slurmdbd"):
        assert package in msg


def test_refuses_a_state_dir_that_is_not_a_cluster(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(UsageError, match="not a hpcscale cluster directory"):
        LocalCluster(tmp_path).up()
    with pytest.raises(UsageError, match="not a hpcscale cluster directory"):
        LocalCluster(tmp_path).down(purge=True)
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--nodes"):
        ClusterSpec(nodes=0)
    with pytest.raises(UsageError, match="unknown cluster settings: gpus"):
        LocalCluster(tmp_path / "c").up(gpus=2)
    with pytest.raises(UsageError, match="--nodes"):
        LocalCluster(tmp_path / "c").up(nodes=100)
    assert not (tmp_path / "c").exists()


def test_status_without_a_cluster_says_how_to_start_and_point_a_shell(tmp_path: Path) -> None:
    """Nothing finds the cluster by itself (only SLURM_CONF does): status says how to set it."""
    state = tmp_path / "my cluster"
    res = CliRunner().invoke(app, ["status", "--state-dir", str(state)])
    assert res.exit_code == 0, res.output
    assert f"no cluster in {state}" in res.stdout
    assert f"eval \"$(hpcscale cluster up --state-dir '{state}')\"" in res.stdout
    assert not state.exists()


def test_log_excerpts_say_when_there_is_no_log(tmp_path: Path) -> None:
    assert excerpt(tmp_path / "gone.log") == f"(no log at {tmp_path / 'gone.log'})"
    (tmp_path / "a.log").write_text("".join(f"line {i}\n" for i in range(40)) + "\n\n")
    assert excerpt(tmp_path / "a.log", 2) == "line 38\nline 39"


# ---------------------------------------------------------------- the session cluster


@pytest.mark.slurm
def test_up_gives_four_idle_nodes(slurm_cluster: ClusterInfo) -> None:
    assert _sinfo(slurm_cluster) == {f"node{i}": "idle" for i in range(1, 5)}
    assert slurm_cluster.up
    assert os.environ["SLURM_CONF"] == slurm_cluster.slurm_conf


@pytest.mark.slurm
def test_every_daemon_listens_on_loopback_only(slurm_cluster: ClusterInfo) -> None:
    spec = ClusterSpec(**slurm_cluster.spec)
    ports = [spec.ctld_port, spec.dbd_port, spec.mysql_port]
    ports += [spec.slurmd_port(i) for i in range(1, spec.nodes + 1)]
    for port in ports:
        assert listening(port) == ["127.0.0.1"], port


@pytest.mark.slurm
def test_batch_job_and_two_node_array_complete_in_sacct(
    slurm_cluster: ClusterInfo, tmp_path: Path
) -> None:
    env = slurm_cluster.env
    single = slurm_run(
        env, "sbatch", "--parsable", f"-o{tmp_path}/single-%j.out", "--wrap", "echo hello"
    ).stdout.strip()
    array = slurm_run(
        env,
        "sbatch",
        "--parsable",
        "-N2",
        "--array=0-1",
        f"-o{tmp_path}/array-%A_%a.out",
        "--wrap",
        "srun -l printenv SLURMD_NODENAME",
    ).stdout.strip()
    rows = wait_for_sacct(env, [single, f"{array}_0", f"{array}_1"])
    assert rows[single][0] == "COMPLETED"
    assert {rows[f"{array}_{i}"][0] for i in (0, 1)} == {"COMPLETED"}
    assert (tmp_path / f"single-{single}.out").read_text() == "hello\n"
    for i in (0, 1):
        lines = (tmp_path / f"array-{array}_{i}.out").read_text().split()
        # one task on each of two distinct virtual nodes
        assert len(set(lines[1::2])) == 2, lines


# One write(2) per rank: print's separate pieces can reach mpirun's output forwarding apart
# and interleave with the other rank's line.
MPI_PROG = (
    "from mpi4py import MPI; import os; c = MPI.COMM_WORLD; "
    "s = c.allreduce(c.rank + 1); "
    "os.write(1, f'{c.rank} {os.environ[\"SLURMD_NODENAME\"]} {s}\\n'.encode())"
)


@pytest.mark.slurm
@pytest.mark.mpi
@pytest.mark.parametrize("launcher", ["srun --mpi=pmix", "mpirun"])
def test_mpi_across_two_virtual_nodes(slurm_cluster: ClusterInfo, launcher: str) -> None:
    pytest.importorskip("mpi4py")
    if launcher == "mpirun":
        cmd = ["salloc", "-N2", "--ntasks-per-node=1", "mpirun", "--allow-run-as-root"]
        cmd += ["--map-by", "node", "-n", "2"]
    else:
        cmd = ["srun", "--mpi=pmix", "-N2", "-n2"]
    env = {**slurm_cluster.env, **slurm_cluster.job_env}
    out = slurm_run(env, *cmd, PY, "-c", MPI_PROG, timeout=60).stdout
    ranks = sorted(line.split() for line in out.splitlines() if line[:1].isdigit())
    assert [r[0] for r in ranks] == ["0", "1"], out
    nodes = {r[1] for r in ranks}
    assert len(nodes) == 2 and nodes <= {f"node{i}" for i in range(1, 5)}, out
    assert {r[2] for r in ranks} == {"3"}, out  # allreduce of 1 + 2 across the nodes


@pytest.mark.slurm
def test_status_json(slurm_cluster: ClusterInfo) -> None:
    wait_idle(slurm_cluster)
    res = CliRunner().invoke(app, ["status", "--json", "--state-dir", slurm_cluster.state_dir])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    records = LocalCluster(slurm_cluster.state_dir).records()
    assert data["up"] is True
    assert data["env"] == {"SLURM_CONF": slurm_cluster.slurm_conf}
    assert "db_password" not in data["spec"]
    assert [d["name"] for d in data["daemons"]] == [
        "munged",
        "mariadbd",
        "slurmdbd",
        "slurmctld",
        *(f"slurmd-node{i}" for i in range(1, 5)),
    ]
    for d in data["daemons"]:
        assert d["alive"] is True
        assert d["pid"] == records[d["name"]].pid
        assert Path(f"/proc/{d['pid']}").exists()
    assert [(n["name"], n["state"], n["cpus"]) for n in data["nodes"]] == [
        (f"node{i}", "idle", 4) for i in range(1, 5)
    ]


@pytest.mark.slurm
def test_status_prints_how_to_point_a_shell_at_the_cluster(
    slurm_cluster: ClusterInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = f"export SLURM_CONF={slurm_cluster.slurm_conf}"
    args = ["status", "--state-dir", slurm_cluster.state_dir]
    res = CliRunner().invoke(app, args)  # the session points SLURM_CONF at it
    assert res.exit_code == 0, res.output
    assert "this shell already points at it" in res.stdout
    assert res.stdout.strip().endswith(export)
    monkeypatch.delenv("SLURM_CONF")
    res = CliRunner().invoke(app, args)
    assert "point a shell at it" in res.stdout
    assert res.stdout.strip().endswith(export)
    # a shell pointed this way reaches it: SLURM_CONF is all a SLURM client needs
    out = subprocess.run(
        ["bash", "-c", f"{export} && sinfo -h -o %P"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"{slurm_cluster.partition}*"


@pytest.mark.slurm
def test_up_again_is_a_no_op_that_prints_the_export_line(slurm_cluster: ClusterInfo) -> None:
    before = {n: r.pid for n, r in LocalCluster(slurm_cluster.state_dir).records().items()}
    res = CliRunner().invoke(app, ["up", "--state-dir", slurm_cluster.state_dir])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().endswith(f"export SLURM_CONF={slurm_cluster.slurm_conf}")
    assert "already up" in res.output
    assert "point this shell at it" not in res.output  # stdout is not a terminal: eval'd
    after = {n: r.pid for n, r in LocalCluster(slurm_cluster.state_dir).records().items()}
    assert after == before


@pytest.mark.slurm
def test_changing_settings_of_a_running_cluster_is_refused(slurm_cluster: ClusterInfo) -> None:
    with pytest.raises(UsageError, match="nodes=4->2"):
        LocalCluster(slurm_cluster.state_dir).up(nodes=2)


@pytest.mark.slurm
def test_up_repairs_a_half_up_cluster(slurm_cluster: ClusterInfo) -> None:
    cluster = LocalCluster(slurm_cluster.state_dir)
    before = cluster.records()
    procs.stop([before["slurmctld"], before["slurmd-node3"]])
    assert not cluster.status().up
    cluster.up()
    after = cluster.records()
    restarted = {n for n in before if after[n].pid != before[n].pid}
    assert restarted == {"slurmctld", "slurmd-node3"}
    assert cluster.status().up
    assert _sinfo(slurm_cluster) == {f"node{i}": "idle" for i in range(1, 5)}


@pytest.mark.slurm
def test_down_stops_every_recorded_pid_and_nothing_else(slurm_cluster: ClusterInfo) -> None:
    """A decoy named like a daemon survives (no name patterns), a reused pid is left alone,
    and up after down brings the same cluster back (job ids continue: state kept)."""
    cluster = LocalCluster(slurm_cluster.state_dir)
    env = slurm_cluster.env
    first = slurm_run(env, "sbatch", "--parsable", "-o/dev/null", "--wrap", "true").stdout.strip()
    decoy = subprocess.Popen(["bash", "-c", "exec -a slurmd sleep 300"])
    try:
        records = cluster.records()
        assert len(records) == 8
        outcome = cluster.down()
        assert set(outcome) == set(records)
        for rec in records.values():
            assert not procs.is_alive(rec.pid), rec
        assert decoy.poll() is None
        assert cluster.records() == {}
        # A stale record whose pid now belongs to someone else: never signalled.
        ticks = procs.start_ticks(decoy.pid)
        stale = procs.ProcRecord("slurmd-node1", decoy.pid, ["slurmd"], (ticks or 0) + 1, "x")
        stale.save(cluster.lay.record("slurmd-node1"))
        assert "not ours" in cluster.down()["slurmd-node1"]
        assert decoy.poll() is None
        assert not cluster.lay.record("slurmd-node1").exists()
    finally:
        decoy.kill()
        decoy.wait()
        info = cluster.up()
    assert info.up
    assert _sinfo(slurm_cluster) == {f"node{i}": "idle" for i in range(1, 5)}
    second = slurm_run(env, "sbatch", "--parsable", "-o/dev/null", "--wrap", "true").stdout
    assert int(second) > int(first)


# ---------------------------------------------------------------- a second, throw-away cluster


@pytest.mark.slurm
def test_purge_wipes_state_and_database_together(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """After `down --purge` a new cluster starts from job id 1 with an empty sacct (had only
    one of state or DB been wiped, ids would collide or continue)."""
    skip_unless_available()
    root = tmp_path_factory.mktemp("purge")
    cluster = start_test_cluster(root, nodes=1)
    try:
        env = cluster.status().env
        job = slurm_run(env, "sbatch", "--parsable", "-o/dev/null", "--wrap", "true").stdout
        assert job.strip() == "1"
        wait_for_sacct(env, ["1"])
        pids = [r.pid for r in cluster.records().values()]
        res = CliRunner().invoke(app, ["down", "--purge", "--state-dir", str(root)])
        assert res.exit_code == 0, res.output
        assert not root.exists()
        assert not any(procs.is_alive(p) for p in pids)
        start_test_cluster(root, nodes=1)
        assert slurm_run(env, "sacct", "-X", "-n", "-o", "JobID").stdout.strip() == ""
        job = slurm_run(env, "sbatch", "--parsable", "-o/dev/null", "--wrap", "true").stdout
        assert job.strip() == "1"
    finally:
        stop_test_cluster(cluster)


@pytest.mark.parametrize(
    ("env", "outcome"),
    [
        ({"CI": "true"}, pytest.fail.Exception),
        ({"HPCSCALE_REQUIRE_SLURM": "1"}, pytest.fail.Exception),
        ({}, pytest.skip.Exception),
    ],
)
def test_a_cluster_that_cannot_start_fails_where_slurm_is_required(
    env: dict[str, str], outcome: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not root (stood in by a patched geteuid: this suite runs as root): under `make test` or
    CI that is a failure naming the cause; elsewhere a skip that says what is needed."""
    for name in ("CI", "HPCSCALE_REQUIRE_SLURM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception), match="needs root") as got:
        skip_unless_available()
    assert got.type is outcome
