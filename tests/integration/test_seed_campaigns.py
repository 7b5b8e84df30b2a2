"""Every study of the seeds (../shared/seeds/000-004) is a campaign in campaigns/ that plans, and
its run count and batch arithmetic are the seed's own table. Plan-only: nothing is rendered or
submitted, and the datasets the campaigns name (placeholders for where a user keeps them) are
never read."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hpcscale.api as hs
from hpcscale.model.run import Run
from hpcscale.model.targets import parse_target
from tests.conftest import CAMPAIGNS, hpcscale

Row = tuple[Any, ...]

# Campaigns that reproduce no seed (the demos'; own_program: a command).
NOT_SEEDS = {"quickstart", "quickstart_slurm", "own_program", "torch_vs_horovod"}

# --------------------------------------------------------------------------------------------
# The seeds' numbers. Each block cites the seed and the table or figure it copies.

# Seed 000, NcclAllReduce / ReductionToOneDevice tables (# GPUs 1, 2, 4, 8), "64 batch size,
# 5 epochs", weak: "as the number of GPUs increases, the global batch size is also scaled up".
SEED000_GPUS = (1, 2, 4, 8)
SEED000_BATCH_PER_GPU = 64
# Seed 000, Fig. 5: "2 V100 GPUs, NcclAllReduce, for 16, 32, 64 batch sizes".
SEED000_FIG5_BATCHES = (16, 32, 64)

# Seed 001, DCGAN and SNGAN scaling tables: (Weak/Strong, Nodes, Batch Size/Node), on CPU and
# GPU alike. (Its "Global Batch Size" column repeats 128 on the W rows; its throughput, e.g. 8 W
# CPU 1359.39 img/s at 149.04 s per 202,599-image epoch, is 128 per node on every node.)
SEED001_SCALING = (
    ("S", 1, 128), ("S", 2, 64), ("S", 4, 32), ("S", 8, 16),
    ("W", 1, 128), ("W", 2, 128), ("W", 4, 128), ("W", 8, 128),
)  # fmt: skip
# Seed 001, CPU computation/communication overlap table: (Nodes, Scaling, Model, Batch).
SEED001_CPU_OVERLAP = tuple(
    (n, s, m, b)
    for m in ("dcgan", "sngan")
    for n, s, b in (
        (2, "S", 64), (2, "W", 128), (4, "S", 32), (4, "W", 128), (8, "S", 16), (8, "W", 128),
    )
)  # fmt: skip
# Seed 001, single-node tables "Effect of batch size on throughput" (DCGAN, SNGAN, WGAN-GP).
SEED001_SINGLE_NODE_BATCHES = (8, 16, 32, 64, 128)
# Seed 001, Tensor Fusion tables: (cycle time ms, fusion buffer MB). CPU: 20 rows; GPU: 15
# rows (no 128 MB).
SEED001_CYCLES = (1, 3.5, 10, 25, 100)
SEED001_CPU_FUSION = tuple((c, f) for f in (32, 64, 128, 256) for c in SEED001_CYCLES)
SEED001_GPU_FUSION = tuple((c, f) for f in (32, 64, 256) for c in SEED001_CYCLES)
# Seed 001, FP16 / mixed precision: "64 fusion buffer size and cycle time of 3.5 ms, and a batch
# size of 32", rows No FP16/MP, FP16, MP: (fp16_allreduce, mixed_precision).
SEED001_FP16_ROWS = ((False, False), (True, False), (False, True))
# Seed 001, hierarchical all-reduce: "4 nodes with a batch size of 32 per node and a cycle time
# of 3.5 ms"; rows (TF buffer size, Hierarchical?).
SEED001_HIERARCHICAL_ROWS = ((32, True), (32, False), (64, True), (64, False))

# Seed 002: three CNNs; CPU 4 processes x 7 threads per node, GPU 1 per node; global batch 128.
SEED002_MODELS = ("resnet50", "inception_v3", "vgg16")
SEED002_NODES = (1, 2, 4, 8)
# Seed 002, Fig. 2: "1 process with 28 threads, 2 processes with 14 threads each and 4 processes
# with 7 threads each", batch fixed to 128.
SEED002_LAYOUTS = ((1, 28), (2, 14), (4, 7))

# Seed 003, Goyal et al.: "Mini-batch size per GPU: 32", 8 GPUs per server, eta = 0.1 x kn/256,
# "gradual warm up of learning rate from low to high value in 5 epochs".
SEED003_NODES = (1, 2, 4, 8)
SEED003_GPUS_PER_SERVER = 8

# Seed 004: fruits (models 1-2 and the Lab 9 single-GPU run) on 1, 2, 4 T4s; Caltech-256
# models 3-6: 2 T4, 4 T4, 4 V100, 8 V100; batch 32 everywhere.
SEED004_FRUIT_GPUS = (1, 2, 4)
SEED004_CALTECH = {"caltech256_t4": (2, 4), "caltech256_v100": (4, 8)}


# --------------------------------------------------------------------------------------------
# What the plans give, as comparable rows.


def plan(name: str) -> hs.Planned:
    return hs.plan(CAMPAIGNS / f"{name}.yaml")


def rows(name: str, row: Callable[[Run], Row]) -> Counter[Row]:
    return Counter(row(r) for r in plan(name).runs)


def exactly(*expected: Row) -> Counter[Row]:
    return Counter(expected)


def sw(run: Run) -> str:
    return {"strong": "S", "weak": "W"}[run.scaling]


def seed_campaigns() -> list[str]:
    return sorted(p.stem for p in CAMPAIGNS.glob("*.yaml") if p.stem not in NOT_SEEDS)


# Campaign -> the seed it reproduces (its description must say so).
SEED_OF = {
    "mirrored_reduction": "000",
    "stackgan_batch": "000",
    "dcgan_strong": "001",
    "dcgan_weak": "001",
    "sngan_strong": "001",
    "sngan_weak": "001",
    "gan_cpu_strong": "001",
    "gan_cpu_weak": "001",
    "gan_batch_sweep": "001",
    "fusion_sweep": "001",
    "fusion_sweep_cpu": "001",
    "fp16_mixed": "001",
    "hierarchical": "001",
    "mpi_flavour": "001",
    "cpu_layouts": "002",
    "cnn_batch_sweep": "002",
    "cnn_weak": "002",
    "cnn_strong": "002",
    "goyal_warmup": "003",
    "fruit_classifier": "004",
    "caltech256_t4": "004",
    "caltech256_v100": "004",
}


# --------------------------------------------------------------------------------------------
# Every campaign plans; every seed campaign is known here and names its seed and figure.


@pytest.mark.parametrize("path", sorted(CAMPAIGNS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_campaign_plans(path: Path) -> None:
    planned = hs.plan(path)
    assert planned.runs and len({r.run_id for r in planned.runs}) == len(planned.runs)
    assert planned.campaign.name == path.stem  # the file is named as its runs' directory


def test_every_seed_campaign_is_checked_here() -> None:
    """A campaign added to campaigns/ must say here which seed it reproduces (or be a demo)."""
    assert seed_campaigns() == sorted(SEED_OF)
    assert set(SEED_OF.values()) == {"000", "001", "002", "003", "004"}  # every seed


# Each study by what it is (its authors, as `init --list` shows them), not by its seed number.
STUDY_OF = {
    "000": "Ahmad & Cai",
    "001": "Vemparala Narayana Murthy",
    "002": "Chen, Liu, Isaacson & Xu",
    "003": "Goyal et al.",
    "004": "Nelson",
}


@pytest.mark.parametrize("name", sorted(SEED_OF))
def test_description_names_the_study_and_table_or_figure(name: str) -> None:
    text = plan(name).campaign.description
    assert text.startswith(STUDY_OF[SEED_OF[name]]) and "seed" not in text, text
    assert re.search(r"\btables?\b|\bFigs?\. \d|\bParts? \d", text), text


# --------------------------------------------------------------------------------------------
# Seed 000: StackGAN, MirroredStrategy on one 8-GPU node.


def test_seed000_mirrored_reduction_is_weak_scaling_64_per_gpu() -> None:
    got = rows(
        "mirrored_reduction",
        lambda r: (
            r.model, r.strategy, r.knob("cross_device_ops"), r.nodes, r.ranks, r.replicas,
            r.batch_per_rank, r.global_batch, r.epochs,
        ),
    )  # fmt: skip
    want = [
        ("stackgan", "mirrored", ops, 1, 1, g, SEED000_BATCH_PER_GPU, SEED000_BATCH_PER_GPU * g, 5)
        for ops in ("nccl", "reduce_to_one")  # NcclAllReduce, ReductionToOneDevice
        for g in SEED000_GPUS
    ]
    assert got == exactly(*want)
    assert len(plan("mirrored_reduction").runs) == 8


def test_seed000_fig5_batch_sweep_to_one_target_loss() -> None:
    planned = plan("stackgan_batch")
    got = Counter(
        (r.model, r.knob("cross_device_ops"), r.replicas, r.batch_per_rank, r.global_batch)
        for r in planned.runs
    )
    assert got == exactly(*[("stackgan", "nccl", 2, b, 2 * b) for b in SEED000_FIG5_BATCHES])
    [target] = planned.campaign.targets  # "the same target loss value" for every batch
    assert parse_target(target.target).goal == "min"
    assert target.placeholder  # the seed prints no value: the report labels it a placeholder


# --------------------------------------------------------------------------------------------
# Seed 001: GANs on Owens (one GPU or 28 cores per node), MVAPICH2-GDR.


@pytest.mark.parametrize(
    ("model", "device", "names"),
    [
        ("dcgan", "gpu", ("dcgan_strong", "dcgan_weak")),
        ("sngan", "gpu", ("sngan_strong", "sngan_weak")),
        ("dcgan", "cpu", ("gan_cpu_strong", "gan_cpu_weak")),
        ("sngan", "cpu", ("gan_cpu_strong", "gan_cpu_weak")),
    ],
)
def test_seed001_scaling_tables(model: str, device: str, names: tuple[str, str]) -> None:
    got: Counter[Row] = Counter()
    for name in names:
        for r in plan(name).runs:
            if r.model == model:
                assert (r.device, r.tasks_per_node, r.gpus_per_node) == (
                    device,
                    1,
                    1 if device == "gpu" else 0,
                )
                assert r.global_batch == r.batch_per_rank * r.nodes
                assert r.args["dataset_size"] == 202_599  # CelebA
                got[(sw(r), r.nodes, r.batch_per_rank)] += 1
    assert got == exactly(*SEED001_SCALING)


def test_seed001_cpu_runs_bind_28_threads_per_node() -> None:
    for name in ("gan_cpu_strong", "gan_cpu_weak", "fusion_sweep_cpu"):
        assert {(r.tasks_per_node, r.threads_per_task) for r in plan(name).runs} == {(1, 28)}


def test_seed001_cpu_overlap_table_comes_from_the_cpu_scaling_runs() -> None:
    have = {
        (r.nodes, sw(r), r.model, r.batch_per_rank): r.timeline
        for name in ("gan_cpu_strong", "gan_cpu_weak")
        for r in plan(name).runs
    }
    assert all(have.get(row) is True for row in SEED001_CPU_OVERLAP), SEED001_CPU_OVERLAP


def test_seed001_single_node_batch_tables() -> None:
    got = rows("gan_batch_sweep", lambda r: (r.model, r.device, r.nodes, r.ranks, r.global_batch))
    want = [
        (m, d, 1, 1, b)
        for m in ("dcgan", "sngan", "wgan_gp")
        for d in ("cpu", "gpu")
        for b in SEED001_SINGLE_NODE_BATCHES
    ]
    assert got == exactly(*want) and sum(got.values()) == 30


def test_seed001_fusion_tables() -> None:
    cpu = rows(
        "fusion_sweep_cpu", lambda r: (r.knob("cycle_time_ms"), r.knob("fusion_threshold_mb"))
    )
    assert cpu == exactly(*SEED001_CPU_FUSION)  # 20 rows
    gpu = rows("fusion_sweep", lambda r: (r.knob("cycle_time_ms"), r.knob("fusion_threshold_mb")))
    assert set(SEED001_GPU_FUSION) <= set(gpu) and sum(gpu.values()) == 20  # + 128 MB
    for name, device in (("fusion_sweep", "gpu"), ("fusion_sweep_cpu", "cpu")):
        shape = {(r.model, r.device, r.nodes, r.batch_per_rank, r.global_batch, r.mark_cycles)
                 for r in plan(name).runs}  # fmt: skip
        assert shape == {("dcgan", device, 4, 32, 128, True)}


def test_seed001_fp16_and_mixed_precision_settings() -> None:
    got = rows(
        "fp16_mixed",
        lambda r: (
            r.model, r.device, r.nodes, r.batch_per_rank, r.knob("fusion_threshold_mb"),
            r.knob("cycle_time_ms"), r.knob("fp16_allreduce"), r.mixed_precision,
        ),
    )  # fmt: skip
    assert got == exactly(*[("dcgan", "gpu", 4, 32, 64, 3.5, *row) for row in SEED001_FP16_ROWS])


def test_seed001_hierarchical_settings() -> None:
    got = rows(
        "hierarchical",
        lambda r: (
            r.model, r.nodes, r.batch_per_rank * r.tasks_per_node, r.knob("cycle_time_ms"),
            r.knob("fusion_threshold_mb"), r.knob("hierarchical_allreduce"),
        ),
    )  # fmt: skip
    assert got == exactly(*[("dcgan", 4, 32, 3.5, *row) for row in SEED001_HIERARCHICAL_ROWS])


def test_seed001_mpi_flavours_repeat_the_weak_gpu_table() -> None:
    got = rows("mpi_flavour", lambda r: (r.mpi, sw(r), r.nodes, r.batch_per_rank))
    want = [(m, *row) for m in ("mvapich2-gdr", "nccl") for row in SEED001_SCALING if row[0] == "W"]
    assert got == exactly(*want)


# --------------------------------------------------------------------------------------------
# Seed 002: ResNet50 / InceptionV3 / VGG16 on Owens.


def test_seed002_fig2_layouts() -> None:
    got = rows("cpu_layouts", lambda r: (r.model, r.tasks_per_node, r.threads_per_task,
                                         r.batch_per_rank, r.global_batch))  # fmt: skip
    want = [(m, t, th, 128 // t, 128) for m in SEED002_MODELS for t, th in SEED002_LAYOUTS]
    assert got == exactly(*want)


def test_seed002_figs3_4_single_node_batch_sweeps() -> None:
    planned = plan("cnn_batch_sweep")
    got = Counter((r.model, r.device, r.nodes, r.ranks, r.batch_per_rank, r.global_batch)
                  for r in planned.runs)  # fmt: skip
    # Fig. 3: CPU, the 4 x 7 layout of Fig. 2, global batch split over 4 ranks; Fig. 4: one GPU.
    # The text names the points 8, 64 and 128; the campaign sweeps the powers of two between
    # 4 (the smallest global batch 4 ranks share) and 128.
    batches = (4, 8, 16, 32, 64, 128)
    want = [
        (m, d, 1, ranks, b // ranks, b)
        for m in SEED002_MODELS
        for d, ranks in (("cpu", 4), ("gpu", 1))
        for b in batches
    ]
    assert got == exactly(*want)
    assert len(planned.runs) == 36


def test_seed002_figs5_8_weak_and_strong() -> None:
    # Weak (Figs. 5-6): "local batch size ... 32" on 4 CPU ranks per node, 128 per GPU.
    weak = rows("cnn_weak", lambda r: (r.model, r.device, r.nodes, r.ranks, r.batch_per_rank,
                                       r.global_batch))  # fmt: skip
    assert weak == exactly(
        *[(m, "cpu", n, 4 * n, 32, 128 * n) for m in SEED002_MODELS for n in SEED002_NODES],
        *[(m, "gpu", n, n, 128, 128 * n) for m in SEED002_MODELS for n in SEED002_NODES],
    )
    # Strong (Figs. 7-8): global 128; "1 node, the local batch size is 32 ... 2 nodes ... 16".
    strong = rows("cnn_strong", lambda r: (r.model, r.device, r.nodes, r.batch_per_rank,
                                           r.global_batch))  # fmt: skip
    assert strong == exactly(
        *[(m, "cpu", n, 32 // n, 128) for m in SEED002_MODELS for n in SEED002_NODES],
        *[(m, "gpu", n, 128 // n, 128) for m in SEED002_MODELS for n in SEED002_NODES],
    )


# --------------------------------------------------------------------------------------------
# Seed 003: Goyal et al.'s warm-up and linear scaling rule.


def scaled_lr(r: Run) -> float:
    """The rate the job runs at once warmed up: lr x global batch / lr_ref_batch (linear)."""
    assert r.args["lr_scaling"] == "linear"
    return float(r.args["lr"]) * r.global_batch / int(r.args.get("lr_ref_batch", r.batch_per_rank))


def test_seed003_goyal_warmup() -> None:
    planned = plan("goyal_warmup")
    got = Counter(
        (r.model, r.nodes, r.gpus_per_node, r.ranks, r.batch_per_rank, r.global_batch,
         r.args["warmup_epochs"])
        for r in planned.runs
    )  # fmt: skip
    g = SEED003_GPUS_PER_SERVER
    want = [
        ("resnet50", n, g, n * g, 32, 32 * n * g, w) for n in SEED003_NODES for w in (5, 0)
    ]  # 5 warm-up epochs, and none as the control
    assert got == exactly(*want)
    for r in planned.runs:  # eta = 0.1 x kn / 256
        assert scaled_lr(r) == pytest.approx(0.1 * r.global_batch / 256)


# --------------------------------------------------------------------------------------------
# Seed 004: the Keras/Horovod classifier on T4 and V100 GPUs.


def test_seed004_fruit_classifier() -> None:
    planned = plan("fruit_classifier")
    assert planned.system.name == "t4-4gpu" and planned.system.gpus_per_node == 4
    got = rows("fruit_classifier", lambda r: (r.model, r.nodes, r.ranks, r.batch_per_rank,
                                              r.global_batch, r.epochs))  # fmt: skip
    assert got == exactly(*[("classifier", 1, g, 32, 32 * g, 10) for g in SEED004_FRUIT_GPUS])
    for r in planned.runs:
        a = r.args
        assert (a["num_classes"], a["fine_tune"], a["augment"], a["optimizer"]) == (
            6,
            True,
            "seed004_fruits",
            "adam",
        )
        assert scaled_lr(r) == pytest.approx(0.1 * r.replicas)  # Adam(lr=0.1 * hvd.size())
        assert "val_dir" in a and not Path(str(a["data_dir"])).exists()  # a placeholder


@pytest.mark.parametrize("name", sorted(SEED004_CALTECH))
def test_seed004_caltech256(name: str) -> None:
    planned = plan(name)
    gpu = {"caltech256_t4": "t4-4gpu", "caltech256_v100": "dgx-v100"}[name]
    assert planned.system.name == gpu
    got = rows(name, lambda r: (r.nodes, r.ranks, r.batch_per_rank, r.global_batch, r.epochs))
    assert got == exactly(*[(1, g, 32, 32 * g, 30) for g in SEED004_CALTECH[name]])
    for r in planned.runs:
        a = r.args
        assert (a["num_classes"], a["val_split"], a["augment"]) == (257, 0.2, "seed004_caltech")
        assert not a.get("fine_tune", False)
        assert scaled_lr(r) == pytest.approx(1.0 * r.replicas)  # "scaled to the number of nodes"
    # Together: the seed's Caltech-256 models 3-6 on 2, 4, 4, 8 GPUs.
    all_gpus = sorted(g for gs in SEED004_CALTECH.values() for g in gs)
    assert all_gpus == [2, 4, 4, 8]


def test_seed004_validate_and_plan_json_need_no_data() -> None:
    """`validate` checks names and values; a data_dir on a cluster it cannot see is a warning
    (its placeholders: tests/integration/test_datapaths.py), so they plan here; `plan --json`
    gives the arithmetic checked above."""
    for name in ("fruit_classifier", "caltech256_v100"):
        path = str(CAMPAIGNS / f"{name}.yaml")
        proc = hpcscale("validate", path)
        assert proc.returncode == 0, proc.stderr
        runs = json.loads(hpcscale("plan", path, "--json", check=True).stdout)
        assert [(r["ranks"], r["global_batch"]) for r in runs] == [
            (r.ranks, r.global_batch) for r in plan(name).runs
        ]
