"""Validation that means what it says: whole-text name checks (no trailing newline),
setup lines bash can parse, placeholders only where a site's or a data path's value belongs,
argument sizes exec accepts, and system names that cannot steer `init` out of its directory.
Everything through the real `hpcscale validate` / `init` commands on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, Field, ValidationError

from hpcscale.model.campaign import Workload
from tests.conftest import hpcscale

LOCAL = (Path(__file__).resolve().parents[3] / "hpcscale" / "systems" / "local.yaml").read_text()


def campaign(tmp_path: Path, system: str = "local", **over: object) -> Path:
    """The quickstart's shape on `system`, with `over` replacing its keys."""
    spec: dict = {
        "name": "strict",
        "workload": {"model": "dcgan", "epochs": 1, "args": {"image_size": 32}},
        "system": system,
        "scaling": "weak",
        "matrix": {"layout": ["1x1"], "batch": 16},
    }
    spec.update(over)
    path = tmp_path / "camp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def profile(tmp_path: Path, **over: object) -> Path:
    """The shipped `local` profile with `over` replacing its keys, as a file."""
    data = yaml.safe_load(LOCAL)
    data.update(over)
    path = tmp_path / "prof.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def refused(path: Path, *words: str) -> str:
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    for w in words:
        assert w in proc.stderr, proc.stderr
    return proc.stderr


# ---------------------------------------------------------------- full matches


def test_a_campaign_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    refused(campaign(tmp_path, name="nl\n"), "name must be")


def test_an_env_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    prof = profile(tmp_path, env={"FOO\n": "1"})
    refused(campaign(tmp_path, system=str(prof)), "not a valid environment variable name")


@pytest.mark.parametrize("where", ["profile", "campaign"])
def test_an_sbatch_option_with_a_trailing_newline_is_refused(tmp_path: Path, where: str) -> None:
    if where == "profile":
        path = campaign(tmp_path, system=str(profile(tmp_path, sbatch_options=["--exclusive\n"])))
    else:
        path = campaign(tmp_path, sbatch_options=["--exclusive\n"])
    refused(path, "is not a plain --option[=value]")


def test_pydantic_patterns_refuse_a_trailing_newline() -> None:
    """pydantic's `pattern=` runs Rust's regex, whose `$` is the end of the text only (Python's
    `$` also matches before a final newline): the program and model fields refuse "x\\n"."""
    for key in ("program", "model"):
        with pytest.raises(ValidationError):
            Workload.model_validate({key: "train\n"})

    class Named(BaseModel):
        name: str = Field(pattern=r"^[a-z]+$")

    with pytest.raises(ValidationError):
        Named(name="abc\n")


def test_a_workload_argument_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    path = campaign(
        tmp_path, workload={"model": "dcgan", "epochs": 1, "args": {"image_size\n": 32}}
    )
    refused(path, "plain identifier")


# ---------------------------------------------------------------- setup lines


@pytest.mark.parametrize("where", ["profile", "campaign"])
def test_setup_lines_bash_cannot_parse_are_refused_where_they_stand(
    tmp_path: Path, where: str
) -> None:
    lines = ["module load x", "echo it's set up", "export A=1"]
    if where == "profile":
        prof = profile(tmp_path, setup=lines)
        err = refused(campaign(tmp_path, system=str(prof)), "setup[1]", "bash -n")
        assert str(prof) in err
    else:
        path = campaign(tmp_path, setup=lines)
        err = refused(path, "[setup[1]]", "bash -n", "echo it's set up")
        assert str(path) in err


def test_setup_lines_spanning_a_block_pass(tmp_path: Path) -> None:
    """An `if` opened on one line and closed on a later one is valid shell."""
    path = campaign(
        tmp_path, setup=['if [ -n "${X:-}" ]; then', "  echo 'it is set'", "fi", "echo ok"]
    )
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 0, proc.stderr
    from hpcscale.model import strict  # imported here: a module old code lacks fails here

    assert strict.setup_problem(["if true; then", "echo 'x'", "fi"]) is None
    assert strict.setup_problem(["if true; then", "echo x"]) is not None


