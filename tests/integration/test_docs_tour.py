"""The README's tour and docs/own-program.md's short example, followed to the letter by a user who
pip-installed hpcscale (issue 29): every shell block of the section, in order, as one script, in
an empty directory with the installed wheel's `hpcscale` first on PATH; submit, collect and
report included. The commands come from the Markdown itself, so the docs cannot drift from what
is tested.

A block that cannot run as written in a test says so just above its fence with
`<!-- not run by the tests: REASON -->`; the test skips it and nothing else.

The installed wheel is the packaging fixture's (tests/packaging_fixture.py): no second build.
"""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.test_docs import ROOT, Block, code_blocks
from tests.packaging_fixture import Installed

SHELL = frozenset({"bash", "bash runnable"})
NOT_RUN = re.compile(r"^<!--\s*not run by the tests:\s*\S.*-->\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
TIMEOUT_S = 1800  # the tour trains four small runs; this only stops a hang
# the tour's four DCGAN runs (a few minutes; more on a loaded 2-core machine), and the wheel
# build when this is the session's first test to need it: past pytest-timeout's 900 s default
TOUR_TIMEOUT = pytest.mark.timeout(TIMEOUT_S + 300)


def section_script(path: Path, heading: str) -> tuple[str, list[Block]]:
    """The shell blocks under `heading` (up to the next heading of its level or above), joined
    in order into one script; blocks marked not run are left out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = code_blocks(path)
    inside = {n for b in blocks for n in range(b.line, b.line + b.text.count("\n") + 2)}
    titles = [
        (n, len(m.group(1)), m.group(2))
        for n, line in enumerate(lines, 1)
        if n not in inside and (m := HEADING.match(line))
    ]
    [(start, level)] = [(n, lv) for n, lv, t in titles if t == heading]
    end = min([n for n, lv, _ in titles if n > start and lv <= level], default=len(lines) + 1)
    chosen = []
    for b in blocks:
        if not (start < b.line < end) or b.info not in SHELL:
            continue
        before = [ln for ln in lines[: b.line - 1] if ln.strip()][-1]
        if not NOT_RUN.match(before.strip()):
            chosen.append(b)
    assert chosen, f"{path.name}: no shell block under {heading!r}"
    script = "".join(f"# --- {b.name}\n{b.text}" for b in chosen)
    return script, chosen


def follow(hs: Installed, script: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run `script` as a reader would: bash, stopping at the first failing command, from
    `home`, with the installed venv's bin/ first on PATH (nothing of the checkout's)."""
    env = {k: v for k, v in hs.env().items() if k != "HPCSCALE_SYSTEMS_PATH"}
    env["PATH"] = f"{hs.venv / 'bin'}:{env.get('PATH', '')}"
    env["XDG_DATA_HOME"] = str(home.parent / "xdg")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n--- script\n{script}--- stdout (end)\n{proc.stdout[-4000:]}\n"
        f"--- stderr (end)\n{proc.stderr[-4000:]}"
    )
    return proc


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@TOUR_TIMEOUT
def test_readme_tour_runs_from_the_installed_wheel(
    installed_hpcscale: Installed, tmp_path: Path
) -> None:
    """init, validate, plan, dry run, doctor (on the profile init wrote here, not the shipped
    one), submit, status, report (which collects), the shipped examples: the starter's every run
    completes and the report is written."""
    script, blocks = section_script(ROOT / "README.md", "A five-minute tour")
    assert re.search(r"^hpcscale submit campaign\.yaml\s", script, re.M), script
    assert re.search(r"^hpcscale report \w+", script, re.M), script
    home = tmp_path / "study"
    home.mkdir()
    proc = follow(installed_hpcscale, script, home)

    starter = yaml.safe_load((home / "campaign.yaml").read_text())
    name, matrix = starter["name"], starter["matrix"]
    expected = starter.get("repeats", 1)
    for values in matrix.values():
        expected *= len(values) if isinstance(values, list) else 1
    cdir = home / "hpcscale-runs" / name
    results = rows(cdir / "results.csv")
    assert len(results) == expected and {r["state"] for r in results} == {"COMPLETED"}, results
    assert all(float(r["images_per_s"]) > 0 for r in results), results
    assert "COMPLETED" in proc.stdout  # `status` showed the runs
    assert str(home.resolve() / "local.yaml") in proc.stdout  # doctor checked init's profile
    index = (cdir / "report" / "index.md").read_text()
    assert "images_per_s" in index or "Images/s" in index
    # the profile init wrote beside the campaign is the one the report describes
    assert "profile not loadable" not in index and "unknown system" not in index
    assert (cdir / "report" / "index.html").is_file()
    assert (home / "quickstart.yaml").is_file()  # the last block ran too
    assert [b.line for b in blocks] == sorted(b.line for b in blocks)


def test_own_program_example_runs_from_the_installed_wheel(
    installed_hpcscale: Installed, tmp_path: Path
) -> None:
    """The guide's short example: the program printing 120 samples/s per rank, validate, plan,
    submit, collect, report; at 1 rank 120 and at 2 ranks 240 samples/s (`scale: per_rank`),
    and the report on that declared metric, saying nothing of Horovod or GANs."""
    script, _ = section_script(ROOT / "docs" / "own-program.md", "A short example")
    assert re.search(r"^hpcscale (submit|collect|report) mine\b", script, re.M), script
    home = tmp_path / "mine"
    home.mkdir()
    follow(installed_hpcscale, script, home)

    cdir = home / "hpcscale-runs" / "mine"
    results = rows(cdir / "results.csv")
    assert {r["state"] for r in results} == {"COMPLETED"}, results
    by_ranks = {int(r["ranks"]): float(r["samples_per_s"]) for r in results}
    assert by_ranks == {1: 120.0, 2: 240.0}
    # as the guide says: no framework is claimed for a plain program, no Horovod without a
    # timeline, no GAN losses
    assert [r["strategy"] for r in results] == ["", ""], results
    index = (cdir / "report" / "index.md").read_text()
    assert "samples_per_s" in index and "samples/s" in index
    for word in ("horovod", "g_loss", "gan", "kind(s) unknown"):
        assert not re.search(rf"\b{re.escape(word)}(?!\w)", index, re.I), word
