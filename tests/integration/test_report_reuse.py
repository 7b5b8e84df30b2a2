"""A report rebuilt from the same data reuses the figures it drew last time, and never one drawn
from other data (#23: figures are most of a report's time); figures drawn in several processes
are the figures drawn in one; tables formatted once for Markdown and HTML read as before."""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from PIL import Image

from hpcscale.report import fmt
from hpcscale.report.build import build, write
from hpcscale.report.data import CampaignSource
from hpcscale.report.figures import render, reuse
from hpcscale.report.figures.fold import with_note
from hpcscale.report.figures.render import digest, draw, draw_all, stored_digest
from hpcscale.report.figures.reuse import reusing
from hpcscale.report.figures.style import axes_grid, new_figure, styled
from hpcscale.report.model import CampaignReport, Section, plot_if
from hpcscale.report.sections import campaign_report
from hpcscale.report.sections.scaling import system_max_nodes
from tests.integration.test_report import check_png, seed001_fusion, seed004
from tests.unit.analysis.test_analysis import seed000_frame


def reports(seed000: pd.DataFrame | None = None) -> list[CampaignReport]:
    """Three campaigns between them drawing every kind of figure the seeds have."""
    return [
        campaign_report(seed000_frame() if seed000 is None else seed000, "seed000"),
        campaign_report(seed001_fusion(), "fusion", max_nodes=system_max_nodes(None, Path("."))),
        campaign_report(seed004(), "seed004"),
    ]


def pngs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "figures").glob("*.png"))}


def pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGBA"))


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure drawn from now on, in this process (workers: one, so none is missed)."""
    drawn: list[Figure] = []
    real = render.draw

    def counting(fig: Figure, fig_digest: str | None = None) -> bytes:
        drawn.append(fig)
        return real(fig, fig_digest)

    monkeypatch.setattr(render, "draw", counting)
    monkeypatch.setattr(render, "MAX_WORKERS", 1)
    return drawn


def test_the_same_data_again_draws_no_figure(tmp_path: Path, draws: list[Figure]) -> None:
    first = write(reports(), tmp_path, ["md", "html"], stamp="now")
    drawn = len(draws)
    before, md, html = pngs(tmp_path), *(tmp_path / f"index.{x}" for x in ("md", "html"))
    texts = md.read_text(), html.read_text()
    assert drawn == sum(len(s.plots) for r in first.reports for s in r.sections) == len(before)
    assert drawn >= 5
    for png in before.values():
        check_png(png)
        assert stored_digest(png)  # the digest travels in the PNG itself

    write(reports(), tmp_path, ["md", "html"], stamp="now")
    assert len(draws) == drawn  # nothing drawn again
    assert pngs(tmp_path) == before  # the same files, byte for byte
    assert (md.read_text(), html.read_text()) == texts


def test_changed_data_is_drawn_again_never_a_stale_figure(
    tmp_path: Path, draws: list[Figure]
) -> None:
    """The stale-figure test: one epoch time changed must redraw exactly the figures showing
    it, each as a report drawn from scratch from the new data draws it."""
    write(reports(), tmp_path / "report", ["md"], stamp="now")
    old = pngs(tmp_path / "report")
    changed = seed000_frame()
    slowest = changed["epoch_time_s"].idxmax()
    changed.loc[slowest, "epoch_time_s"] *= 1.5
    del draws[:]
    write(reports(changed), tmp_path / "report", ["md"], stamp="now")
    reused = pngs(tmp_path / "report")
    write(reports(changed), tmp_path / "fresh", ["md"], stamp="now")  # nothing to reuse there
    fresh = pngs(tmp_path / "fresh")
    assert reused == fresh  # what was reused is what the new data draws
    redrawn = {n for n in fresh if fresh[n] != old[n]}
    assert redrawn and all(n.startswith("seed000-") for n in redrawn)
    assert all(not np.array_equal(pixels(old[n]), pixels(fresh[n])) for n in redrawn)
    assert len(draws) == len(redrawn) + len(fresh)  # the rebuild drew only what changed


def test_any_change_to_a_built_figure_changes_its_digest() -> None:
    """A label relabelled after the figure function returned, a colour, a data point, the
    global rcParams read at draw time: each is a new digest; the same content is the same."""
    fig = reports()[0].sections[0].plots[0].figure
    ax = fig.axes[0]
    seen = [digest(fig)]
    assert seen[0] is not None and digest(fig) == seen[0]
    ax.set_ylabel(ax.get_ylabel() + " (samples/s)")
    seen.append(digest(fig))
    line = ax.get_lines()[0]
    line.set_color("#000000")
    seen.append(digest(fig))
    y = np.array(line.get_ydata(), float)
    y[0] *= 1.001
    line.set_ydata(y)
    seen.append(digest(fig))
    import matplotlib

    with matplotlib.rc_context({"lines.antialiased": False}):
        seen.append(digest(fig))
    assert len(set(seen)) == len(seen)


def test_digests_agree_across_processes() -> None:
    """A cached report is another process: the digest must not depend on ids or hash seeds."""
    code = (
        "from tests.integration.test_report_reuse import reports;"
        "from hpcscale.report.figures import render;"
        "print(' '.join(render.digest(p.figure) for r in reports() for s in r.sections "
        "for p in s.plots))"
    )
    repo = Path(__file__).resolve().parents[2]
    seed = str(int(os.environ.get("PYTHONHASHSEED", "0") or "0") + 1)  # not this one's
    theirs = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": seed},
    ).stdout.split()
    mine = [digest(p.figure) for r in reports() for s in r.sections for p in s.plots]
    assert theirs == mine and None not in mine


def test_a_figure_that_does_not_pickle_is_drawn_every_time(tmp_path: Path) -> None:
    fig = Figure(figsize=(3, 2), layout="constrained")
    ax = fig.subplots()
    ax.plot([1, 2, 3], [2, 1, 3])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.1f} u"))  # a local lambda
    assert digest(fig) is None
    other = Figure(figsize=(3, 2), layout="constrained")
    other.subplots().plot([1, 2, 3], [3, 2, 1])  # the file it replaces shows something else
    old = tmp_path / "old.png"
    old.write_bytes(draw(other))
    assert stored_digest(old.read_bytes()) is None
    assert render.figure_pngs([fig], [old]) == [draw(fig)]


def test_stored_digest_reads_only_our_chunk() -> None:
    fig = reports()[0].sections[0].plots[0].figure
    png = draw(fig, "abc123")
    assert stored_digest(png) == "abc123"
    assert stored_digest(draw(fig)) is None
    assert stored_digest(b"not a png") is None
    assert stored_digest(png[:40]) is None  # cut short: no chunk read past the end


def test_figures_drawn_in_several_processes_are_those_drawn_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each on figures just built (a figure drawn twice moves a little: constrained layout
    starts from where it last left the axes, in `savefig` too)."""
    figures = [p.figure for r in reports() for s in r.sections for p in s.plots]
    digests = [digest(f) for f in figures]
    monkeypatch.setattr(render, "MAX_WORKERS", 3)
    assert render.workers(len(figures)) == min(3, len(os.sched_getaffinity(0)))
    parallel = draw_all(figures, digests)
    again = [p.figure for r in reports() for s in r.sections for p in s.plots]
    assert parallel == [draw(f, d) for f, d in zip(again, digests, strict=True)]


