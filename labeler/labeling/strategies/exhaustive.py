"""Math-Shepherd's estimate: N rollouts from every prefix, all in one generate call."""

from __future__ import annotations

from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.records import Solution
from labeler.labeling.rollouts import PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import PendingLabels, StrategySettings, checked_final_steps


def start(solutions: Sequence[Solution], generator: Generator, settings: StrategySettings, checker=None) -> PendingLabels:
    """`checker`: the one that will check, when known now; the final-step gate reads with its settings
    (without one, as the default checker reads: every checker the CLI builds)."""
    final_checks = checked_final_steps(solutions, settings.final_step, checker)
    probes = [
        Probe(s, i, 0, settings.rollouts)
        for s, solution in enumerate(solutions)
        for i in range(len(solution.steps) - (1 if s in final_checks else 0))
    ]
    sent = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed).send(probes)

    def finish(checker):
        ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
        ledger.record(sent, checker, final_checks=final_checks)
        return ledger.outcome()

    return PendingLabels(finish)
