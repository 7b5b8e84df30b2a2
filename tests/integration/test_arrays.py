"""Job arrays sized for a stock SLURM, without a cluster: arrays split at MaxArraySize with
indices local to each array, the dry run (same text from `--dry-run` and `--backend dry`, no
file named that it does not write), the limits read from scontrol/sacctmgr/squeue text, and a
Ctrl-C that waits for the sbatch in flight. tests/integration/test_slurm.py submits for real."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import yaml

from hpcscale import api
from hpcscale.backends.slurm import arrays, limits, query
from hpcscale.backends.slurm.submit import ctrl_c_deferred
from tests.conftest import CAMPAIGNS, hpcscale

NO_CLUSTER = {"SLURM_CONF": "/nonexistent/slurm.conf"}  # nothing to ask: SLURM's defaults


def big_campaign(tmp_path: Path, runs_per_shape: int = 1250) -> Path:
    """2 shapes (1 and 2 nodes) x `runs_per_shape` batches on the slurm-local profile."""
    spec = {
        "name": "big",
        "workload": {"model": "dcgan", "epochs": 1},
        "system": "slurm-local",
        "scaling": "weak",
        "matrix": {"nodes": [1, 2], "batch": list(range(1, runs_per_shape + 1))},
    }
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def arrays_of(out: str) -> list[tuple[list[int], list[str]]]:
    """(indices, run ids) of each array in a dry run's output."""
    found = []
    ids: list[str] = []
    for line in out.splitlines():
        if m := re.match(r"# array \d+/\d+: \d+ run\(s\), indices \S+: (.*)", line):
            ids = m.group(1).split()
        elif line.startswith("sbatch "):
            (spec,) = re.findall(r"--array=(\S+)", line)
            indices: list[int] = []
            for part in spec.split("%")[0].split(","):
                lo, _, hi = part.partition("-")
                indices += range(int(lo), int(hi or lo) + 1)
            found.append((indices, ids))
    return found


def test_2500_run_dry_run_splits_arrays_at_max_array_size(tmp_path: Path, workdir: Path) -> None:
    camp = big_campaign(tmp_path)
    dry_run = hpcscale("submit", str(camp), "--dry-run", env=NO_CLUSTER, check=True).stdout
    assert "MaxArraySize=1001 [SLURM's default; no cluster to ask" in dry_run
    found = arrays_of(dry_run)
    assert sorted(len(ix) for ix, _ in found) == [249, 249, 1001, 1001]
    for indices, ids in found:
        assert indices == list(range(len(ids)))  # local to the array: 0..n-1
        assert max(indices) < 1001  # sbatch rejects an index >= MaxArraySize
    every = [rid for _, ids in found for rid in ids]
    assert sorted(every) == sorted(r.run_id for r in api.plan(camp).runs)  # each run once
    # a dry run writes no arrays/ file, and names one only on a "would write" line
    assert not (workdir / "big" / "arrays").exists()
    would = [ln for ln in dry_run.splitlines() if ln.startswith("# would write")]
    assert len(would) == 4 and all("(not written by a dry run)" in ln for ln in would)
    for line in dry_run.splitlines():
        if line.startswith("sbatch"):
            named = [w for w in line.split() if "/arrays/" in w and "%A" not in w]
            assert len(named) == 2 and all(any(w in ln for ln in would) for w in named)
    backend_dry = hpcscale("submit", str(camp), "--backend", "dry", env=NO_CLUSTER, check=True)
    assert backend_dry.stdout == dry_run
    assert not (workdir / "big" / "arrays").exists()


def test_cnn_strong_arrays_count_from_zero(workdir: Path) -> None:
    """Each shape of cnn_strong has 3 runs: `--array=0-2`, not the campaign-wide 7,15,23."""
    out = hpcscale(
        "submit", str(CAMPAIGNS / "cnn_strong.yaml"), "--dry-run", env=NO_CLUSTER, check=True
    ).stdout
    specs = re.findall(r"--array=(\S+)", out)
    assert len(specs) == 8 and set(specs) == {"0-2"}


