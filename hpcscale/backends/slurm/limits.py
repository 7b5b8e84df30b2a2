"""What the cluster lets us queue, read where SLURM shows it: MaxArraySize, max_array_tasks and
MaxJobCount from `scontrol show config`, the user's MaxSubmitJobs from `sacctmgr` (their
associations and their QOS's per-user limit) where the cluster enforces limits, and how much of
both is in use from `squeue`.
A submit that ignored them would have sbatch reject whole arrays; a dry run with no cluster to
ask assumes SLURM's defaults and says so."""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hpcscale.backends.slurm import query
from hpcscale.backends.slurm.arrays import DEFAULT_MAX_ARRAY_SIZE
from hpcscale.state.states import NOT_ENDED, RunState

ASK_TIMEOUT_S = 10.0  # a dry run must not hang on a dead controller


@dataclass(frozen=True)
class Limits:
    """`max_array_size`: an array's indices are 0..max_array_size-1 (0: arrays disabled);
    `max_array_tasks`: tasks per array when lower (SchedulerParameters); `max_job_count`: jobs
    slurmctld holds, all users, each array task one job; `max_submit`: this user's pending and
    running jobs (`max_submit_from` says whose limit it is). None: not visible."""

    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_array_tasks: int | None = None
    max_job_count: int | None = None
    max_submit: int | None = None
    max_submit_from: str = ""
    source: str = "SLURM's defaults"

    @property
    def array_tasks(self) -> int:
        """The most tasks one array may hold (indices 0..n-1); 0: one job per run."""
        if self.max_array_tasks is None:
            return self.max_array_size
        return min(self.max_array_size, self.max_array_tasks)

    def summary(self) -> str:
        parts = [f"MaxArraySize={self.max_array_size}"]
        if self.max_array_tasks is not None:
            parts.append(f"max_array_tasks={self.max_array_tasks}")
        if self.max_job_count is not None:
            parts.append(f"MaxJobCount={self.max_job_count}")
        if self.max_submit is not None:
            parts.append(f"MaxSubmitJobs={self.max_submit} ({self.max_submit_from})")
        return f"{', '.join(parts)} [{self.source}]"


@dataclass(frozen=True)
class Usage:
    """Jobs counted against the limits now (array tasks one each, as SLURM counts them)."""

    in_memory: int  # every user's jobs slurmctld holds, recently ended ones included
    mine: int  # this user's jobs not yet ended


@dataclass(frozen=True)
class Room:
    runs: int | None  # how many more jobs fit now; None: no visible limit
    why: str  # the binding limit and its use, for messages


def user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", str(os.getuid()))


