"""The HTML report as people see it: opened from disk (file://) in headless Chromium (Debian's
`chromium`, driven by Playwright over a pipe: `--remote-debugging-pipe`, so neither the browser
nor Playwright's driver listens on any port, which the test checks in /proc while the page is
open). The page loads without console errors, every figure decodes and carries alt text (its
title and caption), every table fits its column or sits in a labelled, focusable scrolling box
(narrow and wide window) with words left- and numbers right-aligned, nothing but file: and data:
URLs is requested, and a full-page screenshot is kept in test-artifacts/ (the path is printed).

Two reports: `hpcscale report` on the real finished quickstart, and a three-campaign report from
the seed studies' own numbers (wide fusion and learning-curve tables, heat maps), so "fits or
scrolls" is checked against tables that really are wider than the page.

Without Chromium or Playwright the tests skip, except under `make test`
(HPCSCALE_REQUIRE_BROWSER=1) or CI (CI=true), where `make setup` has installed both and a missing
one is a failure."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hpcscale.report.build import write
from hpcscale.report.sections import campaign_report
from tests.conftest import REPO, hpcscale

ARTIFACTS = REPO / "test-artifacts"
NARROW, WIDE = 800, 1600  # window widths (CSS px)
HEIGHT = 1000
CHROME_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")  # + Playwright's own
# quickstart_report and compare_report reach the finished quickstart by getfixturevalue (built
# only when a browser is there): its xdist worker is the one that holds it (tests/xdist_groups.py)
pytestmark = pytest.mark.shares("finished_quickstart")


def browser_required() -> bool:
    """`make test` and CI install Chromium (`make setup`): there, its absence is a failure."""
    ci = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
    return ci or os.environ.get("HPCSCALE_REQUIRE_BROWSER") == "1"


def missing_browser() -> str | None:
    """Why the browser test cannot run here, or None."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[dev]', or `make setup`)"
    if not shutil.which("chromium"):
        return "chromium is not installed (apt-get install chromium, or `make setup`)"
    return None


