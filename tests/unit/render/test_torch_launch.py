"""PyTorch DDP's launch contract as rendered (issue 31): MASTER_ADDR/MASTER_PORT lines from the
scheduler, passed on by every launcher; the port rule collision-free (checked by running the
rendered shell line, not the Python twin); torchrun one per node; rankwrap's RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE from each launcher's own variables; the knob/strategy errors."""

from __future__ import annotations

import itertools
import subprocess
import textwrap
from pathlib import Path

import pytest

from hpcscale.api import render_campaign
from hpcscale.backends.slurm.script import PORT_BASE, PORT_SPAN, rendezvous
from hpcscale.model.errors import InputError
from hpcscale.rankwrap import rank_of, torch_env
from tests.conftest import CAMPAIGNS

PROFILE = """\
name: ddp-test
scheduler: slurm
launcher: {launcher}
cores_per_node: 8
max_nodes: 4
gpus_per_node: 0
python: /usr/bin/python3
mpi:
  openmpi: {{}}
"""


def _campaign(tmp: Path, body: str, launcher: str = "srun") -> Path:
    (tmp / "ddp-test.yaml").write_text(PROFILE.format(launcher=launcher))
    path = tmp / "c.yaml"
    path.write_text(textwrap.dedent(body))
    return path


BUNDLED = """\
name: ddp
workload: {model: dcgan, args: {image_size: 32}}
system: ./ddp-test.yaml
scaling: weak
matrix: {nodes: 2, layout: "2x1", batch: 4, strategy: torch_ddp}
"""


def _script(tmp: Path, workdir: Path, body: str = BUNDLED, launcher: str = "srun") -> str:
    _, _, rendered = render_campaign(_campaign(tmp, body, launcher), workdir)
    assert len(rendered) == 1
    return (rendered[0].run_dir / "job.sbatch").read_text()


def _ports(job_ids: list[int]) -> list[int]:
    """MASTER_PORT as the job script computes it, for each job id (one bash, the real line)."""
    line = next(str(x) for x in _rendered_lines() if str(x).startswith("MASTER_PORT="))
    loop = f"for SLURM_JOB_ID in {' '.join(map(str, job_ids))}; do {line}; echo $MASTER_PORT; done"
    out = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def _rendered_lines() -> list[object]:
    from hpcscale.model.run import Run

    run = Run.model_validate(
        {"campaign": "c", "system": "s", "model": "dcgan", "scaling": "weak", "device": "cpu",
         "nodes": 2, "tasks_per_node": 2, "threads_per_task": 1, "gpus_per_node": 0,
         "batch_per_rank": 4, "global_batch": 16, "strategy": "torch_ddp"}
    )  # fmt: skip
    return rendezvous(run, None)  # type: ignore[arg-type]


def test_the_port_rule_gives_10000_consecutive_jobs_10000_ports_in_range() -> None:
    ids = list(range(987_654, 987_654 + 10_000))
    ports = _ports(ids)
    assert len(set(ports)) == 10_000
    assert all(PORT_BASE <= p < PORT_BASE + PORT_SPAN for p in ports)
    assert all(p < 32768 for p in ports)  # below Linux's ephemeral ports


def test_every_pair_of_array_tasks_of_one_job_gets_its_own_port() -> None:
    """Each array task runs with its own SLURM_JOB_ID (the array's id, then ids after it):
    a 1001-task array (SLURM's default MaxArraySize) whose tasks got ids with gaps left by
    other jobs, every pair of tasks apart."""
    first = 4_242
    ids = [first] + [first + 1 + 3 * i for i in range(1000)]
    ports = _ports(ids)
    for (a, pa), (b, pb) in itertools.combinations(zip(ids, ports, strict=True), 2):
        assert pa != pb, (a, b)


