"""The tests' `hpcscale()` runs the CLI in the test process (tests/cli_inprocess.py): what it
returns is what the console script run as its own process returns, exit status, stdout and
stderr alike, for output that depends on the terminal's width, JSON, usage errors, user errors,
and an uncaught exception (--debug)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CAMPAIGNS, hpcscale


def _both(*args: str, **kwargs: object) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    here = hpcscale(*args, **kwargs)  # type: ignore[arg-type]
    own = hpcscale(*args, subprocess=True, **kwargs)  # type: ignore[arg-type]
    return (here.returncode, here.stdout, here.stderr), (own.returncode, own.stdout, own.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        (),
        ("--help",),
        ("submit", "--help"),
        ("plan", str(CAMPAIGNS / "fusion_sweep.yaml")),
        ("plan", "--json", str(CAMPAIGNS / "quickstart.yaml")),
        ("validate", str(CAMPAIGNS / "quickstart.yaml")),
        ("plan", "no-such-campaign.yaml"),  # a user error: one line, exit 2
        ("plan",),  # a usage error: click's message, exit 2
        ("no-such-command",),
    ],
)
def test_in_process_call_returns_what_the_process_does(args: tuple[str, ...]) -> None:
    here, own = _both(*args)
    assert here == own


def test_width_and_workdir_come_from_each_calls_environment(tmp_path: Path) -> None:
    """COLUMNS per call (rich decides a console's width when it is made), and env and cwd
    given to one call only."""
    path = str(CAMPAIGNS / "fusion_sweep.yaml")
    for columns in ("40", "200", "40"):
        here, own = _both("plan", path, env={"COLUMNS": columns})
        assert here == own
    wd = tmp_path / "wd"
    (tmp_path / "none").mkdir()  # no quickstart.yaml there: exit 2, naming the example
    here, own = _both("render", "quickstart.yaml", env={"HPCSCALE_WORKDIR": str(wd)},
                      cwd=tmp_path / "none")  # fmt: skip
    assert here == own and here[0] == 2
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "q.yaml").write_text((CAMPAIGNS / "quickstart.yaml").read_text())
    rendered = hpcscale("render", "q.yaml", env={"HPCSCALE_WORKDIR": str(wd)}, cwd=tmp_path / "c")
    assert rendered.returncode == 0, rendered.stderr
    assert (wd / "quickstart" / "campaign.yaml").is_file()
    assert Path.cwd() != tmp_path / "c"


def test_an_uncaught_exception_is_exit_1_with_its_traceback() -> None:
    """--debug re-raises: the interpreter prints the traceback and exits 1."""
    here, own = _both("--debug", "plan", "no-such-campaign.yaml")
    assert here[0] == own[0] == 1
    assert here[1] == own[1]
    assert here[2].startswith("Traceback (most recent call last):")
    assert here[2].splitlines()[-1] == own[2].splitlines()[-1]
