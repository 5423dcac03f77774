"""Math-Shepherd's estimate: N rollouts from every prefix, all in one generate call."""

from __future__ import annotations

from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.records import Solution
from labeler.labeling.rollouts import PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import PendingLabels, StrategySettings, checked_final_steps, sampled_prefixes


def start(solutions: Sequence[Solution], generator: Generator, settings: StrategySettings) -> PendingLabels:
    probes = [
        Probe(s, i, 0, settings.rollouts)
        for s, solution in enumerate(solutions)
        for i in range(sampled_prefixes(solution, settings.final_step))
    ]
    sent = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed).send(probes)

    def finish(checker):
        ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
        final_checks = checked_final_steps(solutions, settings.final_step)
        ledger.record(sent, checker, final_checks=final_checks)
        return ledger.outcome()

    return PendingLabels(finish)
