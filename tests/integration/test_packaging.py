"""hpcscale installed like any tool (issue 20): the wheel carries what a run needs, works from the
user's own directory with no checkout in sight, writes nothing inside the installed package;
`init`, `doctor`, `--version` and the version recorded in run.json and the report.

The installed package comes from tests/packaging_fixture.py (the wheel in a fresh venv); the
end-to-end run is the session's quickstart (tests/quickstart_fixture.py), which that installed
hpcscale runs from a directory outside the checkout.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import CAMPAIGNS, REPO, hpcscale
from tests.packaging_fixture import Installed

BUNDLED = ("templates", "jobs", "campaigns")  # top-level folders the wheel carries as _data/
PROGRAM = re.compile(r"(/\S+/jobs/(?:tf|torch)/\w+\.py)\b")  # a bundled program in a job script


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`: (size, mtime in ns), to see that nothing was written there."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _checkout_files(folder: str) -> set[str]:
    root = REPO / folder
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")
    }


# ---------------------------------------------------------------- what the package carries


def test_wheel_and_sdist_carry_profiles_templates_programs_and_campaigns(
    installed_hpcscale: Installed,
) -> None:
    """Every file of the top-level folders is in the wheel under hpcscale/_data/ (and in the
    sdist at the top level), the profiles under hpcscale/systems/; the repository keeps one
    copy (no hpcscale/_data/ in git)."""
    wheel = set(zipfile.ZipFile(installed_hpcscale.wheel).namelist())
    with tarfile.open(installed_hpcscale.sdist) as tar:
        sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for folder in BUNDLED:
        files = _checkout_files(folder)
        assert files, folder
        assert {f"hpcscale/_data/{folder}/{f}" for f in files} <= wheel, folder
        assert {f"{folder}/{f}" for f in files} <= sdist, folder
    profiles = {p.name for p in (REPO / "hpcscale" / "systems").glob("*.yaml")}
    assert {f"hpcscale/systems/{p}" for p in profiles} <= wheel
    assert "hpcscale/_data/jobs/tf/manifest.py" in wheel
    assert not any(n.startswith(("jobs/", "templates/", "campaigns/")) for n in wheel)
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "hpcscale/_data"], capture_output=True, text=True
    )
    assert tracked.returncode == 0 and tracked.stdout == ""


def test_the_installed_hpcscale_is_not_the_checkout(installed_hpcscale: Installed) -> None:
    """The fresh venv imports its own hpcscale (the editable finder of .venv stays inactive)
    and finds the bundled folders inside it."""
    code = (
        "import json, os, sys, hpcscale\n"
        "from importlib import metadata\n"
        "from hpcscale.model import resources as r\n"
        "print(json.dumps({'file': hpcscale.__file__,\n"
        "  'path': [os.path.abspath(p) for p in sys.path],\n"
        "  'finders': [type(f).__name__ for f in sys.meta_path],\n"
        "  'dist': str(metadata.distribution('hpcscale')._path),\n"
        "  'dirs': [str(d) for d in (r.jobs_dir(), r.templates_dir(), r.campaigns_dir(),\n"
        "           r.systems_dir())]}))\n"
    )
    out = subprocess.run(
        [str(installed_hpcscale.python), "-c", code],
        cwd=installed_hpcscale.venv.parent,
        capture_output=True,
        text=True,
        env=installed_hpcscale.env(),
        check=True,
    )
    seen = json.loads(out.stdout)
    package = installed_hpcscale.package
    assert Path(seen["file"]).parent == package
    assert Path(seen["dist"]).parent == installed_hpcscale.site
    assert not any("Editable" in f for f in seen["finders"])
    checkout = [p for p in seen["path"] if Path(p).resolve().is_relative_to(REPO)]
    assert all(".venv" in Path(p).parts for p in checkout), checkout  # only the deps' .pth
    assert [Path(d) for d in seen["dirs"]] == [
        package / "_data" / "jobs",
        package / "_data" / "templates",
        package / "_data" / "campaigns",
        package / "systems",
    ]


# ---------------------------------------------------------------- the user's own directory


def test_installed_cli_from_an_empty_directory(
    installed_hpcscale: Installed, tmp_path: Path
) -> None:
    """init, init --example, validate, plan, render, models and doctor --json, from an empty
    directory outside the checkout; nothing is written inside the installed package."""
    hs = installed_hpcscale
    home = tmp_path / "study"
    home.mkdir()
    before = _tree(hs.package)

    version = hs.run("--version", cwd=home, check=True)
    assert version.stdout.strip() == f"hpcscale {hs.version}"

    init = hs.run("init", cwd=home, check=True)
    assert sorted(p.name for p in home.iterdir()) == ["campaign.yaml", "local.yaml"]
    assert (home / "local.yaml").read_bytes() == (
        REPO / "hpcscale" / "systems" / "local.yaml"
    ).read_bytes()
    commands = [ln.split("#")[0].strip() for ln in init.stdout.splitlines() if "hpcscale " in ln]
    assert commands[-3:] == [
        "hpcscale plan campaign.yaml",
        "hpcscale submit campaign.yaml",
        "hpcscale report",
    ]
    starter = yaml.safe_load((home / "campaign.yaml").read_text())
    assert starter["system"] == "local.yaml"
    assert {"nodes", "layout", "batch", "fusion_threshold_mb"} <= set(starter["matrix"])
    assert (home / "campaign.yaml").read_text().count("#") >= 10  # commented for a newcomer

    again = hs.run("init", cwd=home)
    assert again.returncode == 2
    assert "campaign.yaml exists" in again.stderr and "--force" in again.stderr

    hs.run("init", "--example", "quickstart", cwd=home, check=True)
    assert (home / "quickstart.yaml").read_bytes() == (CAMPAIGNS / "quickstart.yaml").read_bytes()

    listed = hs.run("init", "--list", cwd=home, check=True).stdout
    for path in CAMPAIGNS.glob("*.yaml"):
        description = yaml.safe_load(path.read_text())["description"]
        assert re.search(rf"^{re.escape(path.stem)}\s+{re.escape(description[:40])}", listed, re.M)

    for campaign, runs in (("campaign.yaml", 4), ("quickstart.yaml", 2)):
        hs.run("validate", campaign, cwd=home, check=True)
        plan = json.loads(hs.run("plan", campaign, "--json", cwd=home, check=True).stdout)
        assert len(plan) == runs, campaign
        hs.run("render", campaign, cwd=home, check=True)

    scripts = sorted((home / "hpcscale-runs").glob("*/runs/*/job.sbatch"))
    assert len(scripts) == 6
    jobs = hs.package / "_data" / "jobs"
    for script in scripts:
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert syntax.returncode == 0, (script, syntax.stderr)
        programs = PROGRAM.findall(script.read_text())
        assert programs, script
        for program in programs:
            assert Path(program).is_file() and Path(program).parent.parent == jobs, program
        record = json.loads((script.parent / "run.json").read_text())
        assert record["hpcscale_version"] == hs.version

    # the user's own profile, found by name on HPCSCALE_SYSTEMS_PATH, with its own template
    # directory, whose template extends a shipped one
    (home / "site" / "templates").mkdir(parents=True)
    (home / "site" / "templates" / "mine.sbatch.j2").write_text(
        '{% extends "local.sbatch.j2" %}\n{% block header %}\n# my site\n{% endblock %}\n'
    )
    profile = (home / "local.yaml").read_text().replace("name: local", "name: mine")
    profile = profile.replace("template: local.sbatch.j2", "template: mine.sbatch.j2")
    (home / "site" / "mine.yaml").write_text(profile + "templates: templates\n")
    own = {"HPCSCALE_SYSTEMS_PATH": str(home / "site")}
    hs.run("render", "quickstart.yaml", "--system", "mine", "-w", "own", cwd=home, check=True,
           env=own)  # fmt: skip
    [mine, _] = sorted((home / "own" / "quickstart" / "runs").glob("*/job.sbatch"))
    assert "# my site" in mine.read_text() and "mpirun" in mine.read_text()

    models = hs.run("models", cwd=home, check=True).stdout
    assert re.search(r"^dcgan\s+gan", models, re.M)

    doctor = hs.run("doctor", "--json", cwd=home)
    report = json.loads(doctor.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names == [
        "launcher mpirun",
        "python",
        "tensorflow",
        "msgspec",
        "horovod",
        "mpi4py",
        "timeline scanner",
    ]
    failed = [c for c in report["checks"] if not c["passed"]]
    assert not failed and report["ok"] and doctor.returncode == 0, failed
    assert report["python"] == str(hs.venv / "bin" / "python")  # `python: auto`

    assert _tree(hs.package) == before


def test_installed_quickstart_end_to_end(
    installed_hpcscale: Installed, quickstart_copy, tmp_path: Path
) -> None:
    """The session's quickstart ran through the installed hpcscale from outside the checkout
    (submit on the local backend, collect --timeline); its jobs ran the installed programs, and
    the report built from there records the version."""
    hs = installed_hpcscale
    wd = quickstart_copy()
    cdir = wd / "quickstart"
    runs = sorted((cdir / "runs").iterdir())
    assert len(runs) == 2
    for rd in runs:
        metrics = json.loads((rd / "metrics.json").read_text())  # the job finished
        programs = PROGRAM.findall((rd / "job.sbatch").read_text())
        assert programs == [str(hs.package / "_data" / "jobs" / "tf" / "train.py")], programs
        assert metrics["provenance"]["git_revision"] is None  # not the checkout's revision
        assert json.loads((rd / "run.json").read_text())["hpcscale_version"] == hs.version
        assert (rd / "timeline.json").is_file()
    home = tmp_path / "elsewhere"
    home.mkdir()
    hs.run("collect", "quickstart", "--timeline", "-w", str(wd), cwd=home, check=True)
    with (cdir / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    [two] = [r for r in rows if r["ranks"] == "2"]
    assert len(rows) == 2 and two["comm_s"] and float(two["comm_s"]) > 0  # from the timeline
    hs.run("report", "quickstart", "-w", str(wd), cwd=home, check=True, timeout=900)
    index = (cdir / "report" / "index.md").read_text()
    assert f"by hpcscale {hs.version}." in index
    assert re.search(
        rf"\| hpcscale \(rendered the runs\)\s*\| {re.escape(hs.version)}\s*\| 2", index
    )
    assert not (home / "hpcscale-runs").exists()  # -w named the workdir: nothing else written


def test_installed_program_runs_under_a_python_without_hpcscale(
    installed_hpcscale: Installed, tmp_path: Path
) -> None:
    """A profile's `python:` need not have hpcscale installed: the bundled program imports the
    hpcscale it was installed with (jobs/ sits inside it)."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    train = installed_hpcscale.package / "_data" / "jobs" / "tf" / "train.py"
    env = installed_hpcscale.env()
    python = str(bare / "bin" / "python")
    lacks = subprocess.run(
        [python, "-c", "import hpcscale"], cwd=tmp_path, env=env, capture_output=True
    )
    assert lacks.returncode != 0
    proc = subprocess.run(
        [python, str(train), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: train.py") and "--batch-per-rank" in proc.stdout


# ---------------------------------------------------------------- doctor and init, in-process


def test_doctor_horovod_command_is_the_makefiles() -> None:
    """The Horovod build doctor prints is the one `make jobs` runs (one source of flags)."""
    from hpcscale.frameworks.horovod_tf_doctor import HOROVOD_ENV, HOROVOD_VERSION, horovod_command

    makefile = (REPO / "Makefile").read_text()
    [env] = re.findall(r"^HOROVOD_ENV := (.+)$", makefile, re.M)
    assert env.strip() == HOROVOD_ENV
    assert f"horovod=={HOROVOD_VERSION}" in makefile
    command = horovod_command("/opt/py/bin/python")
    assert command == (
        f"{env.strip()} /opt/py/bin/python -m pip install --no-cache-dir "
        f"--no-build-isolation horovod=={HOROVOD_VERSION}"
    )


def test_doctor_fails_and_says_how_to_fix(tmp_path: Path) -> None:
    """A profile whose Python lacks TensorFlow, Horovod, mpi4py and msgspec (a bare venv) and whose
    launcher is not on PATH: every such check fails with its fix, exit 1."""
    bare = tmp_path / "bare"
    subprocess.run(
        [shutil.which("python3") or "python3", "-m", "venv", "--without-pip", str(bare)],
        check=True,
    )
    profile = tmp_path / "bare.yaml"
    text = (REPO / "hpcscale" / "systems" / "local.yaml").read_text()
    text = text.replace("python: auto", f"python: {bare / 'bin' / 'python'}")
    profile.write_text(text.replace("launcher: mpirun", "launcher: mpirun_rsh", 1))
    proc = hpcscale("doctor", "--system", str(profile), "--json", subprocess=True)
    assert proc.returncode == 1, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert not checks["launcher mpirun_rsh"]["passed"] or shutil.which("mpirun_rsh")
    assert checks["python"]["passed"]
    for name in ("tensorflow", "horovod", "mpi4py", "msgspec"):
        assert not checks[name]["passed"] and checks[name]["fix"], name
    assert "tensorflow-cpu==2.15.1" in checks["tensorflow"]["fix"]
    assert "msgspec>=0.18" in checks["msgspec"]["fix"]
    assert "HOROVOD_WITH_MPI=1" in checks["horovod"]["fix"]
    text_out = hpcscale("doctor", "--system", str(profile), subprocess=True)
    failed = [ln for ln in text_out.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) >= 3 and all("fix: " in ln for ln in failed)


@pytest.mark.parametrize("system", sorted(p.stem for p in (REPO / "hpcscale/systems").glob("*")))
def test_starter_campaign_plans_on_every_shipped_system(system: str, tmp_path: Path) -> None:
    """`init --system NAME`: the starter is a valid campaign on that profile's copy."""
    from hpcscale import api

    done = api.init(tmp_path, system=system)
    assert {p.name for p in done.written} == {"campaign.yaml", f"{system}.yaml"}
    planned = api.plan(tmp_path / "campaign.yaml")
    assert planned.runs


def test_init_refuses_before_writing_anything(tmp_path: Path) -> None:
    """An existing profile copy stops init before the campaign is written; --force overwrites."""
    from hpcscale import api
    from hpcscale.model.errors import UsageError

    (tmp_path / "local.yaml").write_text("mine\n")
    with pytest.raises(UsageError, match=r"local\.yaml exists"):
        api.init(tmp_path)
    assert not (tmp_path / "campaign.yaml").exists()
    assert (tmp_path / "local.yaml").read_text() == "mine\n"
    api.init(tmp_path, force=True)
    assert (tmp_path / "local.yaml").read_text() != "mine\n"
    with pytest.raises(UsageError, match=r"no shipped campaign 'quickstrat'.*quickstart"):
        api.init(tmp_path, example="quickstrat")


def test_old_run_records_without_a_version_still_read(tmp_path: Path) -> None:
    """run.json written before hpcscale_version was recorded reads as None."""
    from hpcscale.formats.run_record import load_run_record

    record = {
        "campaign": "c", "system": "local", "model": "dcgan", "scaling": "weak",
        "device": "cpu", "nodes": 1, "tasks_per_node": 1, "threads_per_task": 1,
        "gpus_per_node": 0, "batch_per_rank": 8, "global_batch": 8, "run_id": "abc",
        "ranks": 1, "replicas": 1,
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record))
    assert load_run_record(path).hpcscale_version is None
    path.write_text(json.dumps({**record, "hpcscale_version": "9.9"}))
    assert load_run_record(path).hpcscale_version == "9.9"
