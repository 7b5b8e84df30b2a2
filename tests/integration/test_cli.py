"""The CLI as a person and a script use it: the real console script, piped (a subprocess's
stdout is a pipe) or on a terminal (`script` gives it a pseudo-terminal).

Runs here are rendered, never started: `status` reads a ledger the runs are registered in as
`submit` registers them, and `collect` reads a metrics.json per run written through the file's
own schema (hpcscale.formats.metrics), as a finished job leaves it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hpcscale import api
from hpcscale.collect.collector import load_results
from hpcscale.formats.exit_record import write_exit_record
from hpcscale.formats.metrics import encode_metrics, metrics_from_dict
from hpcscale.state.ledger import Ledger
from tests.conftest import CAMPAIGNS, hpcscale

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAD_PLURAL = re.compile(r"(?<![\d.,])1 (runs|GPUs|files|steps|records|events|tensors|ranks)\b")
HAVE_SCRIPT = shutil.which("script") is not None


def exe() -> str:
    return shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"


def on_terminal(
    *args: str, columns: int, timeout: float = 300, env: dict[str, str] | None = None
) -> str:
    """`hpcscale ARGS` with stdout and stderr on a pseudo-terminal `columns` wide; its output,
    escape codes removed."""
    env = {**os.environ, **(env or {})}
    env = {k: v for k, v in env.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["COLUMNS"] = str(columns)
    proc = subprocess.run(
        ["script", "-qec", shlex.join([exe(), *args]), "/dev/null"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ANSI.sub("", proc.stdout.replace("\r", ""))


def campaign(tmp_path: Path, name: str, matrix: str, system: str = "cpu-cluster") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nworkload:\n  model: dcgan\n  epochs: 2\n  args: {{image_size: 64}}\n"
        f"system: {system}\nscaling: weak\nmatrix:\n  batch: 64\n{matrix}"
    )
    return path


def big(tmp_path: Path) -> Path:
    """10,200 runs: more than the 10,000 that earn a warning."""
    cycles = [round(0.5 + 0.5 * i, 1) for i in range(51)]
    fusion = [8 + 4 * i for i in range(100)]
    matrix = f"  nodes: [1, 2]\n  cycle_time_ms: {cycles}\n  fusion_threshold_mb: {fusion}\n"
    return campaign(tmp_path, "big", matrix)


# ---------------------------------------------------------------- tables never cut


def test_piped_plan_prints_every_full_run_id() -> None:
    """`plan | less` on a narrow terminal: plain aligned text, each run id whole, first word."""
    path = CAMPAIGNS / "fusion_sweep.yaml"
    ids = [r.run_id for r in api.plan(path).runs]
    proc = hpcscale("plan", str(path), env={"COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and "\x1b[" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0] == "fusion_sweep: 20 runs on owens (weak scaling)"
    header = lines[1].split()
    assert header[:3] == ["run_id", "model", "device"]
    assert "fusion_threshold_mb" in header and "cycle_time_ms" in header
    rows = [ln.split() for ln in lines[2 : 2 + len(ids)]]
    assert [r[0] for r in rows] == ids
    assert all(len(r) == len(header) for r in rows)  # one word per column: awk finds them
    assert "values per axis" in lines


@pytest.mark.skipif(not HAVE_SCRIPT, reason="needs script(1) for a pseudo-terminal")
def test_plan_on_a_terminal_never_cuts_run_ids() -> None:
    """Too wide for the terminal: plain text, ids whole; fits: rich's boxes, ids whole."""
    wide = CAMPAIGNS / "fusion_sweep.yaml"
    narrow_out = on_terminal("plan", str(wide), columns=50)
    assert "…" not in narrow_out
    for r in api.plan(wide).runs:
        assert re.search(rf"^{r.run_id}\s", narrow_out, re.M), r.run_id
    small = CAMPAIGNS / "cpu_layouts.yaml"
    boxed = on_terminal("plan", str(small), columns=200)
    assert "┃" in boxed and "…" not in boxed
    for r in api.plan(small).runs:
        assert f"│ {r.run_id} │" in boxed


