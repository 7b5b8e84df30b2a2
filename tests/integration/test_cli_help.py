"""`--help` and shell completion as a newcomer meets them (issue 29, "Smaller"): usage lines
that name arguments plainly, one value's type for a repeatable option, help text shown whole
and wrapped only at the terminal's width, and completion of campaign, example and system names
through the shell's own protocol (the console script run as bash runs it on TAB).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from hpcscale.cli.main import app
from tests.conftest import CAMPAIGNS, REPO

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"
CLI = get_command(app)
RUNNER = CliRunner()
OPTION_WORD = re.compile(r"(?<![\w-])--[a-z][a-z-]*[a-z]")


def commands(group: Any = CLI, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command line that has a --help: the groups and their commands."""
    yield path
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name)


def command_of(path: tuple[str, ...]) -> Any:
    cmd: Any = CLI
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def shown_help(path: tuple[str, ...], columns: int) -> str:
    """`hpcscale ... --help` as printed on a terminal `columns` wide (in-process: the same app
    the console script runs, some forty times faster than as many interpreters)."""
    result = RUNNER.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


ALL = list(commands())


@pytest.fixture(scope="module")
def helps() -> dict[tuple[str, ...], dict[int, str]]:
    """Every command's help at 80 columns (a newcomer's terminal) and 1000 (nothing wraps)."""
    return {path: {w: shown_help(path, w) for w in (80, 1000)} for path in ALL}


def test_usage_lines_name_arguments_as_click_does(helps: dict) -> None:
    """`CAMPAIGN`, `[CAMPAIGN]`, `CAMPAIGN...`: never `{campaign}`, which reads like a
    placeholder to type; nowhere a `<list[str]>`."""
    usage = {
        path: h[80].split("Usage: ", 1)[1].splitlines()[0].strip() for path, h in helps.items()
    }
    assert usage[("validate",)] == "hpcscale validate [OPTIONS] CAMPAIGN"
    assert usage[("submit",)] == "hpcscale submit [OPTIONS] CAMPAIGN"
    assert usage[("status",)] == "hpcscale status [OPTIONS] [CAMPAIGN]"
    assert usage[("init",)] == "hpcscale init [OPTIONS] [DIRECTORY]"
    assert usage[("compare",)] == "hpcscale compare [OPTIONS] CAMPAIGN..."
    for path, line in usage.items():
        assert "{" not in line and "}" not in line, (path, line)
    for path, h in helps.items():
        assert "list[" not in h[1000], path
    report = helps[("report",)][1000]
    assert re.search(r"--target\s+-?\s*<str>\s", report), report
    assert re.search(r"--format\s+-f\s+<md\|html\|csv\|parquet>\s", report), report
    assert re.search(r"CAMPAIGN\s+<str>\.\.\.\s", helps[("compare",)][1000])


def test_help_names_only_options_the_command_has(helps: dict) -> None:
    """An option named in a command's help is one it takes (resubmit has no --follow), unless
    the help names the command it belongs to (`init --list`)."""
    for path, h in helps.items():
        cmd = command_of(path)
        own = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        text = h[1000].split("Usage:", 1)[1]
        names = {*CLI.commands, "hpcscale"}  # `init --list` names another command's option
        mentioned = {
            m.group()
            for m in OPTION_WORD.finditer(text)
            if (text[: m.start()].split() or [""])[-1].strip("`(\"'") not in names
        }
        if path == ():  # the top-level help shows a session: every command's options
            continue
        assert mentioned <= own | {"--help"}, (path, mentioned - own)
    assert "--follow" not in helps[("resubmit",)][1000]


def test_help_text_is_shown_whole_and_never_broken_mid_sentence(helps: dict) -> None:
    """At a width where nothing wraps, each paragraph of a command's description is one line
    (the docstring's line ends are not line breaks), each command's summary is one line of its
    group's list, and every option's help is there word for word (a `[default: local]` in it
    is text, not a markup tag to drop)."""
    for path in ALL:
        cmd, wide = command_of(path), helps[path][1000]
        if cmd.help and path:
            for para in cmd.help.split("\n\n"):
                line = " ".join(para.split())
                assert line in wide, (path, line)
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                summary = " ".join(sub.help.split("\n\n")[0].split()) if sub.help else ""
                assert summary in wide, (path, name, summary)
        for param in cmd.params:
            helptext = getattr(param, "help", None)
            if helptext and not getattr(param, "hidden", False):
                assert " ".join(helptext.split()) in wide, (path, param.name)
    doctor = helps[("doctor",)][1000]
    assert "[default: local]" in doctor and "[default: ./campaign.yaml when there is one]" in doctor


