"""Jobs run on the site's Python: everything a job imports (jobs/ and the parts of hpcscale they
import) runs on Python 3.9, the oldest a profile loads (owens: python/3.9-2022.05) and the oldest
TensorFlow 2.15 supports. The hpcscale core itself needs 3.11; the job side must not.

vermin checks those files for 3.10-only syntax and library calls, `X | Y` unions included (msgspec
evaluates a Struct's annotations when it is used: `str | None` is a TypeError there on 3.9).
Where this machine has a Python 3.9 (pyenv's, or Debian's on older releases), the same modules
are imported under it for real and the job's command line is run."""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VERMIN = [
    str(Path(sys.executable).parent / "vermin"),
    "--target=3.9-",
    "--no-tips",
    "--eval-annotations",
    "--feature",
    "union-types",
    "--violations",
    "--format",
    "parsable",
]
# what jobs/ import beside hpcscale: not installed in the 3.9 environment made here
JOB_ONLY_DEPS = {
    "tensorflow", "numpy", "horovod", "keras", "mpi4py", "PIL", "h5py", "scipy", "torch"
}  # fmt: skip


# ---------------------------------------------------------------- the import closure


def _module_file(root: Path, name: str) -> Path | None:
    path = root.joinpath(*name.split("."))
    for f in (path / "__init__.py", path.with_suffix(".py")):
        if f.is_file():
            return f
    return None


