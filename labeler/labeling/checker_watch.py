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
answers (health_probe), one of them new to it each time so that its symbolic worker pool must answer, not
its cache of verdicts: a checker that answers them is healthy, so the piece's own answers are what time
out, and a row whose answers always do is found and rejected alone with the reason; a checker that times
out on them too is sick (CheckerSickError, a CheckerUnavailable): the machine's failure, never the rows',
so it stops the job as a checker that cannot check does (labeler/labeling/unit_failures.py: stops_the_job),
the unit uncommitted and none of its rows in rejected/: a plain rerun labels them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

from labeler.checking.verdicts import CheckerUnavailable

MIN_TIMEOUTS = 8  # a handful of timeouts in a small unit is pathological answers, not a sick checker


_PROBES = itertools.count(1)


def health_probe() -> list[tuple[str, str]]:
    """Easy answers that a healthy checker's symbolic worker pool decides at once, never seen before (x+n against
    n+x, n new each time), since a checker answers a pair it has decided before from its cache, in no time,
    however sick its pool is (answers it decides in this process would say nothing of the pool either)."""
    n = next(_PROBES)
    return [(f"The answer is: x+{n}", f"{n}+x"), (f"The answer is: 2*y+{n}", f"{n}+y+y")]


class CheckerUnhealthyError(RuntimeError):
    """The answer checker timed out on too many of a unit's answers to label it (TimeoutWatch.verdict), and
    answered easy ones in time right after: the unit's own answers are what time out."""


class CheckerSickError(CheckerUnavailable):
    """The answer checker timed out on too many of a unit's answers, and on easy ones right after: it cannot
    check (the machine is overloaded or its pool hangs), so the job stops, as for any CheckerUnavailable."""


def unhealthy_error(reason: str, checker) -> CheckerUnhealthyError | CheckerSickError:
    """The error a unit the checker could not check fails with (`reason`: TimeoutWatch.verdict): CheckerSickError
    when `checker` times out on health_probe's easy answers too, each asked twice (as the unit's were), else
    CheckerUnhealthyError."""
    probe = health_probe()
    timed_out = [pair for pair, result in zip(probe, checker.check_many(probe)) if result.verdict.value == "timeout"]
    if timed_out:  # a timeout is not cached: asked again, the pool answers anew
        timed_out = [pair for pair, result in zip(timed_out, checker.check_many(timed_out)) if result.verdict.value == "timeout"]
    if timed_out:
        return CheckerSickError(
            f"{reason}; it timed out on {len(timed_out)} of {len(probe)} easy answers checked right after, twice: the checker "
            "is sick or the machine overloaded (a larger --checker-timeout, or fewer processes beside the job)"
        )
    return CheckerUnhealthyError(f"{reason}; it checked {len(probe)} easy answers right after in time: its own answers are what time out")


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
