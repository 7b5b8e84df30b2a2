"""Short names for groups and cells: only what differs between the rows shown, so legends and bar
labels stay short enough to read in print. Knob names and units come from `hpcscale.model.vocab`;
a workload argument that differs is named as the campaign names it, with its value
(`args.lr 0.002`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from hpcscale.analysis.strategies import strategy_of
from hpcscale.model.vocab import KNOBS, Term, arg_columns, is_arg_column, term

Describe = Callable[[pd.Series], str]


def _words(t: Term) -> str:
    """A term's label inside a comma-separated label: lower case, unless it opens with an
    acronym ("MPI flavour")."""
    label = t.label
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def _flag(t: Term) -> Describe:
    """Only a switched-on flag is named (a label says what is on, not all that is off)."""
    name = _words(t)
    return lambda r: name if bool(r[t.name]) else ""


def _num(t: Term) -> Describe:
    name = _words(t)

    def describe(r: pd.Series) -> str:
        v = r[t.name]
        return f"default {name}" if v is None or pd.isna(v) else f"{name} {float(v):g} {t.unit}"

    return describe


def _knob(name: str) -> tuple[tuple[str, ...], Describe]:
    t = term(name)
    return (name,), _flag(t) if t.type == "bool" else _num(t)


def _arg(name: str) -> tuple[tuple[str, ...], Describe]:
    """A workload argument: its column name and value; unset means the job's own default."""

    def describe(r: pd.Series) -> str:
        v = r[name]
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return f"{name} default"
        if pd.api.types.is_bool(v):  # numpy's too
            return f"{name} {str(bool(v)).lower()}"
        return f"{name} {v:g}" if isinstance(v, float) else f"{name} {v}"

    return (name,), describe


def part_of(name: str) -> tuple[tuple[str, ...], Describe]:
    """A label part: one of PARTS, or a workload argument column (`args.<name>`)."""
    return _arg(name) if name not in PARTS and is_arg_column(name) else PARTS[name]


def with_args(rows: pd.DataFrame, parts: Sequence[str]) -> list[str]:
    """`parts` and then every workload argument column of `rows` (named only when it varies)."""
    return [*parts, *(a for a in arg_columns(rows.columns) if a not in parts)]


# Column -> (columns it depends on, how to say it). Order = order in a label.
PARTS: dict[str, tuple[tuple[str, ...], Describe]] = {
    "model": (("model",), lambda r: str(r["model"])),
    "device": (("device",), lambda r: str(r["device"]).upper()),
    "scaling": (("scaling",), lambda r: str(r["scaling"])),
    "program": (("program",), lambda r: f"program {r['program']}"),
    "epochs": (("epochs",), lambda r: _epochs(r["epochs"])),
    "strategy": (("strategy", "cross_device_ops", "mpi", "command", "launcher"), strategy_of),
    "layout": (
        ("tasks_per_node", "threads_per_task"),
        lambda r: f"{int(r['tasks_per_node'])}x{int(r['threads_per_task'])}",
    ),
    "nodes": (("nodes",), lambda r: f"{int(r['nodes'])} node{'s' * (int(r['nodes']) != 1)}"),
    "ranks": (("ranks",), lambda r: f"{int(r['ranks'])} rank{'s' * (int(r['ranks']) != 1)}"),
    "batch_per_rank": (("batch_per_rank",), lambda r: f"batch {int(r['batch_per_rank'])}/rank"),
    "global_batch": (("global_batch",), lambda r: f"global batch {int(r['global_batch'])}"),
    # The numeric and on/off knobs, named as the vocabulary names them.
    **{k: _knob(k) for k in KNOBS if term(k).type in ("bool", "float")},
    "repeat": (("repeat",), lambda r: f"repeat {int(r['repeat'])}"),
    "fixed_batch": (("fixed_batch",), lambda r: str(r["fixed_batch"])),
}
# The knobs a study varies at a fixed scale (how ranks talk and compute), in vocabulary order,
# then the CPU layout.
KNOB_PARTS: tuple[str, ...] = (
    *dict.fromkeys(next(p for p, (cols, _) in PARTS.items() if k in cols) for k in KNOBS),
    "layout",
)
GROUP_PARTS: tuple[str, ...] = (
    "program",
    "model",
    "device",
    "scaling",
    "epochs",
    *KNOB_PARTS,
    "batch_per_rank",
    "global_batch",
)
CELL_PARTS: tuple[str, ...] = (*GROUP_PARTS, "nodes", "ranks")


