"""Site examples: the values a shipped cluster profile only guesses (account, partitions,
reservation, module names), so that a copy still holding them is refused before it queues.

A shipped profile lists them in its own file, as key names a user editing the copy reads next to
the values themselves:

    site_examples: [account, partitions, reservation, modules]

Each name matches that key anywhere in the profile (`modules` is also `gpu.modules` and every
`mpi.<flavour>...modules`); the strings under it (a partition rule by its `name`) are compared
with the shipped profile's own values there, and with a commented-out example of a top-level key
(`# reservation: scaling-week`), which a user uncomments. A copy whose value is still the
example is refused by `validate` and `submit` (not `plan` or a dry run, which only show), naming
the file, line and key of each; the fix is to edit the value, or, where the example really is
the site's, to drop its key from `site_examples:`. The shipped profile itself is an example:
`validate` passes it (the bundled campaigns are planned on it) and only `submit` refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcscale.model.errors import InputError
from hpcscale.model.yamlsrc import KeyPath, format_key, load_yaml

if TYPE_CHECKING:
    from hpcscale.model.system import System

MARKABLE = ("account", "partition", "partitions", "reservation", "qos", "constraint", "modules")
_COMMENTED = re.compile(r"^#\s*([a-z_]+):\s*([A-Za-z0-9_.:,@%+=/-]+)\s*$")


def _strings(value: Any, key: KeyPath) -> Iterator[tuple[KeyPath, str]]:
    """The strings a marked key holds: a scalar, a list's items, a rule mapping's `name`."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*key, i))
    elif isinstance(value, dict) and isinstance(value.get("name"), str):
        yield (*key, "name"), value["name"]


def marked_values(data: Any, names: set[str], key: KeyPath = ()) -> Iterator[tuple[KeyPath, str]]:
    """Every (key path, string) under a key named in `names`, at any depth."""
    if isinstance(data, dict):
        for k, v in data.items():
            if k in names:
                yield from _strings(v, (*key, k))
            elif k != "site_examples":
                yield from marked_values(v, names, (*key, k))


def _examples(shipped: Path, names: set[str]) -> dict[str, set[str]]:
    """The shipped profile's values per marked key name, its commented examples included."""
    src = load_yaml(shipped)
    out: dict[str, set[str]] = {n: set() for n in names}
    for key, value in marked_values(src.data, names):
        out[next(str(k) for k in reversed(key) if str(k) in names)].add(value)
    for line in shipped.read_text(encoding="utf-8").splitlines():
        m = _COMMENTED.match(line)
        if m and m.group(1) in names:
            out[m.group(1)].add(m.group(2))
    return out


def _originals(system: System, shipped_dir: Path) -> list[Path]:
    """The shipped profile a copy came from: the one of the same name, else every shipped one
    (a copy renamed is compared with them all)."""
    same = shipped_dir / f"{system.name}.yaml"
    return [same] if same.is_file() else sorted(shipped_dir.glob("*.yaml"))


def unchanged(system: System, shipped_dir: Path) -> list[tuple[KeyPath, str]]:
    """The marked values of `system`'s file that are still a shipped example."""
    src = system._source
    names = set(system.site_examples)
    if src is None or not names:
        return []
    examples: dict[str, set[str]] = {n: set() for n in names}
    for original in _originals(system, shipped_dir):
        for name, values in _examples(original, names).items():
            examples[name] |= values
    out = []
    for key, value in marked_values(src.data, names):
        name = next(str(k) for k in reversed(key) if str(k) in names)
        if value in examples[name]:
            out.append((key, value))
    return out


def check_names(system: System) -> None:
    """`site_examples:` names only keys whose values can be site examples."""
    src = system._source
    for i, name in enumerate(system.site_examples):
        if name not in MARKABLE and src is not None:
            raise src.error(
                ("site_examples", i),
                f"{name!r} is not a key a site example can be; one of: {', '.join(MARKABLE)}",
            )


def refuse_site_examples(system: System, shipped_dir: Path, *, submitting: bool) -> None:
    """An InputError (exit 2) naming every value of the profile that is still a shipped site
    example: a copy at `validate` and `submit`, the shipped profile itself only at `submit`."""
    src = system._source
    if src is None:
        return
    check_names(system)
    is_shipped = Path(src.path).resolve().parent == shipped_dir.resolve()
    if is_shipped and not submitting:
        return
    found = unchanged(system, shipped_dir)
    if not found:
        return
    lines = [
        f"  {src.path}:{src.line_of(key) or '?'} [{format_key(key)}]: {value}"
        for key, value in found
    ]
    where = src.line_of(("site_examples",))
    if is_shipped:
        fix = (
            f"copy it (`hpcscale init --system {system.name}`), set your site's values in the "
            "copy, and point the campaign's `system:` at the copy"
        )
    else:
        fix = (
            "edit each to your site's value; where an example really is your site's, remove "
            f"its key from `site_examples:` (line {where})"
        )
    raise InputError(
        src.path,
        where,
        "site_examples",
        f"{len(found)} value(s) of profile {system.name!r} are still the shipped profile's "
        f"site examples, not your site's:\n" + "\n".join(lines) + f"\n{fix}",
    )
