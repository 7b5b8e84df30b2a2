"""Site options a real cluster needs: nodes not shared, GPUs asked for as the site accepts,
constraint, reservation and qos (in the profile, and per campaign over it), setup lines before
the launch, mpirun_rsh on this machine, the throttle over plain jobs, and a failed first render
that leaves nothing behind. Expected #SBATCH lines are sbatch(1)'s own option syntax."""

from __future__ import annotations

import errno
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import hpcscale.render.render as render_mod
from hpcscale import api
from hpcscale.backends.slurm import arrays
from hpcscale.model.errors import InputError
from tests.conftest import hpcscale

SITE: dict[str, Any] = {
    "name": "site",
    "scheduler": "slurm",
    "launcher": "srun",
    "cores_per_node": 8,
    "gpus_per_node": 2,
    "max_nodes": 4,
}


def write_case(
    tmp_path: Path,
    profile: dict[str, Any] | None = None,
    camp: dict[str, Any] | None = None,
    device: str = "gpu",
) -> Path:
    """site.yaml (SITE + `profile`) and c.yaml on it (+ `camp`): one run on 1 node, one on 2."""
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({**SITE, **(profile or {})}))
    spec = {
        "name": "sitec",
        "workload": {"model": "dcgan"},
        "system": "site.yaml",
        "scaling": "weak",
        **(camp or {}),
        "matrix": {"nodes": [1, 2], "device": device, "batch": 8},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def scripts(tmp_path: Path, workdir: Path, **kw: Any) -> list[str]:
    return [r.script for r in api.render(write_case(tmp_path, **kw), workdir).runs]


def sbatch_lines(script: str) -> list[str]:
    return [ln.removeprefix("#SBATCH ") for ln in script.splitlines() if ln.startswith("#SBATCH ")]


def line_of(path: Path, key: str) -> int:
    """1-based line of a top-level `key:` in a YAML file (the reference for located errors)."""
    lines = path.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith(f"{key}:"))


@pytest.mark.parametrize(
    ("in_profile", "in_campaign", "expected"),
    [(None, None, False), (True, None, True), (True, False, False), (None, True, True)],
)
def test_exclusive_from_the_profile_or_the_campaign(
    tmp_path: Path,
    workdir: Path,
    in_profile: bool | None,
    in_campaign: bool | None,
    expected: bool,
) -> None:
    profile = {} if in_profile is None else {"exclusive": in_profile}
    camp = {} if in_campaign is None else {"exclusive": in_campaign}
    for script in scripts(tmp_path, workdir, profile=profile, camp=camp):
        assert ("--exclusive" in sbatch_lines(script)) is expected


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ({}, "--gpus-per-node=2"),
        ({"gpu_request": "gpus_per_node"}, "--gpus-per-node=2"),
        ({"gpu_request": "gres"}, "--gres=gpu:2"),
        ({"gpu_request": "gres", "gres_type": "v100"}, "--gres=gpu:v100:2"),
        ({"gres_type": "v100"}, "--gpus-per-node=v100:2"),
    ],
)
def test_gpus_asked_for_as_the_site_accepts(
    tmp_path: Path, workdir: Path, profile: dict[str, str], expected: str
) -> None:
    for script in scripts(tmp_path, workdir, profile=profile):
        asks = [ln for ln in sbatch_lines(script) if ln.startswith(("--gpus", "--gres"))]
        assert asks == [expected]


def test_cpu_runs_ask_for_no_gpus(tmp_path: Path, workdir: Path) -> None:
    profile = {"gpu_request": "gres", "gres_type": "v100"}
    for script in scripts(tmp_path, workdir, profile=profile, device="cpu"):
        assert not [ln for ln in sbatch_lines(script) if ln.startswith(("--gpus", "--gres"))]


PLACEMENT = {"qos": "normal", "constraint": "ib", "reservation": "scaling"}


