"""`submit`'s login-node pre-flight on a SLURM profile (#29): the runs' partition and the
account known to SLURM, checked before anything is written or queued (sbatch on PATH was
already checked there, by api.backend_for); a failure is one error (exit 2) naming the
profile's lines, and nothing is left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from hpcscale.devcluster.status import ClusterInfo
from hpcscale.model.system import SHIPPED_DIR
from tests.conftest import hpcscale


def _campaign(tmp_path: Path, **profile: object) -> Path:
    spec = yaml.safe_load((SHIPPED_DIR / "slurm-local.yaml").read_text())
    spec.update(name="slurm-nope", **profile)
    (tmp_path / "slurm-nope.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: nope\nworkload: {model: dcgan, epochs: 1, args: {image_size: 32}}\n"
        "system: slurm-nope.yaml\nscaling: weak\nmatrix: {batch: 4}\n"
    )
    return path


def _line(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith(text))


@pytest.mark.slurm
def test_an_unknown_partition_and_account_are_refused_before_anything_is_queued(
    slurm_cluster: ClusterInfo, tmp_path: Path, workdir: Path
) -> None:
    path = _campaign(tmp_path, partition="nosuchpart", account="nosuchacct")
    profile = tmp_path / "slurm-nope.yaml"
    proc = hpcscale("submit", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = proc.stderr
    part = _line(profile, "partition:")
    assert f"slurm-nope.yaml:{part} [partition]: partition 'nosuchpart' is not known" in said
    assert "(sinfo lists: debug)" in said  # the one partition the test cluster has
    acct = _line(profile, "account:")
    assert f"slurm-nope.yaml:{acct} [account]: account 'nosuchacct' is not known" in said
    assert "nothing was queued" in said and "Traceback" not in said
    assert not (workdir / "nope").exists()  # nothing half-written
    queued = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True)
    assert "nope" not in queued.stdout
    # a dry run still shows what would be queued, and plan still plans it
    assert hpcscale("submit", str(path), "--dry-run").returncode == 0