def varying(rows: pd.DataFrame, parts: Sequence[str], texts: _Texts | None = None) -> list[str]:
    """The parts whose value differs between rows (NaN/None counted as a value). `texts`: the
    columns' texts made by an earlier question about the same rows."""
    texts = _Texts(rows) if texts is None else texts
    out = []
    for name in parts:
        cols = [c for c in part_of(name)[0] if c in rows.columns]
        if cols and _distinct(rows, cols, texts) > 1:
            out.append(name)
    return out


class _Texts(dict[str, list[str]]):
    """Column -> its values as Python strings, each column made once: labelling a frame asks
    `_distinct` of the same columns again and again (a 1,000-cell sweep: 190 questions)."""

    def __init__(self, rows: pd.DataFrame) -> None:
        super().__init__()
        self.rows = rows

    def __missing__(self, col: str) -> list[str]:
        self[col] = out = list(map(str, self.rows[col].tolist()))
        return out


def _distinct(rows: pd.DataFrame, cols: Sequence[str], texts: _Texts | None = None) -> int:
    """How many different rows `cols` hold, each value as its text (None and NaN apart): a set
    of Python strings, not DataFrame.map(str) + drop_duplicates (a big sweep's labels' cost).
    `texts`: the texts of `rows`' columns made so far (kept for the next question)."""
    if not cols:
        return 1
    texts = _Texts(rows) if texts is None else texts
    return len(set(zip(*(texts[c] for c in dict.fromkeys(cols)), strict=True)))


def describe(row: pd.Series, parts: Sequence[str]) -> str:
    said = [text for text in (part_of(p)[1](row) for p in parts) if text]
    return ", ".join(said) if said or not parts else "defaults"


# Parts that often follow from others (the layout and batches change with the ranks in a
# scaling sweep); dropped from a label when the rest still tells the rows apart.
IMPLIED: tuple[str, ...] = ("global_batch", "batch_per_rank", "layout", "nodes", "fixed_batch")


def minimal(rows: pd.DataFrame, parts: Sequence[str], texts: _Texts | None = None) -> list[str]:
    """`parts` without those in IMPLIED that add no distinction between the rows."""
    keep = list(parts)
    texts = _Texts(rows) if texts is None else texts

    def distinct(ps: list[str]) -> int:
        cols = [c for p in ps for c in part_of(p)[0] if c in rows.columns]
        return _distinct(rows, cols, texts)

    full = distinct(keep)
    for part in IMPLIED:
        if part in keep and len(keep) > 1:
            trial = [p for p in keep if p != part]
            if distinct(trial) == full:
                keep = trial
    return keep


def labels(rows: pd.DataFrame, parts: Sequence[str] = CELL_PARTS, fallback: str = "") -> list[str]:
    """One label per row naming only what differs (workload arguments too); `fallback` (or the
    model) when nothing does."""
    texts = _Texts(rows)
    diff = minimal(rows, varying(rows, with_args(rows, parts), texts), texts)
    if not diff:
        base = fallback or (str(rows["model"].iloc[0]) if len(rows) else "")
        return [base] * len(rows)
    return [describe(r, diff) for r in _records(rows, diff)]


