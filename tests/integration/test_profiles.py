"""System profiles as users write them: their own MPI flavours, launchers from the registry,
their own templates, and `--system` to run one campaign on another system."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from hpcscale import api
from hpcscale.launchers import REGISTRY, Launcher, LaunchRequest, get
from hpcscale.model.errors import InputError
from hpcscale.model.system import SHIPPED_DIR, python_of
from tests.conftest import CAMPAIGNS, hpcscale

INTEL = """\
name: intel-site
scheduler: slurm
launcher: srun
cores_per_node: 48
max_nodes: 16
partition: compute
python: python3
mpi_default: intelmpi
mpi:
  intelmpi:
    modules: [intel-oneapi-mpi/2021.9]
    launcher: mpiexec
    launcher_args: [-genvall]
    env: {I_MPI_PIN_DOMAIN: omp, FI_PROVIDER: mlx}
  openmpi: {}
"""


def campaign(tmp_path: Path, system: str, matrix: str = "nodes: [1, 2]\n  batch: 32") -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(
        "name: site\nworkload: {model: dcgan, args: {image_size: 32}}\n"
        f"system: {system}\nscaling: weak\nmatrix:\n  {matrix}\n"
    )
    return p


def test_profile_defines_its_own_mpi_flavour(tmp_path: Path, workdir: Path) -> None:
    """Any key under `mpi:` is a flavour of that system, with its modules, env and launcher."""
    (tmp_path / "intel.yaml").write_text(INTEL)
    rc = api.render(campaign(tmp_path, "intel.yaml"), workdir)
    assert [r.run.mpi for r in rc.runs] == ["intelmpi", "intelmpi"]
    script = rc.runs[1].script
    assert "module load intel-oneapi-mpi/2021.9" in script
    assert "export I_MPI_PIN_DOMAIN=omp" in script and "export FI_PROVIDER=mlx" in script
    launch = rc.runs[1].launch
    assert launch.startswith('mpiexec -n 2 -ppn 1 -f "$HPCSCALE_HOSTFILE" -genvall python3 ')
    assert 'HPCSCALE_HOSTFILE="$(mktemp' in script  # mpiexec reads hosts: the script writes them
    for r in rc.runs:
        subprocess.run(["bash", "-n", str(r.run_dir / "job.sbatch")], check=True)
    # the other flavour of the same profile, and one the profile does not offer
    other = api.plan(campaign(tmp_path, "intel.yaml", "batch: 8\n  mpi: openmpi")).runs[0]
    assert (other.mpi, other.launcher) == ("openmpi", "srun")
    with pytest.raises(InputError, match="MPI flavour 'mvapich2-gdr' is not offered"):
        api.plan(campaign(tmp_path, "intel.yaml", "batch: 8\n  mpi: mvapich2-gdr"))


def test_unknown_launcher_is_located(tmp_path: Path) -> None:
    (tmp_path / "intel.yaml").write_text(INTEL.replace("launcher: mpiexec", "launcher: mpiexc"))
    proc = hpcscale("validate", str(campaign(tmp_path, "intel.yaml")))
    assert proc.returncode == 2
    assert (
        "intel.yaml:12 [mpi.intelmpi.launcher]" in proc.stderr
        and "did you mean 'mpiexec'" in proc.stderr
    )


def test_launcher_registry_is_the_one_place() -> None:
    """Every shipped profile's launchers are registered; each says whether it reads a
    hostfile, independently of the scheduler."""
    assert set(REGISTRY) == {"srun", "mpirun", "mpirun_rsh", "mpiexec", "horovodrun", "torchrun"}
    assert not get("torchrun").needs_hostfile(allocated=True)  # srun places its one per node
    assert all(isinstance(v, Launcher) and v.name == k for k, v in REGISTRY.items())
    assert not get("srun").needs_hostfile(allocated=True)
    assert get("mpirun").needs_hostfile(allocated=True)
    assert not get("mpirun").needs_hostfile(allocated=False)
    for path in SHIPPED_DIR.glob("*.yaml"):
        spec = yaml.safe_load(path.read_text())
        used = {spec.get("launcher", "srun")}
        used |= {f["launcher"] for f in (spec.get("mpi") or {}).values() if f.get("launcher")}
        assert used <= set(REGISTRY), path


def test_horovodrun_launches_through_the_jobs_python() -> None:
    p = api.plan(CAMPAIGNS / "quickstart.yaml")
    run = p.runs[1].model_copy(update={"mpi": "gloo", "launcher": "horovodrun"})
    python = python_of(p.system)
    req = LaunchRequest(run, ["PROGRAM"], ["A"], ["--gloo"], allocated=False, python=python)
    argv = get("horovodrun").argv(req)
    assert argv[0] == python
    assert argv[1:7] == ["-m", "horovod.runner.launch", "-np", 2, "-H", "localhost:2"]
    assert argv[-2:] == ["--gloo", "PROGRAM"]


def test_system_option_runs_a_campaign_elsewhere(tmp_path: Path) -> None:
    """The quickstart (system: local) on the local SLURM cluster's profile, by name or path."""
    proc = hpcscale("plan", str(CAMPAIGNS / "quickstart.yaml"), "--system", "slurm-local")
    assert proc.returncode == 0, proc.stderr
    assert "on slurm-local" in proc.stdout
    runs = api.plan(CAMPAIGNS / "quickstart.yaml", system="slurm-local").runs
    assert {r.system for r in runs} == {"slurm-local"} and {r.launcher for r in runs} == {"srun"}
    by_path = api.plan(CAMPAIGNS / "quickstart.yaml", system=SHIPPED_DIR / "slurm-local.yaml")
    assert [r.run_id for r in by_path.runs] == [r.run_id for r in runs]
    local = api.plan(CAMPAIGNS / "quickstart.yaml").runs
    assert {r.run_id for r in local}.isdisjoint(r.run_id for r in runs)  # other system, other run
    for cmd in ("validate", "render", "submit"):
        bad = hpcscale(cmd, str(CAMPAIGNS / "quickstart.yaml"), "--system", "nosuch", "--dry-run")
        if cmd != "submit":
            bad = hpcscale(cmd, str(CAMPAIGNS / "quickstart.yaml"), "--system", "nosuch")
        assert bad.returncode == 2, (cmd, bad.stderr)
        assert "--system" in bad.stderr and "unknown system 'nosuch'" in bad.stderr


