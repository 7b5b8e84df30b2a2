"""A scheduler is one registry line (hpcscale.model.registry.SCHEDULERS): the names a profile's
`scheduler:` accepts, and the job output names that collect, status and a ledger rebuilt from
run directories look for, all follow from it. The extra "pbs" line here is registered only in
this process (no PBS runs on this machine); the files are real files on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcscale.formats import outputs
from hpcscale.model import registry
from hpcscale.model.errors import InputError
from hpcscale.model.system import load_system
from hpcscale.state import rebuild
from hpcscale.state.states import RunState

PROFILE = """name: site
scheduler: {scheduler}
launcher: mpirun
template: local.sbatch.j2
cores_per_node: 2
"""


def _profile(tmp_path: Path, scheduler: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(PROFILE.format(scheduler=scheduler))
    return path


def _run_dir(tmp_path: Path, *outputs: tuple[str, int]) -> Path:
    """A run directory with a run.json and the named outputs, each with its own mtime."""
    d = tmp_path / "runs" / "r1"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": "r1"}))
    for name, mtime in outputs:
        (d / name).write_text("printed\n")
        os.utime(d / name, (mtime, mtime))
    return d


@pytest.fixture
def pbs(monkeypatch: pytest.MonkeyPatch) -> None:
    line = registry.SchedulerLine("site.pbs:PbsBackend", "site.pbs_script", "pbs-*.out")
    monkeypatch.setitem(registry.SCHEDULERS, "pbs", line)


def test_a_profile_names_only_a_registered_scheduler(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unknown scheduler 'pbs'.*known: slurm, local"):
        load_system(str(_profile(tmp_path, "pbs")))
    assert load_system(str(_profile(tmp_path, "local"))).scheduler == "local"


def test_a_registered_scheduler_is_accepted_and_its_outputs_found(
    tmp_path: Path, pbs: None
) -> None:
    assert load_system(str(_profile(tmp_path, "pbs"))).scheduler == "pbs"
    d = _run_dir(tmp_path, ("pbs-4242.out", 2_000_000_000), ("local.out", 1_000_000_000))
    assert outputs.job_output(d) == d / "pbs-4242.out"  # the newer of the two
    assert outputs.all_outputs(d) == [d / "local.out", d / "pbs-4242.out"]
    assert "pbs-*.out" in outputs.output_names()
    # rebuilt from the directory: queued by pbs (its output name holds the job id), no exit
    # record yet, so SUBMITTED until its scheduler says more
    state, fields = rebuild._change(d)
    assert (state, fields) == (RunState.SUBMITTED, {"backend": "pbs", "job_id": "4242"})


def test_rebuilt_runs_of_the_shipped_schedulers(tmp_path: Path) -> None:
    slurm = _run_dir(
        tmp_path / "a", ("slurm-77.out", 1_000_000_000), ("slurm-78.out", 1_500_000_000)
    )
    assert rebuild._change(slurm) == (RunState.SUBMITTED, {"backend": "slurm", "job_id": "78"})
    local = _run_dir(tmp_path / "b", ("local.out", 1_000_000_000))
    # a local run that printed but left no exit record died with the process running it
    assert rebuild._change(local) == (RunState.LOST, {"backend": "local"})
    assert rebuild._change(_run_dir(tmp_path / "c")) == (RunState.RENDERED, {})
