"""The answer checker: did a completion reach the reference answer?"""

from labeler.checking.checker import AnswerChecker, states_answer
from labeler.checking.extraction import extract_answer
from labeler.checking.verdicts import CheckerUnavailable, CheckResult, Verdict

__all__ = ["AnswerChecker", "CheckerUnavailable", "CheckResult", "Verdict", "extract_answer", "states_answer"]
