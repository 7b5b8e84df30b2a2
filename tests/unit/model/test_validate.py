"""Everything a job would reject is rejected by `validate`: exit 2, the file, line and key.

Each campaign below used to be accepted and fail only once its job started on the cluster (or
be run wrongly: a workload argument overriding what the plan and the report show).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcscale import api
from hpcscale.api import plan_campaign
from hpcscale.model.errors import InputError, UsageError
from hpcscale.model.job_cli import JOB_FLAGS
from hpcscale.model.vocab import RUN_TERMS
from tests.conftest import CAMPAIGNS, hpcscale

BASE = """\
name: t
workload:
  model: dcgan
  args: {image_size: 32}
system: owens
scaling: weak
matrix:
  batch: 8
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def refused(tmp_path: Path, text: str) -> InputError:
    p = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        plan_campaign(p)
    assert info.value.file == str(p)
    return info.value


def matrix(*lines: str) -> str:
    return BASE + "".join(f"  {ln}\n" for ln in lines)


def args(text: str) -> str:
    return BASE.replace("{image_size: 32}", text)


# (campaign, line, key, words the message must hold)
CASES = [
    (BASE.replace("model: dcgan", "model: gpt2"), 3, "workload.model", "unknown model 'gpt2'"),
    (
        BASE.replace("  model: dcgan", "  program: nosuch\n  model: dcgan"),
        3,
        "workload.program",
        "unknown program 'nosuch'",
    ),
    (args("{bogus_flag: 3}"), 4, "workload.args.bogus_flag", "--bogus-flag"),
    (args("{image_size: 8}"), 4, "workload.args.image_size", "at least 16"),
    (args("{image_size: 72}"), 4, "workload.args.image_size", "multiple of 16"),
    (args("{image_size: 64.0}"), 4, "workload.args.image_size", "expected an integer"),
    (args("{check_sync: 3}"), 4, "workload.args.check_sync", "switch"),
    (args("{lr: true}"), 4, "workload.args.lr", "not true"),
    (args("{lr: 0}"), 4, "workload.args.lr", "must be > 0"),
    (args("{dataset: csv}"), 4, "workload.args.dataset", "expected one of synthetic, folder"),
    (args("{lr_scaling: cubic}"), 4, "workload.args.lr_scaling", "one of linear, sqrt, none"),
    (args("{val_split: 1.0}"), 4, "workload.args.val_split", "must be < 1"),
    (args("{val_split: 0.2}"), 4, "workload.args.val_split", "needs a dataset on disk"),
    (args("{dataset: flat}"), 4, "workload.args.dataset", "needs --data-dir"),
    (matrix("args.image_size: [32, 72]"), 9, "matrix.args.image_size", "multiple of 16"),
    (matrix("args.bogus: [1, 2]"), 9, "matrix.args.bogus", "unknown workload argument"),
    (matrix("model: [dcgan, gpt2]"), 9, "matrix.model[1]", "unknown model 'gpt2'"),
    (
        matrix("model: [dcgan, inception_v3]"),
        4,
        "workload.args.image_size",
        "inception_v3 needs at least 75 px",
    ),
    (args("{batch_per_rank: 5, nodes: 99}"), 4, "workload.args.batch_per_rank", "set by hpcscale"),
    (args("{seed: 7}"), 4, "workload.args.seed", "repeats"),
    (matrix("time_limit_min: -5"), 9, "matrix.time_limit_min", "at least 1"),
    (matrix("time_limit_min: [30, 0]"), 9, "matrix.time_limit_min[1]", "0 as no limit"),
    (matrix("time_limit_min: 1000000"), 9, "matrix.time_limit_min", "at most 525600"),
    (matrix("tasks_per_node: 0"), 9, "matrix.tasks_per_node", "at least 1"),
    (matrix("nodes: true"), 9, "matrix.nodes", "expected an integer"),
    (matrix("nodes: [1, 2.5]"), 9, "matrix.nodes[1]", "expected an integer"),
    (matrix("device: cpu", "gpus_per_node: 1"), 10, "matrix.gpus_per_node", "no GPU"),
    (matrix("device: cpux"), 9, "matrix.device", "not one of cpu, gpu"),
    (matrix("fp16_allreduce: 1"), 9, "matrix.fp16_allreduce", "true or false"),
    (matrix("device: cpu", "tasks_per_node: 30"), 10, "matrix.tasks_per_node", "does not fit"),
    (matrix("device: cpu", "threads_per_task: 30"), 10, "matrix.threads_per_task", "does not fit"),
    (
        matrix("device: cpu", "strategy: mirrored", "replicas_per_task: 0"),
        11,
        "matrix.replicas_per_task",
        "at least 1",
    ),
    (
        matrix("device: cpu", "replicas_per_task: 2"),
        10,
        "matrix.replicas_per_task",
        "strategy: mirrored",
    ),
    (
        matrix("device: cpu", "zip:", "  - {nodes: [1, 2], tasks_per_node: [1, 30]}"),
        11,
        "matrix.zip[0].tasks_per_node",
        "does not fit",
    ),
    (matrix("device: cpu", "strategy: mirrored", "nodes: [1, 2]"), 11, "matrix.nodes", "one node"),
    (
        matrix("device: cpu", "strategy: mirrored", "cross_device_ops: nccl"),
        11,
        "matrix.cross_device_ops",
        "needs device: gpu",
    ),
    (
        matrix("strategy: mirrored") + "collect: {timeline: true}\n",
        10,
        "collect.timeline",
        "no Horovod timeline",
    ),
    (BASE + "collect: {mark_cycles: true}\n", 9, "collect", "needs timeline: true"),
    (matrix("where: 'nodes / 0'"), 9, "matrix.where", "division by zero"),
    (matrix("where: '[1][5]'"), 9, "matrix.where", "index out of range"),
    (matrix("where: '{}[1]'"), 9, "matrix.where", "no key 1"),
    (
        BASE + "references:\n  - {metric: effciency, value: 1}\n",
        10,
        "references[0].metric",
        "did you mean 'efficiency'",
    ),
    (
        BASE + "references:\n  - metric: efficiency\n    where: {rnks: 2}\n    value: 1\n",
        11,
        "references[0].where.rnks",
        "did you mean 'ranks'",
    ),
]


