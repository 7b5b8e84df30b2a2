"""Every figure on the metric the user declared (issue 27): a command's speedup and efficiency
stand on its `throughput:` or `time:` metric, never on another column it printed; a `time:`
campaign's comparisons and figure use that time; predictions carry the swept arguments; a
command is not called Horovod; a superlinear flag allows for the time source's resolution.

Programs run for real under mpirun (1 and 2 ranks) through the local backend; every expected
value is computed here from what the program was told to print."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcscale.analysis.derive import derive
from hpcscale.analysis.quality import quality_flags
from hpcscale.collect.collector import collect_campaign
from hpcscale.report.model import CampaignReport
from hpcscale.report.sections import campaign_report
from hpcscale.state.paths import campaign_dir
from tests.command_fixture import campaign, run_all

# Rank 0 prints a rate of 100·√N·lr and an epoch time of 1/(N·lr) + 0.001·repeat at N ranks
# (the repeat's few ms give the fits' repeats a spread; both sizes get the same), and a loss
# per epoch. N comes from the {ranks} placeholder, not from MPI.
PROGRAM = """\
import math, os, sys
env = os.environ
rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK", env.get("SLURM_PROCID", 0))))
arg = dict(zip(sys.argv[1::2], sys.argv[2::2]))
n, lr, repeat = int(arg["--ranks"]), float(arg["--lr"]), int(arg["--repeat"])
if rank == 0:
    print(f"rate {100.0 * math.sqrt(n) * lr:.9f}", flush=True)
    print(f"epoch {1.0 / (n * lr) + 0.001 * repeat:.9f}", flush=True)
    print("loss 1.0", flush=True)
    print("loss 0.5", flush=True)
"""
COMMAND = '[python, prog.py, --ranks, "{ranks}", --lr, "{args.lr}", --repeat, "{repeat}"]'
THROUGHPUT = f"""\
name: declared
workload:
  command: {COMMAND}
  metrics:
    - {{name: samples_per_s, pattern: 'rate ([\\d.]+)', unit: samples/s}}
    - {{name: epoch_time_s, pattern: 'epoch ([\\d.]+)', unit: s}}
    - {{name: loss, pattern: 'loss ([\\d.]+)', reduce: series}}
  throughput: samples_per_s
  args: {{lr: 1.0}}
system: local
scaling: strong
repeats: 2
matrix: {{layout: ["1x1", "2x1"], batch: 8, args.lr: [1.0, 2.0]}}
"""
TIMED = f"""\
name: timed
workload:
  command: {COMMAND}
  metrics: [{{name: train_time_s, pattern: 'epoch ([\\d.]+)', unit: s}}]
  time: train_time_s
  args: {{lr: 1.0}}
