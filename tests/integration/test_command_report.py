"""A command workload's own figure downstream (issue 21): labels that follow its unit, `time:`
strong scaling, `compare`, `report --check` on an extracted metric, and a real run on the
local SLURM cluster. Expected numbers are the ones the program printed, or hand arithmetic."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcscale.analysis.derive import derive
from hpcscale.collect.collector import collect_campaign, load_results
from hpcscale.report.sections import campaign_report
from hpcscale.state.paths import campaign_dir
from tests.command_fixture import campaign, run_all
from tests.conftest import hpcscale

# Rank 0 prints `per-rank rate 25*lr`; per_rank makes it x ranks: 25*lr at 1 rank, 50*lr at 2.
SAMPLES = """\
name: {name}
workload:
  command: [python, prog.py, --lr, "{{args.lr}}"]
  metrics:
    - {{name: samples_per_s, pattern: 'per-rank rate ([\\d.]+)', scale: per_rank, unit: samples/s}}
  throughput: samples_per_s
  args: {{lr: {lr}}}
system: {system}
scaling: weak
matrix: {matrix}
"""
LOCAL = '{layout: ["1x1", "2x1"], batch: 4}'
REFERENCES = """\
references:
  - {{metric: samples_per_s, where: {{ranks: 2}}, value: {value}, lower: 0.01, upper: 0.01}}
