"""One bad run never blocks the others: whatever one run directory holds (a dangling
`slurm-99.out` link, a run.json whose `nodes` no 64-bit integer holds), that run alone is left
out, named with its reason, and every other run is collected and reported. A damaged
ledger.sqlite (random bytes, or cut short) is set aside and rebuilt from the run directories
(run.json and each run's exit record): `status`, `collect` and `report` go on.

One real campaign (local backend, real mpirun) of four runs: the two 1-rank runs complete, the
two 2-rank runs fail (rank 1 raises KeyError); each test damages its own copy."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.command_fixture import KEYERROR as PROGRAM
from tests.command_fixture import campaign
from tests.conftest import hpcscale

pytestmark = pytest.mark.mpi

BODY = """\
name: iso
workload:
  command: python3 prog.py
  metrics:
    - {name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}
  throughput: samples_per_s
system: local
scaling: weak
matrix: {layout: ["1x1", "2x1"], batch: [4, 8]}
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The submitted campaign's workdir (read-only: tests copy it)."""
    tmp = tmp_path_factory.mktemp("iso")
    wd = tmp / "runs"
    path = campaign(tmp, BODY, PROGRAM)
    sub = hpcscale("submit", str(path), "--backend", "local", env={"HPCSCALE_WORKDIR": str(wd)})
    assert sub.returncode == 1, sub.stdout + sub.stderr  # the 2-rank runs failed
    return wd


@pytest.fixture
def copy(finished: Path, tmp_path: Path) -> Path:
    wd = tmp_path / "runs"
    shutil.copytree(finished, wd, symlinks=True)
    return wd


def _runs(wd: Path) -> dict[tuple[int, int], Path]:
    """(ranks, batch_per_rank) -> run directory."""
    out = {}
    for rd in (wd / "iso" / "runs").iterdir():
        rec = json.loads((rd / "run.json").read_text())
        out[rec["ranks"], rec["batch_per_rank"]] = rd
    return out


def _collect(wd: Path, *extra: str):  # -> CompletedProcess
    return hpcscale("collect", "iso", "-w", str(wd), *extra)


def _measured(wd: Path) -> set[str]:
    df = pd.read_parquet(wd / "iso" / "results.parquet")
    return set(df.loc[df["state"] == "COMPLETED", "run_id"])


def test_a_dangling_slurm_output_link_stops_nothing(copy: Path) -> None:
    runs = _runs(copy)
    for rd in runs.values():  # every run, the completed and the failed
        os.symlink(rd / "gone" / "slurm-99.out", rd / "slurm-99.out")
    proc = _collect(copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "internal error" not in proc.stderr
    assert _measured(copy) == {runs[1, 4].name, runs[1, 8].name}
    rep = hpcscale("report", "iso", "-w", str(copy))
    assert rep.returncode == 0, rep.stdout + rep.stderr


def test_a_run_json_past_64_bit_integers_is_that_runs_problem_alone(copy: Path) -> None:
    runs = _runs(copy)
    bad = runs[1, 4]
    rec = json.loads((bad / "run.json").read_text())
    rec["nodes"] = 10**30
    (bad / "run.json").write_text(json.dumps(rec))
    proc = _collect(copy)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said  # an unreadable run: named, exit 1
    assert "internal error" not in said and "OverflowError" not in said
    assert bad.name in said and "nodes" in said
    assert _measured(copy) == {runs[1, 8].name}  # the other completed run, still measured
    rep = hpcscale("report", "iso", "-w", str(copy))
    assert rep.returncode == 0, rep.stdout + rep.stderr
    md = (copy / "iso" / "report" / "index.md").read_text()
    quality = md[md.index("## Data quality") :]
    assert bad.name in quality and "nodes" in quality


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "random":
        path.write_bytes(random.Random(7).randbytes(len(data)))
    else:
        path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("how", ["random", "truncated"])
def test_a_damaged_ledger_is_set_aside_and_rebuilt(copy: Path, how: str) -> None:
    cdir = copy / "iso"
    assert not (cdir / "ledger.sqlite-wal").exists()  # all of it is in the main file
    _damage(cdir / "ledger.sqlite", how)
    runs = _runs(copy)
    st = hpcscale("status", "iso", "-w", str(copy), "--json")
    assert st.returncode == 0, st.stdout + st.stderr
    assert "set aside" in st.stderr and "rebuilt" in st.stderr
    (aside,) = cdir.glob("ledger.sqlite.corrupt-*")
    assert aside.stat().st_size > 0
    states = {r["run_id"]: r["state"] for r in json.loads(st.stdout)["iso"]}
    # the states the runs' own exit records give: 1-rank completed, 2-rank failed
    assert states == {
        rd.name: "COMPLETED" if ranks == 1 else "FAILED" for (ranks, _), rd in runs.items()
    }
    col = _collect(copy)
    assert col.returncode == 0, col.stdout + col.stderr
    assert _measured(copy) == {runs[1, 4].name, runs[1, 8].name}
    if how == "random":  # the report too (once: it collects as above)
        rep = hpcscale("report", "iso", "-w", str(copy))
        assert rep.returncode == 0, rep.stdout + rep.stderr
    assert len(list(cdir.glob("ledger.sqlite.corrupt-*"))) == 1  # set aside once, not again
