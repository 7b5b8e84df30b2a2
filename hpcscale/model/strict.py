"""Checks a campaign's load makes so that `validate` means what it says: values that
would pass it and fail only when the job starts.

- `setup:` lines (the profile's, then the campaign's) are written into the job script as given:
  `bash -n` of those lines, in that order, must pass (`echo it's set up` leaves a quote open and
  flips the quoting of everything after it).
- One argument longer than Linux's per-string limit (MAX_ARG_STRLEN, 128 KiB) or a command
  longer than the system's ARG_MAX makes exec fail ("exit code 126" in the job).
- A site value of the profile (account, partition, qos, ...) left as a template's stand-in
  (PLACEHOLDERS: `<...>`, `CHANGEME`, `your_...`): also used by hpcscale.model.datapaths for the
  data and weights paths. Other argument values are the program's own business (`todo`,
  `"..."`, `a/path/to/b` are ordinary values there).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hpcscale.model.errors import InputError
from hpcscale.model.yamlsrc import KeyPath, Source

MAX_ARG_STRLEN = 32 * 4096  # Linux: one argument or environment string, its NUL included
_SEG_END = r"(?=/|$)"
# A template's stand-in, never a real value; (how it is named in the message, its pattern).
PLACEHOLDERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("/path/to/...", re.compile(r"(?:^|/)path/to" + _SEG_END, re.I)),
    ("<...>", re.compile(r"<[^<>]*>")),
    ("{{...}}", re.compile(r"\{\{.*?\}\}")),
    ("a 'your...' part", re.compile(r"(?:^|/)your(?:[_-][^/]*)?" + _SEG_END, re.I)),
    (
        "a CHANGEME / TODO / XXX / ... part",
        re.compile(
            r"(?:^|/)(?:change[_-]?me|replace[_-]?me|fix[_-]?me|todo|tbd|x{3,}|\.{3}|…)" + _SEG_END,
            re.I,
        ),
    ),
)
# Profile keys whose values are the site's own names (a template leaves stand-ins there).
SITE_VALUES = ("partition", "account", "qos", "constraint", "reservation", "jobs_dir")


def placeholder_of(value: str) -> str | None:
    """How `value` shows it is a placeholder (e.g. '/path/to/...'), or None."""
    for name, pattern in PLACEHOLDERS:
        if pattern.search(value):
            return name
    return None


def arg_max() -> int:
    """The system's limit on a command's arguments and environment together (bytes)."""
    try:
        return int(os.sysconf("SC_ARG_MAX"))
    except (ValueError, OSError):
        return 2 * 1024 * 1024


def check_loaded(campaign: Any, profile: Any, src: Source) -> None:
    """Raise the first problem (InputError, located) of a loaded campaign and its profile
    (before the campaign's site options): placeholders in site values, setup lines bash cannot
    parse, arguments exec would refuse."""
    profile_src: Source | None = getattr(profile, "_source", None)
    for key in SITE_VALUES:
        value = getattr(profile, key, None)
        if isinstance(value, str) and (marker := placeholder_of(value)):
            message = f"{key} {value!r} is a placeholder ({marker}): set your site's value"
            raise profile_error(profile_src, (key,), message, profile)
    for i, rule in enumerate(getattr(profile, "partitions", [])):
        if marker := placeholder_of(rule.name):
            message = f"partition {rule.name!r} is a placeholder ({marker}): set your site's"
            raise profile_error(profile_src, ("partitions", i, "name"), message, profile)
    lines = [*profile.setup, *campaign.setup]
    if (bad := setup_problem(lines)) is not None:
        i, why = bad
        if i < len(profile.setup):
            raise profile_error(profile_src, ("setup", i), why, profile)
        raise src.error(("setup", i - len(profile.setup)), why)
    for key, why in argv_problems(campaign):
        raise src.error(key, why)


def profile_error(src: Source | None, key: KeyPath, message: str, profile: Any) -> InputError:
    """A problem of the system profile, located in its file when it was read from one."""
    if src is None:
        return InputError(f"<system {profile.name}>", None, ".".join(map(str, key)), message)
    return src.error(key, message)


def _bash_n(lines: Sequence[str]) -> str | None:
    """bash's complaint about `lines` as a script (None: it parses)."""
    proc = subprocess.run(
        ["bash", "-n"], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False
    )
    return None if proc.returncode == 0 else (proc.stderr.strip() or "bash -n failed")


def setup_problem(lines: Sequence[str]) -> tuple[int, str] | None:
    """(index of the culprit line, why) when `bash -n` refuses the setup lines, else None. The
    culprit: the first line from which every longer prefix fails (an `if` left open on one line
    and closed on a later one is fine)."""
    if not lines or (whole := _bash_n(lines)) is None:
        return None
    culprit = len(lines) - 1
    for k in range(len(lines) - 1, 0, -1):  # walk back while the prefix still fails
        if _bash_n(lines[:k]) is None:
            break
        culprit = k - 1
    return culprit, (
        f"setup line {lines[culprit]!r} is not valid shell (bash -n: {whole.splitlines()[-1]}); "
        "setup lines are written into the job script as given"
    )


def _words(campaign: Any) -> Iterable[tuple[KeyPath, str, list[str]]]:
    """(where, argument name, its possible values as text) for every value that reaches the
    command: the workload's arguments (fixed, matrix, zip) and a command's own words."""
    for name, value in campaign.workload.args.items():
        yield ("workload", "args", name), name, [str(value)]
    axes: list[tuple[KeyPath, Mapping[str, Any]]] = [(("matrix",), campaign.axes())]
    axes += [(("matrix", "zip", i), g) for i, g in enumerate(campaign.matrix.zip)]
    for where, group in axes:
        for axis, values in group.items():
            if axis.startswith("args."):
                vals = values if isinstance(values, list) else [values]
                yield (*where, axis), axis[5:], [str(v) for v in vals]
    command = getattr(campaign.workload, "command", None)
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError:
            command = [command]
    for i, word in enumerate(command or []):
        yield ("workload", "command", i), "", [str(word)]


def argv_problems(campaign: Any) -> list[tuple[KeyPath, str]]:
    """Arguments exec would refuse: one value of MAX_ARG_STRLEN bytes or more (with its
    `--name` beside it), or the longest command (each argument at its longest value) over
    ARG_MAX."""
    out: list[tuple[KeyPath, str]] = []
    total, limit = 0, arg_max()
    for key, name, values in _words(campaign):
        sizes = [len(v.encode("utf-8", "surrogatepass")) + 1 for v in values]
        longest = max(sizes, default=0)
        total += longest + (len(name) + 3 if name else 0)
        for i, size in enumerate(sizes):
            if size > MAX_ARG_STRLEN:
                at = (*key, i) if len(values) > 1 else key
                out.append(
                    (
                        at,
                        f"this value is {size - 1} bytes: one argument may be at most "
                        f"{MAX_ARG_STRLEN - 1} bytes (Linux's MAX_ARG_STRLEN, 128 KiB); the job "
                        "could not start (exit code 126). Pass a file holding it instead",
                    )
                )
    if total > limit and not out:
        out.append(
            (
                ("workload",),
                f"the longest command is about {total} bytes of arguments, over this system's "
                f"ARG_MAX ({limit} bytes): the job could not start (exit code 126). Pass the "
                "long values in a file instead",
            )
        )
    return out