def test_plan_splits_shapes_and_the_runs_file_maps_local_indices(
    tmp_path: Path, workdir: Path
) -> None:
    _, _, rendered = api.render_campaign(big_campaign(tmp_path, runs_per_shape=5))
    batches = arrays.plan(rendered, array=True, stamp="s", max_array_size=2)
    assert [len(b.runs) for b in batches] == [2, 2, 1, 2, 2, 1]
    assert len({b.token for b in batches}) == 6
    cdir = workdir / "big"
    for b in batches:
        assert [i for i, _ in b.runs] == list(range(len(b.runs)))
        assert len({arrays.shape_of(r) for _, r in b.runs}) == 1
        arrays.write_array_files(cdir, b)
        assert arrays.read_runs(b.runs_file(cdir)) == dict(enumerate(b.run_ids))
        assert f"--array={arrays.index_spec(range(len(b.runs)))}" in b.argv(cdir, None)
    assert sorted(rid for b in batches for rid in b.run_ids) == sorted(
        r.run.run_id for r in rendered
    )
    # arrays disabled on the cluster (MaxArraySize=0): one plain job per run
    plain = arrays.plan(rendered, array=True, stamp="s", max_array_size=0)
    assert len(plain) == len(rendered) and not any(b.array for b in plain)


SCONTROL = """\
Configuration data as of 2026-01-01T00:00:00
ClusterName             = site
MaxArraySize            = 4001
MaxJobCount             = 50000
SchedulerParameters     = batch_sched_delay=0,max_array_tasks=1500
SLURM_VERSION           = 22.05.8
"""


def test_limits_from_scontrol_config() -> None:
    config = limits.parse_config(SCONTROL)
    assert config["ClusterName"] == "site" and config["MaxArraySize"] == "4001"
    lim = limits.from_config(config, "from `scontrol show config`")
    assert (lim.max_array_size, lim.max_array_tasks, lim.max_job_count) == (4001, 1500, 50000)
    assert lim.array_tasks == 1500  # the smaller of MaxArraySize and max_array_tasks
    stock = limits.from_config(limits.parse_config("MaxJobCount = 10000\n"), "x")
    assert stock.array_tasks == 1001 and stock.max_job_count == 10000
    # MaxSubmitJobs binds only where slurmctld enforces limits (SLURM's default: it does not)
    assert not limits.enforces_limits(config)
    assert not limits.enforces_limits({"AccountingStorageEnforce": "none"})
    assert not limits.enforces_limits({"AccountingStorageEnforce": "associations"})
    assert limits.enforces_limits({"AccountingStorageEnforce": "associations,limits,qos"})


def test_room_is_the_tightest_visible_limit() -> None:
    lim = limits.Limits(max_job_count=100, max_submit=10, max_submit_from="association")
    r = limits.room(lim, limits.Usage(in_memory=95, mine=3))
    assert r.runs == 5 and "MaxJobCount=100" in r.why
    r = limits.room(lim, limits.Usage(in_memory=20, mine=12))
    assert r.runs == 0 and "MaxSubmitJobs=10 (association)" in r.why
    assert limits.room(limits.Limits(), limits.Usage(5, 5)).runs is None  # nothing visible
    assert limits.room(lim, None).runs is None


def test_no_cluster_to_ask(tmp_path: Path) -> None:
    """A SLURM_CONF naming no file would make scontrol retry for a minute: not asked."""
    env = {"PATH": os.environ["PATH"], **NO_CLUSTER}
    assert "names no file" in (limits.no_cluster_reason(env) or "")
    assert "not on PATH" in (limits.no_cluster_reason({"PATH": str(tmp_path)}) or "")


def test_long_name_lists_are_split_below_the_argument_limit() -> None:
    names = [f"hpcscale.campaign.{i:010x}" for i in range(20_000)]
    chunks = query.name_lists(names)
    assert len(chunks) > 1 and all(len(c) <= query.NAMES_MAX_CHARS for c in chunks)
    assert ",".join(chunks).split(",") == names


def test_ctrl_c_waits_for_the_sbatch_in_flight() -> None:
    """A real SIGINT inside the block (sbatch + ledger write) is raised only after it."""
    reached = []
    with pytest.raises(KeyboardInterrupt), ctrl_c_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("ledger written")
    assert reached == ["ledger written"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
