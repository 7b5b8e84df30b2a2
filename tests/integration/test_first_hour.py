"""A newcomer's first commands, met as a user meets them (the real CLI, real files, an empty
directory): the help's typical session works as printed, a shipped example's bare name points at
`init --example`, the dry run's `cd` is where the job starts the program, plan shows values as the
campaign wrote them, and help never names an option the command lacks."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200", "HPCSCALE_WORKDIR": str(cwd / "hpcscale-runs")},
    )  # fmt: skip


def test_help_typical_session_runs_as_printed_after_init(tmp_path: Path) -> None:
    """Each `hpcscale init|validate|plan` line of `hpcscale --help` works in an empty directory
    in the order shown (a pip-installed hpcscale has no campaigns/ folder here)."""
    text = _run(tmp_path, "--help").stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("hpcscale ")]
    shown = [shlex.split(ln.split("#")[0]) for ln in lines]
    runnable = [w for w in shown if w[1] in ("init", "validate", "plan")]
    assert [w[1] for w in runnable][:3] == ["init", "validate", "plan"], lines
    for words in runnable:
        proc = _run(tmp_path, *words[1:])
        assert proc.returncode == 0, (words, proc.stderr)


def test_a_shipped_examples_bare_name_points_at_init_example(tmp_path: Path) -> None:
    for name in ("quickstart", "quickstart.yaml"):
        proc = _run(tmp_path, "plan", name)
        assert proc.returncode == 2
        assert "no such file" in proc.stderr
        assert "hpcscale init --example quickstart" in proc.stderr, proc.stderr
    other = _run(tmp_path, "plan", "nothing_shipped.yaml")
    assert other.returncode == 2 and "init --example" not in other.stderr


def test_dry_run_cd_is_where_the_program_runs(tmp_path: Path) -> None:
    """A command with `cwd:` runs there (the job script's `cd`); the dry run's `cd` line says
    the same directory, so pasted lines run the program in the right place."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('rate 1 samples/s')\n")
    (tmp_path / "c.yaml").write_text(
        "name: drycd\nworkload:\n  command: [python, train.py]\n  cwd: src\n"
        "  metrics: [{name: samples_per_s, pattern: 'rate ([0-9.]+)'}]\n"
        "  throughput: samples_per_s\nsystem: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1']\n  batch: 4\n"
    )
    proc = _run(tmp_path, "submit", "c.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    cds = re.findall(r"^# \w+: cd (.+)$", proc.stdout, re.M)
    assert [Path(shlex.split(c)[0]) for c in cds] == [src], proc.stdout
    [script] = (tmp_path / "hpcscale-runs" / "drycd" / "runs").glob("*/job.sbatch")
    assert f"\ncd {src}\n" in script.read_text()


def test_plan_shows_a_whole_number_as_written(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "name: fusion\nworkload:\n  model: dcgan\n  epochs: 1\n"
        "  args: {image_size: 32, dataset_size: 64}\nsystem: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1']\n  batch: 4\n  fusion_threshold_mb: [32, 64]\n"
    )
    proc = _run(tmp_path, "plan", "c.yaml")
    out = proc.stdout
    assert re.search(r"fusion_threshold_mb +32: 1, 64: 1", out), (out, proc.stderr)
    assert "64.0" not in out and "32.0" not in out, out


def test_resubmit_help_names_no_option_it_lacks() -> None:
    text = _run(Path.cwd(), "resubmit", "--help").stdout
    assert "--max-parallel" in text and "--follow" not in text, text


def test_validate_and_submit_refuse_a_program_that_cannot_start_here(tmp_path: Path) -> None:
    """On a system whose jobs run here, a mistyped program file or interpreter is a located
    validate error (exit 2), and submit refuses it before any run is started."""
    (tmp_path / "train.py").write_text("print('rate 1 samples/s')\n")
    body = (
        "name: {name}\nworkload:\n  command: {command}\n"
        "  metrics: [{{name: samples_per_s, pattern: 'rate ([0-9.]+)'}}]\n"
        "  throughput: samples_per_s\nsystem: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1']\n  batch: 4\n"
    )
    cases = {
        "trian": ("[python, trian.py]", "trian.py: no such file", "did you mean 'train.py'"),
        "pythn": ("[pythn, train.py]", "pythn: not found on PATH", "did you mean 'python'"),
    }
    for name, (command, said, hint) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(body.format(name=name, command=command))
        for args in (["validate"], ["submit", "--backend", "local"]):
            proc = _run(tmp_path, *args, f"{name}.yaml")
            err = " ".join(proc.stderr.split())
            assert proc.returncode == 2, (args, proc.stdout, err)
            assert f"{name}.yaml:3 [workload.command]" in err, err
            assert said in err and hint in err, err
        assert not (tmp_path / "hpcscale-runs" / name / "ledger.sqlite").exists()
    (tmp_path / "ok.yaml").write_text(body.format(name="ok", command="[python, train.py]"))
    assert _run(tmp_path, "validate", "ok.yaml").returncode == 0


def test_leading_python_is_the_profiles_unless_as_written(tmp_path: Path) -> None:
    """`plan` says what a leading `python` becomes; `workload.interpreter: as-written` runs the
    `python` on the job's PATH (a shim here that leaves a mark), the default the profile's."""
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python"
    shim.write_text(f'#!/bin/sh\ntouch "{tmp_path}/shim-ran"\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "t.py").write_text("print('rate 3 samples/s')\n")
    body = (
        "name: {name}\nworkload:\n  command: [python, t.py]\n{extra}"
        "  metrics: [{{name: samples_per_s, pattern: 'rate ([0-9.]+)'}}]\n"
        "  throughput: samples_per_s\nsystem: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1']\n  batch: 4\n"
    )
    (tmp_path / "p.yaml").write_text(body.format(name="prof", extra=""))
    (tmp_path / "w.yaml").write_text(
        body.format(name="written", extra="  interpreter: as-written\n")
    )
    plan = " ".join(_run(tmp_path, "plan", "p.yaml").stdout.split())
    assert "`python` in workload.command runs as the profile's interpreter" in plan, plan
    assert "interpreter" not in _run(tmp_path, "plan", "w.yaml").stdout
    env_path = f"{shims}:{os.environ['PATH']}"
    for name, ran in (("p.yaml", False), ("w.yaml", True)):
        proc = subprocess.run(
            [EXE, "submit", name, "--backend", "local"], cwd=tmp_path, capture_output=True,
            text=True, timeout=300, env={**os.environ, "PATH": env_path,
                                          "HPCSCALE_WORKDIR": str(tmp_path / "runs")},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "shim-ran").exists() is ran, name


def test_a_rate_under_time_or_a_time_under_throughput_is_refused(tmp_path: Path) -> None:
    """Speedup is T_1/T_N on a time, X_N/X_1 on a rate: the wrong key inverts it."""
    (tmp_path / "t.py").write_text("print('rate 3 samples/s took 2 s')\n")
    body = (
        "name: n\nworkload:\n  command: [python, t.py]\n"
        "  metrics: [{{name: samples_per_s, pattern: 'rate ([0-9.]+)', unit: samples/s}},\n"
        "            {{name: took, pattern: 'took ([0-9.]+)', unit: s}}]\n"
        "  {key}: {metric}\nsystem: local\nscaling: strong\n"
        "matrix:\n  layout: ['1x1']\n  batch: 4\n"
    )
    cases = [("time", "samples_per_s", "a throughput"), ("throughput", "took", "a time")]
    for key, metric, said in cases:
        (tmp_path / "c.yaml").write_text(body.format(key=key, metric=metric))
        proc = _run(tmp_path, "validate", "c.yaml")
        err = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and f"[workload.{key}]" in err and said in err, err
    (tmp_path / "c.yaml").write_text(body.format(key="time", metric="took"))
    assert _run(tmp_path, "validate", "c.yaml").returncode == 0


def test_a_name_belongs_to_one_file_and_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    """A second file with the same `name:` is refused, naming the first (--force takes the
    name over); a dry run, even of an edited matrix, marks nothing stale; status says how many
    stale runs it hides."""
    (tmp_path / "t.py").write_text("print('rate 3 samples/s')\n")
    body = (
        "name: twin\nworkload:\n  command: [python, t.py]\n"
        "  metrics: [{{name: samples_per_s, pattern: 'rate ([0-9.]+)'}}]\n"
        "  throughput: samples_per_s\nsystem: local\nscaling: weak\n"
        "matrix:\n  layout: ['1x1']\n  batch: {batch}\n"
    )
    (tmp_path / "a.yaml").write_text(body.format(batch=4))
    (tmp_path / "b.yaml").write_text(body.format(batch=8))
    assert _run(tmp_path, "submit", "a.yaml", "--backend", "local").returncode == 0

    def status() -> tuple[str, str]:
        proc = _run(tmp_path, "status", "twin")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout, " ".join(proc.stderr.split())

    other = _run(tmp_path, "submit", "b.yaml", "--dry-run")
    err = " ".join(other.stderr.split())
    assert other.returncode == 2 and f"belongs to {tmp_path / 'a.yaml'}" in err, err
    assert "--force" in err
    (tmp_path / "a.yaml").write_text(body.format(batch=16))  # edited, then only dry-run
    assert _run(tmp_path, "submit", "a.yaml", "--dry-run").returncode == 0
    assert _run(tmp_path, "submit", "b.yaml", "--dry-run", "--force").returncode == 0
    out, err = status()
    assert "COMPLETED" in out and "stale" not in err, (out, err)

    taken = _run(tmp_path, "submit", "b.yaml", "--backend", "local", "--force")
    assert taken.returncode == 0, taken.stderr
    out, err = status()
    assert "1 stale run(s) hidden" in err and "--include-stale" in err, err
    assert _run(tmp_path, "submit", "a.yaml", "--dry-run").returncode == 2  # b owns it now


def test_the_report_describes_the_profile_init_wrote_beside_the_campaign(tmp_path: Path) -> None:
    """`init` writes `system: local.yaml` beside campaign.yaml; the report reads the campaign's
    directory under hpcscale-runs/, so the profile must be found beside the file that owns it
    (the Provenance table once said "profile not loadable: unknown system 'local.yaml'")."""
    from hpcscale.report.provenance import system_table

    assert _run(tmp_path, "init").returncode == 0
    assert "system: local.yaml" in (tmp_path / "campaign.yaml").read_text()
    assert _run(tmp_path, "render", "campaign.yaml").returncode == 0
    (cdir,) = (tmp_path / "hpcscale-runs").iterdir()
    table, note = system_table("local.yaml", cdir)
    assert note == "" or "not loadable" not in note, note
    settings = dict(zip(table["Setting"], table["Value"], strict=True))
    assert settings["launcher"] == "mpirun" and settings["scheduler"] == "local", settings
