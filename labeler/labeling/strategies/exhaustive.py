"""Math-Shepherd's estimate: N rollouts from every prefix, all in one generate call."""

from __future__ import annotations

from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.records import Solution
from labeler.labeling.rollouts import PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import PendingLabels, StrategySettings, sampled_prefixes


def start(solutions: Sequence[Solution], generator: Generator, settings: StrategySettings) -> PendingLabels:
    probes = [
        Probe(s, i, 0, settings.rollouts)
        for s, solution in enumerate(solutions)
        for i in range(sampled_prefixes(solution, settings.final_step))
    ]
    sent = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed).send(probes)

    def finish(checker):
        ledger = StepLedger(solutions)
        final_checks = range(len(solutions)) if settings.final_step == "check" else ()
        ledger.record(sent, checker, final_checks=final_checks)
        return ledger.outcome()

    return PendingLabels(finish)
