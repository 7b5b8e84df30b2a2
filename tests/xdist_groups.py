"""Which tests must share a pytest-xdist worker (`make test` runs the suite on 2 workers).

A session fixture (the quickstart, the classifier and StackGAN campaigns, the timeline's real
runs, the installed wheel, the SLURM cluster) is built once per worker that asks for it, and a
module- or class-scoped one once per worker that runs a test of its file: tests sharing one must
land on the same worker, or each worker pays for its own real runs. So every test is tied to the
shared fixtures it uses (`item.fixturenames`, which includes the fixtures those fixtures use),
tests tied to a common one form one group (connected components), and under `--dist loadgroup`
`GroupScheduling` sends each group to one worker whole. A test tied to nothing is scheduled
alone, wherever a worker is free. `@pytest.mark.shares("NAME")` ties tests by hand: to the
session fixture NAME where a fixture reaches it by `request.getfixturevalue` (invisible in
`item.fixturenames`), or to anything else shared that NAME names.

Why not xdist's own `xdist_group` marks: pytest-xdist 3.8 groups by renaming each marked
item's nodeid (`item._nodeid`), which pytest 9.2 no longer reads (`nodeid` comes from
`item._id`): the marks are silently ignored and every test is scheduled alone. Here each worker
writes test id -> group to a file the controller named (HPCSCALE_XDIST_GROUPS), and the
controller's scheduler (pytest-xdist's `pytest_xdist_make_scheduler` hook) reads it.

All SLURM tests (the `slurm` marker or the `slurm_cluster` fixture) form one group: one cluster
per worker at a time, so two clusters never race for the same free port block
(tests/slurm_fixture.py picks the first free one) and the SLURM tests' job-start deadlines never
meet a second cluster's daemons.

`@pytest.mark.serial` keeps a test out of the parallel phase: `make test` runs it afterwards,
alone on the machine (`pytest -m serial`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

try:  # the dev extra installs pytest-xdist; without it the suite runs on one process
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover
    LoadScopeScheduling = object  # type: ignore[assignment,misc]

SLURM_GROUP = "slurm"
SHARED_SCOPES = frozenset({"session", "package", "module", "class"})
GROUPS_ENV = "HPCSCALE_XDIST_GROUPS"  # the folder where workers write test id -> group


def _shared_keys(item: pytest.Item) -> list[str]:
    """The shared things this test is tied to: `fx:NAME` for a session fixture of the suite's
    own, `file:PATH` for a module- or class-scoped one (one instance per file), `slurm`."""
    keys = [f"fx:{m.args[0]}" for m in item.iter_markers("shares")]  # tied by hand
    if item.get_closest_marker("slurm") is not None or "slurm_cluster" in item.fixturenames:
        keys.append(SLURM_GROUP)
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    for name in item.fixturenames:
        fixdefs = defs.get(name)
        if not fixdefs:
            continue
        fixdef = fixdefs[-1]  # the one this test gets (the closest override)
        scope = fixdef.scope if isinstance(fixdef.scope, str) else fixdef.scope.value
        module = getattr(fixdef.func, "__module__", "") or ""
        if scope not in SHARED_SCOPES or not module.startswith("tests."):
            continue  # pytest's own (tmp_path_factory...) cost nothing to build twice
        if scope == "session" or scope == "package":
            keys.append(f"fx:{name}")
        else:
            keys.append(f"file:{item.path}")
    return keys


class _Components:
    """Union-find over keys: tests sharing any key end in one component."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        self.find(keys[0])
        for other in keys[1:]:
            a, b = self.find(keys[0]), self.find(other)
            if a != b:
                self.parent[max(a, b)] = min(a, b)


def _group_name(members: set[str]) -> str:
    """A readable, deterministic name: `slurm`, the shared session fixtures (or names given to
    `shares`), else the file."""
    if SLURM_GROUP in members:
        return SLURM_GROUP
    fixtures = sorted(k[3:] for k in members if k.startswith("fx:"))
    if fixtures:
        return "+".join(fixtures)
    files = sorted(k[5:].rsplit("/", 1)[-1].removesuffix(".py") for k in members)
    return "+".join(files)


def assign_groups(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    """Group name -> its tests, for every test tied to a shared fixture (serial tests aside)."""
    comps = _Components()
    tied: list[tuple[pytest.Item, list[str]]] = []
    for item in items:
        if item.get_closest_marker("serial") is not None:
            continue  # runs in its own phase, alone: no worker to share with
        keys = _shared_keys(item)
        if keys:
            comps.union(keys)
            tied.append((item, keys))
    members: dict[str, set[str]] = {}
    for key in list(comps.parent):
        members.setdefault(comps.find(key), set()).add(key)
    groups: dict[str, list[pytest.Item]] = {}
    for item, keys in tied:
        groups.setdefault(_group_name(members[comps.find(keys[0])]), []).append(item)
    return groups


def write_groups(folder: Path, worker: str, items: list[pytest.Item],
                 groups: dict[str, list[pytest.Item]]) -> None:  # fmt: skip
    """This worker's test id -> group, for the tests it collected (its final ids)."""
    kept = {id(item) for item in items}
    mapping = {it.nodeid: name for name, its in groups.items() for it in its if id(it) in kept}
    tmp = folder / f".{worker}.json"
    tmp.write_text(json.dumps(mapping))
    tmp.replace(folder / f"{worker}.json")  # whole or absent for the reader


def _read_groups(folder: Path, wait_s: float = 60.0) -> dict[str, str]:
    """A worker's test id -> group, as it wrote it before reporting its collection
    (conftest's tryfirst hook). Missing, the suite would run ungrouped without a word (every
    worker building every shared run, two SLURM clusters): wait a little, then fail loudly."""
    deadline = time.monotonic() + wait_s
    while not (found := sorted(folder.glob("gw*.json"))):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no xdist worker wrote its test groups to {folder}")
        time.sleep(0.1)
    return dict(json.loads(found[0].read_text()))


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc,valid-type]
    """pytest-xdist's scope scheduling with our groups as the scopes: a group goes to one
    worker whole (the largest first), a test in no group is a scope of its own."""

    def __init__(self, config: pytest.Config, log: object | None = None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has collected
            self._groups = _read_groups(Path(os.environ[GROUPS_ENV]))
        group = self._groups.get(nodeid)
        return f"group:{group}" if group else nodeid
