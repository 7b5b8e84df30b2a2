"""Rendering: every shipped campaign renders to valid bash; values can never run a command."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hpcscale.render.render as render_mod
from hpcscale.api import plan_campaign, render_campaign
from hpcscale.model.errors import InputError, UsageError
from hpcscale.model.system import SHIPPED_DIR
from tests.conftest import CAMPAIGNS, hpcscale


@pytest.mark.parametrize("path", sorted(CAMPAIGNS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_campaign_renders_valid_bash(path: Path, workdir: Path) -> None:
    lc, plan, rendered = render_campaign(path, workdir)
    assert len(rendered) == len(plan.runs)
    for r in rendered:
        script = r.run_dir / "job.sbatch"
        assert os.stat(script).st_mode & stat.S_IXUSR
        subprocess.run(["bash", "-n", str(script)], check=True)
        record = json.loads((r.run_dir / "run.json").read_text())
        assert record["run_id"] == r.run_dir.name == r.run.run_id
        if lc.system.scheduler == "slurm":
            text = script.read_text()
            assert f"#SBATCH --nodes={r.run.nodes}\n" in text
            assert f"#SBATCH --job-name={lc.campaign.name}.hpcscale.{r.run.run_id}\n" in text


def test_render_twice_gives_same_ids_and_files(workdir: Path) -> None:
    path = CAMPAIGNS / "fusion_sweep.yaml"
    _, _, first = render_campaign(path, workdir)
    before = {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()}
    _, _, second = render_campaign(path, workdir)
    assert [r.run.run_id for r in first] == [r.run.run_id for r in second]
    assert {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()} == before


def test_horovod_units(workdir: Path) -> None:
    _, _, rendered = render_campaign(CAMPAIGNS / "fusion_sweep.yaml", workdir)
    r = next(
        r
        for r in rendered
        if r.run.knob("fusion_threshold_mb") == 64 and r.run.knob("cycle_time_ms") == 3.5
    )
    text = (r.run_dir / "job.sbatch").read_text()
    assert f"export HOROVOD_FUSION_THRESHOLD={64 * 1024 * 1024}\n" in text  # bytes
    assert "export HOROVOD_CYCLE_TIME=3.5\n" in text  # ms
    assert "export HOROVOD_GPU_OPERATIONS=NCCL\n" in text


def test_mvapich2_and_nccl_environments(workdir: Path) -> None:
    _, _, rendered = render_campaign(CAMPAIGNS / "mpi_flavour.yaml", workdir)
    mv = next(r for r in rendered if r.run.mpi == "mvapich2-gdr" and r.run.nodes == 2)
    text = (mv.run_dir / "job.sbatch").read_text()
    assert "module load mvapich2-gdr/2.3.6\n" in text
    assert "export MV2_USE_CUDA=1\n" in text and "export MV2_SUPPORT_DL=1\n" in text
    assert "mpirun_rsh -export -np 2 -hostfile" in text
    nccl = next(r for r in rendered if r.run.mpi == "nccl" and r.run.nodes == 2)
    assert "srun --mpi=pmi2 --nodes=2 --ntasks=2" in (nccl.run_dir / "job.sbatch").read_text()


def test_bad_campaign_writes_nothing(tmp_path: Path, workdir: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        textwrap.dedent("""\
        name: bad
        workload: {model: dcgan}
        system: owens
        scaling: strong
        matrix: {nodes: [1, 2, 3], device: gpu, batch: 128}
        """)
    )
    with pytest.raises(InputError):
        render_campaign(bad, workdir)
    assert not workdir.exists() or not any(workdir.rglob("*"))
    proc = hpcscale("render", str(bad), "--workdir", str(workdir))
    assert proc.returncode == 2
    assert "bad.yaml:5" in proc.stderr and "does not divide evenly" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not workdir.exists() or not any(workdir.rglob("*"))


def _breaking_profile(tmp_path: Path, breaks: bool) -> Path:
    """A profile with its own template that fails for 2-node runs only (when `breaks`): the
    first run renders, the second does not."""
    tdir = tmp_path / "tpl"
    tdir.mkdir(exist_ok=True)
    body = "{% if run.nodes > 1 %}{{ no_such_variable }}{% endif %}" if breaks else ""
    (tdir / "site.sbatch.j2").write_text(
        '{% extends "base.sbatch.j2" %}\n{% block env_extra %}' + body + "{% endblock %}\n"
    )
    spec = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    spec.update(name="site", template="site.sbatch.j2", templates="tpl")
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_render_error_midway_writes_nothing(tmp_path: Path, workdir: Path) -> None:
    """All or nothing, on a first render and on a re-render: the error comes from rendering
    the second run, after the first rendered."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "name: mid\nworkload: {model: dcgan}\nsystem: site.yaml\nscaling: weak\n"
        "matrix: {nodes: [1, 2], batch: 8}\n"
    )
    _breaking_profile(tmp_path, breaks=True)
    proc = hpcscale("render", str(campaign), "--workdir", str(workdir))
    assert proc.returncode == 2, proc.stderr
    assert "no_such_variable" in proc.stderr and "Traceback" not in proc.stderr
    assert not workdir.exists() or not any(workdir.rglob("*"))

    _breaking_profile(tmp_path, breaks=False)
    hpcscale("render", str(campaign), "--workdir", str(workdir), check=True)
    before = {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()}
    assert len([p for p in before if p.name == "job.sbatch"]) == 2
    campaign.write_text(campaign.read_text().replace("batch: 8", "batch: 16"))
    _breaking_profile(tmp_path, breaks=True)
    assert hpcscale("render", str(campaign), "--workdir", str(workdir)).returncode == 2
    after = {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()}
    assert after == before


