"""Which report directories `hpcscale report --out` may write over: those it wrote itself.

A report directory hpcscale wrote holds REPORT_MARKER; `report --out DIR` overwrites the report
files (REPORT_NAMES) of such a directory, or of any with `--force`, never someone's own
index.md. Light on purpose: the CLI checks this before importing the report builder.
"""

from __future__ import annotations

from pathlib import Path

from hpcscale.model.errors import UsageError

REPORT_MARKER = ".hpcscale-report"
MARKER_TEXT = "written by `hpcscale report`: it may overwrite this directory's report files\n"
REPORT_NAMES = ("index.md", "index.html", "figures", "data")


def refuse_foreign(out: Path) -> None:
    """Refuse (UsageError, exit 2) an --out directory holding report files hpcscale did not
    write there (no REPORT_MARKER beside them)."""
    if (out / REPORT_MARKER).is_file():
        return
    if (out.exists() or out.is_symlink()) and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    ours = [out / n for n in REPORT_NAMES if (out / n).exists() or (out / n).is_symlink()]
    if ours:
        raise UsageError(
            f"--out {out}: {ours[0]} exists and hpcscale did not write it (no {REPORT_MARKER} "
            "there); not overwritten (--force overwrites it)"
        )