def test_status_and_collect_piped_keep_ids_and_messages_whole(tmp_path: Path) -> None:
    path = CAMPAIGNS / "fusion_sweep.yaml"
    wd = tmp_path / "wd"
    rendered = api.render(path, wd)
    long = "sbatch: error: Batch job submission failed: Requested node configuration is not "
    long += "available (partition gpuparallel, 4 nodes)"
    with Ledger(rendered.directory) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered.runs)
        ledger.update(rendered.runs[0].run.run_id, message=long)
    narrow = {"COLUMNS": "40"}
    proc = hpcscale("status", "fusion_sweep", "-w", str(wd), env=narrow)
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and proc.stdout.startswith("fusion_sweep: 20 runs (")
    firsts = [ln.split()[0] for ln in proc.stdout.splitlines()[2:]]
    assert sorted(firsts) == sorted(r.run.run_id for r in rendered.runs)
    assert long in proc.stdout
    for r in rendered.runs[:3]:
        finish(r.run_dir)
    proc = hpcscale("collect", "fusion_sweep", "-w", str(wd), env=narrow)
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and proc.stdout.startswith("fusion_sweep: 3 runs")
    firsts = {ln.split()[0] for ln in proc.stdout.splitlines()[2:5]}
    assert firsts == {r.run.run_id for r in rendered.runs[:3]}
    assert str(rendered.directory / "results.parquet") in proc.stdout  # one line, not wrapped


# ---------------------------------------------------------------- long plans and renders


@pytest.mark.skipif(not HAVE_SCRIPT, reason="needs script(1) for a pseudo-terminal")
def test_long_render_shows_a_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    path = big(tmp_path)
    # drawn from the start: a fast machine renders 10,200 runs within the usual 1 s delay
    nodelay = {"HPCSCALE_PROGRESS_DELAY": "0"}
    out = on_terminal("render", str(path), "-w", str(tmp_path / "wd"), columns=100, env=nodelay)
    assert "render big.yaml" in out and "/10200" in out  # the bar: runs done of 10,200
    assert "rendered 10200 runs of big" in out
    assert "big has 10,200 runs (more than 10,000)" in out
    piped = hpcscale("plan", str(path))
    assert piped.returncode == 0, piped.stderr
    assert "plan big.yaml" not in piped.stderr and "\x1b[" not in piped.stderr
    assert "warning: campaign big has 10,200 runs (more than 10,000)" in piped.stderr
    assert len(piped.stdout.splitlines()) > 10_200
    small = hpcscale("plan", str(CAMPAIGNS / "quickstart.yaml"))
    assert "warning" not in small.stderr


# ---------------------------------------------------------------- --version, --help, words