@pytest.mark.parametrize(("text", "line", "key", "needle"), CASES)
def test_a_job_would_reject_it_so_validate_does(
    tmp_path: Path, text: str, line: int, key: str, needle: str
) -> None:
    err = refused(tmp_path, text)
    assert (err.line, err.key) == (line, key), str(err)
    assert needle in err.message, str(err)


# Every flag hpcscale writes on the job's command line, and every run field (what `where:`,
# run.json and the report name): a workload argument of that name would shadow it.
SHADOWING = sorted({*JOB_FLAGS, *RUN_TERMS})


@pytest.mark.parametrize("name", SHADOWING)
def test_args_never_shadow_what_hpcscale_sets(tmp_path: Path, name: str) -> None:
    err = refused(tmp_path, args(f"{{{name}: 5}}"))
    assert (err.key, err.line) == (f"workload.args.{name}", 4), str(err)
    assert "set by hpcscale" in err.message
    err = refused(tmp_path, matrix(f"args.{name}: [1, 2]"))
    assert (err.key, err.line) == (f"matrix.args.{name}", 9), str(err)
    err = refused(tmp_path, matrix("exclude:", f"  - {{args.{name}: 1}}"))
    assert err.key == f"matrix.exclude[0].args.{name}", str(err)


def test_where_sees_run_fields_not_arguments_of_the_same_name() -> None:
    from hpcscale.model.where import holds

    fields = {"nodes": 2, "args": {"nodes": 99, "image_size": 32}}
    assert holds("nodes == 2 and image_size == 32", fields)


def test_repeats_still_differ_by_seed(tmp_path: Path) -> None:
    """`seed` is refused as an argument; each repeat runs with its own seed."""
    from hpcscale.frameworks.tf_jobs import program_argv
    from hpcscale.model.system import load_system

    _, plan = plan_campaign(write(tmp_path, BASE + "repeats: 3\n"))
    system = load_system("owens")
    seeds = []
    for run in plan.runs:
        argv = [str(a) for a in program_argv(run, system, tmp_path)]
        assert argv.count("--seed") == 1
        seeds.append(argv[argv.index("--seed") + 1])
    assert seeds == ["0", "1", "2"]


@pytest.mark.parametrize(
    ("extra", "line", "key", "needle"),
    [
        (
            ["nodes: [1, 2]", "exclude:", "  - {nodes: 3}"],
            11,
            "matrix.exclude[0]",
            "excludes nothing",
        ),
        (["nodes: [1, 2]", "where: 'nodes > 5'"], 10, "matrix.where", "keeps no run"),
    ],
)
def test_rules_that_shape_nothing_are_warnings(
    tmp_path: Path, extra: list[str], line: int, key: str, needle: str
) -> None:
    p = write(tmp_path, matrix(*extra))
    _, plan = plan_campaign(p)
    [warning] = plan.warnings
    assert warning.startswith(f"{p}:{line} [{key}]: ") and needle in warning, warning
    for command in ("validate", "plan"):
        proc = hpcscale(command, str(p))
        assert proc.returncode == 0, proc.stderr
        assert "warning:" in proc.stderr and needle in proc.stderr


