"""The provenance section reads only `provenance` from each run's metrics.json (#28: decoding
the whole file, per-epoch series and all, was most of its time at 1,000 runs). What it gets
must be what reading the whole file gave: the field when the file is a JSON object, None for a
file that is missing, unreadable, not JSON, or not an object."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcscale.formats.metrics import load_provenance as _read_provenance


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"epochs": [1, 2], "provenance": {"python": "3.11"}, "x": null}', {"python": "3.11"}),
        ('{"provenance": 3}', 3),  # kept as is; read_runs keeps dicts only
        ('{"epochs": [1, 2]}', None),
        ('["provenance"]', None),
        ('"provenance"', None),
        ('{"provenance": {"python": "3.11"}', None),  # cut short
        ("", None),
    ],
)
def test_provenance_field_or_none(tmp_path: Path, text: str, expected: object) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(text)
    assert _read_provenance(path) == expected


def test_missing_and_undecodable_files_are_none(tmp_path: Path) -> None:
    assert _read_provenance(tmp_path / "metrics.json") is None
    (tmp_path / "bad.json").write_bytes(b'{"provenance": "\xff"}')
    assert _read_provenance(tmp_path / "bad.json") is None
    assert _read_provenance(tmp_path) is None  # a directory: not readable as a file
