"""Errors a user can act on. The CLI prints them as one line and exits with `exit_code`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


class HpcscaleError(Exception):
    """Base for expected failures: shown without a traceback (unless --debug)."""

    exit_code: int = 1


class UsageError(HpcscaleError):
    """Bad input from the user (a file, an option): exit code 2, nothing written."""

    exit_code = 2


@dataclass
class InputError(UsageError):
    """A problem located in an input file: file, line and key path so the user can jump there."""

    file: str
    line: Optional[int]
    key: Optional[str]
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        key = f" [{self.key}]" if self.key else ""
        return f"{where}{key}: {self.message}"


class BackendError(HpcscaleError):
    """A scheduler or launcher refused or failed (sbatch rejected, mpirun missing, ...)."""

    exit_code = 1
