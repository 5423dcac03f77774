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
    rule: str | None = None  # the rule that decided (see Explanation)


@dataclass(frozen=True)
class Explanation:
    """Why a verdict: what was extracted from each side and how, what the question says about the
    answer's form, the rule that decided, and the normal forms it compared."""

    verdict: Verdict
    rule: str
    prediction_answer: str | None
    extraction_rule: str
    reference_answer: str | None
    prediction_form: str = ""
    reference_form: str = ""
    question: dict | None = None
    symbolic_task: tuple | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        out = {
            "verdict": self.verdict.value,
            "rule": self.rule,
            "prediction_answer": self.prediction_answer,
            "extraction_rule": self.extraction_rule,
            "reference_answer": self.reference_answer,
            "prediction_form": self.prediction_form,
            "reference_form": self.reference_form,
        }
        if self.question is not None:
            out["question"] = self.question
        if self.symbolic_task is not None:
            out["symbolic_task"] = _plain(self.symbolic_task)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _plain(task):
    return [_plain(x) for x in task] if isinstance(task, (tuple, list)) else task


class CheckerUnavailable(RuntimeError):
    """The checker cannot check (its worker pool cannot start, refuses to serve or fails its
    self-test). Raised instead of answering: a verdict from a broken checker would be a wrong label."""
