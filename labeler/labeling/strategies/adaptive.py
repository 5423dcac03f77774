"""Rollouts in rounds, stopping each prefix as soon as its label is settled.

A prefix stops once a rollout reaches the answer (its hard label is decided), once the 95% Wilson
interval of its soft label is narrower than `ci_width`, or at N rollouts. Round r of a prefix
draws rollouts r*b.. with the seeds exhaustive uses for them, so adaptive sees a prefix of the
same sequence of completions.

Soft labels only where a prefix reached its full N: there they equal exhaustive's exactly (the same
completions). A prefix stopped early gets label_method "early_stop", its hard label and a null soft
label: correct/drawn under a rule that stops at the first success is biased upward (1 of 2 = 0.5
for a prefix that succeeds one time in eight), and the trainer would learn that bias.
"""

from __future__ import annotations

from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.labeling.monte_carlo import wilson_interval
from labeler.records import Solution
from labeler.labeling.rollouts import BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import StrategySettings, checked_final_steps, sampled_prefixes


def sample(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    open_prefixes = [(s, i) for s, solution in enumerate(solutions) for i in range(sampled_prefixes(solution, settings.final_step, checker))]
    final_checks = checked_final_steps(solutions, settings.final_step, checker)
    while open_prefixes or final_checks:
        probes = []
        for s, i in open_prefixes:
            done = ledger.counts[s][i].n_sampled if ledger.counts[s][i].measured else 0
            probes.append(Probe(s, i, done, min(settings.round_size, settings.rollouts - done)))
        ledger.record(sampler.send(probes), checker, final_checks=final_checks)
        final_checks = ()
        open_prefixes = [
            (s, i)
            for s, i in open_prefixes
            if s not in ledger.failed and not ledger.closed(s, i) and not _settled(ledger.counts[s][i], settings)
        ]
    for steps in ledger.counts:
        for step in steps:
            if step.measured_by == "rollouts" and step.n_sampled < settings.rollouts:
                step.measured_by = "early_stop"
    return ledger.outcome()


def _settled(step, settings: StrategySettings) -> bool:
    if step.n_correct > 0 or step.n_sampled >= settings.rollouts:
        return True
    if step.n_rollouts < settings.min_counted_rollouts:  # too few counted to call it 0 yet: stopping would leave it unlabelled
        return False
    low, high = wilson_interval(step.n_correct, step.n_rollouts)
    return high - low < settings.ci_width