def test_profile_template_is_checked_at_validate(tmp_path: Path) -> None:
    """A profile outside the repo names its own templates directory; a template that is not
    there, or does not parse, fails `validate` at the profile's `template:` line."""
    spec = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    (tmp_path / "tpl").mkdir()
    spec.update(name="mine", template="mine.sbatch.j2", templates="tpl")
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    line = yaml.safe_dump(spec, sort_keys=False).splitlines().index("template: mine.sbatch.j2") + 1
    c = campaign(tmp_path, "mine.yaml")
    proc = hpcscale("validate", str(c))
    assert proc.returncode == 2
    assert f"mine.yaml:{line} [template]" in proc.stderr and "not found in" in proc.stderr
    (tmp_path / "tpl" / "mine.sbatch.j2").write_text('{% extends "base.sbatch.j2" %}{% block x %')
    proc = hpcscale("validate", str(c))
    assert proc.returncode == 2 and "[template]" in proc.stderr, proc.stderr
    (tmp_path / "tpl" / "mine.sbatch.j2").write_text(
        '{% extends "base.sbatch.j2" %}{% block env_extra %}export SITE=1\n{% endblock %}'
    )
    assert hpcscale("validate", str(c)).returncode == 0
    assert "export SITE=1" in api.render(c, tmp_path / "wd").runs[0].script


# ---------------------------------------------------------------- partitions and devices

GPU_ONLY = ("cuda", "nccl", "MV2_USE_CUDA", "MV2_SUPPORT_DL", "MV2_USE_GDRCOPY", "HOROVOD_GPU_")


def _owens_campaign(tmp_path: Path, nodes: str, extra: str = "") -> Path:
    p = tmp_path / "owens_c.yaml"
    p.write_text(
        "name: parts\nworkload: {model: dcgan, args: {image_size: 32}}\nsystem: owens\n"
        f"scaling: weak\nmatrix:\n  nodes: {nodes}\n  device: [cpu, gpu]\n  batch: 8\n{extra}"
    )
    return p


