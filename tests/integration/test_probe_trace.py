"""#32: a user's program that marks its own steps with `hpcscale.probe.step()`, traced through
the per-rank wrapper (`rankwrap.py --torch-trace`): the trace window is counted in the
program's marked steps, not in optimizer steps. The program steps its optimizer INNER times per
marked step and names each marked step with a span of its own, so the test can tell, from each
rank's trace file alone (json.load), which marked steps were traced: exactly the window's,
SKIP..SKIP+STEPS-1, one ProfilerStep each. Real torch, a real 2-rank gloo run under torchrun."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hpcscale.collect.traces import reader
from tests.integration.test_rankwrap_trace import _env, _run, _wrap
from tests.torch_fixture import needs_torch

SKIP, STEPS = 2, 3  # as test_rankwrap_trace's window
MARKED, INNER = 7, 3  # marked steps the program takes, optimizer steps in each

PROGRAM = textwrap.dedent("""\
    import sys
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from hpcscale import probe

    marked, inner = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ddp = DDP(torch.nn.Linear(16, 16))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for k in range(marked):
        with probe.step():
            with torch.profiler.record_function(f"marked {k}"):
                for _ in range(inner):
                    opt.zero_grad()
                    ddp(torch.randn(8, 16)).sum().backward()
                    opt.step()
    print(f"rank {dist.get_rank()}: marked {marked}")
    dist.destroy_process_group()
""")

PLAIN = textwrap.dedent("""\
    import sys
    from hpcscale import probe
    for k in range(6):
        with probe.step():
            pass
    print("torch", "torch" in sys.modules)
    print("traced", probe._BOOT is not None)
""")


def _inside(outer: dict[str, Any], e: dict[str, Any]) -> bool:
    return outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]


@needs_torch
def test_the_window_counts_the_programs_marked_steps(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    run_dir = tmp_path / "run"
    program = _wrap(run_dir, sys.executable, "prog.py", str(MARKED), str(INNER))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "--no-python", *program]  # fmt: skip
    _run(cmd, tmp_path, _env(tmp_path))
    traces = run_dir / "traces"
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.json", "rank1.json"]
    window = [f"marked {k}" for k in range(SKIP, SKIP + STEPS)]  # the marks inside the window
    for r in range(2):
        assert f"rank {r}: marked {MARKED}" in (run_dir / "ranks" / f"{r}.out").read_text()
        with open(traces / f"rank{r}.json") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        steps = sorted(
            (e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]
        )
        assert len(steps) == STEPS
        marks = [e for e in events if e["name"].startswith("marked ")]
        opt = [e for e in events if e["name"].startswith("Optimizer.step#")]
        for step, name in zip(steps, window, strict=True):
            # one marked step per ProfilerStep, the window's, with all its optimizer steps
            assert [m["name"] for m in marks if _inside(step, m)] == [name]
            assert sum(_inside(step, o) for o in opt) == INNER
        assert sorted(m["name"] for m in marks) == window  # nothing traced outside it
    s = reader("torch").summarise(traces, ranks=2, window_unix_us=None)
    assert len(s.steps) == STEPS


def test_the_probe_under_a_traced_run_never_imports_torch(tmp_path: Path) -> None:
    """A program without torch that marks steps: the probe sees the trace bootstrap, marks
    its steps, and torch stays unimported (no trace)."""
    (tmp_path / "plain.py").write_text(PLAIN)
    run_dir = tmp_path / "run"
    out = _run(_wrap(run_dir, sys.executable, "plain.py"), tmp_path, _env(tmp_path))
    assert out.stdout.splitlines()[-2:] == ["torch False", "traced True"], out.stdout
    assert list((run_dir / "traces").iterdir()) == []


def test_the_probe_untraced_marks_nothing() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PLAIN], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines()[-2:] == ["torch False", "traced False"]
