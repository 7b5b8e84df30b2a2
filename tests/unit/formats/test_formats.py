"""hpcscale.formats: each file format and the job's command line, defined once and used by both
the writer and the reader. No runs here: the real files are checked in test_jobs/test_collect."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from hpcscale.formats.atomic import atomic_copy, atomic_write
from hpcscale.formats.run_record import (
    SCHEMA_VERSION,
    RunRecord,
    decode_run_record,
    encode_run_record,
    load_run_record,
)
from hpcscale.formats.steps import StepsFile, decode_steps, encode_steps, load_steps_file
from hpcscale.model.errors import InputError
from hpcscale.model.job_cli import JOB_FLAGS
from hpcscale.model.run import KNOB_DEFAULTS, Run
from hpcscale.model.vocab import KNOB_TERMS, TABLE_RUN_FIELDS
from jobs.steps import StepLog
from jobs.tf.train import build_parser

REPO = Path(__file__).resolve().parents[3]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _run(**update: Any) -> Run:
    fields: dict[str, Any] = {
        "campaign": "demo", "system": "local", "model": "dcgan", "scaling": "weak",
        "device": "cpu", "nodes": 2, "tasks_per_node": 2, "threads_per_task": 3,
        "gpus_per_node": 0, "batch_per_rank": 4, "global_batch": 16, "repeat": 1,
    }  # fmt: skip
    return Run(**{**fields, **update})


# ---------------------------------------------------------------- atomic writes


def test_atomic_write_text_and_bytes_get_the_umask_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.txt"
    atomic_write(target, "héllo\n")
    assert target.read_text() == "héllo\n"
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()
    atomic_write(target, b"\x00bytes", durable=True)
    assert target.read_bytes() == b"\x00bytes"
    atomic_write(target, "x", mode=0o755)
    assert target.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write(target, "old")
    with pytest.raises(TypeError):
        atomic_write(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_copy(tmp_path: Path) -> None:
    src = tmp_path / "src.json"
    src.write_bytes(b"[1, 2]" * 1000)
    os.chmod(src, 0o600)
    dst = tmp_path / "run" / "timeline.json"
    atomic_copy(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert dst.stat().st_mode & 0o777 == 0o666 & ~_umask()  # not the source's 0600
    atomic_copy(src, dst, mode=0o640, durable=True)
    assert dst.stat().st_mode & 0o777 == 0o640
    with pytest.raises(FileNotFoundError):
        atomic_copy(tmp_path / "missing", dst)
    assert sorted(p.name for p in dst.parent.iterdir()) == ["timeline.json"]


# ---------------------------------------------------------------- steps.json


def _log() -> StepLog:
    log = StepLog()
    log.burn_in(100, 200)
    for i, start in enumerate((300, 500, 700)):
        log.add(i // 2, i % 2, start, start + 150)
    return log


def test_steps_writer_and_reader_share_one_struct(tmp_path: Path) -> None:
    data = encode_steps(_log().to_file(rank=0))
    keys = list(json.loads(data))
    assert keys == ["format", "version", "rank", "hostname", "clock", "anchor",
                    "unix_offset_ns", "burn_in", "epoch", "step", "start_ns", "end_ns"]  # fmt: skip
    path = tmp_path / "steps.json"
    path.write_bytes(data)
    f = load_steps_file(path)
    assert isinstance(f, StepsFile) and f.format == "hpcscale.steps" and f.version == 1
    assert (f.epoch, f.step, f.start_ns) == ([0, 0, 1], [0, 1, 0], [300, 500, 700])
    assert f.unix_offset_ns == f.anchor.unix_ns - f.anchor.monotonic_ns
    assert f.burn_in.start_ns == [100]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "not an hpcscale.steps v1 file"),
        ({"version": 2}, "not an hpcscale.steps v1 file"),
        ({"end_ns": [1]}, "lists of different lengths"),
        ({"anchor": "now"}, "invalid steps file"),
        ({"format": None}, "invalid steps file"),
    ],
)
def test_bad_steps_files_name_the_file(change: dict[str, Any], message: str) -> None:
    good = json.loads(encode_steps(_log().to_file(rank=0)))
    with pytest.raises(InputError, match=message) as err:
        decode_steps(json.dumps({**good, **change}).encode(), "runs/x/steps.json")
    assert str(err.value).startswith("runs/x/steps.json")


def test_steps_reader_ignores_unknown_keys_but_needs_format() -> None:
    good = json.loads(encode_steps(_log().to_file(rank=0)))
    assert decode_steps(json.dumps({**good, "gpu": "A100"}).encode()).epoch == [0, 0, 1]
    del good["format"]  # but a file that does not say what it is is not ours
    with pytest.raises(InputError, match="invalid steps file"):
        decode_steps(json.dumps(good).encode())


# ---------------------------------------------------------------- run.json


def test_run_record_round_trips_a_run(tmp_path: Path) -> None:
    run = _run(args={"image_size": 16}, swept=("nodes",), fusion_threshold_mb=64)
    data = encode_run_record(run.as_record())
    assert data.startswith(b'{\n  "schema_version": 1,\n  "campaign": "demo",')
    assert data.endswith(b"}\n")
    path = tmp_path / "run.json"
    path.write_bytes(data)
    rec = load_run_record(path)
    assert rec.schema_version == SCHEMA_VERSION and rec.run_id == run.run_id
    assert (rec.ranks, rec.replicas, rec.program) == (4, 4, "train")
    assert rec.args == {"image_size": 16} and rec.swept == ["nodes"]
    assert rec.fusion_threshold_mb == 64.0
    fields = msgspec.structs.asdict(rec)
    del fields["schema_version"], fields["workload"], fields["campaign_version"]
    del fields["hpcscale_version"]
    record = json.loads(json.dumps(run.as_record()))
    # knobs added since the record's first version are written only when a run sets them;
    # read back, they hold their defaults
    unset = {k: KNOB_DEFAULTS[k] for k in fields.keys() - record.keys()}
    assert unset == {"bucket_cap_mb": None, "gradient_as_bucket_view": False,
                     "static_graph": False, "fp16_compress": False}  # fmt: skip
    assert fields == {**record, **unset}
    names = rec.names()
    assert names["image_size"] == 16 and names["nodes"] == 2 and "args" not in names


def test_run_record_fields_follow_the_run_model() -> None:
    """RunRecord cannot import the pydantic model (jobs import formats): this holds them
    together: same fields, same defaults, and every run column the table takes from it."""
    derived = {"schema_version", "run_id", "ranks", "replicas", "workload", "campaign_version"}
    derived.add("hpcscale_version")
    # the record is flat: the run's `knobs` are one field each (hpcscale.model.run.KNOB_DEFAULTS)
    flat = (set(Run.model_fields) - {"knobs"}) | set(KNOB_DEFAULTS)
    assert set(RunRecord.__struct_fields__) - derived == flat
    fields = {f.name: f for f in msgspec.structs.fields(RunRecord)}
    hints = typing.get_type_hints(RunRecord)
    for name, default in KNOB_DEFAULTS.items():
        assert fields[name].default == default, name
        if KNOB_TERMS[name].type != "str":  # a str knob may be a Literal of its choices
            wanted = {"float": float, "bool": bool, "int": int}[KNOB_TERMS[name].type]
            assert wanted in (typing.get_args(hints[name]) or (hints[name],)), name
    for name, info in Run.model_fields.items():
        if name == "knobs":
            continue
        f = fields[name]
        if info.is_required():
            assert f.required, name
        else:
            got = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
            want = info.get_default(call_default_factory=True)
            assert got == (list(want) if isinstance(want, tuple) else want), name
        if name != "swept":  # a tuple in the model, a JSON list in the file
            assert hints[name] == info.annotation, name
    assert set(TABLE_RUN_FIELDS) <= set(RunRecord.__struct_fields__)


def test_run_records_without_schema_version_are_version_1(tmp_path: Path) -> None:
    """Run directories rendered before schema_version was written, and before `program` had
    its name (`workload` then), still read."""
    old = _run().as_record()
    old["workload"] = old.pop("program")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(old))
    rec = load_run_record(path)
    assert rec.schema_version == 1 and rec.program == "train"


@pytest.mark.parametrize(
    ("content", "key", "message"),
    [
        (None, None, "cannot read run record"),
        (b"{not json", None, "not valid JSON"),
        (b"[1, 2]", None, "not an hpcscale run record (a JSON list without run_id)"),
        (b'{"schema_version": 1, "format": "hpcscale.steps"}', None, "not an hpcscale run record"),
        (b"new", "schema_version", "schema version 2 is not the supported 1 (written by a newer"),
        (b"bad", "nodes", "invalid run record: Expected `int`, got `str`"),
    ],
)
def test_bad_run_records_name_the_file_and_the_problem(
    tmp_path: Path, content: bytes | None, key: str | None, message: str
) -> None:
    path = tmp_path / "run.json"
    good = _run().as_record()
    if content == b"new":
        content = encode_run_record(good).replace(b'"schema_version": 1', b'"schema_version": 2')
    elif content == b"bad":
        content = encode_run_record({**good, "nodes": "two"})
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as err:
        load_run_record(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)
    assert err.value.key == key


def test_a_newer_run_record_is_refused_even_when_its_fields_fit() -> None:
    data = json.dumps({**_run().as_record(), "schema_version": 2}).encode()
    with pytest.raises(InputError, match="schema version 2"):
        decode_run_record(data)
    with pytest.raises(ValueError, match="schema_version 2"):
        encode_run_record({**_run().as_record(), "schema_version": 2})


# ---------------------------------------------------------------- the job's command line


# Each run and the words its job gets after `python jobs/tf/train.py`, written out by hand from the
# job's flags (job_cli.job_argv's order: model, run dir, batch, epochs, device, threads,
# strategy, --seed = the repeat unless `args` has its own, the mirrored pair, the switches, then
# the workload arguments sorted by name: True a bare switch, False left out). Data, not a copy
# of the code: a flag renamed, reordered, dropped or added fails here.
ARGV_CASES: list[tuple[Run, str]] = [
    (
        _run(),
        "--model dcgan --run-dir /r/abc --batch-per-rank 4 --epochs 1 --device cpu --threads 3 "
        "--strategy horovod --seed 1",
    ),
    (
        _run(
            timeline=True,
            mark_cycles=True,
            fp16_allreduce=True,
            mixed_precision=True,
            args={"image_size": 32, "check_sync": True, "debug_desync": False},
        ),
        "--model dcgan --run-dir /r/abc --batch-per-rank 4 --epochs 1 --device cpu --threads 3 "
        "--strategy horovod --seed 1 --fp16-allreduce --mixed-precision --timeline "
        "--mark-cycles --check-sync --image-size 32",
    ),
    (
        _run(
            strategy="mirrored",
            nodes=1,
            tasks_per_node=1,
            replicas_per_task=2,
            args={"seed": 7, "steps_per_epoch": 3, "lr": 0.001},
        ),
        "--model dcgan --run-dir /r/abc --batch-per-rank 4 --epochs 1 --device cpu --threads 3 "
        "--strategy mirrored --cross-device-ops reduce_to_one --devices 2 --lr 0.001 --seed 7 "
        "--steps-per-epoch 3",
    ),
    (
        _run(strategy="mirrored", nodes=1, tasks_per_node=1, cross_device_ops="nccl", device="gpu"),
        "--model dcgan --run-dir /r/abc --batch-per-rank 4 --epochs 1 --device gpu --threads 3 "
        "--strategy mirrored --seed 1 --cross-device-ops nccl --devices 1",
    ),
]
# What the parser must read back from each case's words (seed, cross-device ops, devices), by
# hand: the mirrored runs' defaults are the job's (reduce_to_one, one device).
PARSED = [
    {"seed": 1, "cross_device_ops": None, "devices": None},
    {"seed": 1, "cross_device_ops": None, "devices": None},
    {"seed": 7, "cross_device_ops": "reduce_to_one", "devices": 2},
    {"seed": 1, "cross_device_ops": "nccl", "devices": 1},
]
CASE_IDS = [str(i) for i in range(len(ARGV_CASES))]


@pytest.mark.parametrize(
    ("case", "parsed"), list(zip(ARGV_CASES, PARSED, strict=True)), ids=CASE_IDS
)
def test_the_jobs_parser_reads_the_pinned_words_back(
    case: tuple[Run, str], parsed: dict[str, Any]
) -> None:
    run, words = case
    ns = build_parser().parse_args(words.split())
    assert ns.model == run.model and ns.run_dir == Path("/r/abc")
    assert (ns.batch_per_rank, ns.epochs, ns.device, ns.threads, ns.strategy) == (
        run.batch_per_rank, run.epochs, run.device, run.threads_per_task, run.strategy
    )  # fmt: skip
    assert {k: getattr(ns, k) for k in parsed} == parsed
    for name in ("fp16_allreduce", "mixed_precision", "timeline", "mark_cycles"):
        assert getattr(ns, name) is run.value(name), name
    for key, value in run.args.items():
        assert getattr(ns, key) == value, key
    # every flag the job_cli defines is one the job's parser knows, under the same dest
    known = {a.dest: a.option_strings for a in build_parser()._actions}
    assert all(known[f.dest] == [f.flag] for f in JOB_FLAGS.values())


@pytest.mark.parametrize("case", ARGV_CASES, ids=CASE_IDS)
def test_job_argv_and_the_renderer_give_the_pinned_words(case: tuple[Run, str]) -> None:
    """Rendered scripts must not change: program_argv is the interpreter, the program, then
    exactly the pinned words."""
    from hpcscale.frameworks.tf_jobs import program_argv

    run, words = case
    system = SimpleNamespace(python="auto", jobs_dir=None)
    argv = [str(a) for a in program_argv(run, system, "/r/abc")]  # type: ignore[arg-type]
    assert argv[0] == sys.executable and argv[1] == str(REPO / "jobs" / "tf" / "train.py")
    assert argv[2:] == words.split()


def test_a_rendered_script_runs_the_pinned_command(tmp_path: Path) -> None:
    """campaigns/quickstart.yaml rendered for real: its 2-rank job's launch line, after
    jobs/tf/train.py, is these words (batch 16, epochs 2, layout 2x1 -> 1 thread, repeat 0 -> seed
    0, timeline on, its two workload arguments sorted), read from the campaign by hand."""
    from hpcscale.api import render_campaign

    _, _, rendered = render_campaign(REPO / "campaigns" / "quickstart.yaml", tmp_path)
    [two] = [r for r in rendered if r.run.ranks == 2]
    launch = (two.run_dir / "job.sbatch").read_text().splitlines()[-1]
    words = shlex.split(launch)
    tail = words[words.index(str(REPO / "jobs" / "tf" / "train.py")) + 1 :]
    pinned = (
        f"--model dcgan --run-dir {two.run_dir} --batch-per-rank 16 --epochs 2 --device cpu "
        "--threads 1 --strategy horovod --seed 0 --timeline --dataset-size 512 --image-size 32"
    )
    assert tail == pinned.split()


def test_formats_and_the_jobs_cli_import_without_heavy_packages() -> None:
    """jobs/ imports hpcscale.formats under TensorFlow: no pandas, pydantic or numpy there, and
    the job's parser builds without TensorFlow (a bad flag fails in milliseconds)."""
    code = (
        "import sys\n"
        "import hpcscale.formats.atomic, hpcscale.model.job_cli, hpcscale.formats.metrics\n"
        "import hpcscale.formats.run_record, hpcscale.formats.steps\n"
        "import jobs.steps, jobs.tf.train\n"
        "jobs.tf.train.build_parser()\n"
        "heavy = {'pandas', 'pydantic', 'numpy', 'tensorflow', 'yaml', 'jinja2'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=60).stdout  # fmt: skip
    assert out.strip() == "[]"