def test_plan_json_fields() -> None:
    proc = hpcscale("plan", str(CAMPAIGNS / "fusion_sweep.yaml"), "--json", check=True)
    runs = json.loads(proc.stdout)
    assert len(runs) == 20
    need = {
        "run_id",
        "nodes",
        "tasks_per_node",
        "threads_per_task",
        "gpus_per_node",
        "batch_per_rank",
        "global_batch",
        "scaling",
        "mpi",
        "strategy",
        "cycle_time_ms",
        "fusion_threshold_mb",
    }
    assert need <= set(runs[0])
    assert {(r["cycle_time_ms"], r["fusion_threshold_mb"]) for r in runs} == {
        (c, f) for c in (1, 3.5, 10, 25, 100) for f in (32, 64, 128, 256)
    }


# --- hostile values ------------------------------------------------------------------------

STAND_IN = """#!/bin/bash
# Stands in for mpirun: records the argv and one env var it was given, runs nothing.
printf '%s\\0' "$@" > "$HOSTILE_OUT/argv"
printf '%s' "$HOSTILE_ENV" > "$HOSTILE_OUT/env"
"""

hostile_text = st.one_of(
    st.sampled_from(
        [
            "$(touch PWNED)",
            '"; touch PWNED; "',
            "`touch PWNED`",
            "'; touch PWNED #",
            "a\nb; touch PWNED",
            "${IFS}touch${IFS}PWNED",
            "\\$(touch PWNED)",
            "-np 99",
            "*",
            "~",
            "$HOME",
            "!!",
            "a'b\"c",
        ]
    ),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
        min_size=1,
        max_size=40,
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arg=hostile_text, env=hostile_text)
def test_hostile_values_never_run(tmp_path: Path, arg: str, env: str) -> None:
    """The launcher is a harmless stand-in: nothing else could show which argv it got."""
    case = Path(__import__("tempfile").mkdtemp(dir=tmp_path))
    bindir = case / "bin"
    bindir.mkdir()
    (bindir / "mpirun").write_text(STAND_IN)
    (bindir / "mpirun").chmod(0o755)
    (case / "sys.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "hostile",
                "scheduler": "local",
                "launcher": "mpirun",
                "template": "local.sbatch.j2",
                "cores_per_node": 2,
                "python": "python3",
                "env": {"HOSTILE_ENV": env},
            },
            allow_unicode=True,
        )
    )
    (case / "c.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "hostile",
                "workload": {"model": "dcgan", "args": {"data_dir": arg}},
                "system": "sys.yaml",
                "scaling": "weak",
                "matrix": {"layout": "2x1", "batch": 4},
            },
            allow_unicode=True,
        )
    )
    _, _, rendered = render_campaign(case / "c.yaml", case / "wd")
    script = rendered[0].run_dir / "job.sbatch"
    out = case / "out"
    out.mkdir()
    proc = subprocess.run(
        ["bash", str(script)],
        cwd=case,
        capture_output=True,
        text=True,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOSTILE_OUT": str(out), "HOME": str(case)},
    )
    assert proc.returncode == 0, proc.stderr
    assert not list(case.rglob("PWNED")) and not list(Path.cwd().glob("PWNED"))
    argv = (out / "argv").read_bytes().split(b"\0")[:-1]
    # What YAML itself reads back is the reference (it folds e.g. NEL into a space).
    arg = yaml.safe_load((case / "c.yaml").read_text())["workload"]["args"]["data_dir"]
    env = yaml.safe_load((case / "sys.yaml").read_text())["env"]["HOSTILE_ENV"]
    assert argv[argv.index(b"--data-dir") + 1].decode() == arg
    assert (out / "env").read_text() == env


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("name", ["fusion_sweep.yaml", "cpu_layouts.yaml", "mpi_flavour.yaml"])
def test_forked_workers_write_what_one_process_writes(name: str, workdir: Path) -> None:
    _, _, serial = render_campaign(CAMPAIGNS / name, workdir, workers=1)
    assert render_mod.render_workers(len(serial), 3) == 3  # it does fork (no threads running)
    one = _tree(workdir)
    shutil.rmtree(workdir)
    _, _, forked = render_campaign(CAMPAIGNS / name, workdir, workers=3)
    assert _tree(workdir) == one
    assert [(r.run, r.run_dir, r.script, r.program, r.launch, r.env) for r in forked] == [
        (r.run, r.run_dir, r.script, r.program, r.launch, r.env) for r in serial
    ]
    assert not list(workdir.rglob(".runs.staging-*"))


