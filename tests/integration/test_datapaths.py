"""Placeholders never reach a queue, and a data path a job cannot find is told before it runs
(issue 19 item 5, issue 22 "validate checks what it can see").

The seed campaigns ship `data_dir: /path/to/your/...`; a campaign on this machine (`local`,
`slurm-local`, any profile with `runs_here: true`) may name a directory that is not there.
Expected lines are found in the campaign text by searching it here, not through hpcscale's own
YAML locator; "nothing queued" is checked on disk (no workdir, no run directory, no ledger).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hpcscale import api
from hpcscale.model import datapaths
from hpcscale.model.campaign import load_campaign
from hpcscale.model.errors import InputError
from hpcscale.model.targets import PLACEHOLDER_MARK
from hpcscale.report.data import campaign_source
from hpcscale.report.sections import campaign_report
from tests.conftest import CAMPAIGNS, hpcscale
from tests.integration.test_report import sections_of
from tests.integration.test_report_batch import seed000_fig5

LOCAL = """\
name: dp
workload:
  model: dcgan
  epochs: 1
  args:
    image_size: 16
    dataset: flat
    data_dir: {data_dir}
system: {system}
scaling: weak
matrix:
  layout: 1x1
  batch: 8
"""


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    """1-based line of the nth line of `path` holding `needle` (searched here, independently)."""
    hits = [i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln]
    return hits[nth]


def campaign(tmp_path: Path, data_dir: str, system: str = "local", text: str = LOCAL) -> Path:
    p = tmp_path / "dp.yaml"
    p.write_text(textwrap.dedent(text).format(data_dir=data_dir, system=system))
    return p


def nothing_written(wd: Path) -> bool:
    """No workdir at all: no campaign directory, run directory, script or ledger."""
    return not wd.exists()


# ---------------------------------------------------------------- what a placeholder is


@pytest.mark.parametrize(
    "value",
    [
        "/path/to/your/CUB_200_2011",  # the seed campaigns' own
        "path/to/celeba",
        "/PATH/TO/data",
        "<data dir>",
        "/scratch/<user>/celeba",
        "/data/{{ dataset }}",
        "/home/your_username/imagenet",
        "/home/YOUR-NAME/data",
        "/your/data",
        "/scratch/CHANGEME/celeba",
        "/scratch/replace_me",
        "/data/TODO/x",
        "/data/XXXX/celeba",
        "/data/.../celeba",
    ],
)
def test_placeholders_are_told(value: str) -> None:
    assert datapaths.placeholder_of(value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "/scratch/alice/celeba",
        "/data/paths/to/x",  # `paths`, not `path`
        "/data/pathology/to",
        "/home/yours/data",  # `yours` is a name, not `your_...`
        "/data/todo_list",
        "/data/x.y/z",
        "/data/xx",
        "/data/a..b",
        "imagenet",
        "none",
    ],
)
def test_real_paths_are_not_placeholders(value: str) -> None:
    assert datapaths.placeholder_of(value) is None


# ---------------------------------------------------------------- the shipped seed campaigns


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("fruit_classifier", ["data_dir", "val_dir"]),
        ("stackgan_batch", ["data_dir"]),
        ("goyal_warmup", ["data_dir"]),
    ],
)
def test_seed_placeholders_warn_in_validate_and_are_refused_by_submit(
    tmp_path: Path, name: str, keys: list[str]
) -> None:
    path = CAMPAIGNS / f"{name}.yaml"
    lines = [line_of(path, f"{k}: /path/to/your/") for k in keys]
    ok = hpcscale("validate", str(path))
    assert ok.returncode == 0, ok.stderr  # a cluster profile: a warning, not an error
    for key, line in zip(keys, lines, strict=True):
        assert f"warning: {path}:{line} [workload.args.{key}]" in ok.stderr, ok.stderr
        assert "placeholder" in ok.stderr
    wd = tmp_path / "runs"
    for extra in ([], ["--backend", "local"], ["--backend", "slurm"]):
        proc = hpcscale("submit", str(path), "-w", str(wd), *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        for key, line in zip(keys, lines, strict=True):
            assert f"{path}:{line} [workload.args.{key}]" in proc.stderr, proc.stderr
        assert "placeholder (/path/to/...)" in proc.stderr
        assert nothing_written(wd), list(wd.rglob("*"))
    # a dry run queues nothing: it says what validate says, and shows the scripts
    dry = hpcscale("submit", str(path), "-w", str(wd), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"{path}:{lines[0]} [workload.args.{keys[0]}]" in dry.stderr
    assert not (wd / name / "ledger.sqlite").exists()


def test_submit_refuses_through_the_api_before_writing(tmp_path: Path) -> None:
    wd = tmp_path / "runs"
    with pytest.raises(InputError) as info:
        api.submit(CAMPAIGNS / "caltech256_t4.yaml", wd)
    err = info.value
    path = CAMPAIGNS / "caltech256_t4.yaml"
    assert (err.file, err.line, err.key) == (
        str(path),
        line_of(path, "data_dir: /path/to/"),
        "workload.args.data_dir",
    )
    assert err.exit_code == 2 and nothing_written(wd)


# ---------------------------------------------------------------- systems that run here


def test_local_missing_data_dir_is_a_located_error(tmp_path: Path) -> None:
    """Issue 22's case: `dataset: flat, data_dir: /nonexistent/celeba` on `system: local`."""
    missing = tmp_path / "nonexistent" / "celeba"
    path = campaign(tmp_path, str(missing))
    where = f"{path}:{line_of(path, 'data_dir:')} [workload.args.data_dir]"
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert where in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    wd = tmp_path / "runs"
    proc = hpcscale("submit", str(path), "-w", str(wd))
    assert proc.returncode == 2 and where in proc.stderr, proc.stderr
    assert nothing_written(wd)
    missing.parent.mkdir()
    missing.write_text("a file")  # the job opens a directory
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2 and "is not a directory" in proc.stderr, proc.stderr
    missing.unlink()
    missing.mkdir()
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_a_swept_data_dir_is_located_at_its_own_item(tmp_path: Path) -> None:
    there = tmp_path / "there"
    there.mkdir()
    gone = tmp_path / "gone"
    text = LOCAL.replace("    data_dir: {data_dir}\n", "").replace(
        "  batch: 8\n", f"  batch: 8\n  args.data_dir:\n    - {there}\n    - {gone}\n"
    )
    path = campaign(tmp_path, "", text=text)
    with pytest.raises(InputError) as info:
        api.validate(path)
    assert info.value.line == line_of(path, f"- {gone}")
    assert info.value.key == "matrix.args.data_dir[1]"


