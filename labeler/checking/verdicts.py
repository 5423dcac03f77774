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
