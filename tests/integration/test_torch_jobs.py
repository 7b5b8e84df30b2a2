"""The PyTorch programs (jobs/torch/): each network has its Keras twin's parameter count, and a
real 2-rank DDP run on CPU/gloo, started by torchrun and by mpirun, all-reduces the known values
to their known sum, ends with the same weights on both ranks and writes a metrics.json and
steps.json that hpcscale's readers take unchanged.

Without torch these tests skip, unless HPCSCALE_REQUIRE_TORCH=1 (`make test` sets it: setup
installed torch, so a missing one is a failure there).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hpcscale.devcluster import loopback
from hpcscale.devcluster.probes import listening
from hpcscale.formats.metrics import load_metrics
from hpcscale.formats.steps import load_steps_file

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "jobs" / "torch" / "train.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
HAVE_TORCH = importlib.util.find_spec("torch") is not None
REQUIRE_TORCH = os.environ.get("HPCSCALE_REQUIRE_TORCH") == "1"
pytestmark = pytest.mark.skipif(
    not HAVE_TORCH and not REQUIRE_TORCH,
    reason="torch not installed (make setup installs it; HPCSCALE_REQUIRE_TORCH=1 fails here)",
)
# image 32, 64 images per epoch, 4 per rank: global batch 8, 64 // 8 = 8 steps
TINY = ["--model", "dcgan", "--image-size", "32", "--dataset-size", "64", "--batch-per-rank", "4",
        "--epochs", "1", "--width", "16", "--threads", "1", "--check-sync"]  # fmt: skip
KNOBS = ["--bucket-cap-mb", "1", "--gradient-as-bucket-view", "--static-graph", "--fp16-compress"]
# a launcher's variables in the test's own environment would tell the ranks who they are
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT", "TORCHELASTIC_", "OMPI_", "PMI_", "MV2_", "SLURM_",
               "PMIX_")  # fmt: skip


# ---------------------------------------------------------------- parameter counts


def _keras_counts(model: Any) -> dict[str, int]:
    """What the TF harness records (jobs/tf/harness.py `_param_counts`), counted by Keras."""
    import numpy as np

    def count(vs: list[Any]) -> int:
        return int(sum(np.prod(v.shape) for v in vs))

    return {"total": count(model.variables), "trainable": count(model.trainable_variables)}


def _keras_twins(case: str) -> dict[str, Any]:
    """The Keras networks exactly as jobs/tf/models/ builds them."""
    import tensorflow as tf

    if case.startswith("dcgan"):
        from jobs.tf.models.gan_parts import critic, generator

        px = int(case.split("_")[1])
        cfg = SimpleNamespace(image_size=px, width=64, latent_dim=100)
        bn = tf.keras.layers.BatchNormalization
        d = critic(cfg, "discriminator", norm=bn)
        return {"generator": generator(cfg, norm=bn), "discriminator": d}
    if case in ("resnet50", "vgg16"):
        from jobs.tf.models.cnn import APPLICATIONS

        net = APPLICATIONS[case](
            weights=None, input_shape=(32, 32, 3), classes=3, classifier_activation=None
        )
        return {case: net}
    from jobs.tf.models.classifier import build_model

    backbone = case.split("_", 1)[1]
    cfg = SimpleNamespace(image_size=32, weights="none", backbone=backbone, fine_tune=False)
    model, _ = build_model(cfg, 3)  # type: ignore[arg-type]
    return {"classifier": model}


def _torch_twins(case: str) -> dict[str, Any]:
    from jobs.torch.nets import build

    if case.startswith("dcgan"):
        return build("dcgan", int(case.split("_")[1]), width=64, latent_dim=100)
    if case in ("resnet50", "vgg16"):
        return build(case, 32, num_classes=3)
    return build("classifier", 32, num_classes=3, backbone=case.split("_", 1)[1])


@pytest.mark.parametrize(
    "case",
    ["dcgan_32", "dcgan_64", "resnet50", "vgg16", "classifier_resnet50", "classifier_vgg16"],
)
def test_each_network_has_its_keras_twins_parameter_count(case: str) -> None:
    """Trainable and total (with batch-norm moving statistics) counts, each side counted by its
    own framework, at the sizes the TF tests use (32 px, 3 classes; the GAN at both of its
    geometries, 3 and 4 up-samplings)."""
    pytest.importorskip("tensorflow")
    import tensorflow as tf
    import torch

    from jobs.torch.nets import param_counts

    keras = {name: _keras_counts(m) for name, m in _keras_twins(case).items()}
    tf.keras.backend.clear_session()
    nets = _torch_twins(case)
    ours = {name: param_counts(net) for name, net in nets.items()}
    assert ours == keras
    assert all(v["trainable"] > 0 for v in ours.values())
    # and each runs forward at that size: an image per noise vector, a logit or 3 per image
    px = int(case.split("_")[1]) if case.startswith("dcgan") else 32
    with torch.no_grad():
        for name, net in nets.items():
            x = torch.randn(2, 100) if name == "generator" else torch.rand(2, 3, px, px) * 2 - 1
            shape = {"generator": (2, 3, px, px), "discriminator": (2, 1)}.get(name, (2, 3))
            assert tuple(net.eval()(x).shape) == shape


# ---------------------------------------------------------------- launcher environment


def test_rank_and_world_come_from_each_launchers_variables() -> None:
    from jobs.torch.dist import DistUsageError, from_environ

    master = {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29411"}
    torchrun = from_environ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                             "LOCAL_WORLD_SIZE": "2", **master})  # fmt: skip
    assert (torchrun.rank, torchrun.world_size, torchrun.local_rank) == (3, 4, 1)
    assert (torchrun.master_addr, torchrun.master_port, torchrun.launcher) == (
        "10.0.0.7", 29411, "torchrun")  # fmt: skip
    ompi = from_environ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                         "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                         **master})  # fmt: skip
    assert (ompi.rank, ompi.world_size, ompi.local_world_size, ompi.launcher) == (
        1, 2, 2, "openmpi")  # fmt: skip
    pmi = from_environ({"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", **master})
    assert (pmi.rank, pmi.world_size, pmi.local_rank, pmi.launcher) == (5, 8, 1, "pmi")
    slurm = from_environ({"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
                          "SLURM_TASKS_PER_NODE": "2(x2)", **master})  # fmt: skip
    assert (slurm.rank, slurm.world_size, slurm.local_world_size) == (2, 4, 2)
    # torchrun's variables win over the SLURM ones around them (torchrun under srun)
    both = from_environ({"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
                         **master})  # fmt: skip
    assert (both.rank, both.launcher) == (0, "torchrun")
    single = from_environ({})
    assert (single.rank, single.world_size, single.master_addr, single.launcher) == (
        0, 1, "127.0.0.1", "single")  # fmt: skip
    with pytest.raises(DistUsageError, match="MASTER_ADDR is not set"):
        from_environ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    with pytest.raises(DistUsageError, match="MASTER_PORT is not set"):
        from_environ({"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_ADDR": "node1"})
    with pytest.raises(DistUsageError, match="outside"):
        from_environ({"RANK": "2", "WORLD_SIZE": "2", **master})


def test_the_store_on_a_loopback_master_listens_on_127_0_0_1_only() -> None:
    """torch's TCPStore would listen on every interface; the harness binds it itself."""
    import datetime

    from jobs.torch.dist import DistEnv, make_store

    store = make_store(
        DistEnv(0, 1, 0, 1, "127.0.0.1", 0, "single"), datetime.timedelta(seconds=30)
    )
    store.set("k", "v")
    assert store.get("k") == b"v"
    assert listening(store.port) == ["127.0.0.1"]


