"""The report of a campaign none of whose runs finished but some of which ended in failure: no
figures (there is nothing to measure), a Data quality section listing every run with its state,
the reason its own output gives (hpcscale.state.reason) and that output's file. Writing it, rather
than refusing, puts the why where the numbers would have been; `report --check` still fails."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hpcscale.backends.outputs import run_outputs
from hpcscale.formats.outputs import job_output
from hpcscale.formats.run_record import load_run_record
from hpcscale.model.errors import HpcscaleError
from hpcscale.report.model import CampaignReport, Section, Table
from hpcscale.report.sections.quality import TITLE
from hpcscale.report.sections.unparsed import reason_line, unparsed_text
from hpcscale.state.ledger import LEDGER_NAME, Ledger
from hpcscale.state.states import RunState
from hpcscale.util.text import plural

TEXT = (
    "No run of this campaign finished, so there are no tables or figures. Each run is listed "
    "with its state and the reason its own output gives (the last error line; under an MPI "
    "abort the first; the scheduler's verdict when it gave one); `hpcscale logs RUN` prints "
    "the whole output, `hpcscale resubmit` runs the failed ones again."
)
UNREAD_TEXT = (
    "No run's results could be read, so there are no tables or figures. Each run is listed with "
    "its state and why its results could not be read; `hpcscale logs RUN` prints its whole "
    "output."
)


@dataclass(frozen=True)
class EndedRun:
    run_id: str
    cell: str
    state: RunState
    reason: str
    output: Path | None


def unfinished_runs(cdir: Path, include_stale: bool = False) -> list[EndedRun]:
    """Every run of the campaign's ledger that has not completed (stale ones only with
    `include_stale`), with its reason when it ended without success; [] without a ledger."""
    if not (cdir / LEDGER_NAME).exists():
        return []
    with Ledger(cdir) as ledger:
        rows = [r for r in ledger.rows(include_stale) if r.state != RunState.COMPLETED]
        outputs = run_outputs(cdir, ledger, rows)
    out = []
    for row in rows:
        o = outputs.get(row.run_id)
        reason = o.reason if o is not None and o.reason else "not finished yet"
        out.append(EndedRun(row.run_id, _cell(Path(row.run_dir)), row.state, reason,
                            o.output if o is not None else None))  # fmt: skip
    return out


def any_failed(runs: list[EndedRun]) -> bool:
    """Whether these (a campaign's runs that did not complete) include one that ended: then a
    campaign without a finished run gets a report of its failures instead of none."""
    return any(r.state.failed for r in runs)


def failures_report(
    name: str,
    description: str,
    runs: list[EndedRun],
    provenance: Section | None = None,
    unreadable: Sequence[tuple[str, str]] = (),
    cdir: Path | None = None,
) -> CampaignReport:
    """A campaign report whose one section (beside provenance) is Data quality, one row a run:
    those that did not complete (`runs`) and those that completed but whose results could not
    be read (`unreadable`: run id, reason; their cells from `cdir`'s run directories), with
    what an unparsed metric's pattern and each run's last lines say."""
    rows = [[r.run_id, r.cell, str(r.state), r.reason, str(r.output or "")] for r in runs]
    for rid, why in unreadable:
        run_dir = cdir / "runs" / rid if cdir is not None else None
        output = job_output(run_dir) if run_dir is not None else None
        cell = _cell(run_dir) if run_dir is not None else ""
        rows.append([rid, cell, str(RunState.COMPLETED), reason_line(why), str(output or "")])
    frame = pd.DataFrame(rows, columns=["Run", "Cell", "State", "Reason", "Output"])
    failed = sum(r.state.failed for r in runs)
    text = [TEXT if failed else UNREAD_TEXT]
    said, lines = unparsed_text(unreadable)
    title = "Runs that did not finish" if not unreadable else "Runs left out"
    tables = [Table("quality", title, frame), *lines]
    quality = Section("quality", TITLE, [*text, *said], tables)
    sections = [quality, *([provenance] if provenance else [])]
    if failed:
        note = f"no run finished: {failed} of {len(runs) + len(unreadable)} ended without success"
    else:
        runs_read = plural(len(unreadable), "finished run")
        note = f"no run measured: the results of {runs_read} could not be read"
    return CampaignReport(name, description, sections, pd.DataFrame(), pd.DataFrame(), [], [note])


def _cell(run_dir: Path) -> str:
    """The run's matrix cell ("dcgan, nodes=1, ranks=2") from its run.json; "" unreadable."""
    with contextlib.suppress(HpcscaleError):
        rec = load_run_record(run_dir / "run.json")
        return f"{rec.model}, nodes={rec.nodes}, ranks={rec.ranks}"
    return ""