@pytest.mark.parametrize(
    ("profile", "here"),
    [
        ("slurm-local", True),  # scheduler slurm, but its nodes are this machine
        ("local", True),
        ("cpu-cluster", False),
        ("owens", False),
    ],
)
def test_which_shipped_profiles_run_here(profile: str, here: bool) -> None:
    from hpcscale.model.system import load_system

    assert load_system(profile).jobs_run_here is here


def test_runs_here_in_a_profile_decides(tmp_path: Path) -> None:
    """A copy of a cluster profile that says `runs_here: true` is checked like local; a local
    one saying `runs_here: false` only warns."""
    missing = str(tmp_path / "nope")
    shipped = Path(api.__file__).parent / "systems"
    here = tmp_path / "here.yaml"
    here.write_text((shipped / "cpu-cluster.yaml").read_text() + "runs_here: true\n")
    with pytest.raises(InputError) as info:
        api.validate(campaign(tmp_path, missing, system=str(here)))
    assert info.value.key == "workload.args.data_dir" and "on this machine" in info.value.message
    away = tmp_path / "away.yaml"
    local = (shipped / "local.yaml").read_text().replace("runs_here: true", "runs_here: false")
    away.write_text(local)
    planned = api.validate(campaign(tmp_path, missing, system=str(away)))
    [warning] = planned.expansion.warnings
    assert "[workload.args.data_dir]" in warning and "runs its jobs elsewhere" in warning


# ---------------------------------------------------------------- systems it cannot see


def test_a_cluster_campaign_missing_here_is_a_warning_in_validate_only(tmp_path: Path) -> None:
    path = campaign(tmp_path, "/gpfs/alice/celeba", system="cpu-cluster")
    where = f"{path}:{line_of(path, 'data_dir:')} [workload.args.data_dir]"
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {where}" in proc.stderr and "make sure it exists there" in proc.stderr
    lc = load_campaign(path)
    runs = api.plan(path).runs
    assert datapaths.check(lc, runs, submitting=True) == []  # submit leaves it to the cluster
    (tmp_path / "celeba").mkdir()  # a path this machine shares with the cluster: nothing to say
    shared = campaign(tmp_path, str(tmp_path / "celeba"), system="cpu-cluster")
    assert api.validate(shared).expansion.warnings == []


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("data/celeba", "relative path"),
        ("~/celeba", "does not expand `~`"),
        ("$SCRATCH/celeba", "`$` variables are never expanded"),
        ("/scratch/${USER}/celeba", "`$` variables are never expanded"),
    ],
)
def test_paths_a_job_never_finds_warn_in_validate_and_are_refused_by_submit(
    tmp_path: Path, value: str, needle: str
) -> None:
    path = campaign(tmp_path, f"'{value}'", system="cpu-cluster")
    [warning] = api.validate(path).expansion.warnings
    assert needle in warning and "[workload.args.data_dir]" in warning
    wd = tmp_path / "runs"
    with pytest.raises(InputError) as info:
        api.submit(path, wd, dry_run=False)
    assert needle in info.value.message and info.value.line == line_of(path, "data_dir:")
    assert nothing_written(wd)


