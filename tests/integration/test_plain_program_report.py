"""What a plain user program's collect and report say (issue 29), met as a user meets them: the
CLI on real files, a tiny program run by mpirun at 1 and 2 ranks. One campaign's pattern reads
the program's rate; the other's never matches. Both share one workdir, run once for the module.
Expected values are what the program was told to print (tests.command_fixture.PRINTER)."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.command_fixture import campaign, run_all
from tests.conftest import hpcscale

BODY = """\
name: {name}
workload:
  command: [python, prog.py]
  metrics:
    - {{name: samples_per_s, pattern: '{pattern}', scale: per_rank, unit: samples/s}}
  throughput: samples_per_s
system: local
scaling: weak
matrix: {{layout: ["1x1", "2x1"], batch: 4}}
"""
MATCHES = r"per-rank rate ([\d.]+)"  # rank 0 prints `per-rank rate 25.0`
NEVER = r"throughput ([\d.]+)"  # the program prints no such line


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Campaigns `plain` (its pattern matches) and `nomatch` (never), submitted and collected;
    the workdir and each collect's output."""
    root = tmp_path_factory.mktemp("plain")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCSCALE_WORKDIR", str(root / "runs"))
        said = {"workdir": root / "runs"}
        for name, pattern, rc in (("plain", MATCHES, 0), ("nomatch", NEVER, 1)):
            (root / name).mkdir()
            path = campaign(root / name, BODY.format(name=name, pattern=pattern))
            said[name] = run_all(path, collect_rc=rc)
        yield said


def ranks_of(workdir: Path, name: str) -> dict[str, int]:
    """run id -> ranks, from each run's run.json."""
    return {
        d.name: json.loads((d / "run.json").read_text())["ranks"]
        for d in sorted((workdir / name / "runs").iterdir())
    }


def test_collect_prints_the_pattern_as_written_and_heads_the_table_with_the_metric(
    runs: dict,
) -> None:
    out = str(runs["nomatch"])
    assert f"pattern `{NEVER}`" in out, out  # one backslash, as the campaign wrote it
    assert "[\\\\d.]" not in out, out
    header = next(ln for ln in out.splitlines() if ln.startswith("run_id"))
    assert "samples_per_s" in header and "images_per_s" not in header, header
    # the last error line names each run once, without a dangling "last lines:"
    error = next(ln for ln in out.splitlines() if ln.startswith("error:"))
    assert "last lines" not in error, error


def test_report_of_a_pattern_that_never_matches(runs: dict) -> None:
    """`status` says COMPLETED; the report is written, and its Data quality names the metric,
    the pattern and both runs, with each run's last lines in a block of its own."""
    wd = runs["workdir"]
    status = hpcscale("status", "nomatch", check=True).stdout
    assert status.count("COMPLETED") >= 2, status
    proc = hpcscale("report", "nomatch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no finished runs to report on" not in proc.stderr
    assert "no run measured" in proc.stderr, proc.stderr
    md = (wd / "nomatch" / "report" / "index.md").read_text()
    assert (wd / "nomatch" / "report" / "index.html").is_file()
    ids = ranks_of(wd, "nomatch")
    one, two = sorted(ids, key=ids.get)  # the 1-rank run, the 2-rank run
    first, second = sorted(ids)
    said = (
        f"The metric `samples_per_s` (pattern `{NEVER}`) matched nothing in runs "
        f"{first} and {second}"
    )
    assert said in md, md
    for rid, other in ((one, two), (two, one)):
        block = run_block(md, rid)
        # rank 0 printed `elapsed 12/ranks + 1`: 13.000 at 1 rank, 7.000 at 2
        assert f"elapsed {12 / ids[rid] + 1:.3f}" in block, block
        assert f"elapsed {12 / ids[other] + 1:.3f}" not in block, block
        assert "0: step 2 rate=30.0" in block and "per-rank rate 25.0" in block


def run_block(md: str, rid: str) -> str:
    """The report's block of one run's last lines: from its heading to the next heading."""
    m = re.search(rf"\*\*Run {rid}: last lines of [^\n]*\*\*\n(.*?)(?=\n\*\*|\n## )", md, re.S)
    assert m, md
    return m.group(1)


def test_plain_program_results_and_report_say_nothing_of_horovod_gans_or_seeds(
    runs: dict,
) -> None:
    """A program with no framework, launched by mpirun: no `strategy=horovod` in results.csv,
    no Horovod, GAN losses or unknown workload kinds in its report, the studies named."""
    wd = runs["workdir"]
    with open(wd / "plain" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and [r["strategy"] for r in rows] == ["", ""], rows
    assert sorted(float(r["samples_per_s"]) for r in rows) == [25.0, 50.0]  # 25 x ranks
    proc = hpcscale("report", "plain", check=True)
    md = (wd / "plain" / "report" / "index.md").read_text()
    for words in ("horovod", "seed", "g_loss", "gan", "gans", "kind(s) unknown"):
        assert not re.search(rf"\b{re.escape(words)}(?!\w)", md, re.I), (words, md)
    assert "Ahmad & Cai" in md  # the scaling loss named after the study it comes from
    assert "samples_per_s (samples/s)" in proc.stdout


def test_help_names_no_seed() -> None:
    """Every command's help, as `hpcscale CMD --help` prints it: no "seed 00x", "seed reports"
    or "the seeds'" (a reader does not know the studies by number)."""
    from typer.main import get_command
    from typer.testing import CliRunner

    from hpcscale.cli.main import app

    def lines(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
        yield path
        for name, cmd in sorted(group.commands.items()):
            yield from lines(cmd, (*path, name)) if hasattr(cmd, "commands") else [(*path, name)]

    runner = CliRunner()
    for path in lines(get_command(app)):
        text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
        assert "Usage" in text, (path, text)
        assert not re.search(r"seed (report|0\d\d)|seeds'", text, re.I), (path, text)


@pytest.mark.parametrize(
    ("strategy", "command", "launcher", "column", "named"),
    [
        ("horovod", None, "mpirun", "horovod", "Horovod (openmpi)"),
        ("mirrored", None, "mpirun", "mirrored", "NcclAllReduce"),
        ("horovod", "python prog.py", "mpirun", "", "Your program (openmpi)"),
        ("horovod", "python prog.py", "horovodrun", "horovod", "Horovod (openmpi)"),
    ],
)
def test_strategy_column_of_bundled_and_own_programs(
    strategy: str, command: str | None, launcher: str, column: str, named: str
) -> None:
    """The bundled programs keep their strategy in the results; a user's program has none
    unless horovodrun launched it, and tables name it as the user's own."""
    from hpcscale.analysis.strategies import strategy_of
    from hpcscale.collect.run_row import run_fields
    from hpcscale.formats.run_record import RunRecord

    rec = RunRecord(
        campaign="c", system="local", model="prog", scaling="weak", device="cpu", nodes=1,
        tasks_per_node=2, threads_per_task=1, gpus_per_node=0, batch_per_rank=4,
        global_batch=8, run_id="r", ranks=2, replicas=2, strategy=strategy, command=command,
        launcher=launcher, cross_device_ops="nccl" if strategy == "mirrored" else None,
    )  # fmt: skip
    row = run_fields(rec)
    assert row["strategy"] == column
    assert strategy_of(row) == named