@pytest.mark.timeout(120)
def test_a_worker_that_never_answers_is_stopped_and_its_figures_drawn_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker stuck at the fork (a lock another thread held) must not hang the report. The
    hang is simulated (a real one needs a lock held at the fork, which no test can time): the
    forked worker sleeps instead of drawing."""
    figures = [p.figure for r in reports() for s in r.sections for p in s.plots][:4]
    real_take = render._take
    parent = os.getpid()

    def stuck_in_children(work: int, figs: list[Figure], digests: list[str | None]) -> dict:
        if os.getpid() != parent:
            time.sleep(3600)
        return real_take(work, figs, digests)

    monkeypatch.setattr(render, "_take", stuck_in_children)
    monkeypatch.setattr(render, "MIN_WAIT_S", 1.0)
    monkeypatch.setattr(render, "workers", lambda count: 2)
    out = draw_all(figures, [None] * len(figures))
    again = [p.figure for r in reports() for s in r.sections for p in s.plots][:4]
    assert out == [draw(f) for f in again]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, fmt.MISSING),
        (math.nan, fmt.MISSING),
        (np.float64("nan"), fmt.MISSING),
        (np.float32("nan"), fmt.MISSING),  # read "nan" before: missing, as every NaN
        (math.inf, "∞"),
        (-math.inf, "-∞"),
        (True, "yes"),
        (np.bool_(False), "False"),  # as it always read (not a bool, not a number)
        (12345, "12,345"),
        (np.int64(-9999), "-9999"),
        (3.0, "3"),
        (np.float32(20000.0), "20,000"),
        (12345.6, "12,346"),
        (123.456, "123.5"),
        (np.float64(1.234), "1.23"),
        (0.012345, "0.0123"),
        ("text", "text"),
        (pd.Timestamp("2024-01-02"), "2024-01-02 00:00:00"),
        (1e16, "10,000,000,000,000,000"),
        (-0.0, "0"),
    ],
)
def test_cells_read_as_before(value: object, shown: str) -> None:
    assert fmt.cell(value) == shown


def test_tables_are_formatted_once_while_the_formats_share_them() -> None:
    frame = pd.DataFrame({"a": [1.0, 2.5], "b": [None, None], "c": ["x", "y"]})
    alone = fmt.display(frame)
    assert list(alone.columns) == ["a", "c"] and alone["a"].tolist() == ["1", "2.50"]
    with fmt.shared_display():
        first = fmt.display(frame)
        assert fmt.display(frame) is first
        assert fmt.display(frame, drop_empty=False) is not first
        assert fmt.display(frame.copy()) is not first
    assert first.equals(alone)
    assert fmt.display(frame) is not first  # outside it, formatted afresh


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every matplotlib Figure constructed from now on, in this process."""
    made: list[Figure] = []
    real = Figure.__init__

    def counting(self: Figure, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "__init__", counting)
    monkeypatch.setattr(render, "MAX_WORKERS", 1)
    return made


def build_seeds(out: Path, frames: dict[str, pd.DataFrame]) -> list[Path]:
    """`report.build.build` of campaigns given as run tables (their directories empty)."""
    sources = {}
    for name in frames:
        (out.parent / "campaigns" / name).mkdir(parents=True, exist_ok=True)
        sources[out.parent / "campaigns" / name] = CampaignSource(
            name, out.parent / "campaigns" / name
        )
    result = build(list(sources), out, ["md", "html"], sources=sources,
                   load=lambda src: frames[src.name].copy())  # fmt: skip
    return result.paths


def test_a_report_of_unchanged_data_builds_no_figure(tmp_path: Path, built: list[Figure]) -> None:
    """#28: the figures are keyed on what they are drawn from, so the second report of the same
    data builds no Figure at all, and writes the same files (captions with their notes)."""
    frames = {"seed000": seed000_frame(), "seed004": seed004()}
    out = tmp_path / "report"
    build_seeds(out, frames)
    first = len(built)
    before = pngs(out)
    texts = [(out / f"index.{x}").read_text() for x in ("md", "html")]
    assert first >= len(before) >= 5  # each figure was built once (the first time)
    del built[:]
    build_seeds(out, frames)
    assert built == []  # nothing built: every figure reused by its inputs
    assert pngs(out) == before
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+")  # the report's time: another minute
    assert [stamp.sub("", (out / f"index.{x}").read_text()) for x in ("md", "html")] == [
        stamp.sub("", t) for t in texts
    ]


