"""`exit.json`, the record every job script leaves in its run directory as it ends (its EXIT
trap, templates/base.sbatch.j2): the script's exit code, the signal that ended it (if any), its
start and end times, the host and the machine's load at both ends.

It makes a run's state independent of the ledger: a run directory copied from elsewhere, a
bench fixture or a run under a rebuilt ledger is judged by it (hpcscale.state.run_state). The
script removes a previous attempt's record when it starts, so a record always describes the
attempt that wrote the run's latest output. Standard library only (read by the core, written by
bash and, for fixtures, by `write_exit_record`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from hpcscale.formats.atomic import atomic_write

EXIT_NAME = "exit.json"


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int
    ended_unix_s: float
    started_unix_s: float = math.nan
    signal: Optional[str] = None
    hostname: str = ""
    load_1m_start: float = math.nan
    load_1m_end: float = math.nan
    cpus: float = math.nan

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and self.signal is None

    def describe(self) -> str:
        """How the script ended, in words ("exit code 1", "killed by SIGTERM (exit 143)")."""
        if self.signal:
            return f"ended by SIG{self.signal} (exit code {self.exit_code})"
        return f"exit code {self.exit_code}"


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        out = float(value)
    except ValueError:
        return math.nan
    return out if math.isfinite(out) else math.nan


def read_exit_record(run_dir: Union[str, os.PathLike[str]]) -> Optional[ExitRecord]:
    """The run's exit record; None when there is none, or it is not one (damaged: the run is
    then judged as if it had none)."""
    try:
        data = json.loads((Path(run_dir) / EXIT_NAME).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    code = data.get("exit_code")
    if isinstance(code, bool) or not isinstance(code, int) or not -(2**31) <= code < 2**31:
        return None
    sig = data.get("signal")
    host = data.get("hostname")
    return ExitRecord(
        exit_code=code,
        ended_unix_s=_number(data.get("ended_unix_s")),
        started_unix_s=_number(data.get("started_unix_s")),
        signal=sig if isinstance(sig, str) and sig else None,
        hostname=host if isinstance(host, str) else "",
        load_1m_start=_number(data.get("load_1m_start")),
        load_1m_end=_number(data.get("load_1m_end")),
        cpus=_number(data.get("cpus")),
    )


def write_exit_record(
    run_dir: Union[str, os.PathLike[str]],
    exit_code: int = 0,
    ended_unix_s: Optional[float] = None,
    **fields: Any,
) -> Path:
    """Write a run's exit record as the job script does (for runs made without one: fixtures,
    bench runs assembled from real files)."""
    path = Path(run_dir) / EXIT_NAME
    record = {
        "exit_code": exit_code,
        "signal": None,
        "ended_unix_s": time.time() if ended_unix_s is None else ended_unix_s,
        **fields,
    }
    atomic_write(path, json.dumps(record) + "\n")
    return path