def no_cluster_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why there is no cluster to ask (None: ask). A SLURM_CONF naming a missing file would
    make scontrol retry for a minute, so it counts as no cluster."""
    env = os.environ if environ is None else environ
    if not shutil.which("scontrol", path=env.get("PATH")):
        return "scontrol is not on PATH"
    conf = env.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        return f"SLURM_CONF names no file ({conf})"
    return None


def last_words(res: query.Result) -> str:
    """A client's final complaint without its prefix ('scontrol: fatal: X' -> 'X')."""
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    return lines[-1].split(": ", 2)[-1] if lines else res.error


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config` lines ('MaxArraySize            = 1001') as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def from_config(config: Mapping[str, str], source: str) -> Limits:
    sched = dict(
        p.partition("=")[::2] for p in config.get("SchedulerParameters", "").split(",") if p
    )
    size = _int(config.get("MaxArraySize"))
    return Limits(
        max_array_size=DEFAULT_MAX_ARRAY_SIZE if size is None else size,
        max_array_tasks=_int(sched.get("max_array_tasks")),
        max_job_count=_int(config.get("MaxJobCount")),
        source=source,
    )


def user_max_submit(
    cluster: str | None, user: str, timeout: float = ASK_TIMEOUT_S
) -> tuple[int | None, str]:
    """The user's MaxSubmitJobs (smallest over their associations, parents' limits included as
    sacctmgr shows them) or the per-user MaxSubmitJobs of their default QOS, whichever is
    lower; (None, why) when none is set or sacctmgr cannot tell. Both questions go at once:
    each costs slurmdbd a few hundred ms, and every submit asks."""
    where = [f"user={user}"] + ([f"cluster={cluster}"] if cluster else [])
    assoc = ["sacctmgr", "-n", "-P", "show", "assoc", "where", *where]
    qos = ["sacctmgr", "-n", "-P", "show", "qos", "format=Name,MaxSubmitJobsPerUser"]
    with ThreadPoolExecutor(2) as pool:
        asked = pool.submit(query.run, [*assoc, "format=MaxSubmitJobs,DefaultQOS,QOS"], timeout)
        qres = pool.submit(query.run, qos, timeout).result()
        res = asked.result()
    if not res.ok:
        return None, f"sacctmgr: {last_words(res)}"
    assoc_limits: list[int] = []
    qos_names: set[str] = set()
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 3:
            continue
        if (n := _int(parts[0])) is not None:
            assoc_limits.append(n)
        allowed = [q for q in parts[2].split(",") if q]
        qos_names.add(parts[1] or (allowed[0] if len(allowed) == 1 else "normal"))
    best: tuple[int | None, str] = (None, "no MaxSubmitJobs set")
    if assoc_limits:
        best = (min(assoc_limits), f"association of user {user}")
    for line in qres.stdout.splitlines() if qres.ok else []:
        name, _, limit = line.partition("|")
        n = _int(limit)
        if name in qos_names and n is not None and (best[0] is None or n < best[0]):
            best = (n, f"QOS {name}, per user")
    return best


def enforces_limits(config: Mapping[str, str]) -> bool:
    """Whether slurmctld holds jobs to association/QOS limits (else MaxSubmitJobs, even when
    set in the database, rejects nothing: not worth two sacctmgr calls per submit)."""
    words = set(config.get("AccountingStorageEnforce", "").replace(" ", "").split(","))
    return bool(words & {"limits", "qos", "safe", "all"})


def read_limits(timeout: float = ASK_TIMEOUT_S, user_limits: bool = True) -> Limits:
    """The cluster's limits, or SLURM's defaults (saying why) when no cluster answers."""
    reason = no_cluster_reason()
    if reason is None:
        res = query.run(["scontrol", "show", "config"], timeout=timeout)
        if res.ok:
            config = parse_config(res.stdout)
            limits = from_config(config, "from `scontrol show config`")
            if not user_limits or not enforces_limits(config):
                return limits
            n, whose = user_max_submit(config.get("ClusterName"), user_name(), timeout)
            return Limits(**{**limits.__dict__, "max_submit": n, "max_submit_from": whose})
        reason = f"`scontrol show config` failed: {last_words(res)}"
    return Limits(source=f"SLURM's default; no cluster to ask: {reason}")


def read_usage(user: str | None = None) -> tuple[Usage | None, query.Result]:
    """Jobs in slurmctld now (all users, `-t all`: ended ones still held count against
    MaxJobCount) and this user's unended ones, array tasks one per line."""
    res = query.run(["squeue", "-h", "-r", "-t", "all", "-o", "%u|%T"])
    if not res.ok:
        return None, res
    me = user or user_name()
    lines = [ln.partition("|") for ln in res.stdout.splitlines() if ln.strip()]
    mine = sum(1 for u, _, s in lines if u == me and RunState.parse(s) in NOT_ENDED)
    return Usage(in_memory=len(lines), mine=mine), res


def room(limits: Limits, usage: Usage | None) -> Room:
    """How many more jobs may be queued now, by the tightest visible limit."""
    if usage is None:
        return Room(None, "queue use unknown (squeue failed)")
    options: list[tuple[int, str]] = []
    if limits.max_submit is not None:
        options.append(
            (
                limits.max_submit - usage.mine,
                f"MaxSubmitJobs={limits.max_submit} ({limits.max_submit_from}), "
                f"{usage.mine} job(s) of yours queued or running",
            )
        )
    if limits.max_job_count is not None:
        options.append(
            (
                limits.max_job_count - usage.in_memory,
                f"MaxJobCount={limits.max_job_count}, {usage.in_memory} job(s) in the cluster",
            )
        )
    if not options:
        return Room(None, "no queue limit visible")
    n, why = min(options)
    return Room(max(n, 0), why)
