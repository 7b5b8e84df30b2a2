"""`hpcscale init`: a starting point in the user's own directory. Either a commented starter
campaign sweeping the axes one tries first (nodes, layout, batch, a knob of the default
framework: Framework.starter) with a copy of a system profile beside it to edit, or a copy of
one of the shipped example campaigns.

Nothing is overwritten unless asked (`force`): every target is checked before anything is
written, so a refusal leaves the directory as it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hpcscale.formats.atomic import atomic_write
from hpcscale.frameworks import for_strategy
from hpcscale.model.errors import UsageError
from hpcscale.model.registry import DEFAULT_STRATEGY
from hpcscale.model.resources import campaigns_dir
from hpcscale.model.system import System, load_system
from hpcscale.model.validation import did_you_mean

STARTER_FILE = "campaign.yaml"
STARTER_NAME = "first_study"


@dataclass(frozen=True)
class Example:
    """One shipped campaign (`hpcscale init --example NAME`)."""

    name: str
    description: str
    path: Path


@dataclass
class Initialised:
    """What `init` wrote and the commands to run next (relative to the current directory)."""

    written: list[Path]
    campaign: Path
    next_commands: list[tuple[str, str]] = field(default_factory=list)  # (command, what it does)


def examples() -> list[Example]:
    """The shipped campaigns: the quickstart and every seed study, with their descriptions."""
    found = []
    for path in sorted(campaigns_dir().glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        description = data.get("description", "") if isinstance(data, dict) else ""
        found.append(Example(path.stem, str(description), path))
    return found


def init(
    directory: str | os.PathLike[str] = ".",
    *,
    system: str = "local",
    example: str | None = None,
    force: bool = False,
) -> Initialised:
    """Write a starter (or the shipped campaign `example`) into `directory`, created if needed.
    An existing file is an error naming it (exit 2), unless `force`."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if example is not None:
        files = {target / f"{example}.yaml": _example(example).path.read_bytes()}
        campaign = target / f"{example}.yaml"
    else:
        profile = load_system(system, relative_to=Path.cwd(), where=("--system", None))
        copy = target / f"{profile.name}.yaml"
        files = {
            target / STARTER_FILE: starter_campaign(profile, copy.name).encode("utf-8"),
            copy: _profile_text(profile, copy).encode("utf-8"),
        }
        campaign = target / STARTER_FILE
    for path in (target, *files):  # writing there would follow the link to who knows where
        if path.is_symlink() and not path.exists():
            raise UsageError(f"{path} is a dangling symlink (to {os.readlink(path)}); remove it")
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise UsageError(f"{existing[0]} exists; not overwritten (--force overwrites it)")
    target.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        atomic_write(path, data)
    out = Initialised(list(files), campaign)
    out.next_commands = next_commands(campaign)
    return out


def next_commands(campaign: Path) -> list[tuple[str, str]]:
    shown = _shown(campaign)
    return [
        (f"hpcscale plan {shown}", "the runs its matrix expands to"),
        (f"hpcscale submit {shown}", "render and run them (`hpcscale status` follows them)"),
        ("hpcscale report", "collect the results; tables and figures under ./hpcscale-runs"),
    ]


def starter_campaign(profile: System, profile_file: str) -> str:
    """The starter campaign for `profile` (copied beside it as `profile_file`): CPU ranks, sizes
    that fit the profile (its cores per node, its largest job), a few minutes per run."""
    cores = profile.cores_per_node
    layouts = [f"1x{cores}"] + ([f"2x{cores // 2}"] if cores >= 2 else [])
    nodes = [n for n in (1, 2) if n <= profile.max_nodes]
    gpus = profile.gpus_per_node
    starter = for_strategy(DEFAULT_STRATEGY).starter  # a knob and the trace's words
    body: list[tuple[str, str]] = [
        (f"name: {STARTER_NAME}", f"run data goes to ./hpcscale-runs/{STARTER_NAME}/"),
        (f"description: DCGAN weak scaling on {profile.name}, nodes x layout x batch x fusion", ""),
        ("workload:", ""),
        ("  model: dcgan", "or sngan, wgan_gp, resnet50, ... (hpcscale models)"),
        ("  epochs: 2", "timed epochs per run"),
        ("  args: {image_size: 32, dataset_size: 512}", "32-px images, 512 an epoch"),
        (f"system: {profile_file}", "the profile copied beside this file: edit it"),
        ("scaling: weak", "weak: batch is per rank; strong: the global batch"),
        ("matrix:", "every combination of these values is one run"),
        (f"  nodes: {_flow(nodes)}", f"node counts (the profile allows up to {profile.max_nodes})"),
        ("  device: cpu", f"GPU runs: gpu, no layout, gpus_per_node: [1, {gpus}]" if gpus else ""),
        (f"  layout: {_flow(layouts)}", "CPU ranks per node x threads per rank"),
        ("  batch: [16, 32]", "images per rank (weak scaling)"),
        *([starter.knob] if starter else []),
        ("repeats: 1", "runs per cell: 3 or more give the report noise intervals"),
        *([("collect: {timeline: true}", starter.trace)] if starter else []),
    ]
    width = max(len(line) for line, note in body if note) + 2
    lines = [line.ljust(width) + f"# {note}" if note else line for line, note in body]
    head = f"""\
# A first scaling study: DCGAN on small synthetic images (nothing to download), weak scaling.
# `hpcscale validate {STARTER_FILE}` checks every key and value without running anything,
# `hpcscale plan {STARTER_FILE}` lists the runs, `hpcscale models` the models and their arguments.
"""
    return head + "\n".join(lines) + "\n"


def _flow(values: list[object]) -> str:
    return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values) + "]"


def _profile_text(profile: System, copy: Path) -> str:
    """The profile file as written (comments kept), refused when it names a `templates:`
    directory, which is relative to the original and would not resolve from the copy."""
    source = profile._source
    if source is None:
        raise UsageError(f"system {profile.name!r}: no profile file to copy")
    original = Path(source.path)
    if profile.templates and original.parent.resolve() != copy.parent.resolve():
        raise UsageError(
            f"{original} names its own templates directory ({profile.templates}); copy the "
            "profile and that directory by hand"
        )
    return original.read_text(encoding="utf-8")


def _example(name: str) -> Example:
    found = {e.name: e for e in examples()}
    if name not in found:
        raise UsageError(
            f"no shipped campaign {name!r}{did_you_mean(name, found)}; "
            "`hpcscale init --list` lists them"
        )
    return found[name]


def _shown(path: Path) -> str:
    """`path` as the user would type it from here."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
