"""A run's per-rank traces are part of what collect watches: a trace that appears, grows or is
renamed from its .tmp makes the run be read again (else a cached collect would keep a run's
figures from before its traces were written)."""

from __future__ import annotations

import os
from pathlib import Path

from hpcscale.collect.collector import _fingerprint


def test_a_trace_that_appears_or_changes_changes_the_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    before = _fingerprint(tmp_path)
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank0.json.tmp").write_text("[")
    cut = _fingerprint(tmp_path)
    assert cut != before
    os.replace(traces / "rank0.json.tmp", traces / "rank0.json")
    renamed = _fingerprint(tmp_path)
    assert renamed != cut  # the same size and time, another name
    (traces / "rank0.json").write_text('{"traceEvents": []}')
    assert _fingerprint(tmp_path) != renamed
