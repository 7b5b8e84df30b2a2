"""What a run wrote is shown as text (issue 28): the terminal gets no escapes from it and no
emoji made of it (`:x:` stays `:x:`), index.md no live HTML or `javascript:` link from it
(index.html already escaped both), and `report --out` never overwrites a report hpcscale did not
write. No training: run directories from `render`, ledger rows as `submit` leaves them, a failed
run's output file written here (tests/integration/test_stale.py's helpers)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

import hpcscale.api as hs
from hpcscale.backends.local import LOG_NAME
from hpcscale.report import markdown
from hpcscale.report.model import CampaignReport, Section, Table
from hpcscale.state.ledger import Ledger
from hpcscale.state.states import RunState
from tests.conftest import hpcscale
from tests.integration.test_stale import NAME, _campaign, _finish

HOSTILE_HTML = '<img src=x onerror="alert(1)"> <script>alert(2)</script>'
HOSTILE_LINK = "[click me](javascript:alert(3))"
# a colour, a window title (OSC 0, BEL-ended), a hyperlink (OSC 8, ST-ended), an emoji code
ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;pwned title\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"
FAILED_OUTPUT = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 1, in <module>\n'
    f"ValueError: broken {ESCAPES} :x: [bold]not markup[/bold] {HOSTILE_HTML}\n"
)


def _html(md: str) -> str:
    """index.md as a CommonMark renderer (GitHub's family) turns it into HTML."""
    return MarkdownIt("commonmark", {"html": True}).render(md)


def _live(html: str) -> list[str]:
    """Live elements and links a page would act on (hpcscale's own figures are not)."""
    found = re.findall(r"<script\b[^>]*>|<[a-z]+\b[^>]*\bon[a-z]+=[^>]*>", html, re.I)
    return found + re.findall(r"href=\"\s*javascript:[^\"]*\"", html, re.I)


def test_printable_removes_escapes_and_controls() -> None:
    from hpcscale.util.text import printable

    assert printable(ESCAPES) == "red link"
    assert printable("a\rb\r\nc\x07\x00d\tend") == "a\nb\ncd\tend"
    assert printable(":x: [b]") == ":x: [b]"  # text stays text


def test_logs_to_a_terminal_leave_out_the_jobs_escapes(tmp_path: Path) -> None:
    from hpcscale.util.logtail import copy_shown

    log = tmp_path / "out.log"
    log.write_bytes(FAILED_OUTPUT.encode())
    shown, raw = io.BytesIO(), io.BytesIO()
    copy_shown(log, shown, None, terminal=True)
    copy_shown(log, raw, None, terminal=False)
    assert b"\x1b" not in shown.getvalue() and b"broken red link :x:" in shown.getvalue()
    assert raw.getvalue() == log.read_bytes()  # piped or redirected: the bytes as written
    tailed = io.BytesIO()
    copy_shown(log, tailed, 1, terminal=True)
    assert tailed.getvalue().startswith(b"ValueError: broken red link") and b"\x1b" not in (
        tailed.getvalue()
    )


def _failed_and_finished(tmp_path: Path, description: str = "") -> tuple[str, str]:
    """dcgan_strong at 1 and 2 nodes rendered; the 1-node run finished (its metrics.json), the
    2-node run failed with FAILED_OUTPUT as its local output file: (failed id, finished id)."""
    path = _campaign(tmp_path, "[1, 2]")
    if description:
        text = path.read_text()
        path.write_text(re.sub(r"(?m)^description:.*$", f"description: {description!r}", text))
    rendered = hs.render(path)
    by_nodes = {r.run.nodes: r for r in rendered.runs}
    ok, bad = by_nodes[1], by_nodes[2]
    _finish(ok.run, ok.run_dir)
    (bad.run_dir / LOG_NAME).write_text(FAILED_OUTPUT)
    with Ledger(rendered.directory) as ledger:
        ledger.ensure((r.run.run_id, str(r.run_dir)) for r in rendered.runs)
        ledger.update(ok.run.run_id, RunState.COMPLETED, backend="local", exit_code="0")
        ledger.update(bad.run.run_id, RunState.FAILED, backend="local", exit_code="1")
    return bad.run.run_id, ok.run.run_id


def test_status_shows_a_failed_runs_reason_as_text(tmp_path: Path, workdir: Path) -> None:
    bad, _ = _failed_and_finished(tmp_path)
    proc = hpcscale("status", NAME, check=True)
    line = next(ln for ln in proc.stdout.splitlines() if bad in ln)
    assert "ValueError: broken red" in line, proc.stdout
    assert "\x1b" not in proc.stdout and "pwned" not in proc.stdout
    assert "❌" not in proc.stdout


def test_index_md_shows_campaign_text_and_job_output_as_text(tmp_path: Path, workdir: Path) -> None:
    _failed_and_finished(tmp_path, description=f"{HOSTILE_HTML} {HOSTILE_LINK}")
    hpcscale("report", NAME, check=True)
    md = (workdir / NAME / "report" / "index.md").read_text()
    assert "<script>" not in md and "<img" not in md
    assert _live(_html(md)) == [], _live(_html(md))
    html = _html(md)
    assert "alert(2)" in html and "click me" in html  # shown, as text


def test_markdown_tables_and_notes_escape_html_and_links() -> None:
    reason = f"ValueError: {HOSTILE_HTML} {HOSTILE_LINK} `<kept in code>`"
    frame = pd.DataFrame({"Run": ["r1"], "Reason": [reason]})
    sec = Section(
        "quality", "Data quality", [f"para {HOSTILE_LINK}"], [Table("q", "T", frame, reason)]
    )
    rep = CampaignReport("c", "desc", [sec], pd.DataFrame(), pd.DataFrame())
    md = markdown.render([rep], "title", "now")
    html = _html(md)
    assert _live(html) == [], html
    assert "<code>&lt;kept in code&gt;</code>" in html  # a code span was left as written
    defined = markdown.safe("[x]: javascript:alert(1)\n\nsee [x]")
    assert _live(_html(defined)) == [] and "see [x]" in _html(defined)


def test_report_out_does_not_overwrite_a_report_it_did_not_write(
    tmp_path: Path, workdir: Path
) -> None:
    _failed_and_finished(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "index.md").write_text("my own notes\n")
    proc = hpcscale("report", NAME, "--out", str(theirs))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "not overwritten" in proc.stderr and "--force" in proc.stderr
    assert (theirs / "index.md").read_text() == "my own notes\n"
    hpcscale("report", NAME, "--out", str(theirs), "--force", check=True)
    assert "Scaling report" in (theirs / "index.md").read_text()
    assert (theirs / ".hpcscale-report").is_file()  # util.reportdir.REPORT_MARKER
    hpcscale("report", NAME, "--out", str(theirs), check=True)  # ours now: no --force needed
    fresh = tmp_path / "fresh"
    hpcscale("report", NAME, "--out", str(fresh), check=True)
    assert (fresh / "index.md").is_file() and (fresh / ".hpcscale-report").is_file()
