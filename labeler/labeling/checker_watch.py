"""Timeouts of the answer checker, watched per work unit.

A timed-out check is its own verdict, `timeout`: not known, so out of the label like a cut rollout
(counted per step in n_timeouts; a step left with no counted rollout, or a final step whose check
timed out, is unlabelled with the reason: labeler/labeling/rollouts.py). A timed-out pair is checked
once more at once. Many timeouts mean an overloaded machine or a sick checker, whose unit would come
out mostly unlabelled: a unit whose timeouts still pass `--max-timeout-share` of its checks (and
number at least MIN_TIMEOUTS) fails with CheckerUnhealthyError rather than being labelled. Its executor
retries it, then bisects it like any failing unit (labeler/labeling/unit_failures.py), judging each
piece without MIN_TIMEOUTS.

Whose fault the timeouts are is decided per piece, by asking the checker right away about a few easy
answers (HEALTH_PROBE): a checker that answers them is healthy, so the piece's own answers are what time
out, and a row whose answers always do is found and rejected alone with the reason; a checker that times
out on them too is sick (CheckerSickError): the piece is not split further and its rows are the
machine's failure, left in rejected/ only until a plain rerun labels their unit again, whatever the
unit's other pieces gave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MIN_TIMEOUTS = 8  # a handful of timeouts in a small unit is pathological answers, not a sick checker


# easy answers, one of them for the symbolic worker pool, that a healthy checker decides at once
HEALTH_PROBE = (("The answer is: 2", "2"), ("The answer is: 3", "2"), ("The answer is: x+1", "1+x"))


class CheckerUnhealthyError(RuntimeError):
    """The answer checker timed out on too many of a unit's answers to label it (TimeoutWatch.verdict)."""


class CheckerSickError(CheckerUnhealthyError):
    """The same, and the checker timed out on HEALTH_PROBE's easy answers right after: the machine's fault, not the rows'."""


def unhealthy_error(reason: str, checker) -> CheckerUnhealthyError:
    """The error a unit the checker could not check fails with (`reason`: TimeoutWatch.verdict): CheckerSickError
    when `checker` times out on HEALTH_PROBE too. A checker that cannot check at all raises (CheckerUnavailable)."""
    verdicts = list(checker.check_many(list(HEALTH_PROBE)))
    timeouts = sum(result.verdict.value == "timeout" for result in verdicts)
    if timeouts:
        return CheckerSickError(
            f"{reason}; it timed out on {timeouts} of {len(HEALTH_PROBE)} easy answers checked right after: the checker is sick"
        )
    return CheckerUnhealthyError(f"{reason}; it checked {len(HEALTH_PROBE)} easy answers right after in time: its own answers are what time out")


@dataclass
class TimeoutWatch:
    checked: int = 0
    timeouts: int = 0
    retried: int = 0

    def wrap(self, checker):
        """`checker` with each timed-out pair retried once, counted here."""
        return _Watched(checker, self)

    def verdict(self, max_share: float, min_timeouts: int = MIN_TIMEOUTS) -> str | None:
        """Why the unit cannot be labelled, or None when its timeouts are within bounds."""
        if self.timeouts >= max(min_timeouts, 1) and self.timeouts > max_share * self.checked:
            return (
                f"the answer checker timed out on {self.timeouts} of {self.checked} answers, even after a retry "
                f"(over --max-timeout-share {max_share}): the machine is overloaded or the checker is unhealthy"
            )
        return None


class _Watched:
    def __init__(self, checker, watch: TimeoutWatch):
        self.checker = checker
        self.watch = watch

    def states_answer(self, text: str, reference: str, question: str | None = None) -> bool:
        from labeler.checking import states_answer

        return (getattr(self.checker, "states_answer", None) or states_answer)(text, reference, question)

    def check_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str] | None = None) -> list:
        verdicts = list(self.checker.check_many(pairs, questions))
        timed_out = [i for i, result in enumerate(verdicts) if result.verdict.value == "timeout"]
        if timed_out:
            self.watch.retried += len(timed_out)
            again = self.checker.check_many([pairs[i] for i in timed_out], None if questions is None else [questions[i] for i in timed_out])
            for i, result in zip(timed_out, again):
                verdicts[i] = result
        self.watch.checked += len(pairs)
        self.watch.timeouts += sum(result.verdict.value == "timeout" for result in verdicts)
        return verdicts