def test_qos_constraint_reservation_from_the_profile(tmp_path: Path, workdir: Path) -> None:
    for script in scripts(tmp_path, workdir, profile=PLACEMENT):
        lines = sbatch_lines(script)
        assert {"--qos=normal", "--constraint=ib", "--reservation=scaling"} <= set(lines)


def test_campaign_overrides_each_placement_key(tmp_path: Path, workdir: Path) -> None:
    camp = {"qos": "debug", "constraint": "v100", "reservation": "maint"}
    for script in scripts(tmp_path, workdir, profile=PLACEMENT, camp=camp):
        lines = sbatch_lines(script)
        for key, value in camp.items():
            assert [ln for ln in lines if ln.startswith(f"--{key}=")] == [f"--{key}={value}"]
    # a campaign that sets only one keeps the profile's others
    for script in scripts(tmp_path, workdir, profile=PLACEMENT, camp={"qos": "debug"}):
        assert {"--qos=debug", "--constraint=ib", "--reservation=scaling"} <= set(
            sbatch_lines(script)
        )


def test_campaign_sbatch_options_replace_the_profiles(tmp_path: Path, workdir: Path) -> None:
    profile = {**PLACEMENT, "sbatch_options": ["--mail-type=END"]}
    for script in scripts(tmp_path, workdir, profile=profile):
        assert "--mail-type=END" in sbatch_lines(script)
    camp = {"sbatch_options": ["--signal=USR1@60", "--requeue"]}
    for script in scripts(tmp_path, workdir, profile=profile, camp=camp):
        lines = sbatch_lines(script)
        assert "--mail-type=END" not in lines
        assert {"--signal=USR1@60", "--requeue", "--qos=normal"} <= set(lines)


@pytest.mark.parametrize("where", ["profile", "campaign"])
@pytest.mark.parametrize("option", ["--comment=a b", "--x;id", "-p debug", "--wrap=$(id)"])
def test_unsafe_sbatch_option_is_refused_where_it_stands(
    tmp_path: Path, where: str, option: str
) -> None:
    path = write_case(
        tmp_path,
        profile={"sbatch_options": [option]} if where == "profile" else None,
        camp={"sbatch_options": [option]} if where == "campaign" else None,
    )
    file = tmp_path / ("site.yaml" if where == "profile" else "c.yaml")
    with pytest.raises(InputError) as err:
        api.plan(path)
    assert f"/{file.name}:" in str(err.value) and "sbatch_options" in str(err.value)
    assert "not a plain --option" in str(err.value)


def unsafe_case(tmp_path: Path, where: str, key: str, value: str) -> tuple[Path, str]:
    """The campaign, and where its error must point: `file:line [key]`."""
    path = write_case(
        tmp_path,
        profile={key: value} if where == "profile" else None,
        camp={key: value} if where == "campaign" else None,
    )
    file = tmp_path / ("site.yaml" if where == "profile" else "c.yaml")
    return path, f"{file.name}:{line_of(file, key)} [{key}]"


@pytest.mark.parametrize("where", ["profile", "campaign"])
def test_unsafe_placement_value_is_refused_where_it_stands(
    tmp_path: Path, workdir: Path, where: str
) -> None:
    """#SBATCH lines are read by sbatch, not a shell: the value must need no quoting, as for
    partition and account; exit 2 naming file, line and key, and nothing is written (every
    key and more values below, in-process)."""
    path, located = unsafe_case(tmp_path, where, "constraint", "ib v100")
    for cmd in (("validate",), ("render", "--workdir", str(workdir))):
        proc = hpcscale(cmd[0], str(path), *cmd[1:])
        assert proc.returncode == 2, (cmd, proc.stdout, proc.stderr)
        assert located in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert not workdir.exists() or not any(workdir.rglob("*"))