def _fail_in_last_worker(monkeypatch: pytest.MonkeyPatch, fail: Callable[[], None]) -> None:
    """Fault injection into our own renderer: forked workers inherit the patched function, and
    the run it fails on is the campaign's last, which always falls to the last worker."""
    real = render_mod.render_run
    last = plan_campaign(CAMPAIGNS / "fusion_sweep.yaml")[1].runs[-1]

    def render_run(run, *args, **kwargs):  # type: ignore[no-untyped-def]
        if run.run_id == last.run_id:
            fail()
        return real(run, *args, **kwargs)

    monkeypatch.setattr(render_mod, "render_run", render_run)


def test_error_in_a_worker_writes_nothing(monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
    def fail() -> None:
        raise UsageError("value 'x y' cannot go on an #SBATCH line")

    _fail_in_last_worker(monkeypatch, fail)
    assert render_mod.render_workers(20, 2) == 2  # the failing run is a child's
    with pytest.raises(UsageError, match="#SBATCH line"):
        render_campaign(CAMPAIGNS / "fusion_sweep.yaml", workdir, workers=2)
    assert not (workdir / "fusion_sweep" / "runs").exists()
    assert not list(workdir.rglob(".runs.staging-*"))


def test_a_dying_worker_writes_nothing(monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
    assert render_mod.render_workers(20, 2) == 2  # else os._exit would end pytest itself
    _fail_in_last_worker(monkeypatch, lambda: os._exit(3))
    with pytest.raises(RuntimeError, match=r"render worker 2/2 died \(exit code 3\)"):
        render_campaign(CAMPAIGNS / "fusion_sweep.yaml", workdir, workers=2)
    assert not (workdir / "fusion_sweep" / "runs").exists()
    assert not list(workdir.rglob(".runs.staging-*"))


def test_bad_worker_count_is_a_usage_error(workdir: Path) -> None:
    proc = hpcscale(
        "render",
        str(CAMPAIGNS / "quickstart.yaml"),
        "--workdir",
        str(workdir),
        env={"HPCSCALE_RENDER_WORKERS": "two"},
    )
    assert proc.returncode == 2
    assert "HPCSCALE_RENDER_WORKERS='two'" in proc.stderr and "Traceback" not in proc.stderr
    assert not workdir.exists() or not any(workdir.rglob("*"))


def test_mpirun_under_slurm_gets_the_hostfile_it_names(tmp_path: Path, workdir: Path) -> None:
    """A copied profile with `launcher: mpirun` on SLURM: the script must write the hostfile
    that the mpirun line reads (`set -u` would stop it otherwise)."""
    (tmp_path / "sys.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "mpi-slurm",
                "scheduler": "slurm",
                "launcher": "mpirun",
                "cores_per_node": 4,
                "max_nodes": 4,
            }
        )
    )
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "hostfile",
                "workload": {"model": "dcgan"},
                "system": "sys.yaml",
                "scaling": "weak",
                "matrix": {"nodes": 2, "layout": "2x2", "batch": 8},
            }
        )
    )
    _, _, rendered = render_campaign(tmp_path / "c.yaml", workdir)
    text = (rendered[0].run_dir / "job.sbatch").read_text()
    assert '--hostfile "$HPCSCALE_HOSTFILE"' in text
    assert text.index('HPCSCALE_HOSTFILE="$(mktemp') < text.index("mpirun -np 4")
    assert text.index('> "$HPCSCALE_HOSTFILE"') < text.index("mpirun -np 4")
