"""`hpcscale` imports only the command that runs (issue 28: the cached report of 1,000 runs paid
for every other command's imports). Checked in fresh interpreters, through sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys

# every command module, and what only other commands need (api: every command but the ones below
# goes through it; the developer's local cluster: `hpcscale cluster` only)
COMMAND_MODULES = [
    "hpcscale.cli.campaign",
    "hpcscale.cli.cluster",
    "hpcscale.cli.collect",
    "hpcscale.cli.compare",
    "hpcscale.cli.doctor",
    "hpcscale.cli.init",
    "hpcscale.cli.models",
    "hpcscale.cli.report",
    "hpcscale.cli.status",
    "hpcscale.cli.submit",
]


def _loaded_after(code: str) -> list[str]:
    """The hpcscale modules a fresh interpreter holds after running `code`."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('hpcscale'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.splitlines()[-1])


def _run_cli(*argv: str) -> str:
    """Run the console entry point with `argv` in this process's way, swallowing its exit."""
    return (
        "import sys\nfrom hpcscale.cli.main import run\n"
        f"sys.argv = ['hpcscale', *{list(argv)!r}]\n"
        "try:\n    run()\nexcept SystemExit:\n    pass"
    )


def test_importing_the_cli_imports_no_command() -> None:
    loaded = _loaded_after("import hpcscale.cli.main")
    assert [m for m in COMMAND_MODULES if m in loaded] == []
    assert "hpcscale.api" not in loaded
    assert [m for m in loaded if m.startswith("hpcscale.devcluster")] == []


def test_a_command_imports_its_own_module_only() -> None:
    loaded = _loaded_after(_run_cli("report", "--help"))
    assert [m for m in COMMAND_MODULES if m in loaded] == ["hpcscale.cli.report"]
    assert [m for m in loaded if m.startswith("hpcscale.devcluster")] == []
    loaded = _loaded_after(_run_cli("cluster", "status", "--help"))
    assert [m for m in COMMAND_MODULES if m in loaded] == ["hpcscale.cli.cluster"]


def test_version_imports_no_command() -> None:
    loaded = _loaded_after(_run_cli("--version"))
    assert [m for m in COMMAND_MODULES if m in loaded] == []
    assert "hpcscale.api" not in loaded


def test_the_group_lists_every_command_in_order_and_help_imports_them() -> None:
    code = (
        "from typer.main import get_command\nfrom hpcscale.cli.main import app\n"
        "group = get_command(app)\n"
        "print(list(group.commands))\n"
        "print({n: group.commands[n].name for n in group.commands})\n"
        "print(sorted(group.commands['cluster'].commands))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [
        "init", "doctor", "validate", "plan", "render", "models", "submit", "status", "logs",
        "cancel", "resubmit", "collect", "timeline", "trace", "report", "compare", "cluster",
    ]  # fmt: skip
    assert out[0] == repr(names)
    assert out[1] == repr({n: n for n in names})  # each built, under its own name
    assert out[2] == repr(["down", "status", "up"])
    # the group's help names every command, so it imports them all
    loaded = _loaded_after(_run_cli("--help"))
    assert [m for m in COMMAND_MODULES if m not in loaded] == []