@styled
def toy(values: list[float], label: str) -> Figure | None:
    """A figure function of plain data: nothing to draw without values; a note when folded."""
    if not values:
        return None
    fig = new_figure(2.0, 3.0)
    axes_grid(fig)[0].plot(values, label=label)
    return with_note(fig, f"{label}: {len(values)} points")


def toy_report(one: list[float], two: list[float]) -> CampaignReport:
    plots = [
        *plot_if("one", "One", toy(one, "first")),
        *plot_if("two", "Two", toy(two, "second")),
        *plot_if("none", "None", toy([], "third")),
    ]
    frame = pd.DataFrame({"x": [1]})
    return CampaignReport("toy", "", [Section("toy", "Toy", ["text"], plots=plots)], frame, frame)


def toy_write(out: Path, one: list[float], two: list[float]) -> CampaignReport:
    with reusing(out / "figures"):
        rep = toy_report(one, two)
    write([rep], out, ["md"], stamp="now")
    return rep


def test_a_changed_input_redraws_exactly_its_figure(tmp_path: Path, built: list[Figure]) -> None:
    """One figure's data changed: that figure alone is built and drawn again, as a report
    from scratch draws it; the other is reused with its note; a function that drew nothing
    draws nothing again."""
    out = tmp_path / "report"
    rep = toy_write(out, [1.0, 2.0, 3.0], [3.0, 1.0, 2.0])
    assert [p.key for s in rep.sections for p in s.plots] == ["one", "two"]
    assert len(built) == 2  # the third drew nothing: no Figure
    old, md = pngs(out), (out / "index.md").read_text()
    assert "first: 3 points" in md and "second: 3 points" in md
    del built[:]
    rep = toy_write(out, [1.0, 2.0, 3.0], [3.0, 1.0, 2.5])
    assert len(built) == 1  # the changed one only
    assert [p.key for s in rep.sections for p in s.plots] == ["one", "two"]
    new = pngs(out)
    assert new["toy-one.png"] == old["toy-one.png"]
    assert not np.array_equal(pixels(new["toy-two.png"]), pixels(old["toy-two.png"]))
    toy_write(tmp_path / "fresh", [1.0, 2.0, 3.0], [3.0, 1.0, 2.5])
    assert pngs(tmp_path / "fresh") == new  # what was reused is what the data draws
    assert (out / "index.md").read_text() == md  # the notes travelled with the reused PNGs
    assert (tmp_path / "fresh" / "index.md").read_text() == md


def test_a_figure_touched_after_it_returned_is_built_and_never_reused_by_inputs(
    tmp_path: Path, built: list[Figure]
) -> None:
    """A label changed after the function returned (as a command's metric relabels the
    figures) is not what the inputs draw: that PNG carries no inputs digest, and a reused
    figure that is touched builds its Figure (and draws what the change makes of it)."""
    out = tmp_path / "report"
    with reusing(out / "figures"):
        rep = toy_report([1.0, 2.0], [2.0, 1.0])
    rep.sections[0].plots[0].figure.axes[0].set_title("relabelled")
    write([rep], out, ["md"], stamp="now")
    first = pngs(out)
    assert reuse.inputs_chunk(first["toy-one.png"]) is None
    assert reuse.inputs_chunk(first["toy-two.png"]) is not None
    del built[:]
    with reusing(out / "figures"):
        rep = toy_report([1.0, 2.0], [2.0, 1.0])
    assert len(built) == 1  # "one" is not reused by its inputs: its PNG is not theirs
    rep.sections[0].plots[0].figure.axes[0].set_title("relabelled")
    fig = rep.sections[0].plots[1].figure
    assert isinstance(fig, reuse.ReusedFigure) and len(built) == 1
    fig.axes[0].set_title("touched")  # builds it
    assert len(built) == 2
    write([rep], out, ["md"], stamp="now")
    second = pngs(out)
    assert second["toy-one.png"] == first["toy-one.png"]  # the same content: reused
    assert second["toy-two.png"] != first["toy-two.png"]
    assert reuse.inputs_chunk(second["toy-two.png"]) is None


