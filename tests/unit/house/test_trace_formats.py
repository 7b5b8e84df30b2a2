"""Issue 30: a trace format is one package under collect/traces/ plus one line in
hpcscale.model.registry.TRACE_READERS. Nothing else names a format's label or phrase (the
report once worded sources from a table of the two formats' labels in analysis/overlap.py),
the API finds a run's format through the registry, and the collector reads one summary type
(collect/traces/base.TraceSummary) by plain attributes, never asking a summary with `getattr`
which parts its format has. A third format, registered here for the test only, is worded and
found without any other edit."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import ClassVar

import pytest

from hpcscale import api
from hpcscale.analysis.overlap import sources_phrase
from hpcscale.api import _trace_format
from hpcscale.collect.traces import reader
from hpcscale.collect.traces.base import Merged
from hpcscale.collect.traces.horovod import TimelineSummary
from hpcscale.collect.traces.torch import TorchTraceSummary
from hpcscale.model.registry import TRACE_READERS

PACKAGE = Path(__file__).resolve().parents[3] / "hpcscale"
REGISTRY = PACKAGE / "model" / "registry.py"
# what a summary's format may or may not have: the collector once asked each with getattr
OPTIONAL_PARTS = (
    "steps",
    "notes",
    "figures_rank",
    "bytes_known",
    "waits_known",
    "waits_unknown_why",
    "UNKNOWN_CATEGORIES",
)


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every string literal in a module (implicit concatenations joined)."""
    tree = ast.parse(path.read_text())
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_no_module_but_the_registry_names_a_trace_format_label() -> None:
    """A format's label (the `trace_source` value) and its phrase live in its registry line:
    a table of labels elsewhere would need an edit for every new format."""
    words = {reader(name).label for name in TRACE_READERS}
    words |= {p for line in TRACE_READERS.values() if (p := getattr(line, "phrase", None))}
    assert {"Horovod timeline", "PyTorch profiler"} <= words  # the registry is read
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != REGISTRY
        for line, value in _strings(path)
        if value in words
    ]
    assert found == []


def test_no_getattr_of_a_summary_part() -> None:
    """Every summary has TraceSummary's parts (with its defaults): asking for one by name
    with getattr hides a typo and a format that lacks it."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in OPTIONAL_PARTS
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_both_summaries_have_the_optional_parts() -> None:
    """A Horovod timeline's summary keeps TraceSummary's defaults (no step markers, every
    category, size and wait known, rank 0's figures, nothing to note); a profiler trace's
    starts with a window of steps and waits not yet known, and its own list of notes."""
    from hpcscale.collect.traces.base import TraceSummary

    hvd = TimelineSummary(path="t", size_bytes=0, format="chrome")
    assert TraceSummary in type(hvd).__mro__  # the defaults are TraceSummary's own
    got = {k: getattr(hvd, k) for k in OPTIONAL_PARTS}
    assert got == {
        "steps": None,
        "notes": (),
        "figures_rank": 0,
        "bytes_known": True,
        "waits_known": True,
        "waits_unknown_why": "",
        "UNKNOWN_CATEGORIES": (),
    }
    torch = TorchTraceSummary(path="d", size_bytes=0, format="kineto-json")
    assert TraceSummary in type(torch).__mro__
    assert (torch.steps, torch.notes, torch.waits_known, torch.figures_rank) == ([], [], False, 0)
    assert "negotiate" in torch.UNKNOWN_CATEGORIES
    other = TorchTraceSummary(path="d", size_bytes=0, format="kineto-json")
    torch.notes.append("x")
    assert other.notes == []  # each summary its own list


class PerfTrace:
    """A third trace format, for the test: RUN_DIR/perf.data (never read here)."""

    name: ClassVar[str] = "perf"
    label: ClassVar[str] = "perf record"
    file_name: ClassVar[str] = "perf.data"
    errors: ClassVar[tuple[type[Exception], ...]] = (OSError,)

    def path(self, run_dir: Path) -> Path:
        return run_dir / self.file_name

    def merge(self, run_dir: Path, out: Path) -> Merged:
        out.write_text("[]")
        return Merged(PerfMerged(out, 0, 0, False), [f"{self.file_name}: nothing to merge"])


@dataclasses.dataclass
class PerfMerged:
    out: Path
    records: int
    steps: int
    truncated: bool


@pytest.fixture
def third_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registry line a third format adds."""
    line = dataclasses.replace(
        TRACE_READERS["horovod"],
        where=f"{__name__}:PerfTrace",
        label=PerfTrace.label,
        phrase="the perf recordings",
    )
    monkeypatch.setitem(TRACE_READERS, "perf", line)


@pytest.mark.usefixtures("third_format")
def test_a_third_format_is_worded_from_its_registry_line() -> None:
    assert sources_phrase(["perf record"]) == "the perf recordings"
    assert sources_phrase(["Horovod timeline", "perf record", ""], per="row") == (
        "the Horovod timeline or the perf recordings (the From column says which per row)"
    )
    # the two formats of today, as the report has always worded them
    assert sources_phrase(["PyTorch profiler"]) == "the PyTorch profiler traces"
    assert sources_phrase(["Horovod timeline"]) == "the Horovod timeline"


@pytest.mark.usefixtures("third_format")
def test_a_run_without_run_json_gets_the_format_whose_trace_it_holds(tmp_path: Path) -> None:
    """No run.json to name the framework: the first registered format whose trace is in the
    run directory; none: the first registered (the Horovod timeline, then said missing)."""
    runs = {name: tmp_path / name for name in ("none", "hvd", "torch", "both", "perf")}
    for d in runs.values():
        d.mkdir()
    (runs["hvd"] / "timeline.json").write_text("[]")
    (runs["torch"] / "traces").mkdir()
    (runs["both"] / "timeline.json").write_text("[]")
    (runs["both"] / "traces").mkdir()
    (runs["perf"] / "perf.data").write_bytes(b"")
    got = {name: _trace_format(d) for name, d in runs.items()}
    assert got == {
        "none": "horovod",
        "hvd": "horovod",
        "torch": "torch",
        "both": "horovod",
        "perf": "perf",
    }


@pytest.mark.usefixtures("third_format")
def test_a_third_format_merges_through_its_reader(tmp_path: Path) -> None:
    """`hpcscale trace` asks the run's format's reader to merge (TraceReader.merge): the API
    names no format."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "perf.data").write_bytes(b"")
    traced = api.trace(run, tmp_path / "out.json")
    assert (traced.info.out, traced.warnings) == (
        tmp_path / "out.json",
        ["perf.data: nothing to merge"],
    )
    assert (tmp_path / "out.json").read_text() == "[]"


def test_timeline_help_names_the_default_frameworks_trace() -> None:
    """`timeline FILE` reads the default framework's format; its help, from the registry line,
    reads as it did when it was written out."""
    assert api.trace_file_words() == "a Horovod timeline (HOROVOD_TIMELINE output)"
