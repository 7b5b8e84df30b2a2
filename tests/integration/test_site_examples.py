"""Site examples (#29): `init --system owens` copies `account: PAS0000`; the shipped profile
marks it (with its partitions and module names) as a site example, so `validate` and `submit`
refuse the copy until those values are the user's own, naming file, line and key of each, while
`plan` and a dry run still show it. The profiles the tests and the demo use are not examples."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcscale.model.system import SHIPPED_DIR
from tests.conftest import hpcscale

EXE = shutil.which("hpcscale", path=str(Path(sys.executable).parent)) or "hpcscale"


def _hs(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HPCSCALE_WORKDIR": str(cwd / "runs")}  # COLUMNS=200 as hpcscale() sets it
    return hpcscale(*args, env=env, cwd=cwd, timeout=300)


def _line(path: Path, text: str) -> int:
    """The 1-based line of `path` holding `text` (counted here, not by hpcscale)."""
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def test_an_unedited_copy_is_refused_by_validate_and_submit_only(tmp_path: Path) -> None:
    assert _hs(tmp_path, "init", "--system", "owens").returncode == 0
    profile = tmp_path / "owens.yaml"
    said = _hs(tmp_path, "validate", "campaign.yaml")
    assert said.returncode == 2, said.stdout + said.stderr
    for text, key, value in (
        ("account: PAS0000", "account", "PAS0000"),
        ("name: gpuserial", "partitions[0].name", "gpuserial"),
        ("name: parallel,", "partitions[3].name", "parallel"),
        ("modules: [python/3.9-2022.05]", "modules[0]", "python/3.9-2022.05"),
        ("modules: [nccl/2.11]", "mpi.nccl.gpu.modules[0]", "nccl/2.11"),
    ):
        assert f"owens.yaml:{_line(profile, text)} [{key}]: {value}\n" in said.stderr, said.stderr
    assert "remove its key from `site_examples:`" in said.stderr
    assert "Traceback" not in said.stderr
    doctor = json.loads(_hs(tmp_path, "doctor", "campaign.yaml", "--json").stdout)
    [site] = [c for c in doctor["checks"] if c["name"] == "site values"]
    assert not site["passed"] and "[account]: PAS0000" in site["detail"], site
    # plan and a dry run only show: the example account is there to see
    assert _hs(tmp_path, "plan", "campaign.yaml").returncode == 0
    dry = _hs(tmp_path, "submit", "campaign.yaml", "--dry-run")
    assert dry.returncode == 0 and "--account=PAS0000" in dry.stdout, dry.stderr
    real = _hs(tmp_path, "submit", "campaign.yaml")
    assert real.returncode == 2 and "[account]: PAS0000" in real.stderr, real.stderr
    assert not (tmp_path / "runs" / "first_study" / "ledger.sqlite").exists()

    # the user sets their account and partitions; the module names really are their site's
    text = profile.read_text().replace("PAS0000", "PZS1234")
    for old in ("gpuserial", "gpuparallel", "serial", "parallel"):
        text = text.replace(f"name: {old},", f"name: my{old},")
    profile.write_text(text)
    left = _hs(tmp_path, "validate", "campaign.yaml")
    assert left.returncode == 2 and "[account]" not in left.stderr, left.stderr
    assert "partitions[" not in left.stderr and "[modules[0]]" in left.stderr
    text = text.replace(
        "site_examples: [account, partitions, reservation, modules]",
        "site_examples: [account, partitions, reservation]",
    )
    profile.write_text(text)
    ok = _hs(tmp_path, "validate", "campaign.yaml")
    assert ok.returncode == 0, ok.stderr
    # an example uncommented as shipped (`# reservation: scaling-week`) is one too
    profile.write_text(text + "reservation: scaling-week\n")
    uncommented = _hs(tmp_path, "validate", "campaign.yaml")
    assert uncommented.returncode == 2
    line = len(profile.read_text().splitlines())  # the line appended last
    assert f"owens.yaml:{line} [reservation]: scaling-week" in uncommented.stderr


@pytest.mark.parametrize("system", ["local", "slurm-local"])
def test_the_profiles_tests_and_the_demo_use_are_not_examples(tmp_path: Path, system: str) -> None:
    assert _hs(tmp_path, "init", "--system", system).returncode == 0
    proc = _hs(tmp_path, "validate", "campaign.yaml")
    assert proc.returncode == 0, proc.stderr


def test_every_shipped_cluster_profile_marks_its_examples() -> None:
    """Each shipped cluster profile lists its site examples; a shipped profile validates (the
    bundled campaigns plan on it), and only `submit` refuses it as it is."""
    marked = {p.stem for p in SHIPPED_DIR.glob("*.yaml")
              if re.search(r"^site_examples: \[", p.read_text(), re.M)}  # fmt: skip
    assert marked == {"owens", "cpu-cluster", "dgx-v100", "nccl-8gpu", "nccl-cluster", "t4-4gpu"}


def test_the_shipped_profile_itself_validates_but_is_not_submitted(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "name: c\nworkload: {model: dcgan, args: {image_size: 32}}\nsystem: cpu-cluster\n"
        "scaling: weak\nmatrix: {batch: 8}\n"
    )
    assert _hs(tmp_path, "validate", "c.yaml").returncode == 0
    proc = _hs(tmp_path, "submit", "c.yaml")
    assert proc.returncode == 2, proc.stderr
    assert (
        "[partition]: batch" in proc.stderr and "hpcscale init --system cpu-cluster" in proc.stderr
    )
    assert not (tmp_path / "runs" / "c").exists()