def need_browser() -> None:
    reason = missing_browser()
    if reason and browser_required():
        pytest.fail(f"{reason}; `make setup` installs it and `make test` needs it")
    if reason:
        pytest.skip(reason)


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process, from /proc/*/stat."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # exited meanwhile
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        found[int(stat.parent.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), comm)
    return found


def children(pid: int) -> set[int]:
    return {child for child, (parent, _) in processes().items() if parent == pid}


def process_tree(roots: set[int]) -> dict[int, str]:
    """pid -> command name of these processes and all their descendants."""
    procs = processes()
    tree = {pid: procs[pid][1] for pid in roots if pid in procs}
    todo = list(tree)
    while todo:
        pid = todo.pop()
        kids = [k for k, (parent, _) in procs.items() if parent == pid and k not in tree]
        tree.update({k: procs[k][1] for k in kids})
        todo += kids
    return tree


def listening_sockets(pids: dict[int, str]) -> list[str]:
    """Sockets these processes listen on: TCP in LISTEN, UDP bound and unconnected (what
    `ss -l` shows), each as "command[pid] proto address:port"."""
    listening: dict[str, tuple[str, str]] = {}  # socket inode -> (proto, local address)
    for proto, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == state:
                listening[cols[9]] = (proto, cols[1])
    found = []
    for pid, comm in pids.items():
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        for link in links:
            inode = link.removeprefix("socket:[").removesuffix("]")
            if link.startswith("socket:[") and inode in listening:
                proto, local = listening[inode]
                found.append(f"{comm}[{pid}] {proto} {address(local)}")
    return found


def address(hex_address: str) -> str:
    """/proc/net/tcp's "0100007F:1F90" as "127.0.0.1:8080" (IPv6: "[::1]:8080")."""
    host, port = hex_address.split(":")
    raw = b"".join(int(host[i : i + 8], 16).to_bytes(4, "little") for i in range(0, len(host), 8))
    if len(raw) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, raw)}:{int(port, 16)}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{int(port, 16)}"


@dataclass
class Browser:
    """Chromium under Playwright, plus the processes Playwright started (its driver, whose
    descendants are the browser's processes)."""

    browser: Any
    driver_pids: set[int] = field(default_factory=set)

    def ports(self) -> list[str]:
        """What the driver and the browser listen on (must be nothing: they talk over pipes)."""
        tree = process_tree(self.driver_pids)
        assert any("chrom" in comm for comm in tree.values()), f"no Chromium under {tree}"
        return listening_sockets(tree)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless system Chromium driven by Playwright over `--remote-debugging-pipe` (no port);
    closed through the API (browser.close(), then the driver), never by name."""
    need_browser()
    from playwright.sync_api import sync_playwright

    before = children(os.getpid())
    playwright = sync_playwright().start()
    try:
        driver_pids = children(os.getpid()) - before
        chromium = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), headless=True, args=list(CHROME_ARGS)
        )
        try:
            yield Browser(chromium, driver_pids)
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="module")
def quickstart_report(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """index.html of `hpcscale report` on the real finished quickstart (built only when a
    browser is there to open it: the quickstart trains real models)."""
    need_browser()
    workdir: Path = request.getfixturevalue("finished_quickstart")
    out = tmp_path_factory.mktemp("browser-report")
    hpcscale("report", "quickstart", "-w", str(workdir), "-o", str(out), "-f", "html", check=True)
    return out / "index.html"


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """index.html for three campaigns rebuilt from the seed reports' numbers (seed 000's
    strategies, seed 001's 15-cell fusion sweep, seed 004's classifier learning curves)."""
    from tests.integration.test_report import seed001_fusion, seed004
    from tests.unit.analysis.test_analysis import seed000_frame

    out = tmp_path_factory.mktemp("browser-seeds")
    reports = [
        campaign_report(seed000_frame(), "seed000"),
        campaign_report(seed001_fusion(), "fusion"),
        campaign_report(seed004(), "seed004"),
    ]
    result = write(reports, out, ["html"], stamp="now")
    assert not result.problems
    return out / "index.html"


# -- what the page must satisfy ----------------------------------------------------------------

REMOTE_REF = re.compile(
    r"""(?:\b(?:src|href|srcset|poster|action|data)\s*=\s*["']?\s*|url\(\s*["']?\s*|@import\s+["']?)"""
    r"""(?:https?:)?//""",
    re.IGNORECASE,
)

IMAGES_JS = r"""async () => {
const imgs = Array.from(document.images);
const decoded = await Promise.all(imgs.map(i => i.decode().then(() => true, () => false)));
return imgs.map((i, k) => ({
    decoded: decoded[k] && i.complete && i.naturalWidth > 0 && i.naturalHeight > 0,
    alt: (i.getAttribute('alt') || '').replace(/\s+/g, ' ').trim(),
    caption: (i.closest('figure')?.querySelector('figcaption')?.textContent || '')
      .replace(/\s+/g, ' ').trim(),
    width: i.getBoundingClientRect().width,
    column: i.parentElement.clientWidth,
  }));
}"""

TABLES_JS = """() => {
const page = document.documentElement;
return {
  page: [page.scrollWidth, page.clientWidth],
  tables: Array.from(document.querySelectorAll('table')).map(t => {
    let box = t.parentElement, scroller = null;
    for (let el = box; el && el !== document.body; el = el.parentElement) {
      const o = getComputedStyle(el).overflowX;
      if (o === 'auto' || o === 'scroll') { scroller = el; break; }
    }
    const s = scroller ? scroller.getBoundingClientRect() : null;
    return {
      name: t.caption ? t.caption.textContent.trim() : t.outerHTML.slice(0, 80),
      columns: Array.from(t.rows[0] ? t.rows[0].cells : []).map((_, k) =>
        Array.from(t.rows).filter(r => r.cells[k]).map(r => [
          r.cells[k].textContent.trim(), getComputedStyle(r.cells[k]).textAlign])),
      width: t.getBoundingClientRect().width,
      box: box.clientWidth,
      scroller: scroller ? {left: s.left, right: s.right, focusable: scroller.tabIndex >= 0,
                            label: scroller.getAttribute('aria-label')} : null,
    };
  }),
};
}"""

LOCAL_URL = re.compile(r"^(?:file|data):", re.IGNORECASE)


@dataclass
class PageLog:
    """What a page reported while loading: console errors, uncaught exceptions, and every URL
    it requested other than file: and data: (those are refused, never fetched)."""

    errors: list[str] = field(default_factory=list)
    remote: list[str] = field(default_factory=list)


def open_page(browser: Browser, page: Path, width: int) -> tuple[Any, PageLog]:
    """A new tab at this window width with the report loaded; returns it and what it logged."""
    tab = browser.browser.new_page(viewport={"width": width, "height": HEIGHT})
    log = PageLog()

    def console(message: Any) -> None:
        if message.type == "error":
            log.errors.append(f"console: {message.text}")

    def request(req: Any) -> None:
        if not LOCAL_URL.match(req.url):
            log.remote.append(req.url)

    tab.on("console", console)
    tab.on("pageerror", lambda error: log.errors.append(f"uncaught: {error}"))
    tab.on("request", request)
    tab.route(re.compile(r"^(?!file:|data:)", re.IGNORECASE), lambda route: route.abort())
    tab.goto(page.as_uri(), wait_until="load")
    assert tab.evaluate("document.readyState") == "complete"
    assert tab.evaluate("window.innerWidth") == width
    return tab, log


def table_problems(tab: Any, width: int) -> tuple[list[str], int]:
    """Tables that neither fit their column nor sit in a scrolling box inside the window, plus
    how many tables are wider than their column (those the scrolling box is there for)."""
    got = tab.evaluate(TABLES_JS)
    problems, wide = [], 0
    scroll_width, client_width = got["page"]
    if scroll_width > client_width:
        problems.append(f"the page scrolls sideways at {width} px: {scroll_width} > {client_width}")
    for t in got["tables"]:
        too_wide = t["width"] > t["box"] + 0.5
        wide += too_wide
        s = t["scroller"]
        if s is None and too_wide:
            problems.append(f"{t['name']!r}: {t['width']:.0f} px in a {t['box']} px column")
        if s is not None and (s["left"] < -0.5 or s["right"] > client_width + 0.5):
            problems.append(f"{t['name']!r}: its scrolling box leaves the window at {width} px")
        if s is not None and too_wide and not (s["focusable"] and s["label"]):
            problems.append(f"{t['name']!r}: scrolling box without tabindex and aria-label")
        problems += alignment_problems(t["name"], t["columns"])
    return problems, wide


WORD = re.compile(r"[^\W\d_]{2,}")  # two letters: a word, not the e of 1e-05
PLAIN_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def alignment_problems(table: str, columns: list[list[list[str]]]) -> list[str]:
    """Words read left-aligned; a column of plain numbers (header included) right-aligned so
    the digits line up."""
    problems = []
    for column in columns:
        header, body = column[0], column[1:]
        left = {"left", "start"}
        words = [text for text, align in body if WORD.search(text) and align not in left]
        if words:
            problems.append(f"{table!r}, column {header[0]!r}: words aligned right: {words[:3]}")
        numbers = body and all(PLAIN_NUMBER.fullmatch(text) for text, _ in body)
        if numbers and any(align != "right" for _, align in column):
            problems.append(f"{table!r}, column {header[0]!r}: numbers not aligned right")
    return problems


def screenshot(tab: Any, name: str) -> Path:
    """The whole page (not only the window) as a PNG in test-artifacts/, written atomically."""
    data = tab.screenshot(full_page=True, type="png")
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    print(f"screenshot: {path}")
    return path


def check_report(browser: Browser, page: Path, shot: str) -> int:
    """Every check at both widths; returns the number of tables wider than their column at the
    narrow width (the report's scrolling boxes are exercised only when that is above 0)."""
    html = page.read_text(encoding="utf-8")
    assert not REMOTE_REF.findall(html), "the report references the network"
    wide_at_narrow = 0
    for width in (NARROW, WIDE):
        tab, log = open_page(browser, page, width)
        ports = browser.ports()
        assert ports == [], f"the browser or its driver listens on a port: {ports}"

        images = tab.evaluate(IMAGES_JS)
        assert images, "the report has no figure"
        assert images and all(i["decoded"] for i in images), images
        for img in images:
            assert img["alt"].strip(), f"a figure without alt text: {img['caption']!r}"
            assert img["alt"] == img["caption"], "alt text should be the figure's title + caption"
            assert img["width"] <= img["column"] + 0.5, f"figure wider than its column: {img}"

        problems, wide = table_problems(tab, width)
        assert problems == [], problems
        if width == NARROW:
            wide_at_narrow = wide

        fetched = tab.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        assert [u for u in fetched if not u.startswith("data:")] == [], "the page fetched files"

        screenshot(tab, shot if width == WIDE else shot.replace(".png", f"-{width}.png"))
        assert log.errors == [], f"console errors at {width} px: {log.errors}"
        assert log.remote == [], f"the page requested {log.remote}"
        tab.close()
    return wide_at_narrow


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.horovod
def test_quickstart_report_in_chromium(browser: Browser, quickstart_report: Path) -> None:
    wide = check_report(browser, quickstart_report, "report.png")
    # The overlap table (ranks x eleven columns) is wider than an 800 px window: without its
    # scrolling box it would push the page sideways, so the table check above is not vacuous.
    assert wide >= 1


def test_seed_studies_report_in_chromium(browser: Browser, seed_report: Path) -> None:
    wide = check_report(browser, seed_report, "report-seeds.png")
    assert wide >= 1


@pytest.fixture(scope="module")
def compare_report(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """index.html of `hpcscale compare` on two copies of the real finished quickstart (this
    month's run against last month's: the same campaign name in two directories)."""
    need_browser()
    workdir: Path = request.getfixturevalue("finished_quickstart")
    root = tmp_path_factory.mktemp("browser-compare")
    dirs = []
    for month in ("last_month", "this_month"):
        shutil.copytree(workdir / "quickstart", root / month / "quickstart", symlinks=True)
        dirs.append(str(root / month / "quickstart"))
    out = root / "report"
    hpcscale("compare", *dirs, "-o", str(out), check=True)
    return out / "index.html"


@pytest.mark.mpi
@pytest.mark.horovod
def test_compare_report_in_chromium(browser: Browser, compare_report: Path) -> None:
    wide = check_report(browser, compare_report, "compare.png")
    # the aligned table (two campaigns x four metrics) is wider than 800 px: it must scroll
    assert wide >= 1
