"""Command workloads (issue 21): the user's own program, run for real under mpirun (np 1 and 2)
through the local backend, its figures read from its output by extractors, presets and MLLOG."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcscale.analysis import tables
from hpcscale.analysis.derive import derive
from hpcscale.collect.collector import load_results
from hpcscale.collect.traces.horovod import parse_timeline
from tests.command_fixture import campaign, run_all
from tests.conftest import REPO, hpcscale

CUSTOM = """\
name: custom
workload:
  command: python prog.py --lr "{args.lr}" --tag "{args.tag}"
  metrics:
    - {name: images_per_s, pattern: 'per-rank rate ([\\d.]+)', scale: per_rank, unit: images/s}
    - {name: step_rate, pattern: 'rate=(?P<value>[\\d.]+)', reduce: series, unit: samples/s}
    - {name: val_accuracy, pattern: 'val_acc=([\\d.]+)', reduce: series, source: train.log}
  throughput: images_per_s
  args: {lr: 1.0, tag: "$(touch HOSTILE); `touch HOSTILE2`"}
system: local
scaling: weak
matrix: {layout: ["1x1", "2x1"], batch: 4, args.lr: [1.0, 2.0]}
"""


def test_custom_extractors_per_rank_series_file_source_hostile_and_swept_args(
    tmp_path: Path, workdir: Path
) -> None:
    path = campaign(tmp_path, CUSTOM)
    run_all(path)
    df = load_results("custom")
    assert len(df) == 4
    for _, row in df.iterrows():
        lr, ranks = row["args.lr"], row["ranks"]
        assert row["images_per_s"] == pytest.approx(25.0 * lr * ranks)  # per_rank x ranks
        assert row["val_accuracy"] == [0.5, 0.75]  # a series from a file in the run directory
        # rank 0's own lines (ranks/0.out), not every rank's mixed (issue 27)
        assert list(row["step_rate"]) == [10.0 * lr, 20.0 * lr, 30.0 * lr]
        assert json.loads(row["metric_units"])["images_per_s"].startswith("images/s")
        out = (Path(row["run_dir"]) / "local.out").read_text()
        assert "$(touch HOSTILE); `touch HOSTILE2`" in out  # reached the program as text
    # the hostile value ran nothing, in the program's directory or the run's
    assert not list(tmp_path.rglob("HOSTILE*")) and not list(workdir.rglob("HOSTILE*"))
    cells = derive(df)
    assert sorted(cells["args.lr"]) == [1.0, 1.0, 2.0, 2.0]  # a swept argument: its own cells
    two = cells[cells["ranks"] == 2].set_index("args.lr")
    assert two.loc[2.0, "speedup"] == pytest.approx(2.0)  # against its own lr's baseline


def test_required_metric_that_never_matches_is_unparsed(tmp_path: Path, workdir: Path) -> None:
    """Only the 2-rank run's rank 0 prints `elapsed 7.000` (12 / 2 + 1): the 1-rank run is
    unparsed, the other kept."""
    extra = "    - {name: two_rank_elapsed, pattern: 'elapsed (7)\\.'}\n  throughput:"
    body = CUSTOM.replace("  throughput:", extra, 1).replace(", args.lr: [1.0, 2.0]", "")
    out = run_all(campaign(tmp_path, body), collect_rc=1)
    assert "unparsed" in out and "two_rank_elapsed" in out, out
    assert list(load_results("custom")["ranks"]) == [2]  # the table of the other runs
    report = hpcscale("report", "custom")
    md = (workdir / "custom" / "report" / "index.md").read_text()
    assert "unparsed: two_rank_elapsed" in md, report.stdout + report.stderr
    assert "no line matches" in md
    assert "0: step 2" in md  # the last lines of the output it searched


@pytest.mark.parametrize(
    ("command", "key", "message"),
    [
        ('[python, prog.py, "{rnaks}"]', "workload.command[2]", "did you mean '{ranks}'"),
        (
            "[python, prog.py]\n  metrics: [{name: x_per_s, pattern: 'rate=([0-9.]+'}]",
            "workload.metrics[0].pattern",
            "not a regular expression",
        ),
    ],
)
def test_validate_locates_placeholder_and_regex_errors(
    tmp_path: Path, command: str, key: str, message: str
) -> None:
    metrics = "" if "metrics" in command else "\n  metrics: horovod_synthetic"
    body = f"name: bad\nworkload:\n  command: {command}{metrics}\nsystem: local\n"
    proc = hpcscale("validate", str(campaign(tmp_path, body)))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.replace("\n", " ")
    assert "c.yaml:3" in err or "c.yaml:4" in err, err
    assert key in err and message.replace("'{ranks}'", "'ranks'") in err, err


def test_program_axes_are_refused_unless_passed_through(tmp_path: Path) -> None:
    body = (
        "name: bad\nworkload:\n  command: [python, prog.py{extra}]\n  metrics: horovod_synthetic\n"
        "system: local\nmatrix: {{fp16_allreduce: [true, false], batch: 4}}\n"
    )
    proc = hpcscale("validate", str(campaign(tmp_path, body.format(extra=""))))
    assert proc.returncode == 2 and "fp16_allreduce cannot be applied" in proc.stderr
    ok = hpcscale("validate", str(campaign(tmp_path, body.format(extra=', "{fp16_allreduce}"'))))
    assert ok.returncode == 0, ok.stderr


MLLOG_EXAMPLE = REPO / "campaigns" / "own_program.yaml"


def test_mpi4py_example_under_mllog(tmp_path: Path, workdir: Path) -> None:
    text = MLLOG_EXAMPLE.read_text().replace("cwd: ../examples", f"cwd: {REPO / 'examples'}")
    path = tmp_path / "own_program.yaml"
    path.write_text(text.replace("epochs: 3", "epochs: 2").replace('"20000"', '"4000"'))
    run_all(path)
    df = load_results("own_program").sort_values("ranks")
    assert list(df["ranks"]) == [1, 2]
    for _, row in df.iterrows():
        assert len(row["epoch_times_s"]) == 2 and row["images_per_s"] > 0
        assert len(row["val_accuracy"]) == 2 and len(row["train_loss"]) == 2
    hpcscale("report", "own_program", check=True)
    md = (workdir / "own_program" / "report" / "index.md").read_text()
    assert "Your program" in md and "mpi_numpy_logreg.py" in md and "mllog" in md
    assert "Learning curves" in md or "learning curve" in md.lower()


SYNTHETIC = """\
import timeit
import numpy as np
import tensorflow as tf
import horovod.tensorflow as hvd

