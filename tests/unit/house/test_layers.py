"""Layer boundaries that imports alone would let slip: checked in a fresh interpreter, so no
other test's imports hide a violation."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "hpcscale"


def _modules_after(*imports: str) -> list[str]:
    code = "; ".join(f"import {m}" for m in imports)
    code += "; import sys, json; print(json.dumps(sorted(sys.modules)))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "module",
    [
        "hpcscale.backends.slurm.submit",
        "hpcscale.backends.slurm.query",
        "hpcscale.backends.slurm.backend",
    ],
)
def test_slurm_backend_imports_nothing_of_the_dev_cluster(module: str) -> None:
    """The backend reaches any cluster, real or local, only through SLURM_CONF and PATH."""
    loaded = _modules_after(module)
    assert module in loaded
    assert [m for m in loaded if m.startswith("hpcscale.devcluster")] == []


def test_slurm_backend_package_imports_nothing() -> None:
    loaded = _modules_after("hpcscale.backends.slurm")
    assert [m for m in loaded if m.startswith("hpcscale.backends.slurm.")] == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(tree: ast.Module) -> set[ast.AST]:
    """Import nodes under `if TYPE_CHECKING:` (never run)."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {n for stmt in node.body for n in ast.walk(stmt)}
    return out


def _import_edges(typing: bool = False) -> dict[str, set[str]]:
    """module -> hpcscale modules it imports, at import time or later in a function (a cycle
    through a deferred import is still a cycle); `if TYPE_CHECKING:` imports never run, and
    count only with `typing` (a module whose types name another depends on it too)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = set() if typing else _typing_only(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if node in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import submodule` needs the submodule, not pkg's own namespace
                targets = [
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]
            # a package's own submodules reach it as their parent: not a dependency on it
            found |= {
                t for t in targets if t in modules and t != name and not name.startswith(t + ".")
            }
        edges[name] = found
    return edges


def test_no_import_cycle() -> None:
    """Every module's import-time dependencies form a DAG."""
    edges = _import_edges()
    assert "hpcscale.model.run" in edges["hpcscale.plan.expand"]  # the graph is read
    _assert_acyclic(edges)


def test_no_import_cycle_even_through_type_hints() -> None:
    """Counting `if TYPE_CHECKING:` imports too: the launchers name nothing of the profile,
    not even a type; a launcher is handed the values it needs."""
    edges = _import_edges(typing=True)
    assert "hpcscale.model.registry" in edges["hpcscale.launchers"]  # the graph is read
    launchers = {m: e for m, e in edges.items() if m.startswith("hpcscale.launchers")}
    assert {m: e for m, e in launchers.items() if "hpcscale.model.system" in e} == {}
    _assert_acyclic(edges)