# ---------------------------------------------------------------- weights


WEIGHTS = """\
name: dp
workload:
  model: classifier
  epochs: 1
  args:
    image_size: 32
    weights: {data_dir}
system: {system}
scaling: weak
matrix:
  layout: 1x1
  batch: 8
"""


def test_weights_files_are_checked_keywords_are_not(tmp_path: Path) -> None:
    for keyword in ("imagenet", "none"):
        assert api.validate(campaign(tmp_path, keyword, text=WEIGHTS)).expansion.warnings == []
    missing = tmp_path / "w.weights.h5"
    with pytest.raises(InputError) as info:
        api.validate(campaign(tmp_path, str(missing), text=WEIGHTS))
    assert info.value.key == "workload.args.weights" and "does not exist" in info.value.message
    missing.write_bytes(b"\x89HDF")
    api.validate(campaign(tmp_path, str(missing), text=WEIGHTS))
    # the job expands `~` in --weights (jobs/tf/models/classifier.py), so the check does too
    proc = hpcscale(
        "validate", str(campaign(tmp_path, "~/w.weights.h5", text=WEIGHTS)),
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = hpcscale(
        "validate", str(campaign(tmp_path, "~/other.h5", text=WEIGHTS)),
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 2 and "[workload.args.weights]" in proc.stderr, proc.stderr


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = LOCAL.replace(
        "    data_dir: {data_dir}\n", "    data_dir: /path/to/data\n    val_dir: /nope/val\n"
    )
    path = campaign(tmp_path, "", text=text)
    proc = hpcscale("validate", str(path))
    assert proc.returncode == 2
    assert f"{path}:{line_of(path, 'data_dir:')} [workload.args.data_dir]" in proc.stderr
    assert f"{path}:{line_of(path, 'val_dir:')} [workload.args.val_dir]" in proc.stderr


# ---------------------------------------------------------------- the placeholder target


def test_stackgan_batch_target_is_marked_a_placeholder_wherever_the_report_shows_it(
    tmp_path: Path,
) -> None:
    """The campaign's own marker reaches every table, figure title and caption of the report
    that names the target; a plain target says nothing of the kind."""
    path = CAMPAIGNS / "stackgan_batch.yaml"
    [spec] = campaign_source(Path("unused"), path).targets
    assert spec.placeholder and spec.metric == "g_loss" and spec.value == 1.2
    assert spec.source.endswith(f":{line_of(path, 'targets:')}")
    shown = _target_texts(campaign_report(seed000_fig5(), "fig5", targets=[spec]))
    assert len(shown) >= 6, shown  # two tables, two figures, two texts
    assert all(PLACEHOLDER_MARK in s for s in shown), shown
    plain_file = tmp_path / "plain.yaml"  # the same campaign, its target in the plain form
    text = path.read_text()
    plain_file.write_text(text[: text.index("targets:")] + "targets: ['g_loss<=1.2']\n")
    [plain] = campaign_source(tmp_path, plain_file).targets
    assert not plain.placeholder
    shown = _target_texts(campaign_report(seed000_fig5(), "fig5", targets=[plain]))
    assert shown and not any("placeholder" in s for s in shown), shown


def _target_texts(rep: object) -> list[str]:
    """Every string of the report that names the g_loss target: section texts, table columns
    and cells, figure titles and captions."""
    out: list[str] = []
    for sec in sections_of(rep).values():  # type: ignore[arg-type]
        out += [t for t in sec.text if "g_loss <=" in t]
        for table in sec.tables:
            out += [str(c) for c in table.frame.columns if "g_loss <=" in str(c)]
            for col in table.frame.columns:
                out += [str(v) for v in table.frame[col] if "g_loss <=" in str(v)]
            out += [t for t in (table.title, table.note or "") if "g_loss <=" in t]
        for plot in sec.plots:
            titles = [ax.get_title() for ax in plot.figure.axes]
            out += [t for t in [*titles, plot.caption or ""] if "g_loss <=" in t]
    return out


@pytest.mark.parametrize(
    ("entry", "key", "needle"),
    [
        ("[{target: 'g_loss=1.2', placeholder: true}]", "targets[0].target", "METRIC<=VALUE"),
        ("[{target: 'g_loss<=1.2', placeholer: true}]", "targets[0].placeholer", "placeholder"),
    ],
)
def test_a_bad_target_entry_is_located(tmp_path: Path, entry: str, key: str, needle: str) -> None:
    text = (CAMPAIGNS / "quickstart.yaml").read_text() + f"targets: {entry}\n"
    p = tmp_path / "c.yaml"
    p.write_text(text)
    proc = hpcscale("validate", str(p))
    assert proc.returncode == 2, proc.stderr
    assert f"{p}:{len(text.splitlines())} [{key}]" in proc.stderr and needle in proc.stderr