# ---------------------------------------------------------------- real 2-rank runs


# The launchers' own listeners (torchrun's rendezvous store, Open MPI's daemons) bind every
# interface: the local cluster's LD_PRELOAD shim keeps them on 127.0.0.1, refusing the IPv6
# wildcard so that torch's store falls back to IPv4 (hpcscale.devcluster.loopback.IPV6).
def ipv4_loopback_shim(where: Path) -> Path:
    return loopback.shim(where, ipv6="refuse")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    """Both launches at once (they share the machine's 2 cores either way): torchrun
    --standalone with the DDP knobs on, and mpirun -np 2 with MASTER_ADDR/MASTER_PORT given.
    The launchers' own listeners are kept on 127.0.0.1 by the shim above."""
    if not HAVE_TORCH or not TORCHRUN.exists():
        pytest.fail(f"torch or {TORCHRUN} missing")
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not installed")
    base = tmp_path_factory.mktemp("ddp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}
    env.update(
        LD_PRELOAD=str(ipv4_loopback_shim(base)),
        GLOO_SOCKET_IFNAME="lo",
        OMPI_MCA_oob_tcp_if_include="lo",
        OMPI_MCA_btl_tcp_if_include="lo",
        PYTHONUNBUFFERED="1",
    )
    cmds = {
        "torchrun": [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(TRAIN),
                     "--run-dir", str(base / "torchrun"), *TINY, *KNOBS],
        "mpirun": ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root",
                   "-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={_free_port()}",
                   "-x", "GLOO_SOCKET_IFNAME", sys.executable, str(TRAIN),
                   "--run-dir", str(base / "mpirun"), *TINY],
    }  # fmt: skip
    procs = {
        name: subprocess.Popen(
            cmd, cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for name, cmd in cmds.items()
    }
    out = {}
    for name, proc in procs.items():
        try:
            text, _ = proc.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
        out[name] = (SimpleNamespace(returncode=proc.returncode, output=text), base / name)
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_two_rank_ddp_run_writes_what_the_collector_reads(
    ddp_runs: dict[str, tuple[Any, Path]], launcher: str
) -> None:
    proc, run = ddp_runs[launcher]
    assert proc.returncode == 0, proc.output[-4000:]
    m = load_metrics(run / "metrics.json")
    assert (m.ranks, m.replicas, m.batch_per_rank, m.global_batch) == (2, 2, 4, 8)
    assert (m.steps_per_epoch, m.dataset_size, m.epochs, m.workload) == (8, 64, 1, "gan")
    assert len(m.epoch_time_s) == 1 and m.epoch_time_s[0] > 0
    assert m.images_per_s == pytest.approx([8 * 8 / t for t in m.epoch_time_s])
    assert m.fit_time_s == pytest.approx(sum(m.epoch_time_s))
    assert set(m.losses) == {"d_loss", "g_loss"} and all(len(v) == 1 for v in m.losses.values())
    assert set(m.params) == {"generator", "discriminator"}
    assert m.provenance.horovod is None
    steps = load_steps_file(run / "steps.json")
    assert len(steps.start_ns) == 8 and steps.epoch == [0] * 8 and steps.step == list(range(8))
    assert len(steps.burn_in.start_ns) == 1  # one untimed burn-in step
    ddp = json.loads((run / "ddp.json").read_text())
    assert ddp["strategy"] == "torch_ddp" and ddp["backend"] == "gloo"
    assert ddp["launcher"] == {"torchrun": "torchrun", "mpirun": "openmpi"}[launcher]
    assert sorted((r["rank"], r["local_rank"]) for r in ddp["ranks"]) == [(0, 0), (1, 1)]
    assert "epoch 1/1 time_s=" in proc.output


@pytest.mark.mpi
@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_ranks_all_reduce_the_known_sum_and_end_with_the_same_weights(
    ddp_runs: dict[str, tuple[Any, Path]], launcher: str
) -> None:
    """Rank r contributes r + 1: 1 + 2 = 3. Each rank trains on its own data (seed, rank) and
    noise (seed + rank), so only all-reduced gradients leave the weights equal."""
    proc, run = ddp_runs[launcher]
    assert proc.returncode == 0, proc.output[-4000:]
    ddp = json.loads((run / "ddp.json").read_text())
    assert ddp["allreduce_check"] == {"got": 3.0, "expected": 3.0}
    m = load_metrics(run / "metrics.json")
    assert m.sync_check is not None and m.sync_check.identical
    assert len(m.sync_check.digests) == 2 and len(set(m.sync_check.digests)) == 1


@pytest.mark.mpi
def test_the_ddp_knobs_reach_ddp_and_are_recorded(ddp_runs: dict[str, tuple[Any, Path]]) -> None:
    on = json.loads((ddp_runs["torchrun"][1] / "ddp.json").read_text())
    off = json.loads((ddp_runs["mpirun"][1] / "ddp.json").read_text())
    knobs = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "fp16_compress")
    assert [on[k] for k in knobs] == [1.0, True, True, True]
    assert [off[k] for k in knobs] == [25.0, False, False, False]
    assert load_metrics(ddp_runs["torchrun"][1] / "metrics.json").fp16_allreduce is True


def test_horovod_only_flags_are_refused_with_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}
    res = subprocess.run(
        [sys.executable, str(TRAIN), "--run-dir", str(tmp_path), *TINY, "--fp16-allreduce"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--fp16-allreduce does not apply to torch_ddp" in res.stderr
    assert "--fp16-compress" in res.stderr and "Traceback" not in res.stderr
