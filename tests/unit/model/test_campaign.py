"""Campaign loading, matrix expansion and scaling arithmetic (checked against the seeds' tables)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hpcscale.api import plan_campaign
from hpcscale.frameworks.horovod_tf import fusion_threshold_bytes
from hpcscale.model.errors import InputError
from hpcscale.model.scaling import (
    ScalingError,
    batches,
    fit_layout,
    parse_layout,
)
from tests.conftest import CAMPAIGNS


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


BASE = """\
name: t
workload: {model: dcgan, args: {image_size: 32}}
system: owens
scaling: weak
"""


@pytest.mark.parametrize("path", sorted(CAMPAIGNS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_campaigns_plan(path: Path) -> None:
    _, plan = plan_campaign(path)
    assert plan.runs, f"{path.name} expands to no runs"
    assert len({r.run_id for r in plan.runs}) == len(plan.runs)


def test_strong_scaling_divides_global_batch_like_seed_001() -> None:
    _, plan = plan_campaign(CAMPAIGNS / "dcgan_strong.yaml")
    table = {r.nodes: (r.global_batch, r.batch_per_rank) for r in plan.runs}
    assert table == {1: (128, 128), 2: (128, 64), 4: (128, 32), 8: (128, 16)}


def test_weak_scaling_keeps_per_rank_batch() -> None:
    _, plan = plan_campaign(CAMPAIGNS / "dcgan_weak.yaml")
    assert {r.nodes: (r.batch_per_rank, r.global_batch) for r in plan.runs} == {
        1: (128, 128),
        2: (128, 256),
        4: (128, 512),
        8: (128, 1024),
    }


def test_cnn_strong_cpu_four_ranks_per_node_like_seed_002() -> None:
    # seed 002: "4 processors per node ... 1 node, the local batch size is 32"
    _, plan = plan_campaign(CAMPAIGNS / "cnn_strong.yaml")
    cpu = {r.nodes: r.batch_per_rank for r in plan.runs if r.device == "cpu" and r.model == "vgg16"}
    assert cpu == {1: 32, 2: 16, 4: 8, 8: 4}


def test_cpu_layouts_fill_28_cores() -> None:
    _, plan = plan_campaign(CAMPAIGNS / "cpu_layouts.yaml")
    assert {(r.tasks_per_node, r.threads_per_task) for r in plan.runs} == {(1, 28), (2, 14), (4, 7)}
    assert all(r.tasks_per_node * r.threads_per_task == 28 for r in plan.runs)


def test_mirrored_replicas_are_gpus() -> None:
    _, plan = plan_campaign(CAMPAIGNS / "mirrored_reduction.yaml")
    # seed 000: weak scaling, 64 per GPU ("the global batch size is also scaled up")
    assert {(r.replicas, r.batch_per_rank, r.global_batch) for r in plan.runs} == {
        (1, 64, 64),
        (2, 64, 128),
        (4, 64, 256),
        (8, 64, 512),
    }
    assert all(r.ranks == 1 for r in plan.runs)


def test_scaling_functions() -> None:
    assert parse_layout("2x14").tasks_per_node == 2 and parse_layout("4×7").threads_per_task == 7
    assert batches("strong", 4, batch=128) == (32, 128)
    assert batches("weak", 4, batch=128) == (128, 512)
    assert batches("strong", 4, batch_per_rank=8) == (8, 32)
    with pytest.raises(ScalingError, match="does not divide evenly"):
        batches("strong", 3, batch=128)
    with pytest.raises(ScalingError, match="does not fit a 28-core node"):
        fit_layout(28, device="cpu", layout="4x8")
    assert fusion_threshold_bytes(64) == 64 * 1024 * 1024


def test_product_zip_exclude_where(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        BASE
        + textwrap.dedent("""\
    matrix:
      nodes: [1, 2, 4]
      device: gpu
      batch: [32, 64]
      zip:
        - {cycle_time_ms: [1, 10], fusion_threshold_mb: [32, 64]}
      exclude:
        - {nodes: 4, batch: 64}
      where: "global_batch < 128"
    repeats: 2
    """),
    )
    _, plan = plan_campaign(p)
    cells = {
        (r.nodes, r.batch_per_rank, r.knob("cycle_time_ms"), r.knob("fusion_threshold_mb"))
        for r in plan.runs
    }
    # 3 nodes x 2 batches x 2 zipped = 12; exclude drops (4, 64); where drops global >= 128
    assert cells == {
        (1, 32, 1, 32),
        (1, 32, 10, 64),
        (1, 64, 1, 32),
        (1, 64, 10, 64),
        (2, 32, 1, 32),
        (2, 32, 10, 64),
    }
    assert len(plan.runs) == 12  # two repeats each, distinct ids
    assert len({r.run_id for r in plan.runs}) == 12
    rules = {e.rule.split(":")[0] for e in plan.excluded}
    assert rules == {"exclude[0]", "where"}


def test_weak_scaling_needs_no_divisible_batch(tmp_path: Path) -> None:
    """Weak scaling keeps the per-rank batch: any node count works (3 nodes: 3 x 100)."""
    p = write(tmp_path, BASE + "matrix:\n  batch: 100\n  nodes: [1, 3]\n  device: gpu\n")
    _, plan = plan_campaign(p)
    assert [(r.nodes, r.batch_per_rank, r.global_batch) for r in plan.runs] == [
        (1, 100, 100),
        (3, 100, 300),
    ]


def test_run_ids_do_not_change_between_releases() -> None:
    """Ids name run directories and ledger rows of campaigns already running: these were
    handed out by earlier releases and must stay (a rename of a Run field must not move them)."""
    _, plan = plan_campaign(CAMPAIGNS / "quickstart.yaml")
    assert [r.run_id for r in plan.runs] == ["8acb114189", "c9ac5d5535"]
    _, plan = plan_campaign(CAMPAIGNS / "quickstart_slurm.yaml")
    assert [r.run_id for r in plan.runs] == ["aab32e9d3c", "66af1d138b"]


def test_ids_are_stable_across_loads(tmp_path: Path) -> None:
    a = [r.run_id for r in plan_campaign(CAMPAIGNS / "fusion_sweep.yaml")[1].runs]
    b = [r.run_id for r in plan_campaign(CAMPAIGNS / "fusion_sweep.yaml")[1].runs]
    assert a == b and len(set(a)) == 20


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        (BASE + "matrix:\n  nodez: [1, 2]\n", 6, "did you mean 'nodes'"),
        (BASE.replace("scaling: weak", "scaling: wek"), 4, "'weak', 'strong' or 'none'"),
        (BASE + "reapeats: 2\n", 5, "did you mean 'repeats'"),
        (BASE.replace("system: owens", "system: ownes"), 3, "did you mean 'owens'"),
        (
            "name: t\nworkload: {model: dcgan}\nsystem: owens\nscaling: strong\n"
            "matrix:\n  nodes: [1, 3]\n  device: gpu\n  batch: 128\n",
            8,
            "does not divide evenly",
        ),
        (BASE + "matrix:\n  layout: 4x8\n  device: cpu\n  batch: 8\n", 6, "does not fit"),
        (BASE + "matrix:\n  batch: 8\n  where: \"__import__('os')\"\n", 7, "cannot evaluate"),
        (
            "name: t\nworkload: !!python/object/apply:os.system ['true']\n",
            2,
            "unsupported YAML tag",
        ),
        ("name: [unclosed\n", 2, "invalid YAML"),
        (BASE + "matrix:\n  zip:\n    - {nodes: [1, 2], batch: [8]}\n", 7, "equal lengths"),
    ],
)
def test_bad_input_is_located(tmp_path: Path, body: str, line: int, needle: str) -> None:
    p = write(tmp_path, body)
    with pytest.raises(InputError) as info:
        plan_campaign(p)
    err = info.value
    assert err.file == str(p)
    assert needle in str(err)
    assert err.line == line, str(err)


def test_alias_bomb_is_bounded(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    p = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InputError, match="alias bomb"):
        plan_campaign(p)


@pytest.mark.parametrize("name", ["fusion_sweep.yaml", "mirrored_reduction.yaml", "cnn_weak.yaml"])
def test_fast_record_and_id_match_pydantic_serialisation(name: str) -> None:
    """as_record and run_id skip model_dump for speed; they must give exactly what it gives.
    `program` is hashed under its first name, `workload`, so ids rendered before the rename
    stay the same (ledgers and results of running campaigns keep matching)."""
    import hashlib

    import msgspec

    # the knobs every run had as fields before `knobs` held them, with their defaults then:
    # hashed (and recorded) flat, so no id changed
    legacy = {
        "cross_device_ops": None,
        "fusion_threshold_mb": None,
        "cycle_time_ms": None,
        "fp16_allreduce": False,
        "hierarchical_allreduce": False,
    }
    for run in plan_campaign(CAMPAIGNS / name)[1].runs:
        dumped = run.model_dump(mode="json")
        knobs = dumped.pop("knobs")
        dumped = {**dumped, **legacy, **knobs}
        hashed = {("workload" if k == "program" else k): v for k, v in dumped.items()}
        expected_id = hashlib.sha256(
            # cwd is where a command runs, not what; command, interpreter and trace_window are
            # hashed only when set (ids rendered before they existed stay the same)
            msgspec.json.encode(
                {
                    k: v
                    for k, v in hashed.items()
                    if k not in ("swept", "cwd")
                    and not (k in ("command", "interpreter", "trace_window") and v is None)
                },
                order="sorted",
            )
        ).hexdigest()[:10]
        assert run.run_id == expected_id
        dumped.update(run_id=expected_id, ranks=run.ranks, replicas=run.replicas)
        assert msgspec.json.decode(msgspec.json.encode(run.as_record())) == dumped
