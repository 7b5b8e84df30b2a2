"""Where the numbers came from: software versions, MPI, environment knobs, git revision and the
system profile, read from each run's metrics.json provenance and run.json.

Values that agree across runs are shown once with the number of runs; values that differ are
all listed, so a campaign run half on one software stack and half on another is visible."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from hpcscale.formats.metrics import load_provenance
from hpcscale.formats.run_record import load_run_record
from hpcscale.frameworks import every_framework
from hpcscale.model.errors import HpcscaleError
from hpcscale.model.system import load_system
from hpcscale.state.claim import file_dir

# the environment's settings a report lists: each framework's own (Framework.env_prefixes) and
# the communication, MPI and threading libraries' (prefixes: only `startswith` reads them)
KNOB_PREFIXES: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            *(p for fw in every_framework() for p in fw.env_prefixes),
            "NCCL_",
            "MV2_",
            "UCX_",
            "I_MPI_",
            "OMPI_MCA_",
            "OMP_",
            "KMP_",
            "CUDA_VISIBLE_DEVICES",
            "GLOO_",
        ]
    )
)
# Open MPI's own per-job bookkeeping (ids, URIs, session dirs): not settings anyone chose.
OMPI_BOOKKEEPING: tuple[str, ...] = (
    "OMPI_MCA_orte_",
    "OMPI_MCA_ess",
    "OMPI_MCA_pmix",
    "OMPI_MCA_initial_wdir",
    "OMPI_MCA_shmem_",
)
MAX_VALUES = 3  # more distinct values than this: "varies per run" rather than a list
# metrics.json provenance's versions, in the software table's order: Python, the frameworks'
# libraries (Framework.software, in the registry's order), the MPI library
SOFTWARE: tuple[tuple[str, str], ...] = (
    ("python", "Python"),
    *dict.fromkeys(s for fw in every_framework() for s in fw.software),
    ("mpi", "MPI library"),
)


def read_runs(campaign_dir: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(run.json's fields, metrics.json provenance or None) for every run directory with a
    valid run.json. Unreadable files count as missing: provenance must not stop a report."""
    out = []
    for rd in sorted((campaign_dir / "runs").glob("*/run.json")):
        try:
            run = msgspec.structs.asdict(load_run_record(rd))
        except HpcscaleError:
            continue
        prov = load_provenance(rd.parent / "metrics.json")
        out.append((run, prov if isinstance(prov, dict) else None))
    return out


def software_table(runs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    finished = [p for _, p in runs if p is not None]
    for key, name in SOFTWARE:
        rows += _distinct(name, (p.get(key) for p in finished))
    rows += _distinct("Git revision", (_revision(p) for p in finished))
    rows += _distinct(
        "Hosts", (", ".join(sorted(set(p.get("hostnames") or []))) or None for p in finished)
    )
    rows += _distinct("hpcscale (rendered the runs)", (r.get("hpcscale_version") for r, _ in runs))
    rows += _distinct("System profile", (r.get("system") for r, _ in runs))
    rows += _distinct("MPI flavour", (r.get("mpi") for r, _ in runs))
    rows += _distinct("Launcher", (r.get("launcher") for r, _ in runs))
    return pd.DataFrame(rows, columns=["Item", "Value", "Runs"])


def knobs_table(runs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> pd.DataFrame:
    envs = [p.get("env") or {} for _, p in runs if p is not None]
    names = sorted(k for k in {k for env in envs for k in env} if is_knob(k))  # each name once
    rows: list[dict[str, Any]] = []
    for name in names:
        values = [env.get(name) for env in envs]
        if len(values) > 1 and len(set(values)) == len(values):  # e.g. a per-run temp path
            rows.append({"Item": name, "Value": "differs in every run", "Runs": len(values)})
        else:
            rows += _distinct(name, values, keep_missing=True)
    table = pd.DataFrame(rows, columns=["Item", "Value", "Runs"])
    return table.rename(columns={"Item": "Variable"})


def system_table(name: str | None, campaign_dir: Path) -> tuple[pd.DataFrame, str]:
    """The system profile's main settings, and a note when it cannot be loaded here."""
    if not name:
        return pd.DataFrame(columns=["Setting", "Value"]), "no system profile recorded"

    try:
        system = load_system(name, relative_to=file_dir(campaign_dir))
    except (HpcscaleError, OSError) as exc:
        return pd.DataFrame([{"Setting": "name", "Value": name}]), f"profile not loadable: {exc}"
    fields = (
        "name",
        "description",
        "scheduler",
        "launcher",
        "cores_per_node",
        "gpus_per_node",
        "partition",
        "account",
        "modules",
        "mpi_default",
        "env",
    )
    rows = []
    for f in fields:
        value = getattr(system, f)
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        rows.append({"Setting": f, "Value": str(value)})
    rows.append({"Setting": "MPI flavours", "Value": ", ".join(system.mpi)})
    return pd.DataFrame(rows, columns=["Setting", "Value"]), ""


def is_knob(name: str) -> bool:
    if name.startswith(OMPI_BOOKKEEPING):
        return False
    return name.startswith(KNOB_PREFIXES)


def _distinct(item: str, values: Iterable[Any], keep_missing: bool = False) -> list[dict[str, Any]]:
    counts = Counter(v for v in values if keep_missing or v is not None)
    if not counts:
        return []
    if len(counts) > MAX_VALUES:
        total = sum(counts.values())
        return [{"Item": item, "Value": f"varies per run ({len(counts)} values)", "Runs": total}]
    rows = []
    for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        rows.append({"Item": item, "Value": "(unset)" if value is None else str(value), "Runs": n})
    return rows


def _revision(prov: dict[str, Any]) -> str | None:
    rev = prov.get("git_revision")
    if not rev:
        return None
    return f"{rev[:12]} (uncommitted changes)" if prov.get("git_dirty") else str(rev[:12])
