"""`make bench` after a fresh `make setup`: every module a bench script imports, in its own
code or in the Python it hands a child interpreter, comes from a distribution that `make
setup` installs (the core dependencies, the dev and bench extras, the jobs packages)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "bench"
FIRST_PARTY = {"hpcscale", "jobs", "bench", "tests"}
# what `make setup` installs: `.[dev,bench]`, the jobs extra, and what the Makefile names
SETUP_EXTRAS = ("dev", "bench", "jobs")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in SETUP_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    reqs += makefile_installs()
    return {_norm(m.group(0)) for r in reqs if (m := re.match(r"[A-Za-z0-9][\w.-]*", r))}


def makefile_installs() -> list[str]:
    """Packages the Makefile pip-installs by name (Horovod: a source build, in no extra)."""
    out = []
    text = (REPO / "Makefile").read_text()
    # a variable the Makefile sets (TORCH ?= torch==2.13.0) stands for its value
    values = dict(re.findall(r"^([A-Z_]+) *[?:]?= *(.*)$", text, re.M))
    for line in text.splitlines():
        for found in re.findall(r"\$\(PIP\) install ([^;&]*)", line):
            args = re.sub(r"\$\(([A-Z_]+)\)", lambda m: values.get(m[1], m[0]), found)
            out += [a.strip("'\"") for a in args.split() if re.match(r"['\"]?[A-Za-z]", a)]
    return out


def _top_names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _imports_in_text(text: str) -> set[str]:
    """Import lines inside a string: code a bench runs with `python -c` or writes to a file."""
    out: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith(("import ", "from ")):
            continue
        try:
            out |= _top_names(ast.parse(line))
        except SyntaxError:  # `from x import (` continues on the next line
            m = re.match(r"from\s+([A-Za-z_]\w*)[\w.]*\s+import\b", line)
            if m:
                out.add(m.group(1))
    return out


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = _top_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names |= _imports_in_text(node.value)
        elif isinstance(node, ast.JoinedStr):  # an f-string: its literal parts
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            names |= _imports_in_text("".join(str(p) for p in parts))
    local = {p.stem for p in BENCH.glob("*.py")}
    return {n for n in names if n not in sys.stdlib_module_names | FIRST_PARTY | local}


def missing(path: Path, have: set[str]) -> list[str]:
    """Third-party imports of `path` that no distribution `make setup` installs provides."""
    dists = packages_distributions()
    out = []
    for name in sorted(imports_of(path)):
        # not installed here: the import name is the best guess at its distribution's name
        providers = {_norm(d) for d in dists.get(name, [name])}
        if not providers & have:
            out.append(f"{name} (from {', '.join(sorted(providers))})")
    return out


def test_every_bench_import_is_installed_by_make_setup() -> None:
    have = declared()
    scripts = sorted(BENCH.glob("*.py"))
    assert scripts
    problems = {p.name: m for p in scripts if (m := missing(p, have))}
    assert not problems, f"add to [project.optional-dependencies] bench: {problems}"


def test_the_check_sees_imports_in_child_code(tmp_path: Path) -> None:
    """A module only a child interpreter imports counts, and an undeclared one is reported."""
    script = tmp_path / "b.py"
    script.write_text(
        "import json\nimport yaml\nfrom hpcscale.api import plan\n"
        'CODE = "import json, sys\\nimport orjson_like_nosuch\\n"\n'
        'CONFIG = f"""\nfrom reframe.core.builtins import (\n    parameter,\n)\n{1}"""\n'
    )
    assert imports_of(script) == {"yaml", "orjson_like_nosuch", "reframe"}
    assert missing(script, declared()) == ["orjson_like_nosuch (from orjson-like-nosuch)"]