# ---------------------------------------------------------------- placeholders


def own_program(tmp_path: Path, args: dict[str, object]) -> Path:
    """A command workload (its arguments are its own) taking `args` as placeholders."""
    words = ["python3", "-c", "import sys; print(sys.argv)"]
    words += [f"{{args.{k}}}" for k in args]
    return campaign(
        tmp_path,
        workload={"command": words, "epochs": 1, "args": args, "metrics": "mllog"},
    )


def test_ordinary_argument_values_are_not_placeholders(tmp_path: Path) -> None:
    args = {"a": "todo", "b": "xxxx", "c": "...", "d": "your_model", "e": "a/path/to/b"}
    proc = hpcscale("validate", str(own_program(tmp_path, args)))
    assert proc.returncode == 0, proc.stderr
    assert "placeholder" not in proc.stderr


def test_a_data_path_placeholder_is_still_told(tmp_path: Path) -> None:
    path = campaign(
        tmp_path,
        workload={"model": "dcgan", "epochs": 1, "args": {"data_dir": "/path/to/your/data"}},
    )
    refused(path, "placeholder (/path/to/...)", "data_dir")


@pytest.mark.parametrize(
    ("key", "value"), [("account", "CHANGEME"), ("partition", "your_partition"), ("qos", "xxx")]
)
def test_a_site_value_placeholder_is_refused(tmp_path: Path, key: str, value: str) -> None:
    prof = profile(tmp_path, **{key: value})
    err = refused(campaign(tmp_path, system=str(prof)), f"[{key}]", "placeholder")
    assert str(prof) in err


# ---------------------------------------------------------------- argument sizes


def test_one_argument_over_max_arg_strlen_is_refused(tmp_path: Path) -> None:
    big = "x" * (128 * 1024)  # with its NUL, one byte over the 128 KiB Linux takes
    refused(own_program(tmp_path, {"blob": big}), "[workload.args.blob]", "MAX_ARG_STRLEN")
    ok = "x" * (128 * 1024 - 1)
    proc = hpcscale("validate", str(own_program(tmp_path, {"blob": ok})))
    assert proc.returncode == 0, proc.stderr


def test_a_command_over_arg_max_is_refused(tmp_path: Path) -> None:
    limit = os.sysconf("SC_ARG_MAX")
    n = limit // (100 * 1024) + 1  # values of 100 KiB each, together over ARG_MAX
    args = {f"v{i}": "y" * (100 * 1024) for i in range(n)}
    refused(own_program(tmp_path, args), "ARG_MAX", str(limit))


# ---------------------------------------------------------------- init's system names


@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "a/b", ".hidden"])
def test_init_refuses_a_system_name_that_is_a_path(tmp_path: Path, name: str) -> None:
    absolute = tmp_path / "abs-escaped"  # "ABSOLUTE": a name that is an absolute path
    evil = profile(tmp_path, name=str(absolute) if name == "ABSOLUTE" else name)
    target = tmp_path / "deep" / "d"
    proc = hpcscale("init", str(target), "--system", str(evil))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "name must be" in proc.stderr and str(evil) in proc.stderr
    assert not (tmp_path / "escaped.yaml").exists()
    assert not Path(f"{absolute}.yaml").exists()
    assert not target.exists()


def test_init_refuses_a_dangling_symlink_where_it_would_write(tmp_path: Path) -> None:
    target = tmp_path / "d"
    target.mkdir()
    outside = tmp_path / "outside" / "campaign.yaml"
    (target / "campaign.yaml").symlink_to(outside)
    proc = hpcscale("init", str(target), "--force")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "dangling symlink" in proc.stderr
    assert not outside.exists() and (target / "campaign.yaml").is_symlink()
    assert not (target / "local.yaml").exists()
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    proc = hpcscale("init", str(tmp_path / "gone"))
    assert proc.returncode == 2 and "dangling symlink" in proc.stderr, proc.stderr