@pytest.mark.parametrize("where", ["profile", "campaign"])
@pytest.mark.parametrize("value", ["ib v100", "ib\nv100", "a;touch x", "$(id)", "ib&v100"])
def test_every_unquotable_value_is_refused(tmp_path: Path, where: str, value: str) -> None:
    for key in ("qos", "constraint", "reservation"):
        path, located = unsafe_case(tmp_path, where, key, value)
        with pytest.raises(InputError) as err:
            api.plan(path)
        assert f"/{located}: " in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("key", "value"), [("gpu_request", "gpus"), ("gres_type", "v100:2"), ("exclusive", "yes!")]
)
def test_bad_gpu_request_or_exclusive_in_the_profile_is_located(
    tmp_path: Path, key: str, value: str
) -> None:
    path = write_case(tmp_path, profile={key: value})
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert f"site.yaml:{line_of(tmp_path / 'site.yaml', key)} [{key}]" in proc.stderr


PROFILE_SETUP = [
    "source ~/venvs/hvd/bin/activate",
    'echo "{{ run_id }} $(touch PWNED) ${NOT_SET_ANYWHERE}"',
    "{% if unbalanced %} ulimit -l unlimited",
]
CAMPAIGN_SETUP = ["conda activate tf215 || true"]


def test_setup_lines_are_written_as_given_and_not_run_at_render(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workdir: Path
) -> None:
    """Profile lines, then the campaign's, verbatim before the launch: not quoted, not read as
    a template (a `{{ }}` or an unbalanced `{% %}` stays text), not run by rendering."""
    path = write_case(tmp_path, profile={"setup": PROFILE_SETUP}, camp={"setup": CAMPAIGN_SETUP})
    monkeypatch.chdir(tmp_path)  # where a command run at render would leave its PWNED
    proc = hpcscale("render", str(path), "--workdir", str(workdir))
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("PWNED"))
    runs = sorted((workdir / "sitec" / "runs").glob("*/job.sbatch"))
    assert len(runs) == 2
    for job in runs:
        text = job.read_text()
        lines = text.splitlines()
        start = lines.index("set +u")
        assert lines[start + 1 : start + 5] == [*PROFILE_SETUP, *CAMPAIGN_SETUP]
        assert lines[start + 5] == "set -u"
        assert text.index("set +u") < text.index("\nsrun ")  # before the launch
        subprocess.run(["bash", "-n", str(job)], check=True)
        assert not list(job.parent.glob("PWNED"))


@pytest.mark.parametrize("where", ["profile", "campaign"])
def test_empty_setup_line_is_located(tmp_path: Path, where: str) -> None:
    path = write_case(
        tmp_path,
        profile={"setup": ["  "]} if where == "profile" else None,
        camp={"setup": ["  "]} if where == "campaign" else None,
    )
    file = tmp_path / ("site.yaml" if where == "profile" else "c.yaml")
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert f"{file.name}:{line_of(file, 'setup') + 1} [setup[0]]" in proc.stderr, proc.stderr


# MVAPICH2 is not packaged for this machine's Debian, so mpirun_rsh itself cannot run here:
# this stand-in takes its place on PATH (through the profile's `setup`, as a site's would). It
# checks what the real one needs from the script, a readable hostfile with one line per rank,
# and records what it was given; the job script, bash and the local backend are the real ones.
STAND_IN_MPIRUN_RSH = """#!/bin/bash
set -eu
np= hostfile=
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np="$2"; shift 2 ;;
    -hostfile) hostfile="$2"; shift 2 ;;
    *) shift ;;
  esac
done
[ -r "$hostfile" ] || { echo "mpirun_rsh: cannot read hostfile '$hostfile'" >&2; exit 1; }
cp "$hostfile" "$HPCSCALE_RUN_DIR/hosts.seen"
echo "$np" > "$HPCSCALE_RUN_DIR/np.seen"
"""


