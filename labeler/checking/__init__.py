"""The answer checker: did a completion reach the reference answer?"""

from labeler.checking.checker import AnswerChecker, CheckResult, Verdict, extract_answer

__all__ = ["AnswerChecker", "CheckResult", "Verdict", "extract_answer"]