system: local
scaling: strong
repeats: 3
matrix: {{layout: ["1x1", "2x1"], batch: 8, args.lr: [1.0, 2.0]}}
"""


def epoch_time(ranks: int, lr: float, repeat: int) -> float:
    """What the program was told to print as its epoch time."""
    return 1.0 / (ranks * lr) + 0.001 * repeat


def report_of(name: str) -> CampaignReport:
    collected = collect_campaign(campaign_dir(name))
    return campaign_report(collected.frame, name, context=collected.context)


def section(rep: CampaignReport, key: str):
    (found,) = [s for s in rep.sections if s.key == key]
    return found


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CampaignReport]]:
    """Both campaigns submitted and collected once, in one workdir; their reports."""
    root = tmp_path_factory.mktemp("declared")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCSCALE_WORKDIR", str(root / "runs"))
        reports = {}
        for name, body in (("declared", THROUGHPUT), ("timed", TIMED)):
            (root / name).mkdir()
            run_all(campaign(root / name, body, PROGRAM))
            reports[name] = report_of(name)
        yield reports


def test_strong_scaling_of_a_command_is_judged_on_its_declared_throughput(
    campaigns: dict[str, CampaignReport],
) -> None:
    """rate 100·√N: speedup √2 = 1.414 and efficiency √2/2 = 0.707 at 2 ranks, though its
    epoch time (1/N, which the old code divided) halves; the report says which."""
    rep = campaigns["declared"]
    cells = rep.cells.set_index(["args.lr", "ranks"])
    for lr in (1.0, 2.0):
        assert cells.loc[(lr, 2), "speedup"] == pytest.approx(math.sqrt(2))
        assert cells.loc[(lr, 2), "efficiency"] == pytest.approx(math.sqrt(2) / 2)
        assert cells.loc[(lr, 2), "speedup_on"] == "throughput"
    said = " ".join(section(rep, "efficiency").text)
    assert "judged on throughput" in said and "declared as `throughput:`" in said, said
    assert "judged on time" not in said, said
    table = section(rep, "efficiency").tables[0].frame
    assert list(table["Efficiency"].round(4)) == [1.0, 0.7071, 1.0, 0.7071]


def test_a_time_campaign_compares_and_draws_its_time(campaigns: dict[str, CampaignReport]) -> None:
    """Three repeats per cell: lr 2's time (1/(2N)) against lr 1's (1/N), each ± 2 ms of
    repeats: the [min, max] intervals do not overlap, so lr 2 is faster at both sizes."""
    rep = campaigns["timed"]
    runs = rep.runs
    scaling = section(rep, "scaling")
    (compare,) = [t for t in scaling.tables if t.key == "comparisons"]
    frame = compare.frame.set_index("Ranks")
    assert "Which setting is faster (time)" in compare.title
    for ranks in (1, 2):
        row = frame.loc[ranks]
        assert row["A"] == "args.lr 2" and "faster than" in row["Verdict"], row.to_dict()
        repeats = runs[(runs["ranks"] == ranks) & (runs["args.lr"] == 2.0)]["repeat"]
        want = statistics.median(epoch_time(ranks, 2.0, int(r)) for r in repeats)
        assert row["train_time_s (s) A"] == pytest.approx(want)
    assert "75 % with 3 repeats" in compare.note, compare.note  # [min, max] of 3: its level
    (plot,) = scaling.plots
    assert plot.title == "Time against scale"
    (ax,) = plot.figure.axes
    assert ax.get_ylabel() == "train_time_s (s)"
    drawn = sorted(tuple(line.get_ydata()) for line in ax.lines if len(line.get_ydata()) == 2)
    for lr in (1.0, 2.0):
        med = [
            statistics.median(
                epoch_time(n, lr, int(r))
                for r in runs[(runs["ranks"] == n) & (runs["args.lr"] == lr)]["repeat"]
            )
            for n in (1, 2)
        ]
        assert any(d == pytest.approx(med) for d in drawn), (med, drawn)  # measured
        assert any(d == pytest.approx([med[0], med[0] / 2]) for d in drawn)  # ideal T_1 / N


def test_predictions_carry_the_swept_argument(campaigns: dict[str, CampaignReport]) -> None:
    """Amdahl on T(N) = 1/(N·lr) + 0.001·r̄ (r̄ the mean repeat, the same at both sizes):
    serial part a = 0.001·r̄, b = 1/lr; so at 16 ranks 0.001·r̄ + 1/(16·lr), each on its lr."""
    rep = campaigns["declared"]
    (table,) = [t for t in section(rep, "extrapolation").tables if t.key == "predictions"]
    frame = table.frame
    assert "args.lr" in frame.columns, list(frame.columns)
    mean_repeat = statistics.mean(rep.runs["repeat"])
    at16 = frame[frame["Ranks"] == 16].set_index("args.lr")
    for lr in (1.0, 2.0):
        want = 0.001 * mean_repeat + 1.0 / (16 * lr)
        assert at16.loc[lr, "Predicted"] == pytest.approx(want, rel=1e-3)


def test_a_command_is_not_called_horovod_nor_its_curves_metrics_json(
    campaigns: dict[str, CampaignReport],
) -> None:
    rep = campaigns["declared"]
    strategies = set(section(rep, "efficiency").tables[0].frame["Strategy"])
    assert len(strategies) == 1 and not any(s.startswith("Horovod") for s in strategies)
    assert all(s.startswith("Your program (") for s in strategies), strategies
    said = " ".join(section(rep, "training").text)
    assert "metrics.json" not in said and "your program's output" in said, said


# Hand-set MLLOG stamps (whole milliseconds, as MLPerf writes them): one epoch of 1000 samples,
# timed 201 ms at 1 rank and {args.gap} ms at 2 ranks.
MLLOG_PROGRAM = """\
import json, os, sys
if int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))) != 0:
    sys.exit(0)