def group_labels(cells: pd.DataFrame, scaling_parts: bool = True) -> dict[Any, str]:
    """A label per `group` id of derived cells, naming what differs between groups."""
    firsts = cells.sort_values("group", kind="stable").groupby("group").head(1)
    parts = [p for p in GROUP_PARTS if scaling_parts or p != "scaling"]
    # Within a group the other batch column varies with the axis; name the one held fixed.
    batches = _records(firsts[["scaling", "global_batch", "batch_per_rank"]])
    firsts = firsts.assign(fixed_batch=[_fixed_batch(r) for r in batches])
    parts = [p for p in parts if p not in ("batch_per_rank", "global_batch")] + ["fixed_batch"]
    names = labels(firsts, parts)
    return dict(zip(firsts["group"].tolist(), names, strict=True))


def _epochs(value: Any) -> str:
    if value is None or pd.isna(value):
        return "default epochs"
    return f"{int(value)} epoch{'s' * (int(value) != 1)}"


def _records(rows: pd.DataFrame, parts: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows as plain dicts, for the per-row `describe` functions (which index them as
    they index a Series): `iterrows` builds a Series per row, several times slower. With
    `parts`, only the columns they describe (a sweep's table is a hundred columns wide)."""
    return (rows if parts is None else rows[_columns(rows, parts)]).to_dict("records")


def _columns(rows: pd.DataFrame, parts: Sequence[str]) -> list[str]:
    """The columns of `rows` that `parts` describe, once each."""
    return list(dict.fromkeys(c for p in parts for c in part_of(p)[0] if c in rows.columns))


def _fixed_batch(row: Mapping[str, Any]) -> str:
    if row["scaling"] == "strong":
        return f"global batch {int(row['global_batch'])}"
    return f"batch {int(row['batch_per_rank'])}/rank"


def with_setting(
    table: pd.DataFrame, rows: pd.DataFrame, match: Mapping[str, str], identity: Sequence[str]
) -> pd.DataFrame:
    """Add a "Setting" column naming the knobs that tell rows apart when the columns the table
    shows (`identity`, as cell columns) do not, e.g. fp16 on/off in a plain scaling table.

    The analysis tables sort their rows; each table row is matched back to its cell on the
    `match` columns (table column -> cell column), whose values the tables copy unchanged: the
    first cell not yet matched with equal values (missing equal to missing), looked up by
    value (one pass over each frame, not every row against every cell)."""
    parts = _needed(rows, [c for c in identity if c in rows.columns])
    if not parts or table.empty:
        return table
    records = _records(rows[list(dict.fromkeys([*_columns(rows, parts), *match.values()]))])
    names = [describe(r, parts) for r in records]
    waiting: dict[tuple, deque[int]] = {}
    for k, r in enumerate(records):
        waiting.setdefault(_key(r[c] for c in match.values()), deque()).append(k)
    settings = []
    for trow in _records(table[list(match)]):
        hits = waiting.get(_key(trow[c] for c in match))
        if not hits:  # cannot happen with the analysis' tables; never mislabel a row
            return table
        settings.append(names[hits.popleft()])
    out = table.copy()
    out.insert(1, "Setting", settings)
    return out


def _needed(rows: pd.DataFrame, identity: list[str]) -> list[str]:
    """The fewest knob parts that, with the identity columns, tell every cell apart."""

    texts = _Texts(rows)

    def distinct(parts: Sequence[str]) -> int:
        return _distinct(rows, identity + [c for p in parts for c in part_of(p)[0]], texts)

    parts = varying(rows, with_args(rows, ["epochs", *KNOB_PARTS]), texts)
    full = distinct(parts)
    if distinct([]) == full:
        return []
    for part in reversed(list(parts)):
        trial = [p for p in parts if p != part]
        if distinct(trial) == full:
            parts = trial
    return parts


_MISSING = object()  # None and NaN: equal to each other as `with_setting` matches


def _key(values: Iterable[Any]) -> tuple:
    """Values as a dict key that is equal where `==` is (1 and 1.0 alike), missing as one."""
    return tuple(_MISSING if _missing(v) else v for v in values)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float):  # numpy's float64 too (whose != gives a numpy bool)
        return bool(v != v)
    if isinstance(v, str | int):  # bool too; numpy's integers and others: pd.isna
        return False
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list-like value: not missing
        return False
