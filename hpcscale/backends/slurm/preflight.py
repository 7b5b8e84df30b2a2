"""`submit`'s pre-flight on a SLURM profile: only what the login node can tell before anything
is queued, the runs' partitions and the account known to SLURM (sbatch on PATH is checked
before, by api.backend_for). Modules and the program's paths often exist only on the compute
nodes, so they are left to the jobs (and `hpcscale doctor` says what it can see of them)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpcscale.model.errors import InputError, UsageError
from hpcscale.model.yamlsrc import KeyPath, format_key

if TYPE_CHECKING:
    from hpcscale.model.run import Run
    from hpcscale.model.system import System

TIMEOUT_S = 20


def _ask(argv: list[str]) -> tuple[bool, str]:
    """(answered, stdout or the last line it said)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return True, proc.stdout


def known_partitions() -> set[str]:
    """The partitions SLURM lists here (`sinfo -h -o %P`; the default one's `*` dropped)."""
    ok, out = _ask(["sinfo", "-h", "-o", "%P"])
    if not ok:
        raise UsageError(
            f"sinfo -h -o %P failed ({out}): the SLURM controller does not answer, so nothing "
            "was queued; run `hpcscale doctor` on the login node"
        )
    return {line.strip().rstrip("*") for line in out.splitlines() if line.strip()}


def account_known(account: str) -> bool | None:
    """Whether SLURM's accounting knows `account`; None where it cannot say (no sacctmgr, or
    accounting off), which is not a problem: sbatch decides there."""
    if shutil.which("sacctmgr") is None:
        return None
    ok, out = _ask(["sacctmgr", "-nP", "show", "account", account, "format=Account"])
    if not ok:
        return None
    return account in {line.strip() for line in out.splitlines()}


def _partition_key(system: System, name: str) -> KeyPath:
    for i, rule in enumerate(system.partitions):
        if rule.name == name:
            return ("partitions", i, "name")
    return ("partition",)


def check(system: System, runs: Sequence[Run]) -> None:
    """One error (exit 2) naming every problem, before anything is written or queued (sbatch
    on PATH is the backend's fit, api.backend_for, checked before this)."""
    used = {p for p in (system.partition_for(r) for r in runs) if p is not None}
    problems: list[tuple[KeyPath, str]] = []
    if used:
        known = known_partitions()
        for name in sorted(used - known):
            problems.append(
                (
                    _partition_key(system, name),
                    f"partition {name!r} is not known to SLURM here "
                    f"(sinfo lists: {', '.join(sorted(known)) or 'none'})",
                )
            )
    if system.account is not None and account_known(system.account) is False:
        problems.append(
            (("account",), f"account {system.account!r} is not known to SLURM's accounting here")
        )
    if not problems:
        return
    src = system._source
    if src is None:
        raise UsageError("; ".join(message for _, message in problems))
    lines = [f"  {src.path}:{src.line_of(k) or '?'} [{format_key(k)}]: {m}" for k, m in problems]
    key = problems[0][0]
    raise InputError(
        src.path,
        src.line_of(key),
        format_key(key),
        f"nothing was queued: profile {system.name!r} names what this cluster does not have:\n"
        + "\n".join(lines)
        + "\nset the profile's values to those of this cluster (`sinfo -s` lists its "
        "partitions, `sacctmgr show assoc user=$USER` your accounts)",
    )
