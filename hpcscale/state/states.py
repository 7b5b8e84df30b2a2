"""Run states, one enum for the ledger and every backend: SLURM's job states (sacct, squeue)
plus hpcscale's own (RENDERED before submission, SUBMITTED before SLURM answers, LOST when the
process running a local run died)."""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    RENDERED = "RENDERED"
    SUBMITTED = "SUBMITTED"
    # active in SLURM
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    COMPLETING = "COMPLETING"
    CONFIGURING = "CONFIGURING"
    RESIZING = "RESIZING"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    # ended
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    PREEMPTED = "PREEMPTED"
    REVOKED = "REVOKED"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    LOST = "LOST"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str | None) -> RunState:
        """A state as SLURM prints it ('CANCELLED by 0', 'OUT_OF_ME+', '') or as stored."""
        word = (text or "").split()[0] if (text or "").strip() else ""
        try:
            return cls(word)
        except ValueError:
            return cls.UNKNOWN

    @property
    def terminal(self) -> bool:
        """Ended: it never changes again unless the run is resubmitted."""
        return self in TERMINAL

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def failed(self) -> bool:
        """Ended without success (what `resubmit --failed` may pick from)."""
        return self in TERMINAL and self is not RunState.COMPLETED


TERMINAL: frozenset[RunState] = frozenset(
    {
        RunState.COMPLETED,
        RunState.FAILED,
        RunState.CANCELLED,
        RunState.TIMEOUT,
        RunState.NODE_FAIL,
        RunState.OUT_OF_MEMORY,
        RunState.BOOT_FAIL,
        RunState.DEADLINE,
        RunState.PREEMPTED,
        RunState.REVOKED,
        RunState.SPECIAL_EXIT,
        RunState.LOST,
    }
)
ACTIVE: frozenset[RunState] = frozenset(
    {
        RunState.SUBMITTED,
        RunState.PENDING,
        RunState.RUNNING,
        RunState.REQUEUED,
        RunState.REQUEUE_HOLD,
        RunState.REQUEUE_FED,
        RunState.RESV_DEL_HOLD,
        RunState.SUSPENDED,
        RunState.STOPPED,
        RunState.COMPLETING,
        RunState.CONFIGURING,
        RunState.RESIZING,
        RunState.SIGNALING,
        RunState.STAGE_OUT,
    }
)
# squeue states in which a job has not ended (its %e is a forecast, not an end time)
NOT_ENDED: frozenset[RunState] = ACTIVE - {RunState.SUBMITTED}
DEFAULT_RESUBMIT: tuple[RunState, ...] = (RunState.TIMEOUT, RunState.NODE_FAIL, RunState.FAILED)
