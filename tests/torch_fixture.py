"""What the PyTorch launch tests share: the user's unmodified DDP program (examples/
ddp_allreduce.py) as a command workload with `framework: torch`, the loopback shim that keeps
torch's stores on 127.0.0.1, and reading what each rank was given from its own output."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from hpcscale.devcluster import loopback

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "examples" / "ddp_allreduce.py"
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAVE_TORCH and os.environ.get("HPCSCALE_REQUIRE_TORCH") != "1",
    reason="torch not installed (make setup installs it; HPCSCALE_REQUIRE_TORCH=1 fails here)",
)
LINE = re.compile(r"^ddp (?P<given>.*) host=\S+ sum=(?P<sum>\S+)$")


def ddp_campaign(tmp: Path, name: str, system: str, matrix: str, extra: str = "") -> Path:
    """The program beside a campaign running it as a torch command."""
    shutil.copy(PROGRAM, tmp / "ddp_allreduce.py")
    path = tmp / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        workload:
          command: python ddp_allreduce.py
          framework: torch
          metrics:
            - {{name: rate, pattern: 'rank \\d+: ([\\d.]+) samples/s', ranks: all}}
          throughput: rate
        system: {system}
        scaling: weak
        matrix: {matrix}
        """)
        + textwrap.dedent(extra)
    )
    return path


def shim_env(where: Path) -> dict[str, str]:
    """LD_PRELOAD of the local cluster's bind shim (IPv6 wildcard refused, so torch's stores
    bind 127.0.0.1): nothing the test starts listens beyond loopback."""
    lib = loopback.shim(where, ipv6="refuse")
    return {**os.environ, "LD_PRELOAD": str(lib)}


def given(run_dir: Path) -> dict[int, dict[str, str]]:
    """Each rank's variables and all-reduce sum, from its own output file (ranks/<r>.out)."""
    out: dict[int, dict[str, str]] = {}
    for path in sorted((run_dir / "ranks").glob("*.out")):
        for line in path.read_text().splitlines():
            if m := LINE.match(line):
                values = dict(kv.split("=", 1) for kv in m["given"].split())
                values["sum"] = m["sum"]
                out[int(path.stem)] = values
    return out