arg = dict(zip(sys.argv[1::2], sys.argv[2::2]))
took = 201 if arg["--ranks"] == "1" else int(arg["--gap"])
def log(key, t, kind="POINT_IN_TIME", value=None, **meta):
    rec = {"namespace": "", "time_ms": t, "event_type": kind, "key": key, "value": value,
           "metadata": meta}
    print(":::MLLOG " + json.dumps(rec), flush=True)
log("run_start", 1000, "INTERVAL_START")
log("epoch_start", 1000, "INTERVAL_START", epoch_num=1)
log("epoch_stop", 1000 + took, "INTERVAL_END", epoch_num=1, samples_count=1000)
log("run_stop", 1000 + took, "INTERVAL_END", status="success")
"""
MLLOG = """\
name: stamps
workload:
  command: [python, prog.py, --ranks, "{ranks}", --gap, "{args.gap}"]
  metrics: mllog
  throughput: images_per_s
  args: {gap: 100}
system: local
scaling: strong
matrix: {layout: ["1x1", "2x1"], batch: 8, args.gap: [100, 95]}
"""


def test_superlinear_allows_for_the_stamps_resolution(tmp_path: Path, workdir: Path) -> None:
    """1 ms stamps: 201 ms at 1 rank and 100 ms at 2 give efficiency 0.201 / (2·0.100) = 1.005,
    but the true times may be 200.x ms and 100.x ms: the efficiency may be as low as
    (0.201 − 0.001) / (2·(0.100 + 0.001)) < 1, so its bound is (1 + 1/100) / (1 − 1/201) =
    1.01505 and nothing is flagged. At 95 ms: 0.201 / 0.190 = 1.0579 > (1 + 1/95) / (1 − 1/201)
    = 1.01558: flagged."""
    run_all(campaign(tmp_path, MLLOG, MLLOG_PROGRAM))
    collected = collect_campaign(campaign_dir("stamps"))
    cells = derive(collected.frame).set_index(["args.gap", "ranks"])
    assert cells.loc[(100, 2), "efficiency"] == pytest.approx(0.201 / 0.200)
    assert cells.loc[(95, 2), "efficiency"] == pytest.approx(0.201 / 0.190)
    flags = quality_flags(collected.frame, collected.context)
    superlinear = {f.run_id for f in flags if f.kind == "superlinear"}
    gap = collected.frame.set_index("run_id")["args.gap"]
    assert superlinear and {int(gap[r]) for r in superlinear} == {95}, flags
    assert cells.loc[(100, 2), "efficiency_tolerance"] == pytest.approx(1.01 * 201 / 200 - 1)
    assert cells.loc[(95, 2), "efficiency_tolerance"] == pytest.approx((1 + 1 / 95) * 201 / 200 - 1)
    # the same 1.005 from a clock with nothing to allow for (no MLLOG stamps) is flagged
    bundled = collected.frame.assign(extractors="")
    flags = quality_flags(bundled, collected.context)
    assert {int(gap[f.run_id]) for f in flags if f.kind == "superlinear"} == {95, 100}
