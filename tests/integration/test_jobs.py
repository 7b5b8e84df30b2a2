"""The workloads (jobs/tf/train.py) trained for real: `mpirun -np 2` of every model at tiny sizes
(but two CNNs, which share resnet50's training loop and run as one bare process), the mirrored
strategy over two logical CPU devices, and the failures a user can cause.

Each run is a module-scoped fixture shared by the assertions about it, so the file costs one
process group per model. No mocks: real TensorFlow, real Horovod over Open MPI, real timelines.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpcscale.formats.metrics import SCHEMA_VERSION, Metrics, load_metrics
from hpcscale.model.errors import InputError
from jobs.steps import clock_anchor, percentile
from jobs.tf.config import (
    gan_image_size_problem,
    process_world_size,
    scaled_lr,
    steps_per_epoch,
)

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "jobs" / "tf" / "train.py"
HAVE_HOROVOD = importlib.util.find_spec("horovod") is not None and shutil.which("mpirun")
needs_horovod = pytest.mark.skipif(not HAVE_HOROVOD, reason="Horovod or mpirun not installed")

TINY_GAN = ["--image-size", "16", "--width", "4", "--latent-dim", "8", "--batch-per-rank", "2"]
TINY = ["--epochs", "1", "--steps-per-epoch", "2", "--threads", "1", "--check-sync"]
# A deadlock must end the run, not the test session: Horovod aborts after a 2-minute stall.
STALL_ENV = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "20", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "120"}


def train(
    run_dir: Path, *args: str, np: int | None = 2, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Start train.py as the launcher would: under `mpirun -np N`, or bare when np is None."""
    env = {**os.environ, **STALL_ENV, "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, str(TRAIN), "--run-dir", str(run_dir), *args]
    if np is not None:
        exports = [x for name in STALL_ENV for x in ("-x", name)]
        cmd = ["mpirun", "-np", str(np), "--oversubscribe", "--allow-run-as-root", *exports, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """Horovod appends events on one line ending in '}]'; a run cut short may lack the ']'."""
    text = path.read_text().rstrip()
    if not text.endswith("]"):
        text = text.rstrip(",") + "]"
    return json.loads(text)


# -- real runs, shared between tests ----------------------------------------------------------


@pytest.fixture(scope="module")
def dcgan_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("dcgan")
    ok(train(run, "--model", "dcgan", *TINY_GAN, "--epochs", "2", "--steps-per-epoch", "3",
             "--threads", "1", "--check-sync", "--timeline", "--mark-cycles"))  # fmt: skip
    return run


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten small PNGs (odd size, resized by the pipeline) in two class folders."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    for i in range(10):
        folder = root / ("cats" if i % 2 else "dogs")
        folder.mkdir(exist_ok=True)
        Image.new("RGB", (20, 24), (i * 20, 255 - i * 20, 128)).save(folder / f"{i}.png")
    (root / "dogs" / "notes.txt").write_text("not an image")
    return root


@pytest.fixture(scope="module")
def sngan_run(tmp_path_factory: pytest.TempPathFactory, image_dir: Path) -> Path:
    run = tmp_path_factory.mktemp("sngan")
    ok(train(run, "--model", "sngan", *TINY_GAN, *TINY, "--data-dir", str(image_dir)))
    return run


@pytest.fixture(scope="module")
def wgan_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    run = tmp_path_factory.mktemp("wgan_gp")
    proc = train(run, "--model", "wgan_gp", *TINY_GAN, *TINY, "--n-critic", "5")
    return run, proc


CNN_SIZES = {"resnet50": "32", "vgg16": "32", "inception_v3": "75"}
# One CNN proves the custom loop's gradient sync at 2 ranks (the loop is the same for all three);
# the others are checked for building, training and writing their metrics in one bare process
# (no mpirun, one TensorFlow start instead of two: about half the CPU of a 2-rank run).
CNN_RANKS = {"resnet50": 2, "vgg16": 1, "inception_v3": 1}


@pytest.fixture(scope="module", params=sorted(CNN_SIZES))
def cnn_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int]:
    model = request.param
    run = tmp_path_factory.mktemp(model)
    ranks = CNN_RANKS[model]
    ok(train(run, "--model", model, "--image-size", CNN_SIZES[model], "--num-classes", "3",
             "--batch-per-rank", "2", *TINY, np=2 if ranks == 2 else None))  # fmt: skip
    return run, ranks


@pytest.fixture(scope="module")
def mirrored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("mirrored")
    ok(train(run, "--model", "dcgan", "--strategy", "mirrored", "--cross-device-ops",
             "reduce_to_one", "--devices", "2", *TINY_GAN, *TINY, np=None))  # fmt: skip
    return run


# -- what the runs must show ------------------------------------------------------------------


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_dcgan_np2_metrics_validate_and_describe_the_run(dcgan_run: Path) -> None:
    m = load_metrics(dcgan_run / "metrics.json")
    assert (m.schema_version, m.workload, m.model, m.strategy) == (1, "gan", "dcgan", "horovod")
    assert (m.ranks, m.replicas, m.batch_per_rank, m.global_batch) == (2, 2, 2, 4)
    assert (m.epochs, m.steps_per_epoch, m.dataset_size) == (2, 3, 12)
    assert len(m.epoch_time_s) == len(m.images_per_s) == len(m.epoch_cpu_s) == 2
    assert all(c > 0 for c in m.epoch_cpu_s)
    for t, ips in zip(m.epoch_time_s, m.images_per_s, strict=True):
        assert ips == pytest.approx(m.global_batch * m.steps_per_epoch / t)
    assert m.fit_time_s == pytest.approx(sum(m.epoch_time_s))
    assert set(m.losses) == {"d_loss", "g_loss"} and all(len(v) == 2 for v in m.losses.values())
    assert m.accuracy is None
    assert m.step_time.count == 6
    assert m.step_time.p50_ms <= m.step_time.p90_ms <= m.step_time.p99_ms
    assert set(m.params) == {"generator", "discriminator"}
    assert m.param_count == sum(p.trainable for p in m.params.values()) > 0
    assert m.lr_scaled == pytest.approx(2 * m.lr)
    prov = m.provenance
    assert prov.horovod == "0.28.1" and prov.tensorflow and prov.mpi and "Open MPI" in prov.mpi
    assert len(prov.hostnames) == 2
    assert prov.env["OMPI_COMM_WORLD_SIZE"] == "2"
    assert prov.env["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "20"
    assert prov.env["HOROVOD_TIMELINE_MARK_CYCLES"] == "1"


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_dcgan_np2_ranks_hold_identical_weights(dcgan_run: Path) -> None:
    sync = load_metrics(dcgan_run / "metrics.json").sync_check
    assert sync is not None and sync.identical and len(sync.digests) == 2


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_dcgan_np2_timeline_is_copied_and_parses(dcgan_run: Path) -> None:
    events = read_timeline(dcgan_run / "timeline.json")
    start = [e for e in events if "start_time_since_epoch_in_micros" in e.get("args", {})]
    assert len(start) == 1
    tensors = {e["args"]["name"] for e in events if e.get("name") == "process_name"
               and "name" in e.get("args", {})}  # fmt: skip
    assert any("DistributedGradientTape" in t for t in tensors)
    names = {e.get("name") for e in events}
    assert "MPI_ALLREDUCE" in names and "NEGOTIATE_ALLREDUCE" in names
    assert "CYCLE_START" in names  # --mark-cycles
    assert not list(dcgan_run.glob(".*.tmp"))  # atomic writes left nothing behind


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_dcgan_np2_steps_line_up_with_the_timeline(dcgan_run: Path) -> None:
    """steps.json's anchor maps rank 0's steps into the timeline's Unix-epoch microseconds: the
    gradient allreduces of the timed steps fall inside the timed steps' span."""
    steps = json.loads((dcgan_run / "steps.json").read_text())
    assert steps["format"] == "hpcscale.steps" and steps["rank"] == 0
    assert steps["epoch"] == [0, 0, 0, 1, 1, 1] and steps["step"] == [0, 1, 2, 0, 1, 2]
    assert len(steps["burn_in"]["start_ns"]) == 1
    pairs = list(zip(steps["start_ns"], steps["end_ns"], strict=True))
    assert all(s < e for s, e in pairs)
    assert all(e0 <= s1 for (_, e0), (s1, _) in itertools.pairwise(pairs))
    off = steps["unix_offset_ns"]
    lo, hi = (pairs[0][0] + off) / 1000, (pairs[-1][1] + off) / 1000
    events = read_timeline(dcgan_run / "timeline.json")
    t0 = next(e["args"]["start_time_since_epoch_in_micros"] for e in events
              if "start_time_since_epoch_in_micros" in e.get("args", {}))  # fmt: skip
    grad_pids = {e["pid"] for e in events if e.get("name") == "process_name"
                 and "DistributedGradientTape" in e.get("args", {}).get("name", "")}  # fmt: skip
    inside = [e for e in events if e.get("pid") in grad_pids and e.get("name") == "MPI_ALLREDUCE"
              and lo <= t0 + e["ts"] <= hi]  # fmt: skip
    # 6 timed steps x (G + D gradients): fusion may merge tensors, but each step reduces some.
    assert len(inside) >= 6


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_sngan_np2_reads_an_image_directory_sharded_by_rank(
    sngan_run: Path, image_dir: Path
) -> None:
    m = load_metrics(sngan_run / "metrics.json")
    assert m.model == "sngan" and m.data == str(image_dir)
    assert m.dataset_size == 10  # the text file is not an image
    assert m.steps_per_epoch == 2
    assert m.sync_check is not None and m.sync_check.identical
    assert not (sngan_run / "timeline.json").exists()  # not asked for


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_wgan_gp_np2_completes_without_stall_and_stays_in_sync(wgan_run: tuple[Path, Any]) -> None:
    run, proc = wgan_run
    ok(proc)
    assert "missing ranks" not in proc.stderr.lower()
    m = load_metrics(run / "metrics.json")
    assert set(m.losses) == {"c_loss", "w_distance", "g_loss"}
    assert set(m.params) == {"generator", "critic"}
    assert m.sync_check is not None and m.sync_check.identical


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_cnn_trains_and_stays_in_sync(cnn_run: tuple[Path, int]) -> None:
    run, ranks = cnn_run
    m = load_metrics(run / "metrics.json")
    assert m.workload == "cnn" and m.num_classes == 3 and m.ranks == ranks
    assert m.accuracy is None and m.train_accuracy is not None  # training, not validation
    assert all(0.0 <= a <= 1.0 for a in m.train_accuracy)
    assert list(m.losses) == ["loss"]
    assert m.param_count > 1_000_000  # the real applications network, not a stand-in
    assert m.sync_check is not None and m.sync_check.identical
    assert len(m.sync_check.digests) == ranks  # every rank's weights were compared


@pytest.mark.horovod
@pytest.mark.mpi
@needs_horovod
def test_sync_check_catches_diverged_ranks(tmp_path: Path) -> None:
    proc = train(tmp_path, "--model", "dcgan", *TINY_GAN, "--epochs", "1", "--steps-per-epoch",
                 "1", "--burn-in-steps", "0", "--threads", "1", "--debug-desync")  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "weights differ across ranks" in proc.stderr
    sync = load_metrics(tmp_path / "metrics.json").sync_check
    assert sync is not None and not sync.identical


@pytest.mark.horovod
@needs_horovod
def test_mirrored_reduce_to_one_over_two_cpu_devices_trains(mirrored_run: Path) -> None:
    m = load_metrics(mirrored_run / "metrics.json")
    assert (m.strategy, m.cross_device_ops, m.ranks, m.replicas) == ("mirrored", "reduce_to_one",
                                                                     1, 2)  # fmt: skip
    assert m.global_batch == 4
    assert m.sync_check is not None and m.sync_check.digests[0] == m.sync_check.digests[1]
    assert m.provenance.horovod is None


@pytest.mark.parametrize("ops", ["nccl", "hierarchical_copy"])
def test_gpu_only_cross_device_ops_fail_clearly_on_cpu(tmp_path: Path, ops: str) -> None:
    run = tmp_path / "run"
    proc = train(run, "--model", "dcgan", "--strategy", "mirrored", "--cross-device-ops", ops,
                 "--devices", "2", np=None, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--cross-device-ops {ops} needs GPUs" in lines[0]
    assert not run.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "dcgan_xl"], "invalid choice: 'dcgan_xl'"),
        (["--model", "inception_v3", "--image-size", "64"], "needs at least 75 px"),
        (["--model", "dcgan", "--image-size", "36"], "multiple of 8"),
        (["--model", "dcgan", "--devices", "2"], "--devices is for --strategy mirrored"),
        (["--model", "dcgan", "--mark-cycles"], "--mark-cycles needs --timeline"),
        (["--model", "dcgan", "--batch-per-rank", "0"], "must be >= 1"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    run = tmp_path / "run"
    proc = train(run, *args, np=None, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not run.exists()


def test_bad_model_under_mpirun_exits_2(tmp_path: Path) -> None:
    if not shutil.which("mpirun"):
        pytest.skip("mpirun not installed")
    proc = train(tmp_path / "run", "--model", "nope", np=2, timeout=120)
    assert proc.returncode == 2
    assert "invalid choice: 'nope'" in proc.stderr


def test_help_teaches_the_contract() -> None:
    out = subprocess.run([sys.executable, str(TRAIN), "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    for needle in ("--model", "--run-dir", "--cross-device-ops", "--timeline", "metrics.json",
                   "steps.json", "HOROVOD_FUSION_THRESHOLD", "exit codes"):  # fmt: skip
        assert needle in out


# -- pure pieces -----------------------------------------------------------------------------


def test_scaled_lr_ramps_linearly_to_base_times_replicas() -> None:
    """The default rule (linear, reference one replica's batch of 32): lr x replicas."""
    assert scaled_lr(0, 0.1, 0, 128, 32) == pytest.approx(0.4)
    assert scaled_lr(0, 0.1, 100, 128, 32) == pytest.approx(0.1)
    assert scaled_lr(50, 0.1, 100, 128, 32) == pytest.approx(0.25)
    assert scaled_lr(100, 0.1, 100, 128, 32) == pytest.approx(0.4)
    assert scaled_lr(1000, 0.1, 100, 128, 32) == pytest.approx(0.4)


def test_steps_per_epoch_is_whole_global_batches_unless_requested() -> None:
    assert steps_per_epoch(202599, 128, None) == 1582
    assert steps_per_epoch(10, 128, None) == 1
    assert steps_per_epoch(202599, 128, 7) == 7


def test_percentile_matches_numpy_linear() -> None:
    np = pytest.importorskip("numpy")
    values = sorted([5.0, 1.0, 9.0, 3.0, 7.5, 2.25])
    for q in (0, 10, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_gan_image_sizes() -> None:
    assert gan_image_size_problem(32) is None and gan_image_size_problem(64) is None
    assert gan_image_size_problem(48) is None
    assert "multiple of 16" in (gan_image_size_problem(72) or "")
    assert "at least 16" in (gan_image_size_problem(8) or "")


def test_parser_is_built_from_the_manifest() -> None:
    """The job's own arguments come from jobs/tf/manifest.py (what `hpcscale validate` and
    `hpcscale models` read), the flags hpcscale sets from hpcscale.model.job_cli."""
    from hpcscale.model.job_cli import JOB_FLAGS
    from jobs.tf.manifest import ARGS
    from jobs.tf.train import build_parser

    actions = {a.dest: a for a in build_parser()._actions if a.dest != "help"}
    assert set(actions) == set(ARGS) | set(JOB_FLAGS)
    for name, arg in ARGS.items():
        assert actions[name].option_strings == [arg.flag]
        assert actions[name].help == arg.help
        assert actions[name].default == (False if arg.type == "switch" else arg.default)


@pytest.mark.parametrize("model", ["dcgan", "wgan_gp", "resnet50", "inception_v3"])
def test_parser_and_validate_refuse_the_same_arguments(model: str) -> None:
    """One declaration, two readers: the job's parser and hpcscale's campaign check agree on
    every value (an image size the model cannot take, an out-of-range or mistyped value)."""
    from hpcscale.model.workloads import args_problem, manifest
    from jobs.tf.train import _problem, build_parser

    cases = [{"image_size": px} for px in (8, 16, 24, 36, 48, 64, 72, 75, 96, 224)]
    cases += [{"lr": 0}, {"lr": 1e-3}, {"burn_in_steps": -1}, {"width": "x"}, {"image_size": 64.0}]
    for args in cases:
        argv = ["--model", model, "--run-dir", "unused"]
        argv += [x for k, v in args.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        try:
            job_refuses = _problem(build_parser().parse_args(argv)) is not None
        except SystemExit as exc:
            job_refuses = exc.code == 2
        assert job_refuses == (args_problem(model, args, manifest()) is not None), (model, args)


def test_process_world_size_reads_the_launcher_environment() -> None:
    assert process_world_size({}) == 1
    assert process_world_size({"OMPI_COMM_WORLD_SIZE": "4"}) == 4
    assert process_world_size({"PMI_SIZE": "8"}) == 8


def test_clock_anchor_pairs_the_two_clocks() -> None:
    import time

    a = clock_anchor()
    assert a["uncertainty_ns"] >= 0
    assert abs((a["unix_ns"] - a["monotonic_ns"]) - (time.time_ns() - time.monotonic_ns())) < 1e9


def test_load_metrics_names_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "metrics.json"
    bad.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "workload": "gan"}))
    with pytest.raises(InputError) as err:
        load_metrics(bad)
    assert str(bad) in str(err.value) and "invalid metrics" in str(err.value)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_metrics(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_metrics(tmp_path / "missing.json")
    assert Metrics.__struct_fields__[0] == "schema_version"


@pytest.mark.horovod
def test_tensorflow_schedule_matches_the_pure_definition() -> None:
    pytest.importorskip("tensorflow")
    from jobs.tf.distribute import ScaledWarmup

    for warmup, rule in itertools.product((0, 40), ("linear", "sqrt", "none")):
        schedule = ScaledWarmup(0.01, warmup, 256, 32, rule)
        for step in (0, 1, 20, 39, 40, 100):
            want = scaled_lr(step, 0.01, warmup, 256, 32, rule)
            assert float(schedule(step)) == pytest.approx(want)
