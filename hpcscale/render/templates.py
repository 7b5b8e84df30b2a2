"""Job templates: one Jinja environment per template search path (a profile's own directory
before the shipped templates/), strict about undefined names, quoting every printed value."""

from __future__ import annotations

from functools import cache

import jinja2

from hpcscale.util.shell import env_name, finalize, sbatch_value


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
