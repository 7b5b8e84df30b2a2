"""Safe YAML loading that remembers where every key came from, so errors can name a line.

Aliases are expanded by us with a node budget: a "billion laughs" document fails fast instead of
eating memory. Only standard YAML tags are accepted (SafeLoader), never Python objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcscale.model.errors import InputError

MAX_NODES = 200_000
MAX_DEPTH = 100  # nesting levels; a campaign needs about 5, and deeper exhausts Python's stack
_PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
KeyPath = tuple[str | int, ...]


@dataclass
class Source:
    """Parsed YAML data plus the 1-based line of each key path."""

    path: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key: KeyPath) -> int | None:
        """Line of the deepest known prefix of `key` (a missing key points at its parent)."""
        for n in range(len(key), -1, -1):
            if key[:n] in self.lines:
                return self.lines[key[:n]]
        return None

    def error(self, key: KeyPath, message: str) -> InputError:
        return InputError(self.path, self.line_of(key), format_key(key) or None, message)


def format_key(key: KeyPath) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_yaml(path: str | Path, text: str | None = None) -> Source:
    """Load one YAML document; raise InputError with the file and line on any problem."""
    name = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(name, None, None, "no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(name, None, None, f"cannot read: {exc}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise _too_deep(name, _deep_line(text), None) from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise InputError(name, line, None, f"invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(name, None, None, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    src = Source(name, None)
    if node is None:
        return src
    budget = [MAX_NODES]
    src.data = _build(node, (), src, loader, budget)
    return src


def _too_deep(file: str, line: int | None, key: KeyPath | None) -> InputError:
    return InputError(
        file, line, format_key(key) if key else None, f"nested more than {MAX_DEPTH} levels deep"
    )


def _deep_line(text: str) -> int | None:
    """The line where nesting passes MAX_DEPTH, found by the parser's events (iterative, where
    composing the document recursed too deep for Python)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return event.start_mark.line + 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


def _build(
    node: yaml.Node, key: KeyPath, src: Source, loader: yaml.SafeLoader, budget: list[int]
) -> Any:
    if len(key) >= MAX_DEPTH:
        raise _too_deep(src.path, node.start_mark.line + 1, key[:1])
    budget[0] -= 1
    if budget[0] < 0:
        raise InputError(
            src.path,
            node.start_mark.line + 1,
            format_key(key) or None,
            f"document expands to more than {MAX_NODES} nodes (alias bomb?)",
        )
    src.lines.setdefault(key, node.start_mark.line + 1)
    if not isinstance(node, yaml.ScalarNode) and node.tag not in _PLAIN_TAGS:
        raise InputError(
            src.path,
            node.start_mark.line + 1,
            format_key(key) or None,
            f"unsupported YAML tag {node.tag!r} (only plain data is allowed)",
        )
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            k = _scalar(knode, key, src, loader)
            if not isinstance(k, (str, int, float, bool)) or isinstance(k, bool):
                raise src.error(key, f"keys must be strings, got {k!r}")
            k = str(k)
            if k in out:
                raise InputError(
                    src.path, knode.start_mark.line + 1, format_key((*key, k)), "duplicate key"
                )
            src.lines[(*key, k)] = knode.start_mark.line + 1
            out[k] = _build(vnode, (*key, k), src, loader, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, (*key, i), src, loader, budget) for i, v in enumerate(node.value)]
    return _scalar(node, key, src, loader)


def _scalar(node: yaml.Node, key: KeyPath, src: Source, loader: yaml.SafeLoader) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise InputError(
            src.path,
            node.start_mark.line + 1,
            format_key(key) or None,
            "a mapping key must be a plain value",
        )
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError:
        raise InputError(
            src.path,
            node.start_mark.line + 1,
            format_key(key) or None,
            f"unsupported YAML tag {node.tag!r} (only plain data is allowed)",
        ) from None
