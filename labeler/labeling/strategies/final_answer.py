"""Outcome labels only: the last step of each solution, by checking the answer it states; no rollouts.

What best-of-N needs of its candidates (`labeler bon`): did each one reach the reference answer,
and which answer did it state (the rollouts table keeps the check with its extracted answer). The
other steps are `unlabelled` ("not sampled"); so is a last step that cannot be checked, with the
reason: a solution cut by its token budget (unless --truncated incorrect, which checks it as it
stands), one that the input says stops before its answer, a last step with no answer to find.
"""

from __future__ import annotations

from typing import Sequence

from labeler.labeling.rollouts import SentRound, StepLedger
from labeler.labeling.strategies import PendingLabels, StrategySettings, states_last_answer
from labeler.records import Solution

NOT_SAMPLED = "not sampled: the final-answer strategy labels only the last step"


def start(solutions: Sequence[Solution], settings: StrategySettings) -> PendingLabels:
    def finish(checker):
        ledger = StepLedger(solutions, settings.truncated)
        reasons = [unchecked_reason(solution, settings.truncated, checker) for solution in solutions]
        checks = [s for s, reason in enumerate(reasons) if reason is None]
        ledger.record(SentRound([], [], [], []), checker, final_checks=checks)
        for s, (solution, reason) in enumerate(zip(solutions, reasons)):
            last = len(solution.steps) - 1
            if reason is not None:
                ledger.infer(s, last, None, reason)
            for i in range(last):
                ledger.infer(s, i, None, NOT_SAMPLED)
        return ledger.outcome()

    return PendingLabels(finish)


def unchecked_reason(solution: Solution, truncated: str, checker=None) -> str | None:
    """Why the last step of `solution` cannot be labelled by its answer; None when it can."""
    if solution.sampling_truncated and truncated != "incorrect":
        return "the sampled solution was cut by its token budget (--solution-max-new-tokens)"
    if not solution.complete and not solution.sampling_truncated:
        return "the input says the solution stops before its final answer"
    if not states_last_answer(solution, checker):
        return "the last step states no answer the checker can find"
    return None