def _setup_lines(script: str) -> str:
    """The script's module loads and exports (not hpcscale's own: paths hold test names)."""
    lines = script.splitlines()
    keep = [ln for ln in lines if ln.startswith(("module load ", "export "))]
    return "\n".join(ln for ln in keep if not ln.startswith("export HPCSCALE_"))


def _partition_of(script: str) -> str | None:
    found = [ln.split("=", 1)[1] for ln in script.splitlines() if ln.startswith("#SBATCH --part")]
    assert len(found) <= 1
    return found[0] if found else None


def test_owens_partition_follows_device_and_node_count(tmp_path: Path, workdir: Path) -> None:
    """As on OSC Owens: gpuserial for 1-node GPU jobs, gpuparallel for 2-8 GPU nodes, serial
    and parallel for CPU jobs (the #SBATCH line, so runs of other partitions share no array)."""
    rc = api.render(_owens_campaign(tmp_path, "[1, 2, 8]"), workdir)
    got = {(r.run.device, r.run.nodes): _partition_of(r.script) for r in rc.runs}
    assert got == {
        ("gpu", 1): "gpuserial",
        ("gpu", 2): "gpuparallel",
        ("gpu", 8): "gpuparallel",
        ("cpu", 1): "serial",
        ("cpu", 2): "parallel",
        ("cpu", 8): "parallel",
    }
    system = rc.planned.system
    assert [system.partition_for(r.run) for r in rc.runs] == list(got.values())


