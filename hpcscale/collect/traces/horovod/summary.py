"""What one timeline says: the summary every trace format fills
(hpcscale.collect.traces.summary.Summary), every category, size and wait known.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcscale.collect.traces.base import NO_COLLECTIVES
from hpcscale.collect.traces.summary import Summary, TensorStat

__all__ = ["NO_COLLECTIVES", "TensorStat", "TimelineSummary"]


@dataclass
class TimelineSummary(Summary):
    """A Horovod timeline's summary: both engines fold a timeline into it (`folding`); a
    timeline knows every category, size and wait, has no step markers and is rank 0's."""
