"""The Horovod timeline switch.

Horovod 0.28.1 reads HOROVOD_TIMELINE in hvd.init(): every rank must have it set (it enables the
timeline controller on all ranks), but only the coordinator (rank 0) opens and writes the file;
other ranks' paths are never created. Each process therefore gets its own fresh node-local path
(Horovod's writer slows badly on shared filesystems), and rank 0 copies its file into the run
directory after hvd.shutdown(), which joins the writer thread and flushes the file. A run whose
ranks submitted no collective (e.g. one rank) leaves a 0-byte file, copied as is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from hpcscale.formats.atomic import atomic_copy


class TimelineSwitch:
    def __init__(self, enabled: bool, mark_cycles: bool, base_dir: Optional[Path]) -> None:
        self.enabled = enabled
        self.mark_cycles = mark_cycles
        self.base_dir = base_dir
        self.local_dir: Optional[Path] = None

    @property
    def local_path(self) -> Optional[Path]:
        return None if self.local_dir is None else self.local_dir / "timeline.json"

    def arm(self) -> None:
        """Set the environment; must run before hvd.init()."""
        if not self.enabled:
            return
        base = str(self.base_dir) if self.base_dir else None  # None: $TMPDIR, else /tmp
        self.local_dir = Path(tempfile.mkdtemp(prefix="hpcscale-timeline-", dir=base))
        os.environ["HOROVOD_TIMELINE"] = str(self.local_path)
        if self.mark_cycles:
            os.environ["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"

    def collect(self, run_dir: Path) -> Optional[int]:
        """Rank 0, after hvd.shutdown(): copy into the run dir; the copied size in bytes."""
        path = self.local_path
        if path is None or not path.exists():
            return None
        dst = run_dir / "timeline.json"
        atomic_copy(path, dst)
        return dst.stat().st_size

    def cleanup(self) -> None:
        if self.local_dir is not None:
            shutil.rmtree(self.local_dir, ignore_errors=True)
