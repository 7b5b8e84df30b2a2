"""System profiles as users write them: their own MPI flavours, launchers from the registry,
their own templates, and `--system` to run one campaign on another system."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from hpcscale import api
from hpcscale.core.system import SHIPPED_DIR
from hpcscale.errors import InputError
from hpcscale.launchers import REGISTRY, Launcher, LaunchRequest, get

from .conftest import CAMPAIGNS, hpcscale

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
    assert set(REGISTRY) == {"srun", "mpirun", "mpirun_rsh", "mpiexec", "horovodrun"}
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
    req = LaunchRequest(run, p.system, ["PROGRAM"], ["A"], ["--gloo"], allocated=False)
    argv = get("horovodrun").argv(req)
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