def test_the_slurm_rendezvous_resolves_the_first_hosts_nodeaddr_and_fails_without(
    tmp_path: Path, workdir: Path
) -> None:
    """The lines run under bash with a stand-in `scontrol` (no cluster in the unit tier; the
    real one runs in tests/integration/test_torch_slurm.py): NodeAddr, not the node name; a
    node with no address stops the job with exit 2 and says so."""
    script = _script(tmp_path, workdir)
    assert "export MASTER_ADDR MASTER_PORT" in script
    block = script[script.index("# where the ranks meet") : script.index("export MASTER_ADDR")]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(
        "#!/bin/bash\n"
        'if [ "$2" = hostnames ]; then printf "node7\\nnode8\\n"; exit 0; fi\n'
        'if [ "$3" = node7 ] && [ -n "$ADDR" ]; then\n'
        '  echo "NodeName=node7 Arch=x86_64 CoresPerSocket=4"\n'
        '  echo "   NodeAddr=$ADDR NodeHostName=node7 Version=22.05"; fi\n'
    )
    (fake / "scontrol").chmod(0o755)
    probe = f'set -euo pipefail\n{block}\necho "$MASTER_ADDR $MASTER_PORT"\n'
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "123", "SLURM_JOB_NODELIST": "x"}
    ok = subprocess.run(["bash", "-c", probe], env={**env, "ADDR": "10.1.2.7"},
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["10.1.2.7", str(PORT_BASE + 123)]
    bad = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "no address for node7" in bad.stderr and bad.stdout == ""


@pytest.mark.parametrize(
    ("launcher", "passes"),
    [
        ("srun", None),  # srun passes the whole environment
        ("mpirun", "-x MASTER_ADDR -x MASTER_PORT"),
        ("mpiexec", None),  # Hydra passes the environment by default
        ("mpirun_rsh", 'MASTER_ADDR="${MASTER_ADDR}" MASTER_PORT="${MASTER_PORT}"'),
    ],
)
def test_every_launcher_passes_the_rendezvous_on(
    launcher: str, passes: str | None, tmp_path: Path, workdir: Path
) -> None:
    script = _script(tmp_path, workdir, launcher=launcher)
    meet = script.index("export MASTER_ADDR MASTER_PORT")
    launch = script.rindex("jobs/torch/train.py")
    assert meet < launch
    if passes is not None:
        assert passes in script[meet:]
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_horovod_runs_get_no_rendezvous(workdir: Path) -> None:
    _, _, rendered = render_campaign(CAMPAIGNS / "quickstart_slurm.yaml", workdir)
    for r in rendered:
        assert "MASTER_ADDR" not in (r.run_dir / "job.sbatch").read_text()


def test_torchrun_is_one_per_node_under_srun_with_the_nodes_cpus(
    tmp_path: Path, workdir: Path
) -> None:
    body = BUNDLED.replace('layout: "2x1"', 'layout: "2x3"')
    script = _script(tmp_path, workdir, body, launcher="torchrun")
    launch = script.splitlines()[-1]
    head = launch.split(" -m torch.distributed.run ")[0]
    assert head.startswith("srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=6 ")
    rest = launch.split(" -m torch.distributed.run ")[1]
    assert rest.startswith(
        '--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:'
        '$MASTER_PORT" --rdzv-id "${SLURM_JOB_ID:-$MASTER_PORT}" --no-python /usr/bin/python3 '
    )
    assert "export OMP_NUM_THREADS=3\n" in script  # the layout's threads (torchrun keeps them)


def test_rankwrap_gives_each_launchers_rank_world_and_local_rank() -> None:
    srun = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "1"}  # fmt: skip
    assert torch_env(srun) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                               "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    uneven = {**srun, "SLURM_STEP_TASKS_PER_NODE": "3,1", "SLURM_PROCID": "3"}
    assert torch_env(uneven)["LOCAL_WORLD_SIZE"] == "1"
    # mpirun inside a batch script: the step's SLURM_PROCID 0 is inherited, Open MPI's win
    ompi = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
            "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
    assert torch_env(ompi) == {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
                               "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    mv2 = {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
           "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "4"}  # fmt: skip
    assert torch_env(mv2) == {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                              "LOCAL_WORLD_SIZE": "4"}  # fmt: skip
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert torch_env(hydra) == {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                                "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    # under torchrun its own values stand, and name the rank file (not the node's task)
    child = {**srun, "TORCHELASTIC_RUN_ID": "7", "RANK": "2", "WORLD_SIZE": "4"}
    assert torch_env(child) == {}
    assert rank_of(child) == 2
    assert torch_env({}) == {}


def _error(tmp: Path, body: str) -> str:
    from hpcscale.api import plan_campaign

    with pytest.raises(InputError) as exc:
        plan_campaign(_campaign(tmp, body))
    return str(exc.value)


def test_a_horovod_knob_on_a_ddp_cell_and_the_reverse_are_refused(tmp_path: Path) -> None:
    said = _error(tmp_path, BUNDLED.replace("strategy: torch_ddp", "strategy: torch_ddp, "
                                            "fusion_threshold_mb: 32"))  # fmt: skip
    assert (
        "fusion_threshold_mb is a knob of strategy: horovod or mirrored, not of torch_ddp" in said
    )
    said = _error(tmp_path, BUNDLED.replace("strategy: torch_ddp", "strategy: horovod, "
                                            "bucket_cap_mb: 32"))  # fmt: skip
    assert "bucket_cap_mb is a knob of strategy: torch_ddp, not of horovod" in said


def test_torchrun_with_horovod_is_refused(tmp_path: Path) -> None:
    body = BUNDLED.replace("strategy: torch_ddp", "strategy: horovod") + "launcher: torchrun\n"
    said = _error(tmp_path, body)
    assert "launcher torchrun" in said and "torch_ddp" in said


def test_a_model_the_torch_programs_lack_is_refused_with_theirs(tmp_path: Path) -> None:
    said = _error(tmp_path, BUNDLED.replace("model: dcgan", "model: sngan"))
    assert "torch_ddp has no model 'sngan'" in said and "dcgan, resnet50, vgg16" in said


def test_ddp_knobs_on_a_command_need_a_placeholder(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text("print('rate 1')\n")
    body = """\
    name: own
    workload:
      command: python prog.py
      framework: torch
      metrics: [{name: rate, pattern: 'rate ([\\d.]+)'}]
      throughput: rate
    system: ./ddp-test.yaml
    matrix: {layout: "2x1", bucket_cap_mb: [1, 25]}
    """
    said = _error(tmp_path, body)
    assert "bucket_cap_mb" in said and "DDP(...)" in said


def test_a_torch_command_with_timeline_gets_the_profiler_injected(
    tmp_path: Path, workdir: Path
) -> None:
    """collect.timeline on a `framework: torch` command: rankwrap starts the profiler in the
    program (--torch-trace into RUN_DIR/traces, the campaign's window); off: nothing."""
    (tmp_path / "prog.py").write_text("print('rate 1')\n")
    body = """\
    name: own
    workload:
      command: python prog.py
      framework: torch
      metrics: [{name: rate, pattern: 'rate ([\\\\d.]+)'}]
      throughput: rate
    system: ./ddp-test.yaml
    scaling: weak
    matrix: {layout: "2x1", batch: 4}
    """
    traced = body + "collect: {timeline: true, trace_window: {skip: 2, steps: 3}}\n"
    script = _script(tmp_path, workdir, traced)
    run_dir = script.split("export HPCSCALE_RUN_DIR=")[1].split("\n")[0]
    assert f"--torch-env --torch-trace {run_dir}/traces --trace-window 2,3 -- " in script
    plain = _script(tmp_path, workdir / "plain", body)
    assert "--torch-env -- " in plain and "--torch-trace" not in plain