def _assert_acyclic(edges: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def _package_of(module: str) -> str:
    """hpcscale.collect.readers.extract -> hpcscale.collect; top-level modules stand alone."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_package_level_cycle() -> None:
    """Packages depend on each other one way (model at the ground, the CLI on top): a cycle
    between packages hides in module-level DAGs, and it is what makes a package impossible to
    use or test on its own."""
    edges: dict[str, set[str]] = {}
    for module, targets in _import_edges(typing=True).items():
        pkg = _package_of(module)
        edges.setdefault(pkg, set()).update(
            t for t in map(_package_of, targets) if t != pkg and t != "hpcscale"
        )
    assert "hpcscale.model" in edges["hpcscale.render"]  # the graph is read
    _assert_acyclic(edges)


def test_core_and_api_import_without_tensorflow() -> None:
    loaded = _modules_after("hpcscale", "hpcscale.api", "hpcscale.cli.main", "hpcscale.formats")
    assert "hpcscale.api" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("tensorflow", "horovod", "keras")] == []


def test_cli_holds_no_backend_logic() -> None:
    """The CLI reaches backends through hpcscale.api; it may name their option types only."""
    allowed = {"hpcscale.backends.base", "hpcscale.backends.slurm.backend"}
    for path in (PACKAGE / "cli").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("hpcscale.backends", "hpcscale.state.ledger")
            ):
                assert node.module in allowed, f"{path.name} imports {node.module}"
                names = {a.name for a in node.names}
                assert names <= {"BackendOptions", "Submission", "SlurmOptions"}, path.name


def test_model_is_the_ground() -> None:
    """model/ imports nothing else of hpcscale (deferred or typing-only imports included)."""
    edges = _import_edges(typing=True)
    assert "hpcscale.model.run" in edges["hpcscale.plan.expand"]  # the graph is read
    out = {
        m: sorted(e for e in es if not e.startswith("hpcscale.model"))
        for m, es in edges.items()
        if m.startswith("hpcscale.model")
    }
    assert {m: es for m, es in out.items() if es} == {}


# Imports of hpcscale's own modules that may stay inside a function, each with why. Anything
# else is imported at module level: a deferred import hides a dependency (and a cycle) from the
# reader and from the graph tests above.
DEFERRED_ALLOWED: dict[tuple[str, str], str] = {
    # `from hpcscale import probe` runs inside users' training jobs, whose Python may have
    # only the standard library: importing the package must not import the API (pydantic,
    # jinja2, ...), so the package's shortcuts to the API load it on first use.
    ("hpcscale", "hpcscale.api"): "the package stays stdlib-only for hpcscale.probe",
    ("hpcscale", "hpcscale.model.campaign"): "the package stays stdlib-only for hpcscale.probe",
    ("hpcscale", "hpcscale.plan.expand"): "the package stays stdlib-only for hpcscale.probe",
    # the C timeline scanner is an optional extension (built only where a compiler was at
    # install time); where it is imported, its absence is handled (the doctor imports it by
    # the registry's name for the default framework's trace reader, no import statement)
    ("hpcscale.collect.traces.horovod.parse", "hpcscale.collect.traces.horovod._scan"): (
        "optional compiled extension"
    ),
    ("hpcscale.collect.traces.horovod.parse", "hpcscale.collect.traces.horovod.compiled_engine"): (
        "imports the optional compiled extension at its top"
    ),
}
# The API loads what needs pandas, NumPy and matplotlib (collect, report, compare, the trace
# readers' shapes) when first called, so that every CLI command, `hpcscale --version` and
# `--help` start without them: these modules (or what they import) import those libraries at
# their top. Each goes when the libraries are imported late inside it instead.
DEFERRED_FOR_STARTUP = {
    ("hpcscale.api", m): "pandas, NumPy or matplotlib at start-up"
    for m in (
        "hpcscale.analysis.quality",
        "hpcscale.collect.collector",
        "hpcscale.collect.readers.command_row",
        "hpcscale.collect.split",
        "hpcscale.collect.traces.base",
        "hpcscale.collect.traces.summary",
        "hpcscale.report.build",
        "hpcscale.report.compare",
        "hpcscale.report.data",
        "hpcscale.report.fmt",
        "hpcscale.report.labels",
    )
}

# the API's commands that plan, render, submit or check import those parts inside (#28: `hpcscale
# report` paid for the SLURM backend's submitit and asyncio, the doctor, planner and renderer)
DEFERRED_FOR_STARTUP |= {
    ("hpcscale.api", m): "the backends, doctor, planner and renderer at start-up (report)"
    for m in (
        "hpcscale.backends.fit",
        "hpcscale.backends.slurm.backend",
        "hpcscale.doctor_campaign",
        "hpcscale.model.datapaths",
        "hpcscale.plan.expand",
        "hpcscale.render.render",
        "hpcscale.results",
        "hpcscale.writing",
    )
}

# every command imports cli.complete (its options name the callbacks); only a completion needs
# the API (issue 28: `hpcscale report` and `--version` paid for every command's imports)
DEFERRED_FOR_STARTUP |= {
    ("hpcscale.cli.complete", m): "the API at start-up"
    for m in ("hpcscale.api", "hpcscale.model.system")
}


def _is_module(name: str) -> bool:
    """Whether `name` is a module or package of hpcscale (a compiled one by its C source)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.is_dir() or any(path.with_suffix(s).is_file() for s in (".py", ".c"))


def _deferred_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every `import hpcscale...` / `from hpcscale... import` inside a
    function or class body, except under `if TYPE_CHECKING:`."""
    skip = _typing_only(tree)
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for node in ast.walk(fn):
            if node in skip:
                continue
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from pkg import submodule` names the submodule (a C extension's by its source)
                mods = [
                    f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                    else node.module
                    for a in node.names
                ]  # fmt: skip
            elif isinstance(node, ast.ImportFrom) and node.level:  # relative: ours too
                mods = ["hpcscale." + "." * node.level + (node.module or "")]
            else:
                continue
            out += [(node.lineno, m) for m in mods if m.split(".")[0] == "hpcscale"]
    return sorted(set(out))


def test_no_deferred_import_of_hpcscale() -> None:
    """hpcscale's own modules are imported at module level (heavy third-party libraries may
    be imported late, inside the lower modules); the exceptions are listed, with why."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        for line, module in _deferred_imports(ast.parse(path.read_text())):
            if (name, module) not in DEFERRED_ALLOWED | DEFERRED_FOR_STARTUP:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module}")
    assert found == []
    # the walk sees deferred imports: the allowed ones are there
    parse = PACKAGE / "collect" / "traces" / "horovod" / "parse.py"
    assert {m for _, m in _deferred_imports(ast.parse(parse.read_text()))} == {
        "hpcscale.collect.traces.horovod._scan",
        "hpcscale.collect.traces.horovod.compiled_engine",
    }


