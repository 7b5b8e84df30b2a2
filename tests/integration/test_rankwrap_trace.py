"""#32: a user's unmodified PyTorch program traced per rank by the per-rank wrapper
(`rankwrap.py --torch-trace DIR --trace-window SKIP,STEPS`): the bootstrap it puts on
PYTHONPATH starts torch.profiler in every Python the program starts (rankwrap under torchrun,
torchrun under rankwrap through a shell script), steps it on the optimizer's step() and writes
DIR/rank<r>.json; a program with its own profiler is left alone and said so; a program without
torch never imports it. Real processes, real torch, real files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from hpcscale import rankwrap
from tests.packaging_fixture import Installed
from tests.torch_fixture import PROGRAM, needs_torch, shim_env

RANKWRAP = str(Path(rankwrap.__file__).resolve())
# launcher variables of an enclosing job (a test run under srun/mpirun) must not leak in
LAUNCH_VARS = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "MV2_", "HOROVOD_", "TORCHELASTIC_")
SKIP, STEPS = 2, 3  # the window the tests ask for; ddp_allreduce.py takes 20 steps


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in shim_env(tmp).items() if not k.startswith(LAUNCH_VARS)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PYTHONPATH", "PYTHONSTARTUP"):
        env.pop(name, None)
    env.update(GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1", **extra)
    return env


def _wrap(run_dir: Path, *program: str, window: str = f"{SKIP},{STEPS}") -> list[str]:
    return [sys.executable, "-I", RANKWRAP, "--dir", str(run_dir), "--torch-env",
            "--torch-trace", str(run_dir / "traces"), "--trace-window", window, "--",
            *program]  # fmt: skip


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _steps(path: Path) -> list[int]:
    """The ProfilerStep numbers in one trace file (json.load: it must be whole JSON)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    names = [e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    return sorted(int(n.split("#", 1)[1]) for n in names)


def _check_ranks(traces: Path, world: int) -> None:
    assert sorted(p.name for p in traces.iterdir()) == [f"rank{r}.json" for r in range(world)]
    for r in range(world):
        steps = _steps(traces / f"rank{r}.json")
        assert len(steps) == STEPS, (r, steps)  # exactly the window's steps
        assert steps == list(range(steps[0], steps[0] + STEPS)), steps  # consecutive
        with open(traces / f"rank{r}.json") as f:
            assert json.load(f)["distributedInfo"]["rank"] == r


@needs_torch
def test_each_rank_under_torchrun_writes_its_window(tmp_path: Path) -> None:
    """torchrun starts rankwrap per rank (the campaign's layout): each rank's trace exists, is
    JSON, and holds exactly STEPS ProfilerStep spans."""
    shutil.copy(PROGRAM, tmp_path / "prog.py")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "--no-python", *_wrap(run_dir, sys.executable, "prog.py")]  # fmt: skip
    _run(cmd, tmp_path, _env(tmp_path))
    _check_ranks(run_dir / "traces", 2)
    for r in range(2):  # the program ran unchanged and its output was kept per rank
        assert f"rank {r}: " in (run_dir / "ranks" / f"{r}.out").read_text()


@needs_torch
def test_torchruns_children_under_a_shell_script(tmp_path: Path) -> None:
    """rankwrap -> bash script.sh -> torchrun -> 2 workers: the environment carries the
    bootstrap through the shell and torchrun to each worker, which writes its own rank."""
    shutil.copy(PROGRAM, tmp_path / "prog.py")
    (tmp_path / "script.sh").write_text(
        f"set -e\nexec {sys.executable} -m torch.distributed.run --standalone "
        "--nproc-per-node 2 prog.py\n"
    )
    run_dir = tmp_path / "run"
    _run(_wrap(run_dir, "bash", "script.sh"), tmp_path, _env(tmp_path))
    _check_ranks(run_dir / "traces", 2)


OWN = textwrap.dedent("""\
    import sys
    import torch

    m = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)

    def step():
        loss = m(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(int(sys.argv[1])):  # steps before the program's own profiler starts
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        for _ in range(3):
            step()
    p.export_chrome_trace("own.json")
    print("own profiler done")
""")