def test_a_rule_that_excludes_something_is_not_warned_about(tmp_path: Path) -> None:
    _, plan = plan_campaign(write(tmp_path, matrix("nodes: [1, 2]", "exclude:", "  - {nodes: 2}")))
    assert plan.warnings == [] and len(plan.runs) == 1


def test_a_system_time_limit_beyond_a_year_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sys.yaml").write_text(
        "name: big\nscheduler: slurm\ncores_per_node: 2\ntime_limit_min: 10000000\n"
    )
    err = refused(tmp_path, BASE.replace("system: owens", "system: sys.yaml"))
    assert err.key == "system" and "525600" in err.message, str(err)


@pytest.mark.parametrize("depth", [150, 5000])
def test_deeply_nested_yaml_is_a_located_error(tmp_path: Path, depth: int) -> None:
    p = write(tmp_path, "name: " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(InputError, match="nested more than 100 levels") as info:
        plan_campaign(p)
    assert info.value.line == 1
    block = "a:\n" + "".join("  " * (i + 1) + "b:\n" for i in range(depth))
    p = write(tmp_path, block)
    with pytest.raises(InputError, match="nested more than 100 levels") as info:
        plan_campaign(p)
    assert info.value.line == 101


def test_validate_exits_2_with_the_location(tmp_path: Path) -> None:
    deep = write(tmp_path, "name: " + "[" * 5000 + "]" * 5000 + "\n", "deep.yaml")
    zero = write(tmp_path, matrix("where: 'nodes / 0'"), "zero.yaml")
    shadow = write(tmp_path, args("{batch_per_rank: 5, nodes: 99}"), "shadow.yaml")
    for p, where in ((deep, ":1:"), (zero, ":9 [matrix.where]"), (shadow, ":4 [workload.args")):
        proc = hpcscale("validate", str(p))
        assert proc.returncode == 2, proc.stderr
        assert f"{p}{where}" in proc.stderr.replace("\n", ""), proc.stderr
        assert "internal error" not in proc.stderr


def test_where_conditions_that_raise_say_what_failed() -> None:
    from hpcscale.model.where import ConditionError, holds

    for text, words in [
        ("nodes / 0", "division by zero"),
        ("[1][5]", "index out of range"),
        ("{}[1]", "no key 1"),
        ("nodes ==", "invalid syntax"),
    ]:
        with pytest.raises(ConditionError, match=words) as info:
            holds(text, {"nodes": 2})
        assert repr(text) in str(info.value)


def test_cancel_with_a_bad_condition_exits_2_with_no_run_active(
    tmp_path: Path, workdir: Path
) -> None:
    from hpcscale.state.ledger import Ledger

    rendered = api.render(CAMPAIGNS / "quickstart.yaml", workdir)
    with Ledger(rendered.directory) as ledger:  # rendered, never submitted: nothing active
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered.runs)
    proc = hpcscale("cancel", "quickstart", "--where", "nodes / 0")
    assert proc.returncode == 2, proc.stderr
    assert "division by zero" in proc.stderr


# -- backends that do not fit the system ---------------------------------------------------------


def test_a_backend_that_does_not_fit_the_system_is_refused() -> None:
    from hpcscale.model.system import load_system

    local, owens, slurm_local = (load_system(n) for n in ("local", "owens", "slurm-local"))
    with pytest.raises(UsageError, match="--system slurm-local"):
        api.backend_for(local, "slurm")
    with pytest.raises(UsageError, match="mpirun_rsh") as info:
        api.backend_for(owens, "local")
    assert "--system local" in str(info.value) and "modules" in str(info.value)
    assert api.backend_for(local, "local") == "local"
    assert api.backend_for(slurm_local, "slurm") == "slurm"
    assert api.backend_for(owens, "dry") == "dry"


def test_submit_with_a_backend_that_does_not_fit_exits_2(workdir: Path) -> None:
    proc = hpcscale("submit", str(CAMPAIGNS / "quickstart.yaml"), "--backend", "slurm")
    assert proc.returncode == 2, proc.stderr
    assert "--system slurm-local" in proc.stderr
    assert not (workdir / "quickstart" / "ledger.sqlite").exists()  # nothing submitted


# -- the workload declaration ---------------------------------------------------------------------