def _imports(tree: ast.Module, package: str) -> Iterator[str]:
    """Modules an import statement anywhere in `tree` names (function bodies too: `train.main`
    imports the harness late), except under `if TYPE_CHECKING:` (never run) and inside a
    module-level `__getattr__` (PEP 562: runs only when a lazy name is asked for, and no job
    asks hpcscale for its API)."""

    def walk(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from (n for stmt in child.orelse for n in [stmt, *walk(stmt)])
                continue
            if isinstance(child, ast.FunctionDef) and child.name == "__getattr__" and node is tree:
                continue
            yield child
            yield from walk(child)

    for node in walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # submodules, when they are


def job_closure(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file of every first-party module a job can import: all of jobs/, and the
    hpcscale modules they reach (their parent packages included: importing a.b runs a)."""
    todo = [
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted((root / "jobs").rglob("*.py"))
    ]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen or (path := _module_file(root, name)) is None:
            continue
        seen[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [
            m
            for m in _imports(ast.parse(path.read_text()), package)
            if m.split(".")[0] in ("jobs", "hpcscale")
        ]
    return dict(sorted(seen.items()))


def check_py39(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """vermin over `files`: exit 0 when all run on Python 3.9, else 1 with one line per use."""
    return subprocess.run([*VERMIN, *map(str, files)], capture_output=True, text=True, timeout=300)


def test_the_closure_is_jobs_and_the_formats_layer() -> None:
    """jobs/ import from hpcscale only the formats layer (and what it needs), as the design
    says; measured once with `python -X importtime jobs/tf/train.py` on a real DCGAN run, which
    loaded hpcscale, .core, .core.vocab, .errors and .formats{,._messages,.atomic,.job_cli,
    .metrics,.steps} (since moved: .model, .model.vocab, .model.errors, .model.job_cli): all
    must be in the closure. A job importing pandas' or pydantic's side of hpcscale would put
    the whole core on the site's Python."""
    closure = job_closure()
    core = {n for n in closure if n.startswith("hpcscale")}
    measured = {
        "hpcscale", "hpcscale.model", "hpcscale.model.vocab", "hpcscale.model.errors",
        "hpcscale.formats", "hpcscale.formats._messages", "hpcscale.formats.atomic",
        "hpcscale.model.job_cli", "hpcscale.formats.metrics", "hpcscale.formats.steps",
    }  # fmt: skip
    assert measured <= core
    allowed = {
        "hpcscale", "hpcscale.model", "hpcscale.model.vocab", "hpcscale.model.errors",
        "hpcscale.model.job_cli", "hpcscale.model.registry",  # the strategies' names (stdlib)
    }  # fmt: skip
    assert {n for n in core if not n.startswith("hpcscale.formats")} <= allowed
    assert {"jobs.tf.train", "jobs.tf.harness", "jobs.tf.distribute", "jobs.tf.config"} <= set(
        closure
    )


def test_ruff_lints_the_closure_as_python39() -> None:
    """pyproject's per-file-target-version names every file of the closure (so ruff never asks
    for `X | None` or `zip(strict=)` there) and nothing of the core beyond it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    globs = [g for g, v in config["per-file-target-version"].items() if v == "py39"]
    files = [str(p.relative_to(ROOT)) for p in job_closure().values()]
    package_inits = {"hpcscale/__init__.py", "hpcscale/model/__init__.py"}  # no annotations
    assert [
        f for f in files if f not in package_inits and not any(fnmatch(f, g) for g in globs)
    ] == []
    assert config["lint"]["pyupgrade"]["keep-runtime-typing"] is True


def test_everything_a_job_imports_runs_on_python39() -> None:
    res = check_py39(list(job_closure().values()))
    assert res.returncode == 0, res.stdout + res.stderr


BAD_CODE = {
    "slots dataclass": (
        "from dataclasses import dataclass\n\n@dataclass(frozen=True, slots=True)\n"
        "class Shape:\n    nodes: int\n",
        "dataclasses.dataclass(slots)",
    ),
    "zip strict": ("def pairs(a, b):\n    return list(zip(a, b, strict=True))\n", "zip(strict)"),
    "match": ("def kind(x):\n    match x:\n        case 1:\n            return 'one'\n", "pattern"),
    "union in a Struct": (
        "from __future__ import annotations\n\nimport msgspec\n\n"
        "class Rec(msgspec.Struct):\n    host: str | None = None\n",
        "union types",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_CODE))
def test_the_check_fails_on_python310_code_in_jobs(kind: str, tmp_path: Path) -> None:
    """The same check over a copy of the tree with one 3.10-only module in jobs/: it fails and
    names the file and the feature."""
    code, feature = BAD_CODE[kind]
    for top in ("jobs", "hpcscale"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "jobs" / "site_py.py").write_text(code)
    closure = job_closure(tmp_path)
    assert "jobs.site_py" in closure
    res = check_py39(list(closure.values()))
    assert res.returncode == 1
    bad = [ln for ln in res.stdout.splitlines() if ln.startswith(str(tmp_path)) and "3.10" in ln]
    assert {ln.split(":")[0] for ln in bad} == {str(tmp_path / "jobs" / "site_py.py")}
    assert any(feature in ln for ln in bad), res.stdout


# ---------------------------------------------------------------- a real Python 3.9


def _python39() -> str | None:
    """A Python 3.9 on this machine: on PATH, Debian's, or pyenv's (whose shim on PATH runs
    only the selected version, so its versions/ directory is searched)."""
    found = [shutil.which("python3.9"), "/usr/bin/python3.9", "/usr/local/bin/python3.9"]
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    found += sorted(p for r in roots if r for p in glob.glob(f"{r}/versions/3.9*/bin/python3.9"))
    for exe in filter(None, found):
        try:
            res = subprocess.run(
                [exe, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        except OSError:
            continue
        if res.stdout.strip() == "True":
            return exe
    return None


@pytest.fixture(scope="session")
def python39(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python 3.9 venv with msgspec (the formats layer's one dependency), made once."""
    exe = _python39()
    if exe is None:
        pytest.skip("no Python 3.9 on this machine (pyenv install 3.9, or Debian's python3.9); "
                    "the vermin check above still holds")  # fmt: skip
    venv = tmp_path_factory.mktemp("py39") / "venv"
    subprocess.run([exe, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "msgspec"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if pip.returncode != 0:
        pytest.skip(f"cannot install msgspec for Python 3.9 here: {pip.stderr.strip()[-300:]}")
    return venv / "bin/python"


IMPORT_ALL = """
import importlib, inspect, sys, traceback
import msgspec
skipped = []
for name in sys.argv[2:]:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name.split(".")[0] in sys.argv[1].split(","):
            skipped.append(name)
            continue
        raise
    for cls in vars(module).values():
        if inspect.isclass(cls) and issubclass(cls, msgspec.Struct) and cls.__module__ == name:
            msgspec.json.schema(cls)  # evaluates every annotation, as decoding does
print("needs-tf:", " ".join(skipped))
"""


def test_job_modules_import_and_run_under_python39(python39: Path, tmp_path: Path) -> None:
    """Under a real 3.9: every module of the closure that needs no TensorFlow imports (each
    msgspec Struct's annotations evaluated), and train.py parses a command line and rejects a
    bad one with its own one-line error (exit 2)."""
    closure = job_closure()
    res = subprocess.run(
        [str(python39), "-c", IMPORT_ALL, ",".join(sorted(JOB_ONLY_DEPS)), *closure],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    needs_tf = set(res.stdout.split("needs-tf:")[1].split())
    imported = set(closure) - needs_tf
    assert {n for n in closure if n.startswith("hpcscale")} <= imported
    assert {"jobs.tf.train", "jobs.tf.config", "jobs.tf.manifest", "jobs.tf.models"} <= imported
    bad = subprocess.run(
        [str(python39), str(ROOT / "jobs/tf/train.py"), "--model", "dcgan", "--run-dir",
         str(tmp_path / "run"), "--batch-per-rank", "4", "--epochs", "1",
         "--data-dir", str(tmp_path / "missing")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2, bad.stderr
    assert f"--data-dir {tmp_path / 'missing'}: not a directory" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_vermin_is_a_dev_dependency() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("vermin") for d in deps["optional-dependencies"]["dev"])