def test_cpu_runs_load_no_cuda_on_any_shipped_profile(tmp_path: Path, workdir: Path) -> None:
    """Every shipped profile and MPI flavour: a CPU run loads no CUDA/NCCL and sets no
    MV2_USE_CUDA (nor any GPU-only setting); the same run on GPUs gets them where the
    profile has them. The CPU run still gets what the flavour needs on any device."""
    for path in sorted(SHIPPED_DIR.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        for mpi in spec.get("mpi") or {"openmpi": {}}:
            devices = "[cpu, gpu]" if spec.get("gpus_per_node") else "cpu"
            c = tmp_path / f"{path.stem}-{mpi}.yaml"
            c.write_text(
                f"name: dev-{path.stem}-{mpi}\nworkload: {{model: dcgan}}\nsystem: {path}\n"
                f"scaling: none\nmatrix: {{device: {devices}, batch: 8, mpi: {mpi}}}\n"
            )
            rc = api.render(c, workdir)
            for r in rc.runs:
                setup = _setup_lines(r.script)
                leaked = [w for w in GPU_ONLY if w in setup]
                assert r.run.device == "gpu" or not leaked, (path.name, mpi, leaked, setup)
                subprocess.run(["bash", "-n", str(r.run_dir / "job.sbatch")], check=True)
    owens = {
        r.run.device: r.script for r in api.render(_owens_campaign(tmp_path, "2"), workdir).runs
    }
    assert "module load cuda/11.2.2\nmodule load mvapich2-gdr/2.3.6\n" in owens["gpu"]
    assert "export MV2_USE_CUDA=1\n" in owens["gpu"] and "MV2_SUPPORT_DL" in owens["gpu"]
    assert "module load mvapich2/2.3.6\n" in owens["cpu"]
    for script in owens.values():  # MVAPICH2 with threaded ranks, on either device, once
        assert script.count("export MV2_ENABLE_AFFINITY=0\n") == 1
        assert 'MV2_ENABLE_AFFINITY="${MV2_ENABLE_AFFINITY}"' in script  # reaches every rank


def test_run_no_partition_admits_is_located_in_the_profile(tmp_path: Path) -> None:
    """16 GPU nodes: Owens' gpuparallel takes at most 8. `validate` says so at the profile's
    `partitions:` line, before anything is queued."""
    owens = SHIPPED_DIR / "owens.yaml"
    lines = owens.read_text().splitlines()
    line = next(i for i, ln in enumerate(lines, 1) if ln.startswith("partitions:"))
    proc = hpcscale("validate", str(_owens_campaign(tmp_path, "[8, 16]")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"owens.yaml:{line} [partitions]" in proc.stderr
    assert "no partition admits a 16-node gpu run" in proc.stderr and "gpuparallel" in proc.stderr
    assert "Traceback" not in proc.stderr
    # a where: rule that drops those runs leaves nothing to refuse
    ok = _owens_campaign(tmp_path, "[8, 16]", "  where: \"device == 'cpu' or nodes <= 8\"\n")
    assert hpcscale("validate", str(ok)).returncode == 0
    # a fallback partition takes what no rule admits
    spec = yaml.safe_load(owens.read_text())
    spec.update(name="owens2", partition="batch")
    (tmp_path / "owens2.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    text = _owens_campaign(tmp_path, "[8, 16]").read_text()
    (tmp_path / "fallback.yaml").write_text(text.replace("system: owens", "system: owens2.yaml"))
    p = api.plan(tmp_path / "fallback.yaml")
    parts = {(r.device, r.nodes): p.system.partition_for(r) for r in p.runs}
    assert parts[("gpu", 16)] == "batch" and parts[("gpu", 8)] == "gpuparallel"


@pytest.mark.parametrize(
    ("rule", "key", "message"),
    [
        (
            "{name: big, min_nodes: 9, max_nodes: 4}",
            "partitions[1]",
            "min_nodes 9 is above max_nodes 4",
        ),
        ("{name: big, devices: gpu}", "partitions[1].devices", "unknown key 'devices'"),
        ("{name: big, device: tpu}", "partitions[1].device", "'cpu' or 'gpu'"),
        ("{name: 'a b'}", "partitions[1].name", "must contain only"),
        ("{name: big, max_nodes: 0}", "partitions[1].max_nodes", "greater than 0"),
    ],
)
def test_bad_partition_rule_is_located(tmp_path: Path, rule: str, key: str, message: str) -> None:
    profile = INTEL.replace(
        "partition: compute\n", f"partitions:\n  - {{name: small, max_nodes: 1}}\n  - {rule}\n"
    )
    (tmp_path / "intel.yaml").write_text(profile)
    line = profile.splitlines().index(f"  - {rule}") + 1
    proc = hpcscale("validate", str(campaign(tmp_path, "intel.yaml")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"intel.yaml:{line} [{key}]" in proc.stderr and message in proc.stderr, proc.stderr


def test_device_settings_of_a_profile(tmp_path: Path, workdir: Path) -> None:
    """`cpu:` / `gpu:` of the system and of a flavour add modules and env for that device
    only, in the order system, system device, flavour, flavour device."""
    profile = (
        INTEL.replace("max_nodes: 16\n", "max_nodes: 16\ngpus_per_node: 2\n")
        .replace(
            "partition: compute\n",
            "partitions:\n  - {name: gpu, device: gpu}\n  - {name: compute, device: cpu}\n"
            "modules: [base]\ngpu: {modules: [cuda], env: {SITE_GPU: '1'}}\n"
            "cpu: {env: {SITE_CPU: '1'}}\n",
        )
        .replace(
            "    env: {I_MPI_PIN_DOMAIN: omp, FI_PROVIDER: mlx}\n",
            "    env: {I_MPI_PIN_DOMAIN: omp, FI_PROVIDER: mlx}\n"
            "    gpu: {modules: [impi-cuda], env: {I_MPI_OFFLOAD: '1'}}\n",
        )
    )
    (tmp_path / "intel.yaml").write_text(profile)
    c = campaign(tmp_path, "intel.yaml", "nodes: 1\n  batch: 8\n  device: [cpu, gpu]")
    by_device = {r.run.device: r for r in api.render(c, workdir).runs}
    gpu, cpu = by_device["gpu"].script, by_device["cpu"].script
    assert (
        "module load base\nmodule load cuda\nmodule load intel-oneapi-mpi/2021.9\n"
        "module load impi-cuda\n" in gpu
    )
    assert "module load base\nmodule load intel-oneapi-mpi/2021.9\nexport" in cpu
    assert "export SITE_GPU=1\n" in gpu and "export I_MPI_OFFLOAD=1\n" in gpu
    assert "SITE_GPU" not in cpu and "I_MPI_OFFLOAD" not in cpu and "export SITE_CPU=1\n" in cpu
    assert _partition_of(gpu) == "gpu" and _partition_of(cpu) == "compute"
