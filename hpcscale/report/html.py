"""index.html: one self-contained file (figures embedded as base64 PNG), readable offline and
printable; the same content as index.md."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pandas as pd
from jinja2 import Environment
from markupsafe import Markup

from hpcscale.report.fmt import display
from hpcscale.report.model import CampaignReport

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
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.25rem 0; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; height: auto; }
figcaption { font-style: italic; font-size: 0.9rem; }
.meta { color: #666; }
.scroll { overflow-x: auto; }
.PASS { color: #176317; font-weight: 600; }
.FAIL { color: #a31515; font-weight: 600; }
@media print { figure, table { page-break-inside: avoid; } }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="meta">Generated {{ stamp }} by hpcscale.</p>
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
{% for t in s.tables %}<div class="scroll">{{ table(t.frame, t.title) }}</div>
{% if t.note %}<p><em>{{ t.note }}</em></p>{% endif %}
{% endfor %}
{% for f in s.plots %}<figure>
<img src="data:image/png;base64,{{ b64(f.png) }}" alt="{{ f.title }}">
<figcaption>{{ f.title }}{% if f.caption %}: {{ f.caption }}{% endif %}</figcaption>
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


def table_html(frame: pd.DataFrame, title: str) -> Markup:
    shown = display(frame)
    if shown.empty:
        return Markup("<p><em>(no rows)</em></p>")
    html = shown.to_html(index=False, escape=True, border=0, na_rep="–")
    html = html.replace("<td>PASS</td>", '<td class="PASS">PASS</td>')
    html = html.replace("<td>FAIL</td>", '<td class="FAIL">FAIL</td>')
    caption = Markup("<caption>{}</caption>").format(title)
    return Markup(html.replace(">\n  <thead>", f">\n{caption}\n  <thead>", 1))


def render(reports: Sequence[CampaignReport], title: str, stamp: str) -> str:
    env = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(TEMPLATE)
    return tmpl.render(
        reports=reports,
        title=title,
        stamp=stamp,
        h="h2" if len(reports) == 1 else "h3",
        table=table_html,
        b64=lambda data: base64.b64encode(data).decode("ascii"),
    )
