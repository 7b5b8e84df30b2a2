"""One line of `hpcscale doctor`'s answer (Check). Here, below the frameworks, so that a
framework's own checks (Framework.doctor_check) and the doctor asking for them share it without
an import cycle (the doctor imports the frameworks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer; `fix` is what to do when it failed."""

    name: str
    passed: bool
    detail: str
    fix: str = ""


def said(result: dict[str, Any], what: str) -> str:
    """What a probe of the jobs' Python found of `what`: its version, or why it did not import."""
    if "version" in result:
        return f"{what} {result['version']}"
    return f"{what} does not import: {result.get('error', 'unknown error')}"
