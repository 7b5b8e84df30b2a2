"""Writes tests/data/shipped_scripts.json.gz: the job script every run of every shipped campaign
renders to, on its own system, on local and slurm-local, and on a site profile with its own
`jobs_dir`. Made once from the code before issue #30 moved the TensorFlow programs into jobs/tf/
(main d2897ff + this file): tests/unit/render/test_shipped_scripts.py holds every later layout
to the same scripts, so a move of the programs changes their paths and nothing else.

Normalised so that the record holds across machines: the workdir, the checkout and the
interpreter are masked (<WORKDIR>, <ROOT>, <PYTHON>). The TensorFlow programs' paths are
recorded where they live since #30 (`.../jobs/tf/train.py`): the record was written with
`LEGACY_TF_PATHS` mapping `jobs/<program>.py` to `jobs/tf/<program>.py`; the code now renders
those paths itself, so the test maps nothing. Run from the checkout's root:
`python -m tests.data.make_shipped_scripts`.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

from hpcscale import api
from hpcscale.model.resources import jobs_dir

ROOT = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).with_name("shipped_scripts.json.gz")
SYSTEMS = (None, "local", "slurm-local", "site-jobs-dir")  # None: the campaign's own system
# a site whose programs live elsewhere on the cluster: `jobs_dir` names the jobs root there
SITE_JOBS_DIR = "/site/hpcscale/jobs"
SITE_PROFILE = (
    "name: site-jobs-dir\nscheduler: slurm\npartition: batch\ncores_per_node: 28\n"
    f"python: python3\njobs_dir: {SITE_JOBS_DIR}\n"
)
# a TensorFlow program's path as rendered before #30 (jobs/train.py), in the record's form: used
# only to write the record from the code before the move (`--legacy`, at d2897ff + this file);
# today's code renders jobs/tf/ itself and writes the same record without it
LEGACY_TF_PATHS = re.compile(r"/jobs/(\w+\.py)\b")


def normalise(text: str, workdir: Path, legacy: bool = False) -> str:
    """A script with what differs between machines masked."""
    text = text.replace(str(workdir), "<WORKDIR>")
    text = text.replace(sys.executable, "<PYTHON>")
    for root in {str(ROOT), str(jobs_dir().parent)}:  # the same in a checkout; both masked
        text = text.replace(root, "<ROOT>")
    return LEGACY_TF_PATHS.sub(r"/jobs/tf/\1", text) if legacy else text


def shipped_scripts(scratch: Path, legacy: bool = False) -> dict[str, str]:
    """`campaign@system/run_id` -> normalised script (`campaign@system` -> "error: ..." where a
    system cannot run the campaign), rendered into `scratch`."""
    site = scratch / "site-jobs-dir.yaml"
    site.write_text(SITE_PROFILE)
    out: dict[str, str] = {}
    for path in sorted((ROOT / "campaigns").glob("*.yaml")):
        for system in SYSTEMS:
            key = f"{path.stem}@{system or 'own'}"
            workdir = scratch / key
            profile = str(site) if system == "site-jobs-dir" else system
            try:
                rendered = api.render(path, workdir, system=profile, workers=1)
            except Exception as exc:  # a campaign a system cannot run: recorded as such
                out[key] = f"error: {type(exc).__name__}"
                continue
            for r in rendered.runs:
                out[f"{key}/{r.run.run_id}"] = normalise(r.script, workdir, legacy)
    return out


def load_record() -> dict[str, str]:
    with gzip.open(RECORD, "rt") as f:
        return json.load(f)  # type: ignore[no-any-return]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        scripts = shipped_scripts(Path(tmp), legacy="--legacy" in sys.argv)
    text = json.dumps(scripts, indent=0, sort_keys=True) + "\n"
    with gzip.GzipFile(RECORD, "wb", mtime=0) as f:  # mtime 0: the same bytes for the same record
        f.write(text.encode())
    print(f"wrote {RECORD}: {len(scripts)} entries")