def test_mpirun_rsh_on_this_machine_gets_the_hostfile_it_reads(
    tmp_path: Path, workdir: Path
) -> None:
    """Under `scheduler: local` the script lists localhost once per rank in the hostfile that
    the mpirun_rsh line names (before: an unset $HPCSCALE_HOSTFILE under `set -u`)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpirun_rsh").write_text(STAND_IN_MPIRUN_RSH)
    (bindir / "mpirun_rsh").chmod(0o755)
    profile = {
        "name": "mv-here",
        "scheduler": "local",
        "launcher": "mpirun_rsh",
        "template": "local.sbatch.j2",
        "cores_per_node": 2,
        "max_nodes": 1,
        "python": "auto",
        "setup": [f'export PATH={bindir}:"$PATH"'],
    }
    (tmp_path / "mv-here.yaml").write_text(yaml.safe_dump(profile))
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "rsh",
                "workload": {"model": "dcgan"},
                "system": "mv-here.yaml",
                "scaling": "weak",
                "matrix": {"layout": "2x1", "batch": 8},
            }
        )
    )
    assert hpcscale("validate", str(tmp_path / "c.yaml")).returncode == 0
    proc = hpcscale("submit", str(tmp_path / "c.yaml"), "--workdir", str(workdir))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    (run_dir,) = (workdir / "rsh" / "runs").iterdir()
    assert (run_dir / "np.seen").read_text() == "2\n"
    assert (run_dir / "hosts.seen").read_text() == "localhost\nlocalhost\n"


def test_no_array_throttle_is_n_lanes_in_the_dry_run(tmp_path: Path, workdir: Path) -> None:
    """--no-array --max-parallel 2: jobs 1 and 2 go at once, job k starts after job k-2 (at
    most 2 at once, not 1); arrays each start after the one before."""
    camp = tmp_path / "plain.yaml"
    camp.write_text(
        "name: plain\nworkload: {model: dcgan}\nsystem: slurm-local\nscaling: weak\n"
        "matrix: {batch: [4, 8, 16, 32, 64]}\n"
    )
    rendered = api.render(camp, workdir).runs
    plain = arrays.describe(rendered, array=False, max_parallel=2)
    deps = [re.findall(r"--dependency=afterany:<job of sbatch (\d+)>", ln) for ln in plain]
    assert deps == [[], [], ["1"], ["2"], ["3"]]
    unthrottled = arrays.describe(rendered, array=False, max_parallel=None)
    assert len(unthrottled) == 5 and not [ln for ln in unthrottled if "--dependency" in ln]
    # batch changes no #SBATCH line here: one shape, so split it with a small MaxArraySize
    arr = [ln for ln in arrays.describe(rendered, array=True, max_parallel=1, max_array_size=2)
           if ln.startswith("sbatch")]  # fmt: skip
    deps = [re.findall(r"--dependency=afterany:<job of sbatch (\d+)>", ln) for ln in arr]
    assert deps == [[], ["1"], ["2"]]


def _fail_writing_campaign_file(monkeypatch: pytest.MonkeyPatch) -> None:
    real = render_mod.atomic_write

    def atomic_write(path: Path, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == "campaign.yaml":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(render_mod, "atomic_write", atomic_write)


def _fail_moving_runs_into_place(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.rename

    def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(dst).name == "runs":
            raise OSError(errno.EIO, "Input/output error", str(dst))
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(render_mod.os, "rename", rename)


@pytest.mark.parametrize("fault", [_fail_writing_campaign_file, _fail_moving_runs_into_place])
def test_failed_first_render_leaves_no_campaign_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workdir: Path, fault: Any
) -> None:
    """Fault injection into our own renderer, after every run rendered and the campaign file
    was kept: the first render fails with no campaign.yaml, versions/ or runs/ left."""
    path = write_case(tmp_path)
    with monkeypatch.context() as m:
        fault(m)
        with pytest.raises(OSError):
            api.render(path, workdir)
    assert not workdir.exists() or sorted(workdir.rglob("*")) == []
    rc = api.render(path, workdir)  # and the next render makes the whole campaign
    cdir = workdir / "sitec"
    assert (cdir / "campaign.yaml").exists() and len(list((cdir / "versions").iterdir())) == 1
    assert len(rc.runs) == 2