hvd.init()
tf.config.threading.set_intra_op_parallelism_threads(1)
model = tf.keras.Sequential([tf.keras.layers.Dense(256, activation="relu"),
                             tf.keras.layers.Dense(10)])
opt = tf.optimizers.SGD(0.01)
data = tf.random.uniform([8, 512])
target = tf.random.uniform([8], minval=0, maxval=9, dtype=tf.int64)

@tf.function
def step(first):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            target, model(data, training=True), from_logits=True))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    if first:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)

step(True)
img_secs = []
for x in range(3):
    t = timeit.timeit(lambda: step(False), number=5)
    img_sec = 8 * 5 / t
    if hvd.rank() == 0:
        print("Iter #%d: %.1f img/sec per %s" % (x, img_sec, "CPU"), flush=True)
    img_secs.append(img_sec)
if hvd.rank() == 0:
    m, c = np.mean(img_secs), 1.96 * np.std(img_secs)
    print("Img/sec per %s: %.1f +-%.1f" % ("CPU", m, c))
    n = hvd.size()
    print("Total img/sec on %d %s(s): %.1f +-%.1f" % (n, "CPU", n * m, n * c))
"""


def test_horovod_synthetic_program_with_timeline(tmp_path: Path, workdir: Path) -> None:
    body = """\
    name: synth
    workload:
      command: [python, synth.py, --batch-size, "{batch_per_rank}"]
      metrics: horovod_synthetic
    system: local
    scaling: weak
    matrix: {layout: ["1x1", "2x1"], batch: 8}
    collect: {timeline: true}
    """
    said = run_all(campaign(tmp_path, body, SYNTHETIC, "synth.py"), timeline=True)
    # a program of the user's writes no steps.json: the note says what that means for it
    assert "per-epoch figures include start-up" not in said
    assert said.count("timeline figures cover the whole run, start-up included") == 2
    df = load_results("synth").set_index("ranks")
    totals = {}
    for ranks in (1, 2):
        out = (Path(df.loc[ranks, "run_dir"]) / "local.out").read_text()
        line = next(x for x in out.splitlines() if "Total img/sec" in x)
        totals[ranks] = float(line.split(": ")[1].split(" ")[0])
        assert df.loc[ranks, "images_per_s"] == totals[ranks]
    # its output gives no count of epochs: no per-epoch figure, never a guessed divisor
    assert math.isnan(df.loc[2, "comm_s"]) and df.loc[2, "span_s"] > 0
    cells = derive(load_results("synth"))
    assert cells.set_index("ranks").loc[2, "speedup"] == pytest.approx(totals[2] / totals[1])
    # no epoch times: the share is of the timeline's span (its own column, start-up included),
    # by hand: the run's whole communication (per epoch x epochs) over its span
    shares = tables.overhead_table(cells).set_index("Ranks")
    assert shares[tables.COMM_SHARE_LABEL].isna().all()
    tl = parse_timeline(Path(df.loc[2, "run_dir"]) / "timeline.json")
    assert tl.seconds("comm") > 0  # the user's own Horovod timeline, split
    by_hand = 100.0 * tl.seconds("comm") / df.loc[2, "span_s"]
    assert 0 < shares.loc[2, tables.COMM_SPAN_SHARE_LABEL] == pytest.approx(by_hand)


KERAS = """\
import numpy as np
import tensorflow as tf
from hpcscale import probe

x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=2, validation_split=0.25, verbose=0,
          callbacks=[probe.KerasCallback(batch_size=32)])
"""


def test_keras_fit_with_probe_callback(tmp_path: Path, workdir: Path) -> None:
    body = """\
    name: keras
    workload: {command: [python, fit.py], metrics: mllog}
    system: local
    matrix: {layout: "1x1", batch: 32}
    """
    run_all(campaign(tmp_path, body, KERAS, "fit.py"))
    (row,) = load_results("keras").to_dict("records")
    assert len(row["epoch_times_s"]) == 2 and row["images_per_s"] > 0
    assert len(row["val_accuracy"]) == 2 and len(row["train_loss"]) == 2
