"""Whether a profile's job template can be used: found in its search path and parseable. Checked
when a profile loads, so `validate` catches it at the profile's `template:` line; the template is
compiled (with render's filters) only when scripts are written (hpcscale.render.templates)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jinja2


def template_problem(dirs: Sequence[str], name: str) -> str | None:
    """Why template `name` cannot be used from `dirs` (missing, or a Jinja syntax error), or
    None. Like Jinja's FileSystemLoader, the first directory holding `name` wins."""
    for d in dirs:
        path = Path(d) / name
        if path.is_file():
            try:
                jinja2.Environment().parse(path.read_text(), name, str(path))
            except jinja2.TemplateSyntaxError as exc:
                return f"template {exc.filename or exc.name}:{exc.lineno}: {exc.message}"
            return None
    return f"template {name!r} not found in {', '.join(dirs)}"
