"""Timeouts of the answer checker, watched per work unit.

A timed-out check is its own verdict, `timeout`: not known, so out of the label like a cut rollout
(counted per step in n_timeouts; a step left with no counted rollout, or a final step whose check
timed out, is unlabelled with the reason: labeler/labeling/rollouts.py). A timed-out pair is checked
once more at once. Many timeouts mean an overloaded machine or a sick checker, whose unit would come
out mostly unlabelled: a unit whose timeouts still pass `--max-timeout-share` of its checks (and
number at least MIN_TIMEOUTS) fails with CheckerUnhealthyError rather than being labelled. Its executor
retries it, then bisects it like any failing unit (labeler/labeling/unit_failures.py), judging each
piece without MIN_TIMEOUTS: a row whose answers always time out is found and rejected alone with the
reason, and a unit whose pieces all stay unhealthy (a sick checker) is committed as the machine's
failure, which a plain rerun redoes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MIN_TIMEOUTS = 8  # a handful of timeouts in a small unit is pathological answers, not a sick checker


class CheckerUnhealthyError(RuntimeError):
    """The answer checker timed out on too many of a unit's answers to label it (TimeoutWatch.verdict)."""


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
