"""index.html: one self-contained file (figures embedded as base64 PNG), readable offline and
printable; the same content as index.md."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence

import pandas as pd
from jinja2 import Environment
from markupsafe import Markup, escape

from hpcscale.report.fmt import MISSING, display
from hpcscale.report.model import CampaignReport, Plot
from hpcscale.version import hpcscale_version

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 72rem; padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3, h4 { line-height: 1.2; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }
th { background: #f3f3f3; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.25rem 0; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; height: auto; }
figcaption { font-style: italic; font-size: 0.9rem; }
.meta { color: #666; }
.scroll { overflow-x: auto; }
.scroll:focus-visible { outline: 2px solid #1a5fb4; outline-offset: 2px; }
.PASS { color: #176317; font-weight: 600; }
.FAIL { color: #a31515; font-weight: 600; }
@media print { figure, table { page-break-inside: avoid; } }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="meta">Generated {{ stamp }} by hpcscale {{ version }}.</p>
{% if reports|length > 1 %}<p>Campaigns:
{% for r in reports %}<a href="#{{ r.name }}">{{ r.name }}</a>{% if not loop.last %}, {% endif %}
{% endfor %}</p>{% endif %}
{% for r in reports %}
<section id="{{ r.name }}">
{% if reports|length > 1 %}<h2>{{ r.name }}</h2>{% endif %}
{% if r.description %}<p>{{ r.description }}</p>{% endif %}
<nav><p>Sections: {% for s in r.sections %}<a href="#{{ r.name }}-{{ s.key }}">{{ s.title }}</a>
{%- if not loop.last %} · {% endif %}{% endfor %}</p></nav>
{% for s in r.sections %}
<{{ h }} id="{{ r.name }}-{{ s.key }}">{{ s.title }}</{{ h }}>
{% for p in s.text %}<p>{{ p }}</p>
{% endfor %}
{% for t in s.tables %}<div class="scroll" role="region" tabindex="0" aria-label="{{ t.title }}">
{{ table(t.frame, t.title) }}</div>
{% if t.note %}<p><em>{{ t.note }}</em></p>{% endif %}
{% endfor %}
{% for f in s.plots %}<figure>
<img src="data:image/png;base64,{{ b64(f.png) }}" alt="{{ alt(f) }}">
<figcaption>{{ alt(f) }}</figcaption>
</figure>
{% endfor %}
{% endfor %}
{% if r.notes %}<{{ h }}>Not shown</{{ h }}><ul>
{% for n in r.notes %}<li>{{ n }}</li>
{% endfor %}</ul>{% endif %}
</section>
{% endfor %}
</body>
</html>
"""


_ENV = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
_NUMBER = r"[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?%?|[-+−]?∞"
NUMERIC = re.compile(rf"(?:{_NUMBER})|\[(?:{_NUMBER}), (?:{_NUMBER})\]", re.IGNORECASE)


def numeric_column(cells: Sequence[str]) -> bool:
    """A column of numbers (dashes for missing allowed) is right-aligned so digits line up;
    anything with words in it (strategies, versions, paths) reads better left-aligned."""
    present = set(cells) - {MISSING}  # each distinct text once (a sweep repeats its settings)
    return bool(present) and all(NUMERIC.fullmatch(c.strip()) for c in present)


def _cell_class(numeric: bool, value: str = "") -> Markup:
    names = (["num"] if numeric else []) + ([value] if value in ("PASS", "FAIL") else [])
    return Markup(' class="{}"').format(" ".join(names)) if names else Markup("")


def table_html(frame: pd.DataFrame, title: str) -> Markup:
    shown = display(frame)
    if shown.empty:
        return Markup("<p><em>(no rows)</em></p>")
    columns = [str(c) for c in shown.columns]
    values = [shown[c].tolist() for c in shown.columns]  # fmt.display: strings already
    num = [numeric_column(col) for col in values]
    # joined here, not in a Jinja template: its call per cell was most of a big report's time;
    # each distinct value of a column escaped once (a sweep repeats its settings)
    cls = [str(_cell_class(n)) for n in num]
    head = "".join(
        f'<th scope="col"{c}>{escape(t)}</th>' for c, t in zip(cls, columns, strict=True)
    )
    cells = [_cells(c, n, col) for c, n, col in zip(cls, num, values, strict=True)]
    body = "".join("<tr>" + "".join(row) + "</tr>\n" for row in zip(*cells, strict=True))
    return Markup(
        f"<table>\n<caption>{escape(title)}</caption>\n<thead><tr>{head}</tr></thead>\n"
        f"<tbody>\n{body}</tbody>\n</table>"
    )


def _cells(cls: str, numeric: bool, column: list[str]) -> list[str]:
    """A column's `<td>` elements: its class, PASS/FAIL marked, the value escaped."""
    td = {
        v: f"<td{cls if v not in ('PASS', 'FAIL') else _cell_class(numeric, v)}>{escape(v)}</td>"
        for v in set(column)
    }
    return [td[v] for v in column]


def alt_text(plot: Plot) -> str:
    """A figure's alt text and caption: its title plus what it shows, so a reader who cannot see
    the image (screen reader, image blocked) still learns what it plots."""
    return f"{plot.title}: {plot.caption}" if plot.caption else plot.title


def render(reports: Sequence[CampaignReport], title: str, stamp: str) -> str:
    tmpl = _ENV.from_string(TEMPLATE)
    return tmpl.render(
        reports=reports,
        title=title,
        stamp=stamp,
        version=hpcscale_version(),
        h="h2" if len(reports) == 1 else "h3",
        table=table_html,
        alt=alt_text,
        b64=lambda data: base64.b64encode(data).decode("ascii"),
    )