def test_workload_arguments_are_read_without_tensorflow_or_the_jobs_package() -> None:
    code = (
        "import sys, json; from hpcscale.model import workloads; "
        "names = [m.name for m in workloads.models()]; "
        "print(json.dumps([names, sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('jobs', 'tensorflow', 'horovod', 'keras'))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, loaded = json.loads(out.stdout)
    assert "dcgan" in names and "resnet50" in names
    assert loaded == []


def test_models_lists_models_and_their_arguments() -> None:
    proc = hpcscale("models", check=True)
    for needle in ("dcgan", "inception_v3", "image_size", "64", "square images", "n_critic"):
        assert needle in proc.stdout
    models = json.loads(hpcscale("models", "--json", check=True).stdout)
    by_name = {m["name"]: m for m in models}
    args = {a["name"]: a for a in by_name["wgan_gp"]["args"]}
    assert args["n_critic"]["default"] == 5 and args["n_critic"]["help"]
    assert "n_critic" not in {a["name"] for a in by_name["resnet50"]["args"]}
    assert by_name["inception_v3"]["min_image_size"] == 75


def test_reference_names_are_columns_the_report_derives() -> None:
    """What validate accepts in a reference is what the report's check can find."""
    import numpy as np
    import pandas as pd

    from hpcscale.analysis.derive import derive
    from hpcscale.analysis.references import METRIC_UNITS
    from hpcscale.collect.collector import COLUMNS
    from hpcscale.model.campaign import REFERENCE_KEYS, reference_metrics

    row = dict.fromkeys(COLUMNS, np.nan)
    row.update(
        run_id="a", campaign="c", model="dcgan", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=1, threads_per_task=1, gpus_per_node=0, ranks=1, batch_per_rank=8,
        global_batch=8, strategy="horovod", mpi="openmpi", repeat=0, epoch_time_s=1.0,
        images_per_s=8.0, fp16_allreduce=False, hierarchical_allreduce=False,
        mixed_precision=False, losses={}, epoch_times_s=[1.0], val_accuracy=None,
    )  # fmt: skip
    columns = set(derive(pd.DataFrame([row])).columns)
    assert set(REFERENCE_KEYS) <= columns
    assert reference_metrics() <= columns
    assert set(METRIC_UNITS) <= reference_metrics()


@pytest.mark.parametrize("path", sorted(CAMPAIGNS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_campaigns_still_validate(path: Path) -> None:
    _, plan = plan_campaign(path)
    assert plan.runs and plan.warnings == []


def _own_jobs(tmp_path: Path, manifest: str | None) -> Path:
    """A system profile whose runs use their own jobs directory (`jobs_dir`: a jobs root, the
    TensorFlow programs and their manifest in its tf/)."""
    jobs = tmp_path / "jobs"
    (jobs / "tf").mkdir(parents=True)
    (jobs / "tf" / "train.py").write_text("print('a stand-in')\n")
    if manifest is not None:
        (jobs / "tf" / "manifest.py").write_text(textwrap.dedent(manifest))
    system = tmp_path / "own.yaml"
    system.write_text(f"name: own\nscheduler: slurm\ncores_per_node: 2\njobs_dir: {jobs}\n")
    return system


def test_a_jobs_dir_without_a_manifest_declares_nothing(tmp_path: Path) -> None:
    """A system's own jobs directory (a stand-in program) declares no arguments: they go
    unchecked, but names hpcscale sets are still refused."""
    own = _own_jobs(tmp_path, None)
    text = args("{sleep: 3, fail: 'yes'}").replace("system: owens", f"system: {own}")
    _, plan = plan_campaign(write(tmp_path, text))
    assert plan.runs[0].args == {"sleep": 3, "fail": "yes"}
    err = refused(tmp_path, args("{epochs: 3}").replace("system: owens", f"system: {own}"))
    assert err.key == "workload.args.epochs"


def test_a_jobs_dir_with_its_own_manifest_is_the_one_checked(tmp_path: Path) -> None:
    from hpcscale.model.workloads import MANIFEST

    own = _own_jobs(tmp_path, MANIFEST.read_text().replace('"lr",', '"learning_rate",'))
    text = BASE.replace("system: owens", f"system: {own}")
    plan_campaign(write(tmp_path, text.replace("{image_size: 32}", "{learning_rate: 0.1}")))
    err = refused(tmp_path, text.replace("{image_size: 32}", "{lr: 0.1}"))
    assert err.key == "workload.args.lr" and "learning_rate" in err.message


def test_a_jobs_dir_in_the_old_flat_layout_is_refused(tmp_path: Path) -> None:
    """A site's copy of the bundled programs from before they moved into jobs/tf/ (manifest.py
    and train.py at its top): its scripts would name a tf/train.py that is not there, and its
    checks would be skipped, so validation says so instead of passing."""
    from hpcscale.model.workloads import MANIFEST

    own = _own_jobs(tmp_path, None)
    jobs = tmp_path / "jobs"
    (jobs / "tf" / "train.py").rename(jobs / "train.py")
    (jobs / "tf").rmdir()
    (jobs / "manifest.py").write_text(MANIFEST.read_text())
    with pytest.raises(InputError) as info:
        plan_campaign(write(tmp_path, BASE.replace("system: owens", f"system: {own}")))
    err = info.value  # located in the profile, at its key
    assert (err.file, err.line, err.key) == (str(own), 4, "jobs_dir")
    assert "old flat layout" in err.message and "tf/" in err.message