def test_version() -> None:
    proc = hpcscale("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"hpcscale {metadata.version('hpcscale')}"


def _commands() -> list[list[str]]:
    import typer.main

    from hpcscale.cli.main import app

    out: list[list[str]] = [[]]

    def walk(cmd: object, prefix: list[str]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            out.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(typer.main.get_command(app), [])
    return out


def test_no_help_shows_a_bool_metavar() -> None:
    """Flags take no value: no `<bool>` beside them in any command's --help."""
    commands = _commands()
    assert ["plan"] in commands and ["cluster", "up"] in commands
    for cmd in commands:
        proc = hpcscale(*cmd, "--help")
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert "--help" in proc.stdout
        assert "<bool>" not in proc.stdout, cmd
    assert "--json" in hpcscale("plan", "--help").stdout


def test_one_run_is_not_one_runs(tmp_path: Path) -> None:
    path = campaign(tmp_path, "one", "  nodes: 1\n")
    wd = tmp_path / "wd"
    outs = {
        cmd: hpcscale(*args)
        for cmd, args in {
            "validate": ("validate", str(path)),
            "plan": ("plan", str(path)),
            "render": ("render", str(path), "-w", str(wd)),
        }.items()
    }
    for cmd, proc in outs.items():
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert not BAD_PLURAL.search(proc.stdout + proc.stderr), (cmd, proc.stdout)
    assert "1 run," in outs["validate"].stdout
    assert outs["plan"].stdout.startswith("one: 1 run on cpu-cluster")
    assert "rendered 1 run of one" in outs["render"].stdout
    (run_dir,) = (wd / "one" / "runs").iterdir()
    with Ledger(wd / "one") as ledger:
        ledger.ensure([(run_dir.name, str(run_dir))])
    finish(run_dir)
    for args in (("status", "one"), ("collect", "one")):
        proc = hpcscale(*args, "-w", str(wd))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("one: 1 run") and not BAD_PLURAL.search(proc.stdout)


# ---------------------------------------------------------------- timeline and trace


TIMELINE = """[
{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "grad_0"}},
{"name": "NEGOTIATE_ALLREDUCE", "ph": "B", "ts": 100, "pid": 0, "tid": 0},
{"ph": "E", "ts": 200, "pid": 0, "tid": 0},
{"name": "ALLREDUCE", "ph": "B", "ts": 200, "pid": 0, "tid": 0},
{"name": "MPI_ALLREDUCE", "ph": "B", "ts": 210, "pid": 0, "tid": 0},
{"ph": "E", "ts": 300, "pid": 0, "tid": 0},
{"ph": "E", "ts": 310, "pid": 0, "tid": 0},
"""


def test_timeline_says_what_the_path_is(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "timeline.json").write_text(TIMELINE)
    ok = hpcscale("timeline", str(run / "timeline.json"))
    assert ok.returncode == 0 and "(horovod<0.20.1, 6 events, 1 tensor)" in ok.stdout
    cases = {
        run: "is a directory, not a file (did you mean",
        Path("/dev/null"): "not a regular file (a character device)",
        tmp_path / "missing.json": "no such file",
    }
    for path, message in cases.items():
        proc = hpcscale("timeline", str(path))
        assert proc.returncode == 2, (path, proc.stdout)
        assert f"{path}: {message}" in proc.stderr and "Traceback" not in proc.stderr
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    proc = hpcscale("timeline", str(empty))
    assert proc.returncode == 0 and "(an empty file): no collectives recorded" in proc.stdout


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_trace_into_a_directory_with_the_umasks_mode(tmp_path: Path, umask: int) -> None:
    run = tmp_path / "0123456789"
    run.mkdir()
    (run / "timeline.json").write_text(TIMELINE)
    out_dir = tmp_path / "traces"
    out_dir.mkdir()
    cmd = f"umask {umask:03o}; exec {shlex.join([exe(), 'trace', str(run), '-o', str(out_dir)])}"
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    trace = out_dir / "0123456789.trace.json"
    assert [p.name for p in out_dir.iterdir()] == [trace.name]
    assert len(json.loads(trace.read_text())) == 7
    assert stat.S_IMODE(trace.stat().st_mode) == 0o666 & ~umask
    bad = hpcscale("trace", str(run), "-o", "/dev/null")
    assert bad.returncode == 2 and "/dev/null: not a regular file" in bad.stderr


def test_trace_finds_a_run_by_the_rules_of_logs(tmp_path: Path) -> None:
    """`trace RUN` takes a run id as `logs` does (state.select.find_run): a whole id however
    short, a prefix of 4 characters or more, and says which runs an ambiguous prefix matches;
    the runs are those on disk, a campaign copied from a cluster having no ledger."""
    wd = tmp_path / "wd"
    for cdir, rid in (("a", "abcd1234"), ("b", "abcd9999"), ("c", "ab")):
        (wd / cdir / "runs" / rid).mkdir(parents=True)
    out = str(tmp_path / "t.json")
    short = hpcscale("trace", "ab", "-o", out, "--workdir", str(wd))
    assert short.returncode == 2, short.stderr
    assert f"{wd / 'c' / 'runs' / 'ab'}: no timeline.json" in " ".join(short.stderr.split())
    many = hpcscale("trace", "abcd", "-o", out, "--workdir", str(wd))
    assert many.returncode == 2
    assert "abcd: matches several runs (a/abcd1234, b/abcd9999)" in many.stderr
    (wd / "a" / "runs" / "abcd1234" / "timeline.json").write_text(TIMELINE)
    one = hpcscale("trace", "abcd1", "-o", out, "--workdir", str(wd))
    assert one.returncode == 0, one.stderr
    assert "no steps.json, writing the timeline only" in one.stderr
    assert len(json.loads(Path(out).read_text())) == 7  # as the umask test: the records only
    none = hpcscale("trace", "zzz", "-o", out, "--workdir", str(wd))
    assert none.returncode == 2 and "a prefix needs 4 characters or more" in none.stderr


# ---------------------------------------------------------------- load_results


def test_load_results_takes_the_campaign_yaml(tmp_path: Path) -> None:
    path = campaign(tmp_path, "loadme", "  nodes: [1, 2]\n")
    wd = tmp_path / "wd"
    rendered = api.render(path, wd)
    for r in rendered.runs:
        finish(r.run_dir)
    assert hpcscale("collect", str(path), "-w", str(wd)).returncode == 0
    by_name = load_results("loadme", workdir=wd)
    by_yaml = load_results(str(path), workdir=wd)
    assert sorted(by_yaml["run_id"]) == sorted(r.run.run_id for r in rendered.runs)
    assert list(by_yaml["run_id"]) == list(by_name["run_id"])
    assert list(api.load_results(str(path), workdir=wd)["run_id"]) == list(by_name["run_id"])
    from hpcscale.model.errors import UsageError

    with pytest.raises(UsageError, match="does not exist"):
        load_results(str(tmp_path / "nope.yaml"), workdir=wd)


# ---------------------------------------------------------------- helpers


def finish(run_dir: Path) -> None:
    """The metrics.json a finished job writes (rank 0), for this run's run.json."""
    rec = json.loads((run_dir / "run.json").read_text())
    epochs, steps = rec["epochs"], 4
    ranks = rec["nodes"] * rec["tasks_per_node"]
    times = [2.0 + 0.1 * i for i in range(epochs)]
    metrics = metrics_from_dict(
        {
            "schema_version": 1,
            "workload": "gan",
            "model": rec["model"],
            "strategy": rec.get("strategy", "horovod"),
            "cross_device_ops": None,
            "ranks": ranks,
            "replicas": ranks,
            "batch_per_rank": rec["batch_per_rank"],
            "global_batch": rec["global_batch"],
            "epochs": epochs,
            "steps_per_epoch": steps,
            "dataset_size": rec["global_batch"] * steps,
            "data": "synthetic",
            "image_size": 64,
            "num_classes": None,
            "device": rec["device"],
            "threads": rec["threads_per_task"],
            "fp16_allreduce": False,
            "mixed_precision": None,
            "timeline": False,
            "lr": 0.0002,
            "lr_scaled": 0.0002 * ranks,
            "warmup_epochs": 0.0,
            "burn_in_steps": 1,
            "burn_in_s": 0.5,
            "epoch_time_s": times,
            "images_per_s": [rec["global_batch"] * steps / t for t in times],
            "fit_time_s": sum(times),
            "losses": {"g": [1.0] * epochs, "d": [0.5] * epochs},
            "accuracy": None,
            "step_time": {"count": 8, "mean_ms": 500, "p50_ms": 500, "p90_ms": 510, "p99_ms": 520},
            "params": {"g": {"total": 10, "trainable": 10}},
            "param_count": 10,
            "sync_check": None,
            "started_unix_s": 1.7e9,
            "finished_unix_s": 1.7e9 + sum(times),
            "provenance": {
                "python": "3.11",
                "tensorflow": "2.15.1",
                "keras": "2.15.0",
                "horovod": "0.28.1",
                "mpi": None,
                "hostnames": ["node1"],
                "env": {},
                "git_revision": None,
                "git_dirty": None,
                "argv": ["train.py"],
            },
        }
    )
    (run_dir / "metrics.json").write_bytes(encode_metrics(metrics))
    write_exit_record(run_dir, 0)  # it completed, as its job script would have recorded