def test_prose_fills_80_columns(helps: dict) -> None:
    """At 80 columns a description line ends only where the next word would not fit, every
    option's name is shown whole, and the top-level help's example session keeps one command
    and its comment a line."""
    for path, h in helps.items():
        prose = h[80].split("\n\n", 1)[1].split("╭", 1)[0].splitlines()
        for a, b in itertools.pairwise(prose):
            if re.match(r"^ \S", a) and re.match(r"^ \S", b):
                room = 80 - 2  # rich's one-column margins
                assert len(a.rstrip()) + 1 + len(b.split()[0]) > room, (path, a, b)
    for path, h in helps.items():  # an option's name whole, not `--include-partial-tim…`
        for param in command_of(path).params:
            for name in (o for o in param.opts if o.startswith("--")):
                assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", h[80]), (path, name)
    top = helps[()][80]
    session = [ln.strip() for ln in (app.info.help or "").splitlines() if ln.startswith("  hpc")]
    assert len(session) >= 6
    for line in session:
        assert re.search(rf"^\s+{re.escape(line)}\s*$", top, re.M), line


# ---------------------------------------------------------------- shell completion


def complete(line: str, cwd: Path, xdg: Path) -> list[str]:
    """What bash offers on TAB after `line`: the completion function `hpcscale
    --show-completion bash` prints (what `--install-completion` installs), called by bash with
    COMP_WORDS and COMP_CWORD set as readline sets them."""
    words = line.split() + ([""] if line.endswith(" ") else [])
    env = {k: v for k, v in os.environ.items() if k not in ("HPCSCALE_WORKDIR", "COLUMNS")}
    env |= {"XDG_DATA_HOME": str(xdg), "HPCSCALE_SYSTEMS_PATH": "", "SHELL": "/bin/bash"}
    env["PATH"] = f"{Path(EXE).parent}{os.pathsep}{env.get('PATH', '')}"
    script = (
        'eval "$(hpcscale --show-completion bash)"\n'
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_hpcscale_completion hpcscale\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def run_cli(*args: str, cwd: Path, xdg: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HPCSCALE_WORKDIR"}
    proc = subprocess.run(
        [EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**env, "XDG_DATA_HOME": str(xdg), "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)


def test_shell_completion_offers_campaign_example_and_system_names(tmp_path: Path) -> None:
    """Campaign names from ./hpcscale-runs and from every workdir hpcscale has rendered into
    (the per-user index), shipped example names, shipped profile names, and campaign files."""
    xdg, here, there, elsewhere = (tmp_path / d for d in ("xdg", "here", "there", "elsewhere"))
    for d in (here, there, elsewhere):
        d.mkdir()
    run_cli("init", "--example", "quickstart", cwd=here, xdg=xdg)
    run_cli("render", "quickstart.yaml", cwd=here, xdg=xdg)
    (there / "mine.yaml").write_text(
        (CAMPAIGNS / "quickstart.yaml").read_text().replace("name: quickstart", "name: my_study")
    )
    run_cli("render", "mine.yaml", cwd=there, xdg=xdg)

    assert complete("hpcscale status ", here, xdg) == ["quickstart", "my_study", "quickstart.yaml"]
    assert complete("hpcscale status my", elsewhere, xdg) == ["my_study"]
    assert complete("hpcscale report q", here, xdg) == ["quickstart", "quickstart.yaml"]
    assert complete("hpcscale compare quickstart ", there, xdg) == [
        "my_study", "quickstart", "mine.yaml"
    ]  # fmt: skip
    assert complete("hpcscale submit ", there, xdg) == ["mine.yaml"]

    examples = sorted(p.stem for p in CAMPAIGNS.glob("*.yaml"))
    assert complete("hpcscale init --example ", elsewhere, xdg) == examples
    assert complete("hpcscale init --example quick", elsewhere, xdg) == [
        e for e in examples if e.startswith("quick")
    ]
    profiles = sorted(p.stem for p in (REPO / "hpcscale" / "systems").glob("*.yaml"))
    assert complete("hpcscale init --system ", elsewhere, xdg) == profiles
    assert complete("hpcscale plan mine.yaml --system ", there, xdg) == [*profiles, "mine.yaml"]
    assert complete("hpcscale init --system ow", elsewhere, xdg) == ["owens"]

    readme = (REPO / "README.md").read_text()
    assert "hpcscale --install-completion" in readme
