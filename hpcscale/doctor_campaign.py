"""`hpcscale doctor CAMPAIGN`: what this campaign needs here, not what some profile could need.

The campaign's own profile (resolved beside the campaign file, as `submit` resolves it: the
`local.yaml` that `init` wrote, not the shipped `local`), its launchers and scheduler; for a
bundled program the jobs' Python with what the campaign's frameworks import
(Framework.python_modules over the strategies its matrix uses: TensorFlow and its distribution
library for the TensorFlow programs, PyTorch for `strategy: torch_ddp`); for the user's own command
(`workload.command`) only what that command needs: its working directory, its interpreter
running, its program file there, and PyTorch when it says `workload.framework: torch`. A
command is not asked for TensorFlow (which library its program trains with is its own
choice).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpcscale.backends import backend_class
from hpcscale.doctor import (
    PROBE_TIMEOUT_S,
    Check,
    Diagnosis,
    launcher_checks,
    module_checks,
    probes_for,
    python_checks,
    run_probe,
    scanner_check,
    slurm_checks,
)
from hpcscale.doctor import doctor as doctor_system
from hpcscale.frameworks import for_strategy
from hpcscale.model.campaign import LoadedCampaign, load_campaign
from hpcscale.model.command import (
    AS_WRITTEN,
    PYTHONS,
    fields_of,
    resolve_cwd,
)
from hpcscale.model.errors import InputError
from hpcscale.model.registry import COMMAND_FRAMEWORKS, DEFAULT_STRATEGY
from hpcscale.model.site_examples import refuse_site_examples
from hpcscale.model.system import SHIPPED_DIR, System, python_of
from hpcscale.starter import STARTER_FILE

if TYPE_CHECKING:
    from hpcscale.model.run import Run

VERSION_PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


def doctor(
    system: str | None = None, campaign: str | Path | None = None, here: Path | None = None
) -> Diagnosis:
    """`campaign` checked on its own profile (or on `system`); without one, the campaign `init`
    wrote in `here` (the current directory) when there is one, else the profile `system`
    (default `local`, the shipped one)."""
    here = Path.cwd() if here is None else here
    if campaign is None and system is None and (here / STARTER_FILE).is_file():
        campaign = here / STARTER_FILE
    if campaign is not None:
        return doctor_campaign(campaign, system)
    return doctor_system(system or "local")


def doctor_campaign(campaign: str | Path, system: str | None = None) -> Diagnosis:
    """Check this host for `campaign` (a YAML file), on its own profile or on `system`."""
    loaded = load_campaign(campaign, system)
    profile = loaded.system
    python = python_of(profile)
    source = profile._source.path if profile._source else profile.name
    out = Diagnosis(profile.name, str(source), python, campaign=str(campaign))
    out.checks += launcher_checks(profile)
    if profile.site_examples:
        out.checks.append(site_values_check(profile))
    if profile.scheduler == "slurm":
        out.checks += slurm_checks(profile)
    own = loaded.campaign.workload.command is not None
    needs = campaign_modules(loaded)
    if own:
        own_checks = command_checks(loaded, python)
        out.checks += own_checks
        started = all(c.passed for c in own_checks if c.name in ("cwd", "python"))
        if needs and started:  # what the command imports, where its interpreter runs
            runs = command_python(loaded, python)
            probe = run_probe(profile, runs, needs)
            if "error" in probe:  # every module, with the error that stopped the probe
                probe = {m: {"error": probe["error"]} for m in needs}
            out.checks += module_checks(profile, runs, probe, needs)
    else:
        probe = run_probe(profile, python, probes_for(needs))
        out.checks += python_checks(profile, python, probe, needs)
    if not own or loaded.campaign.collect.timeline:  # collect --timeline's fast engine
        out.checks.append(scanner_check())
    return out


def strategies_of(loaded: LoadedCampaign) -> list[str]:
    """The `strategy:` values the campaign's matrix uses (its zip groups too), else the
    default framework's (the registry's); for a command with `workload.framework`, that
    framework's."""
    c = loaded.campaign
    if c.workload.command is not None and c.workload.framework is not None:
        return [COMMAND_FRAMEWORKS[c.workload.framework]]
    values: list[object] = []
    for group in [c.axes(), *c.matrix.zip]:
        value = group.get("strategy", [])
        values += value if isinstance(value, list) else [value]
    return [str(v) for v in dict.fromkeys(values)] or [DEFAULT_STRATEGY]


def campaign_modules(loaded: LoadedCampaign) -> tuple[str, ...]:
    """What the jobs' Python must import for this campaign: its frameworks' python_modules.
    A user's command only for `workload.framework: torch` (PyTorch), whose launch contract
    it asked for; its own imports are otherwise its own."""
    workload = loaded.campaign.workload
    if workload.command is not None and workload.framework != "torch":
        return ()
    names: list[str] = []
    for strategy in strategies_of(loaded):
        try:
            names += for_strategy(strategy).python_modules
        except KeyError:  # an unknown strategy is validate's to locate
            continue
    return tuple(dict.fromkeys(names))


def command_python(loaded: LoadedCampaign, python: str) -> str:
    """The interpreter that runs the command: the profile's for a leading python/python3
    (unless `interpreter: as-written`, then the one on PATH), a Python named as the first word,
    else the profile's (a wrapper script runs in the profile's environment)."""
    workload = loaded.campaign.workload
    first = (workload.command or [python])[0]
    if first in PYTHONS:
        return python if workload.interpreter != AS_WRITTEN else shutil.which(first) or first
    if Path(first).name.startswith("python"):
        return first
    return python