"""
HEADER = "samples_per_s (samples/s)"


def printed(run_dir: str, pattern: str) -> float:
    """The value the program printed (the last match in rank 0's own output, where the per-rank
    wrapper kept it; else the job's). Not the job's merged output when there are rank files:
    there the ranks' writes interleave mid-line (seen: `per-rank rate 50.02.0`)."""
    rank0 = Path(run_dir) / "ranks" / "0.out"
    files = [rank0] if rank0.exists() else sorted(Path(run_dir).glob("*.out"))
    out = "".join(p.read_text() for p in files)
    return float(re.findall(pattern, out)[-1])


@pytest.fixture(scope="module")
def two_campaigns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Campaigns a (lr 1) and b (lr 2), each at 1 and 2 ranks under mpirun, in one workdir."""
    root = tmp_path_factory.mktemp("samples")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCSCALE_WORKDIR", str(root / "runs"))
        paths = {}
        for name, lr in (("a", 1.0), ("b", 2.0)):
            (root / name).mkdir()
            body = SAMPLES.format(name=name, lr=lr, system="local", matrix=LOCAL)
            paths[name] = campaign(root / name, body)
            run_all(paths[name])
        yield paths


def test_samples_per_s_labels_the_tables_figure_and_summary(two_campaigns: dict) -> None:
    df = load_results("a").set_index("ranks")
    for ranks in (1, 2):
        shown = printed(df.loc[ranks, "run_dir"], r"per-rank rate ([\d.]+)")
        assert df.loc[ranks, "samples_per_s"] == pytest.approx(shown * ranks)
    proc = hpcscale("report", "a", check=True)
    assert HEADER in proc.stdout, proc.stdout  # the terminal summary's column
    header = scaling_header(campaign_dir("a"))
    assert HEADER in header and "Images/s" not in header, header
    collected = collect_campaign(campaign_dir("a"))
    rep = campaign_report(collected.frame, "a", context=collected.context)
    (plot,) = [p for s in rep.sections for p in s.plots if p.key == "throughput"]
    assert {ax.get_ylabel() for ax in plot.figure.axes} == {HEADER}


def test_compare_two_command_campaigns(two_campaigns: dict, tmp_path: Path) -> None:
    proc = hpcscale("compare", "a", "b", "-o", str(tmp_path), check=True)
    assert f"{HEADER} on ranks" in proc.stdout, proc.stdout
    runs = {n: load_results(n).set_index("ranks") for n in "ab"}
    # b's program printed twice a's rate at each size (lr 2 against 1): +100 %
    for ranks in (1, 2):
        a, b = (printed(runs[n].loc[ranks, "run_dir"], r"per-rank rate ([\d.]+)") for n in "ab")
        assert b / a == pytest.approx(2.0)
    assert proc.stdout.count("+100.0%") == 2, proc.stdout
    md = (tmp_path / "index.md").read_text()
    assert f"a: {HEADER}" in md and f"b: {HEADER}" in md and "a: Images/s" not in md


def test_compare_of_unlike_scaling_metrics_leaves_their_difference_out(
    two_campaigns: dict, tmp_path: Path
) -> None:
    """c prints half a's rate (lr 0.5) but calls it tokens/s: a -50 % that is no regression of
    a's samples/s, since it is another quantity; speedup and efficiency (ratios) still compare."""
    wd = two_campaigns["a"].parent.parent / "runs"
    body = SAMPLES.format(name="c", lr=0.5, system="local", matrix=LOCAL)
    body = body.replace("samples_per_s", "tokens_per_s").replace("samples/s", "tokens/s")
    (tmp_path / "c").mkdir()
    path = campaign(tmp_path / "c", body)
    hpcscale("submit", str(path), "--backend", "local", "-w", str(wd), check=True)
    hpcscale("collect", str(path), "-w", str(wd), check=True)
    proc = hpcscale("compare", "a", "c", "-w", str(wd), "-o", str(tmp_path / "out"), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # no regression: nothing compared
    md = " ".join((tmp_path / "out" / "index.md").read_text().split())
    said = "not comparable (a: samples_per_s (samples/s), c: tokens_per_s (tokens/s))"
    assert md.count(said) == 4, md  # the throughput at 1 and 2 ranks: listed, and in the table
    assert "| a: samples_per_s (samples/s) |" in md and "| c: tokens_per_s (tokens/s) |" in md
    assert "-50.0%" not in proc.stdout and "0 regression(s)" in proc.stdout, proc.stdout
    title = "Scaling metric (a: samples_per_s (samples/s), c: tokens_per_s (tokens/s)) on ranks"
    assert title in proc.stdout, proc.stdout
    assert "its differences are left out" in md


@pytest.mark.parametrize(("value", "rc"), [(50.0, 0), (80.0, 1)])
def test_reference_on_an_extracted_metric(
    two_campaigns: dict, tmp_path: Path, value: float, rc: int
) -> None:
    """50 = 25 x 2 ranks (what rank 0 printed, x ranks): within 1 %; 80 is not."""
    text = two_campaigns["a"].read_text() + REFERENCES.format(value=value)
    path = two_campaigns["a"].with_name(f"a_{value:.0f}.yaml")  # beside its program file
    path.write_text(text)
    assert hpcscale("validate", str(path)).returncode == 0
    proc = hpcscale("report", str(path), "--check")
    assert proc.returncode == rc, proc.stdout + proc.stderr
    said = "PASS" if rc == 0 else "FAIL"
    assert "references: 1 of 1 passed" in proc.stdout if rc == 0 else said in proc.stderr


@pytest.mark.parametrize(
    ("metric", "unit", "said"),
    [
        ("samples_per_s", "tokens/s", "the extractor of 'samples_per_s' (workload.metrics) "
         "declares 'samples/s'"),
        ("samples_per_s_max", "images/s", "declares 'samples/s'"),
        ("efficiency", "%", "which is a plain ratio"),
        ("samples_per_s", "samples/s", None),
    ],
)  # fmt: skip
def test_a_reference_unit_that_is_not_the_metrics_is_refused_by_validate(
    tmp_path: Path, metric: str, unit: str, said: str | None
) -> None:
    body = SAMPLES.format(name="u", lr=1.0, system="local", matrix=LOCAL) + (
        f"references:\n  - {{metric: {metric}, value: 1, unit: '{unit}'}}\n"
    )
    proc = hpcscale("validate", str(campaign(tmp_path, body)))
    if said is None:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 2, proc.stdout
    assert "c.yaml:12 " in proc.stderr and "references[0].unit" in proc.stderr, proc.stderr
    assert said in " ".join(proc.stderr.split()), proc.stderr


TIME = """\
name: strong
workload:
  command: [python, prog.py]
  metrics: [{name: train_time_s, pattern: 'elapsed ([\\d.]+)', unit: s}]
  time: train_time_s
system: local
scaling: strong
matrix: {layout: ["1x1", "2x1"], batch: 8}
"""


def test_time_metric_strong_scaling_speedup(tmp_path: Path, workdir: Path) -> None:
    run_all(campaign(tmp_path, TIME))
    df = load_results("strong").set_index("ranks")
    t = {n: printed(df.loc[n, "run_dir"], r"elapsed ([\d.]+)") for n in (1, 2)}
    cells = derive(load_results("strong")).set_index("ranks")
    assert cells.loc[2, "speedup"] == pytest.approx(t[1] / t[2])  # T_1 / T_N
    assert cells.loc[2, "efficiency"] == pytest.approx(t[1] / t[2] / 2)
    hpcscale("report", "strong", check=True)
    header = scaling_header(workdir / "strong")
    assert "train_time_s (s)" in header and "Epoch time" not in header, header


def test_time_metric_refused_for_weak_scaling(tmp_path: Path) -> None:
    proc = hpcscale("validate", str(campaign(tmp_path, TIME.replace("strong", "weak"))))
    assert proc.returncode == 2 and "workload.time" in proc.stderr, proc.stderr


@pytest.mark.slurm
def test_command_on_the_local_slurm_cluster(
    slurm_cluster: object, tmp_path: Path, workdir: Path
) -> None:
    """1 and 2 nodes x 1 rank under srun: the figures read from slurm-<job>.out."""
    from tests.integration.test_slurm import wait_terminal

    matrix = '{nodes: [1, 2], layout: "1x1", batch: 4}'
    body = SAMPLES.format(name="onslurm", lr=1.0, system="slurm-local", matrix=matrix)
    hpcscale("submit", str(campaign(tmp_path, body)), check=True)
    rows = wait_terminal("onslurm", timeout=300)
    assert {r["state"] for r in rows} == {"COMPLETED"}, rows
    hpcscale("collect", "onslurm", check=True)
    df = load_results("onslurm").set_index("nodes")
    rate = {}
    for nodes in (1, 2):
        assert list(Path(df.loc[nodes, "run_dir"]).glob("slurm-*.out"))
        rate[nodes] = printed(df.loc[nodes, "run_dir"], r"per-rank rate ([\d.]+)") * nodes
        assert df.loc[nodes, "samples_per_s"] == pytest.approx(rate[nodes])
    cells = derive(load_results("onslurm")).set_index("nodes")
    assert cells.loc[2, "speedup"] == pytest.approx(rate[2] / rate[1])
    hpcscale("report", "onslurm", check=True)
    assert HEADER in scaling_header(workdir / "onslurm")


def scaling_header(cdir: Path) -> str:
    """The header row of the report's scaling table."""
    md = (cdir / "report" / "index.md").read_text()
    return next(line for line in md.splitlines() if line.startswith("| Model"))


# Fails until `fixed` exists beside it; while `hold` exists, waits (for a cancel) instead.
LIFECYCLE = """\
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
if not os.path.exists(os.path.join(here, "fixed")):
    sys.stderr.write("prog.py: error: not fixed yet\\n")
    sys.exit(3)
while os.path.exists(os.path.join(here, "hold")):
    time.sleep(0.2)
print("per-rank rate 25.0", flush=True)
"""


@pytest.mark.slurm
def test_command_status_cancel_and_resubmit_on_slurm(
    slurm_cluster: object, tmp_path: Path, workdir: Path
) -> None:
    """The ledger's verbs work on a program of the user's as on the bundled ones: its failure
    explained in its own words, `resubmit --failed` after the fix, `cancel --where` while it
    runs, and `resubmit --failed --state CANCELLED` to finish the campaign."""
    from tests.integration.test_slurm import status_rows, wait_terminal

    matrix = '{nodes: [1, 2], layout: "1x1", batch: 4}'
    body = SAMPLES.format(name="verbs", lr=1.0, system="slurm-local", matrix=matrix)
    hpcscale("submit", str(campaign(tmp_path, body, LIFECYCLE)), check=True)
    rows = wait_terminal("verbs", timeout=300)
    assert [r["state"] for r in rows] == ["FAILED", "FAILED"], rows
    assert {r["reason"] for r in rows} == {"prog.py: error: not fixed yet"}
    (tmp_path / "fixed").touch()
    (tmp_path / "hold").touch()
    proc = hpcscale("resubmit", "verbs", "--failed", check=True)
    assert "resubmitting 2 run(s)" in proc.stdout
    deadline = time.monotonic() + 120
    # slurm-local runs one job at a time: one holds while the other waits its turn
    while "RUNNING" not in {r["state"] for r in status_rows("verbs")[0]}:
        assert time.monotonic() < deadline, status_rows("verbs")
        time.sleep(0.5)
    said = hpcscale("cancel", "verbs", "--where", "nodes == 2", check=True)
    assert "cancel requested for 1 run(s)" in said.stdout
    while (state := by_nodes(status_rows("verbs")[0]))[2] != "CANCELLED":
        assert time.monotonic() < deadline + 60, state
        time.sleep(0.5)
    assert state[1] in ("PENDING", "RUNNING"), state
    (tmp_path / "hold").unlink()
    rows = wait_terminal("verbs", timeout=120)
    assert by_nodes(rows) == {1: "COMPLETED", 2: "CANCELLED"}
    hpcscale("resubmit", "verbs", "--failed", "--state", "CANCELLED", check=True)
    rows = wait_terminal("verbs", timeout=300)
    assert by_nodes(rows, "state", "attempts") == {
        1: ("COMPLETED", 2),
        2: ("COMPLETED", 3),
    }
    hpcscale("collect", "verbs", check=True)
    df = load_results("verbs").set_index("nodes").sort_index()
    assert list(df["samples_per_s"]) == [25.0, 50.0]  # 25 per rank, as printed, x ranks


def by_nodes(rows: list[dict], *fields: str) -> dict[int, object]:
    """Status rows keyed by their run's node count (from its run.json): the state, or a tuple
    of `fields`."""
    out: dict[int, object] = {}
    for r in rows:
        nodes = json.loads((Path(r["run_dir"]) / "run.json").read_text())["nodes"]
        out[nodes] = tuple(r[f] for f in fields) if fields else r["state"]
    return out