# What the CLI may import of hpcscale besides the API: itself, the ground (errors, names,
# vocabularies), the small helpers under util/, the version, the developer's local cluster
# (`hpcscale cluster` drives it, not the API), and the backends' option types
# (test_cli_holds_no_backend_logic).
CLI_MAY_IMPORT = (
    "hpcscale.api",
    "hpcscale.cli",
    "hpcscale.model",
    "hpcscale.util",
    "hpcscale.version",
    "hpcscale.devcluster",
    "hpcscale.backends.base",
    "hpcscale.backends.slurm.backend",
)


def test_cli_goes_through_the_api() -> None:
    """Every command is an hpcscale.api call: the CLI reads no trace, table or state module
    itself (it once parsed timelines, built frames and searched run directories by its own
    rules). Type-only imports (`if TYPE_CHECKING:`) may name a result's type."""
    found = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _typing_only(tree)
        for node in ast.walk(tree):
            if node in skip:
                continue
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            found += [
                f"cli/{path.name}:{node.lineno}: {m}"
                for m in mods
                if m.split(".")[0] == "hpcscale"
                and m != "hpcscale"
                and not any(m == a or m.startswith(a + ".") for a in CLI_MAY_IMPORT)
            ]
    assert found == []


# Horovod is one framework among several: it is named only behind its seams (its framework
# modules, its trace reader, its launcher, and the registry lines naming them). These files
# still name it, each with the group of issue #30's plan (notes s12/plan30.md, section 2) that
# will clear it; the test fails when one stops naming it, so the list only shrinks and stays true.
HOROVOD_SEAMS = (
    "hpcscale/frameworks/",
    "hpcscale/collect/traces/horovod/",
    "hpcscale/launchers/horovodrun.py",
    "hpcscale/model/registry.py",  # the registry lines: the framework, reader and launcher
)
STILL_NAMING: dict[str, str] = {
    "hpcscale/analysis/studies.py": "kept: literature citations, named as each study was run",
    # metrics.json's schema (jobs/tf and jobs/torch write it, every existing run's file carries
    # the flat provenance key `horovod`, the report reads it by that key via Framework.software).
    # msgspec declares a file's fields statically and refuses unknown ones (a writer's typo
    # fails); a generic `software` mapping nests the versions (a new file format, read twice
    # forever), fields built from the registry at import (defstruct) only move the word and hide
    # the schema, and a renamed field (`name=`) still spells it
    "hpcscale/formats/metrics.py": "kept: file-format field `horovod` (a version)",
    # the one contract between the renderer (frameworks/) and both bundled programs (jobs/): the
    # only modules both may import are model/ and formats/ (jobs never import hpcscale.frameworks,
    # hpcscale never imports jobs). The TF-only flags (the strategy value `horovod`, its help,
    # --timeline's and --mark-cycles') in jobs/tf/ would be loaded by path by the renderer and by
    # workloads.RESERVED, and imported by jobs/torch (which refuses them by name), or declared
    # twice; respelling the help would only hide them
    "hpcscale/model/job_cli.py": "kept: the TF programs' flags (shared renderer/job contract)",
}


def _naming_horovod(root: Path) -> set[str]:
    """Source files under root/hpcscale naming Horovod (any case), outside its seams."""
    return {
        rel
        for path in (root / "hpcscale").rglob("*.py")
        if not (rel := path.relative_to(root).as_posix()).startswith(HOROVOD_SEAMS)
        and "horovod" in path.read_text().lower()
    }


def test_horovod_named_only_behind_its_seams(tmp_path: Path) -> None:
    """A new mention of Horovod outside its seams fails, and so does a listed file that no
    longer names it (take it off STILL_NAMING)."""
    naming = _naming_horovod(PACKAGE.parent)
    assert sorted(naming - STILL_NAMING.keys()) == [], "name it behind the framework's seam"
    assert sorted(STILL_NAMING.keys() - naming) == [], "cleared: take it off STILL_NAMING"
    # the scan sees a mention, in any case, and lets the seams name it
    (tmp_path / "hpcscale" / "frameworks").mkdir(parents=True)
    (tmp_path / "hpcscale" / "new.py").write_text("# as horovodrun does\n")
    (tmp_path / "hpcscale" / "frameworks" / "x.py").write_text('"""HOROVOD_RANK"""\n')
    assert _naming_horovod(tmp_path) == {"hpcscale/new.py"}
