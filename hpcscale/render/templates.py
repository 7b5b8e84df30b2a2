"""Job templates: one Jinja environment per template search path (a profile's own directory
before the shipped templates/), strict about undefined names, quoting every printed value."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import jinja2

from hpcscale.render.shell import env_name, finalize, sbatch_value


@cache
def environment(dirs: tuple[str, ...]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        autoescape=False,
        auto_reload=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sbatch"] = sbatch_value
    env.filters["envname"] = env_name
    return env


def template_problem(dirs: Sequence[str], name: str) -> str | None:
    """Why template `name` cannot be used from `dirs` (missing, or a Jinja syntax error), or
    None. Checked when a profile loads, so `validate` catches it."""
    try:
        environment(tuple(dirs)).get_template(name)
    except jinja2.TemplateNotFound as exc:
        return f"template {exc.name!r} not found in {', '.join(dirs)}"
    except jinja2.TemplateSyntaxError as exc:
        return f"template {exc.filename or exc.name}:{exc.lineno}: {exc.message}"
    return None
