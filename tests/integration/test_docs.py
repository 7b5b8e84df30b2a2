"""The README and the guides in docs/ stay true (issue 20): a newcomer follows them to the letter.

- A fenced block whose info string is `bash runnable` (or `python runnable`) is run as written,
  alone, in a fresh temporary directory (its working directory), with the venv's bin/ first on
  PATH and HPCSCALE_WORKDIR at ./hpcscale-runs there, and must exit 0 (docs/development.md).
- Every `hpcscale ...` command in a shell block names a command and options the CLI has, and
  every `make TARGET` a target of the Makefile: a block not run must still be right.
- Links between the docs reach a file (and a heading) that exists.
- docs/reference.md is what `python -m hpcscale.reference` generates from hpcscale/model/vocab.py.
- The README's Horovod build is the command `hpcscale doctor` prints.

The README's whole tour and docs/own-program.md's short example, submit, collect and report
included, run from the installed wheel in tests/integration/test_docs_tour.py.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from hpcscale import reference
from hpcscale.cli.main import app
from hpcscale.frameworks.horovod_tf_doctor import horovod_command

ROOT = Path(__file__).resolve().parents[2]
DOCS: tuple[Path, ...] = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BIN = Path(sys.executable).parent
# info string -> the interpreter a runnable block is run with (its text as the last argument)
RUNNERS: dict[str, list[str]] = {
    "bash runnable": ["bash", "-euo", "pipefail", "-c"],
    "python runnable": [sys.executable, "-c"],
}
SHELL_INFOS = frozenset({"", "bash", "sh", "shell", "console"})  # blocks whose commands are checked
TIMEOUT_S = 120  # a runnable block takes seconds; this only stops a hang
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
SUBSHELL = re.compile(r"\$\(([^()]*)\)")
OPERATORS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "("})


@dataclass(frozen=True)
class Block:
    """One fenced code block of a doc: its info string, text and where it opens."""

    path: Path
    line: int
    info: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def opening(line: str) -> re.Match[str] | None:
    """The fence a line opens (CommonMark: a backtick fence's info string has no backtick, so
    a line starting with inline code is prose)."""
    m = FENCE.match(line)
    return None if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)) else m


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file (CommonMark fences: ``` or ~~~, closed by a fence of
    the same character at least as long)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = opening(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).strip(), i
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if (
                close
                and close.group(1)[0] == fence[0]
                and len(close.group(1)) >= len(fence)
                and not close.group(2).strip()
            ):
                break
            body.append(lines[i])
            i += 1
        out.append(Block(path, start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return out


def prose_lines(path: Path) -> Iterator[str]:
    """The lines of a Markdown file outside its fenced blocks."""
    inside: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if inside is None and (start := opening(line)):
            inside = start.group(1)
        elif inside is not None and m and m.group(1)[0] == inside[0]:
            if len(m.group(1)) >= len(inside) and not m.group(2).strip():
                inside = None
        elif inside is None:
            yield line


BLOCKS: list[Block] = [b for p in DOCS for b in code_blocks(p)]
RUNNABLE: list[Block] = [b for b in BLOCKS if b.info in RUNNERS]


def block_env(directory: Path) -> dict[str, str]:
    """What a reader's shell has after installing hpcscale: the venv's bin/ first on PATH, the
    default workdir (./hpcscale-runs) spelled out; nothing of this session's own profile path."""
    env = {k: v for k, v in os.environ.items() if k != "HPCSCALE_SYSTEMS_PATH"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HPCSCALE_WORKDIR"] = str(directory / "hpcscale-runs")
    env["COLUMNS"] = "200"
    return env


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
def test_runnable_block_succeeds(block: Block, tmp_path: Path) -> None:
    """A block marked runnable works as shown, from an empty directory."""
    work = tmp_path / "reader"
    work.mkdir()
    proc = subprocess.run(
        [*RUNNERS[block.info], block.text],
        cwd=work,
        env=block_env(work),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{block.name} ({block.info}) exited {proc.returncode}\n--- block\n{block.text}"
        f"--- stdout (end)\n{proc.stdout[-3000:]}\n--- stderr (end)\n{proc.stderr[-3000:]}"
    )


def test_the_readme_and_the_guides_have_runnable_blocks() -> None:
    """The marker is the contract: a README without a runnable tour would test nothing."""
    readme = [b for b in RUNNABLE if b.path.name == "README.md"]
    assert readme, "README.md has no `bash runnable` block (the tour must stay tested)"
    assert any("hpcscale init" in b.text for b in readme)
    assert {b.path.name for b in RUNNABLE} - {"README.md"}, "no guide has a runnable block"


# ---------------------------------------------------------------- commands shown exist

CLI = get_command(app)
MAKE_TARGETS = frozenset(
    re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", (ROOT / "Makefile").read_text(), re.MULTILINE)
)


def shell_lines(text: str) -> Iterator[str]:
    """A shell block's command lines: heredoc bodies (a campaign's YAML) left out."""
    until: str | None = None
    for line in text.splitlines():
        if until is not None:
            if line.strip() == until:
                until = None
            continue
        if m := HEREDOC.search(line):
            until = m.group(1)
        yield line


def words(line: str) -> list[str]:
    """A command line as the shell splits it, comments dropped, operators as words of their own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>(")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote in a synopsis: split on blanks
        return line.split("#", 1)[0].split()


def commands(line: str, program: str) -> Iterator[list[str]]:
    """The arguments of every `program` command on a line, `$(...)` substitutions included."""
    for inner in SUBSHELL.findall(line):
        yield from commands(inner, program)
    args: list[str] | None = None
    for word in words(line):
        if word in OPERATORS:
            if args is not None:
                yield args
            args = None
        elif args is not None:
            args.append(word.strip("[]"))
        elif word == program or word.endswith("/" + program):
            args = []
    if args is not None:
        yield args


def cli_problems(args: list[str]) -> list[str]:
    """What in `hpcscale ARGS` the CLI does not have: an unknown command or option."""
    cmd: Any = CLI  # typer's own click: a group is a command with `commands`
    said = ["hpcscale"]
    rest = list(args)
    while getattr(cmd, "commands", None) is not None and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        if name not in cmd.commands:
            return [f"`{' '.join(said)}` has no command {name!r}"]
        cmd = cmd.commands[name]
        said.append(name)
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    options = [a.split("=", 1)[0] for a in rest if re.match(r"^--?[A-Za-z]", a)]
    return [f"`{' '.join(said)}` has no option {o}" for o in options if o not in known]


def shown_commands() -> Iterator[tuple[Block, str]]:
    for block in BLOCKS:
        if block.info.split(" ")[0] in SHELL_INFOS:
            for line in shell_lines(block.text):
                yield block, line


def test_every_hpcscale_command_shown_exists() -> None:
    problems = [
        f"{block.name}: {p}  <- {line.strip()}"
        for block, line in shown_commands()
        for args in commands(line, "hpcscale")
        for p in cli_problems(args)
    ]
    seen = sum(1 for _, line in shown_commands() for _ in commands(line, "hpcscale"))
    assert seen > 20, f"only {seen} hpcscale commands found in the docs: is the parser broken?"
    assert not problems, "\n".join(problems)


def test_every_make_target_shown_exists() -> None:
    problems = [
        f"{block.name}: no Makefile target {target!r}  <- {line.strip()}"
        for block, line in shown_commands()
        for args in commands(line, "make")
        for target in args
        if not target.startswith("-") and "=" not in target and target not in MAKE_TARGETS
    ]
    seen = sum(1 for _, line in shown_commands() for _ in commands(line, "make"))
    assert seen >= 2, f"only {seen} make commands found in the docs: is the parser broken?"
    assert not problems, "\n".join(problems)


def test_the_checker_catches_what_is_not_there() -> None:
    """The command check itself: a wrong command or option is caught, a right one passes."""
    assert cli_problems(["plan", "c.yaml", "--json"]) == []
    assert cli_problems(["cluster", "up", "--nodes", "2"]) == []
    assert cli_problems(["plan", "c.yaml", "--jsn"]) == ["`hpcscale plan` has no option --jsn"]
    assert cli_problems(["plot"]) == ["`hpcscale` has no command 'plot'"]
    line = 'eval "$(hpcscale cluster up)" && hpcscale status x --watch | cat  # a comment --no'
    assert list(commands(line, "hpcscale")) == [["cluster", "up"], ["status", "x", "--watch"]]


# ---------------------------------------------------------------- links


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, blanks as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for line in prose_lines(path) if (m := HEADING.match(line))}


def test_links_between_the_docs_resolve() -> None:
    problems, seen = [], 0
    for path in DOCS:
        for line in prose_lines(path):
            for target in LINK.findall(line):
                seen += 1
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, mailto:: not ours to check offline
                file, _, anchor = target.partition("#")
                dest = (path.parent / file).resolve() if file else path
                if not dest.exists():
                    problems.append(f"{path.relative_to(ROOT)}: {target}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problems.append(f"{path.relative_to(ROOT)}: {target}: no such heading")
    assert seen > 10, f"only {seen} links found in the docs: is the parser broken?"
    assert not problems, "\n".join(problems)


def test_every_guide_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in DOCS[1:] if f"docs/{p.name}" not in readme]
    assert not missing, f"README.md does not link {', '.join(missing)}"


# ---------------------------------------------------------------- generated and shared text


def test_reference_is_not_stale() -> None:
    """docs/reference.md is generated from hpcscale/model/vocab.py: regenerated here, it must be
    the file as committed."""
    path = ROOT / reference.REFERENCE
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    fresh = reference.render()
    diff = "".join(
        list(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                fresh.splitlines(keepends=True),
                str(reference.REFERENCE),
                "generated",
            )
        )[:60]
    )
    assert current == fresh, f"{reference.REFERENCE} is stale: run `{reference.COMMAND}`\n{diff}"


def test_reference_check_mode_says_stale(tmp_path: Path) -> None:
    stale = tmp_path / "reference.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert reference.main([str(stale), "--check"]) == 1
    assert stale.read_text(encoding="utf-8") == "# old\n"  # --check writes nothing
    assert reference.main([str(stale)]) == 0
    assert reference.main([str(stale), "--check"]) == 0


def test_readme_horovod_build_is_the_doctors() -> None:
    """The README's source build of Horovod is exactly what `hpcscale doctor` prints for a
    profile whose jobs run with python3 (the Makefile's flags:
    tests/integration/test_packaging.py)."""
    assert horovod_command("python3") in (ROOT / "README.md").read_text(encoding="utf-8")