def test_arguments_that_do_not_digest_are_drawn_every_time(tmp_path: Path) -> None:
    """An argument outside the libraries whose objects pickle to what they hold (a matplotlib
    object, a function defined in a function) has no inputs digest: drawn as before."""
    assert reuse.inputs_of(toy, ([1.0], "a"), {}, 150) is not None
    assert reuse.inputs_of(toy, ([1.0], FuncFormatter(str)), {}, 150) is None
    assert reuse.inputs_of(toy, ([1.0], lambda: 1), {}, 150) is None
    assert reuse.inputs_of(toy, ([1.0], "a"), {}, 150) == reuse.inputs_of(
        toy, ([1.0], "a"), {}, 150
    )
    assert reuse.inputs_of(toy, ([1.0], "a"), {}, 150) != reuse.inputs_of(
        toy, ([1.0], "b"), {}, 150
    )


def test_a_report_whose_figures_are_all_reused_imports_no_figure_code(tmp_path: Path) -> None:
    """#28: a report of unchanged data, in a process of its own (as `hpcscale report` runs),
    imports none of matplotlib's figure, axes and image code: nothing is built or drawn, the
    sample grids are decoded by Pillow."""
    frames = {"seed000": seed000_frame()}
    out = tmp_path / "report"
    build_seeds(out, frames)
    before = pngs(out)
    code = (
        "import sys; from pathlib import Path;"
        "from tests.unit.analysis.test_analysis import seed000_frame;"
        "from hpcscale.report.build import build; from hpcscale.report.data import CampaignSource;"
        "c = Path(sys.argv[2]); build([c], Path(sys.argv[1]), ['md', 'html'], "
        "sources={c: CampaignSource('seed000', c)}, load=lambda src: seed000_frame());"
        "print(sorted(m for m in sys.modules if m.startswith(('matplotlib.figure', "
        "'matplotlib.axes', 'matplotlib.image', 'matplotlib.backends.backend_agg'))))"
    )
    repo = Path(__file__).resolve().parents[2]
    got = subprocess.run(
        [sys.executable, "-c", code, str(out), str(tmp_path / "campaigns" / "seed000")],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert got[-2] == "[]"
    assert pngs(out) == before


def test_a_figure_file_cut_short_is_drawn_again(tmp_path: Path, built: list[Figure]) -> None:
    """Its inputs chunk comes before the image data: a file cut after it is not reused."""
    out = tmp_path / "report"
    toy_write(out, [1.0, 2.0], [2.0, 1.0])
    whole = pngs(out)
    cut = out / "figures" / "toy-one.png"
    cut.write_bytes(whole["toy-one.png"][:-200])
    assert reuse.inputs_chunk(cut.read_bytes()) is not None
    del built[:]
    toy_write(out, [1.0, 2.0], [2.0, 1.0])
    assert len(built) == 1
    assert pngs(out) == whole


def _in_a_process(code: str, *args: str, cwd: Path | None = None) -> list[str]:
    """The lines a fresh Python process prints running `code` (as `hpcscale report` runs)."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd or repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def test_a_report_whose_figures_are_all_reused_imports_no_matplotlib(tmp_path: Path) -> None:
    """#28: a report of unchanged data, in a process of its own, imports no matplotlib at all:
    the drawing environment a fresh import gives is kept beside the figures by the first report
    (written once its figures are), and a figure function that drew nothing is not called
    again."""
    out = tmp_path / "report"
    (tmp_path / "campaigns" / "seed000").mkdir(parents=True)
    code = (
        "import sys; from pathlib import Path;"
        "from tests.unit.analysis.test_analysis import seed000_frame;"
        "from hpcscale.report.build import build; from hpcscale.report.data import CampaignSource;"
        "c = Path(sys.argv[2]); build([c], Path(sys.argv[1]), ['md', 'html'], "
        "sources={c: CampaignSource('seed000', c)}, load=lambda src: seed000_frame());"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    args = (str(out), str(tmp_path / "campaigns" / "seed000"))
    assert _in_a_process(code, *args)[-1] != "[]"  # the first report draws every figure
    before = pngs(out)
    md = (out / "index.md").read_text()
    assert _in_a_process(code, *args)[-1] == "[]"
    assert pngs(out) == before
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+")
    assert stamp.sub("", (out / "index.md").read_text()) == stamp.sub("", md)


ENVIRONMENT = (
    "import sys; from pathlib import Path; from hpcscale.report.figures import reuse;"
    "p = reuse._Previous(Path(sys.argv[1])); print(repr(p.environment(150))); p.save();"
    "print('matplotlib' in sys.modules)"
)
LIVE = "from hpcscale.report.figures import reuse; print(repr(reuse.drawing_environment(150)))"


def test_the_environment_kept_is_the_one_a_fresh_import_gives(tmp_path: Path) -> None:
    """What a fresh process reads from the figures directory instead of importing matplotlib is
    what importing it gives; a matplotlibrc where matplotlib looks (here: the working
    directory) makes another environment, read anew."""
    figures = tmp_path / "figures"
    figures.mkdir()
    runs = [_in_a_process(ENVIRONMENT, str(figures), cwd=tmp_path) for _ in range(3)]
    assert runs[0][-1] == "True"  # the first imports it (and keeps what it gives)
    assert runs[-1][-1] == "False"  # a later one reads it
    live = _in_a_process(LIVE, cwd=tmp_path)[-1]
    assert {r[0] for r in runs} == {repr(eval(live).decode())}
    assert (figures / reuse.ENVIRONMENT_FILE).is_file()
    (tmp_path / "matplotlibrc").write_text("font.size: 13\n")
    again = [_in_a_process(ENVIRONMENT, str(figures), cwd=tmp_path) for _ in range(2)]
    assert again[0][-1] == "True" and again[-1][-1] == "False"
    live_rc = _in_a_process(LIVE, cwd=tmp_path)[-1]
    assert {r[0] for r in again} == {repr(eval(live_rc).decode())}
    assert again[0][0] != runs[0][0] and "('font.size', '13.0')" in eval(again[0][0])


DREW: list[list[float]] = []


@styled
def at_least_two(values: list[float]) -> Figure | None:
    """Nothing to draw from fewer than two values (decided before any matplotlib)."""
    DREW.append(list(values))
    if len(values) < 2:
        return None
    fig = new_figure(2.0, 3.0)
    axes_grid(fig)[0].plot(values)
    return fig


def test_a_figure_function_that_drew_nothing_is_not_called_again_for_the_same_inputs(
    tmp_path: Path,
) -> None:
    """The same function of the same inputs returns None again without being called; other
    inputs call it."""
    out = tmp_path / "report"

    def report(values: list[float]) -> tuple[list[str], str]:
        with reusing(out / "figures"):
            plots = [
                *plot_if("one", "One", toy([1.0, 2.0], "first")),
                *plot_if("few", "Few", at_least_two(values)),
            ]
        frame = pd.DataFrame({"x": [1]})
        rep = CampaignReport("toy", "", [Section("toy", "Toy", ["t"], plots=plots)], frame, frame)
        write([rep], out, ["md"], stamp="now")
        return [p.key for p in plots], (out / "index.md").read_text()

    report([1.0])  # no figures directory yet to keep it in
    first = report([1.0])
    del DREW[:]
    assert report([1.0]) == first == (["one"], first[1])
    assert DREW == []
    assert report([2.0]) == first
    assert DREW == [[2.0]]
    keys, _ = report([1.0, 3.0])
    assert keys == ["one", "few"] and DREW == [[2.0], [1.0, 3.0]]