def site_values_check(profile: System) -> Check:
    """Whether the profile still holds values its shipped original only gave as examples (an
    account, partitions, module names), which `validate` and `submit` refuse."""
    try:
        refuse_site_examples(profile, SHIPPED_DIR, submitting=True)
    except InputError as exc:
        said = exc.message.splitlines()
        values = ", ".join(line.strip() for line in said[1:-1])
        return Check("site values", False, f"still the shipped examples: {values}", said[-1])
    return Check("site values", True, "none of the profile's `site_examples` left as shipped")


def command_checks(loaded: LoadedCampaign, python: str) -> list[Check]:
    """The command's directory, its interpreter and its program file, as the job will see
    them (on a cluster, the same paths on the compute nodes)."""
    workload = loaded.campaign.workload
    words = list(workload.command or [])
    cwd = Path(resolve_cwd(workload.cwd, loaded.path))
    checks = [
        Check("cwd", cwd.is_dir(), str(cwd) if cwd.is_dir() else f"{cwd} is not a directory",
              "" if cwd.is_dir() else f"create it, or set `workload.cwd` in {loaded.path}")
    ]  # fmt: skip
    if not cwd.is_dir():
        return checks
    if words[0] in PYTHONS and workload.interpreter != AS_WRITTEN:
        checks.append(interpreter_check(python, f"the profile's `python:` (for {words[0]!r})"))
        rest = words[1:]
    else:
        checks.append(executable_check(words[0], cwd))
        rest = words[1:] if _is_interpreter(words[0]) else []
    if (script := _script(rest)) is not None:
        path = cwd / script
        near = _near(path)
        checks.append(
            Check("program", path.is_file(), str(path) if path.is_file() else
                  f"{script}: no such file in {cwd}{near}",
                  "" if path.is_file() else "fix the path in `workload.command` (relative to "
                  "`workload.cwd`, else to the campaign file's folder)")
        )  # fmt: skip
    return checks


def interpreter_check(python: str, what: str) -> Check:
    """The interpreter runs here, and which Python it is."""
    try:
        proc = subprocess.run(
            [python, "-c", VERSION_PROBE], capture_output=True, text=True,
            timeout=PROBE_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("python", False, f"{python} does not run here: {exc}",
                     f"set {what} to an interpreter that exists here")  # fmt: skip
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("python", False, f"{python} does not run here: {last}",
                     f"set {what} to an interpreter that runs here")  # fmt: skip
    return Check("python", True, f"{python} is Python {proc.stdout.strip()}")


def executable_check(word: str, cwd: Path) -> Check:
    """The command's first word: a program on PATH, or a file (relative to `cwd`)."""
    if "/" in word:
        path = cwd / word
        ok = path.is_file() and shutil.which(str(path)) is not None
        detail = str(path) if ok else f"{word}: not an executable file in {cwd}"
    else:
        found = shutil.which(word)
        ok = found is not None
        detail = found or f"{word}: not found on PATH{_near_program(word)}"
    return Check("program", ok, detail, "" if ok else "fix the first word of `workload.command`")


def _is_interpreter(word: str) -> bool:
    """A first word that runs a script named next (python3.11, /opt/conda/bin/python, bash)."""
    name = Path(word).name
    return name.startswith(("python", "pypy")) or name in ("bash", "sh", "Rscript", "julia")


def _script(words: list[str]) -> str | None:
    """The program file among an interpreter's words: the first that is not an option, unless
    it holds a placeholder (known only when rendering)."""
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in ("-c", "-m"):  # code or a module, not a file
            return None
        elif w in ("-W", "-X", "-o", "-O"):  # an option and its value (python, bash)
            skip = True
        elif not w.startswith("-"):
            return None if fields_of(w) else w
    return None


def _near(path: Path) -> str:
    """A did-you-mean among the files beside a missing one (`trian.py` -> `train.py`)."""
    from difflib import get_close_matches

    if not path.parent.is_dir():
        return ""
    names = [p.name for p in path.parent.iterdir() if p.is_file()]
    close = get_close_matches(path.name, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _near_program(word: str) -> str:
    close = [p for p in PYTHONS if p != word and _edits(p, word) <= 1]
    return f"; did you mean {close[0]!r}?" if close else ""


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (short words only)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def check_program(
    loaded: LoadedCampaign, backend: str | None = None, runs: Sequence[Run] = ()
) -> None:
    """`validate` (`backend` None) and `submit` (through `backend`, for `runs`) refuse a
    profile still holding its shipped site examples (hpcscale.model.site_examples); on `submit`
    the backend checks what can be known before queueing (`Backend.preflight`: SLURM's
    partitions and account). On a system whose jobs run here: the command's directory,
    interpreter and program file exist, or an error located at `workload.command` (exit 2)
    before anything is queued, instead of every run failing with `exit code 2`. A cluster's
    compute nodes may see other paths and modules: there `doctor` says, nothing refuses."""
    refuse_site_examples(loaded.system, SHIPPED_DIR, submitting=backend is not None)
    if backend is not None:
        backend_class(backend).preflight(loaded.system, runs)
    if loaded.campaign.workload.command is None or not loaded.system.jobs_run_here:
        return
    failed = [c for c in command_checks(loaded, python_of(loaded.system)) if not c.passed]
    if failed:
        key = ("workload", "cwd") if failed[0].name == "cwd" else ("workload", "command")
        said = "; ".join(f"{c.detail} ({c.fix})" if c.fix else c.detail for c in failed)
        raise loaded.source.error(key, said)