@needs_torch
@pytest.mark.parametrize("before", [0, 2])
def test_a_program_with_its_own_profiler_is_left_alone(tmp_path: Path, before: int) -> None:
    """Its profiler started before any step (0) or inside our window (2 steps in, window 1,5):
    no trace from us, not even a .tmp, a one-line note, and the program's own trace written."""
    (tmp_path / "own.py").write_text(OWN)
    run_dir = tmp_path / "run"
    cmd = _wrap(run_dir, sys.executable, "own.py", str(before), window="1,5")
    out = _run(cmd, tmp_path, _env(tmp_path))
    assert "own profiler done" in out.stdout
    traces = run_dir / "traces"
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.own-profiler"]
    note = (traces / "rank0.own-profiler").read_text()
    assert note.count("\n") == 1 and "torch.profiler" in note, note
    with open(tmp_path / "own.json") as f:
        assert json.load(f)["traceEvents"]


# where the interpreter finds a sitecustomize of its own (none: "")
SHADOWED = (
    "import importlib.machinery as m; s = m.PathFinder.find_spec('sitecustomize'); "
    "print(s.origin if s else '')"
)
PLAIN = textwrap.dedent("""\
    import sys
    print("torch", "torch" in sys.modules)
    print("boot", "_hpcscale_trace_boot" in sys.modules)
    print("site", sys.modules["sitecustomize"].__file__)
""")


@pytest.mark.parametrize("shell", [False, True])
def test_a_program_without_torch_never_imports_it(tmp_path: Path, shell: bool) -> None:
    """A plain Python program (directly, and under bash) gets the bootstrap but no torch and
    no trace; a sitecustomize of its own PYTHONPATH still runs (chained after ours)."""
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / "script.sh").write_text(f"{sys.executable} plain.py\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('site own ran')\n")
    run_dir = tmp_path / "run"
    program = ["bash", "script.sh"] if shell else [sys.executable, "plain.py"]
    out = _run(_wrap(run_dir, *program), tmp_path, _env(tmp_path, PYTHONPATH=str(site)))
    lines = out.stdout.splitlines()
    assert lines[:3] == ["site own ran", "torch False", "boot True"], lines
    assert lines[3] == f"site {site / 'sitecustomize.py'}"
    assert list((run_dir / "traces").iterdir()) == []


@pytest.mark.parametrize("window", ["3", "a,2", "2,0", "-1,3"])
def test_a_bad_window_is_a_usage_error(tmp_path: Path, window: str) -> None:
    out = subprocess.run(
        _wrap(tmp_path / "run", sys.executable, "-c", "pass", window=window),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--trace-window" in out.stderr
    assert not (tmp_path / "run").exists()


def test_the_wheel_carries_the_bootstrap(installed_hpcscale: Installed, tmp_path: Path) -> None:
    """The installed rankwrap.py (run by its path, as a job runs it) finds the bootstrap beside
    it in the installed package: a plain program gets it."""
    wheel = set(zipfile.ZipFile(installed_hpcscale.wheel).namelist())
    assert "hpcscale/rankwrap_boot/sitecustomize.py" in wheel
    (tmp_path / "plain.py").write_text(PLAIN)
    run_dir = tmp_path / "run"
    wrap = _wrap(run_dir, sys.executable, "plain.py")
    wrap[2] = str(installed_hpcscale.package / "rankwrap.py")
    out = _run(wrap, tmp_path, _env(tmp_path))
    boot = installed_hpcscale.package / "rankwrap_boot" / "sitecustomize.py"
    # the interpreter's own sitecustomize (Debian's python3 has one: apport's hook) runs
    # chained after ours and is then the one named `sitecustomize`; without one, ours is
    own = subprocess.run(
        [sys.executable, "-c", SHADOWED], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert out.stdout.splitlines() == ["torch False", "boot True", f"site {own or boot}"]
