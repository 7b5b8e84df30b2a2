"""Every shipped campaign renders the job scripts it rendered before issue #30 moved the TensorFlow
programs into jobs/tf/, run ids included (tests/data/shipped_scripts.json.gz, written by
tests/data/make_shipped_scripts.py): on its own system, on local and slurm-local, and on a site
profile whose `jobs_dir` names the jobs root on the cluster. A script that changed would run
another program, or the same one differently, under an id that says it is the same run."""

from __future__ import annotations

import difflib
from pathlib import Path

from tests.data.make_shipped_scripts import SITE_JOBS_DIR, load_record, shipped_scripts


def _diffs(recorded: dict[str, str], now: dict[str, str], keys: list[str]) -> str:
    out = []
    for key in keys[:3]:
        out += difflib.unified_diff(
            recorded[key].splitlines(), now[key].splitlines(), f"recorded {key}", "now", n=0
        )
    return "\n".join(out)


def test_every_shipped_campaign_renders_the_scripts_it_did(tmp_path: Path) -> None:
    recorded = load_record()
    assert len(recorded) > 350  # the record is read: every campaign on four systems
    now = shipped_scripts(tmp_path)
    # the same runs (an id is a key), and for each the same script
    assert sorted(set(recorded) - set(now)) == [], "runs no longer rendered (ids changed?)"
    assert sorted(set(now) - set(recorded)) == [], "runs not in the record (ids changed?)"
    changed = sorted(k for k in recorded if now[k] != recorded[k])
    assert changed == [], _diffs(recorded, now, changed)


def test_the_record_names_the_programs_where_they_live() -> None:
    """The record's TensorFlow and PyTorch programs, under the checkout and under a site's
    `jobs_dir` (values from jobs/: the programs' own paths)."""
    text = "\n".join(load_record().values())
    assert "<ROOT>/jobs/tf/train.py --model dcgan" in text
    assert "<ROOT>/jobs/torch/train.py --model dcgan" in text
    assert f" {SITE_JOBS_DIR}/tf/train.py --model resnet50" in text
    assert f" {SITE_JOBS_DIR}/torch/train.py --model dcgan" in text
    assert "/jobs/train.py" not in text
