"""index.md: the report as GitHub-flavoured Markdown, figures as PNG files beside it.

Text that can hold what a run wrote (cells, reasons, notes, paragraphs) is shown as text, as
index.html shows it: raw HTML outside code spans is escaped (`<` before a tag name
becomes `&lt;`), and Markdown links and reference definitions in it are broken apart, so a job's
output or a campaign's value never becomes a live element or a `javascript:` link. hpcscale's own
links (figures, anchors) are written apart from that text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from hpcscale.report.fmt import display
from hpcscale.report.model import CampaignReport, Section
from hpcscale.version import hpcscale_version

# CommonMark: a code span is a run of backticks closed by a run of the same length (its text is
# literal); HTML starts at `<` + a tag name, `/`, `!` or `?`; a link at `](`, a definition at
# `[label]:` opening a line.
_CODE = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_LINK = re.compile(r"\]\s*[(\[]")
_DEFINITION = re.compile(r"^(\s{0,3})\[(?=[^\]]*\]:)", re.M)


def safe(text: str) -> str:
    """`text` as Markdown that renders it as text: no raw HTML, no links (see the module)."""
    if "<" not in text and "]" not in text:
        return text
    out, at = [], 0
    for m in _CODE.finditer(text):
        out += [_plain(text[at : m.start()]), m.group(0)]
        at = m.end()
    out.append(_plain(text[at:]))
    return "".join(out)


def _plain(text: str) -> str:
    text = _TAG_OPEN.sub("&lt;", text)
    text = _LINK.sub(lambda m: "\\" + m.group(0), text)
    return _DEFINITION.sub(r"\1\\[", text)


def table_md(frame: pd.DataFrame) -> str:
    shown = display(frame)
    if shown.empty:
        return "_(no rows)_"
    header = [safe(str(c)).replace("|", "\\|") for c in shown.columns]
    columns = [_cells(shown[c].tolist()) for c in shown.columns]
    if any("\n" in v or "\x1b" in v for v in set().union(header, *columns)):  # each text once
        shown = pd.DataFrame(dict(enumerate(columns)))  # multi-line cells: tabulate's layout
        shown.columns = header
        return shown.to_markdown(index=False, tablefmt="github", disable_numparse=True)
    return _github(header, columns)


def _cells(column: list[str]) -> list[str]:
    """A column's cells made `safe`, pipes escaped: each distinct value once."""
    made = {v: safe(v).replace("|", "\\|") for v in set(column)}
    return [made[v] for v in column]


def _github(header: list[str], columns: list[list[str]]) -> str:
    """What `to_markdown(tablefmt="github", disable_numparse=True)` writes for one-line text
    cells (tabulate: left-aligned, stripped, each column as wide as its widest cell or its
    heading + 2), built directly: tabulate took seconds for a table of a sweep's cells. Each
    distinct text of a column is stripped and padded once (a sweep repeats its settings)."""
    widths, padded = [], []
    for h, col in zip(header, columns, strict=True):
        stripped = {v: v.strip() for v in set(col)}
        width = max(len(h) + 2, *(len(v) for v in stripped.values()))
        pad = {v: s.ljust(width) for v, s in stripped.items()}
        widths.append(width)
        padded.append([pad[v] for v in col])
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in zip(*padded, strict=True)]
    return "\n".join(lines)


def render(reports: Sequence[CampaignReport], title: str, stamp: str) -> str:
    single = len(reports) == 1
    lines = [f"# {title}", "", f"_Generated {stamp} by hpcscale {hpcscale_version()}._", ""]
    if not single:
        lines += ["Campaigns: " + ", ".join(f"[{r.name}](#{_anchor(r.name)})" for r in reports), ""]
    for rep in reports:
        level = 2 if single else 3
        if not single:
            lines += [f"## {rep.name}", ""]
        if rep.description:
            lines += [safe(rep.description), ""]
        lines += _contents(rep.sections)
        for sec in rep.sections:
            lines += _section(sec, level)
        if rep.notes:
            lines += [f"{'#' * level} Not shown", ""]
            lines += [f"- {safe(n)}" for n in rep.notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _contents(sections: Sequence[Section]) -> list[str]:
    return ["Sections: " + " · ".join(s.title for s in sections), ""]


def _section(sec: Section, level: int) -> list[str]:
    out = [f"{'#' * level} {safe(sec.title)}", ""]
    for para in sec.text:
        out += [safe(para), ""]
    for tab in sec.tables:
        out += [f"**{safe(tab.title)}**", "", table_md(tab.frame), ""]
        if tab.note:
            out += [f"_{safe(tab.note)}_", ""]
    for plot in sec.plots:
        out += [f"![{safe(plot.title)}]({plot.file})", ""]
        if plot.caption:
            out += [f"_{safe(plot.caption)}_", ""]
    return out


def _anchor(name: str) -> str:
    return "".join(c for c in name.lower().replace(" ", "-") if c.isalnum() or c in "-_")
