"""The verdict of one answer check and its result record."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Verdict(str, enum.Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    UNPARSEABLE = "unparseable"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class CheckResult:
    verdict: Verdict
    extracted: str | None  # the extracted final answer of the prediction


class CheckerUnavailable(RuntimeError):
    """The checker cannot check (its worker pool cannot start, refuses to serve or fails its
    self-test). Raised instead of answering: a verdict from a broken checker would be a wrong label."""
