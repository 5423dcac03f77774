"""Binary search for the first error (OmegaPRM-style), batched across solutions round by round.

Monte-Carlo labels are monotone in expectation: if prefix s1..si can still reach the answer, so
can every shorter prefix. So a probe of prefix i with any correct rollout makes steps 0..i
positive, and one with none makes i and (by convention) every later step negative. Each round
probes the middle of every open solution's interval; all probes of a round share one generate call.
A probe of prefix i draws the same rollouts (same seeds) that exhaustive draws from prefix i.
"""

from __future__ import annotations

from typing import Sequence

from labeler.generation import Generator
from labeler.records import Solution
from labeler.rollouts import BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.strategies import StrategySettings


def search(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    # lo: every step before it is known positive; hi: a step known negative (len(steps): none known).
    lo = [0] * len(solutions)
    hi = [len(solution.steps) for solution in solutions]
    if settings.final_step == "check":
        ledger.record(sampler.send([]), checker, final_checks=range(len(solutions)))
        for s, solution in enumerate(solutions):
            last = len(solution.steps) - 1
            if ledger.counts[s][last].n_correct > 0:
                lo[s] = len(solution.steps)  # the full solution reaches the answer: every prefix can
            else:
                hi[s] = last

    while True:
        probes = [
            Probe(s, (lo[s] + hi[s]) // 2, 0, settings.rollouts) for s in range(len(solutions)) if lo[s] < hi[s] and s not in ledger.failed
        ]
        if not probes:
            break
        for probe, correct in zip(probes, ledger.record(sampler.send(probes), checker)):
            if correct is None:
                continue  # the engine could not run it: the solution is rejected
            if correct > 0:
                lo[probe.solution] = probe.step + 1
            else:
                hi[probe.solution] = probe.step

    after = False if settings.after_first_error == "negative" else None
    for s, solution in enumerate(solutions):
        first_error = hi[s]  # == len(steps) when no step is negative
        for i in range(len(solution.steps)):
            ledger.infer(s, i, True if i < first_error else (False if i == first_error else after))
    return ledger.outcome()
