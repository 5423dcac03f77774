"""Search for the first error (OmegaPRM-style), batched across solutions round by round.

Monte-Carlo labels are taken as monotone: a probe of prefix i with any correct rollout makes steps
0..i positive; one with none makes step i negative, and (by convention) every later step too.
The search gallops from the start (probes 0, 1, 3, 7, ...) until a probe is negative or the
prefixes run out, then bisects the last interval. That is about 2*log2(j+2) probes for a first
error at j: a little more than plain bisection when errors are late, far fewer when they are
early. When labels are monotone it lands on the first negative prefix (exhaustive's first_error).
Real labels are noisy: a negative prefix between two positive probes (say prefix 5 when 3 and 7
are positive) is stepped over, so the search finds the first negative prefix *after the last
positive probe*, which can be later than exhaustive's. Starting from the front keeps such skips
rarer than a midpoint-first search, which jumps past every early error.

Each round probes one prefix of every open solution; all probes of a round share one generate
call. A probe of prefix i draws the same rollouts (same seeds) that exhaustive draws from prefix i.
With --final-step check the last step is labelled by its stated answer, not searched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.records import Solution
from labeler.labeling.rollouts import BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import StrategySettings, checked_final_steps, sampled_prefixes


@dataclass
class _Search:
    """One solution's search over its sampled prefixes 0..size-1."""

    size: int
    low: int = 0  # every prefix before it is known positive
    high: int | None = None  # a prefix known negative (None: none found yet)
    gallop: int = 0  # next galloping probe, while high is None
    stopped_at: int | None = None  # a probe that gave no verdict (prefix beyond the context, every rollout cut)

    def next_probe(self) -> int | None:
        if self.stopped_at is not None:
            return None
        if self.high is None:
            if self.gallop < self.size:
                return self.gallop
            self.high = self.size  # galloped past the end: bisect what is left, "size" meaning none negative
        return (self.low + self.high) // 2 if self.low < self.high else None

    def observe(self, step: int, positive: bool) -> None:
        if positive:
            self.low = step + 1
            if self.high is None:
                self.gallop = 2 * step + 1 if step else 1
        else:
            self.high = step

    @property
    def first_negative(self) -> int | None:
        """The first negative sampled prefix, or None when every sampled prefix is positive."""
        return self.high if self.high is not None and self.high < self.size else None


def search(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions, settings.truncated)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    searches = [_Search(size=sampled_prefixes(solution, settings.final_step)) for solution in solutions]
    final_checks = checked_final_steps(solutions, settings.final_step)
    while True:
        probes = []
        for s, state in enumerate(searches):
            step = None if s in ledger.failed else state.next_probe()
            if step is not None:
                probes.append(Probe(s, step, 0, settings.rollouts))
        if not probes and not final_checks:
            break
        for probe, correct in zip(probes, ledger.record(sampler.send(probes), checker, final_checks=final_checks)):
            if correct is not None:
                searches[probe.solution].observe(probe.step, correct > 0)
            elif probe.solution not in ledger.failed:  # (a failed solution is rejected whole)
                searches[probe.solution].stopped_at = probe.step
        final_checks = ()

    after = False if settings.after_first_error == "negative" else None
    after_reason = "after the first error (--after-first-error unlabelled)"
    for s, (solution, state) in enumerate(zip(solutions, searches)):
        first_error = state.first_negative
        if first_error is None:  # every sampled prefix positive; a checked last step keeps its own label
            first_error = len(solution.steps)
        for i in range(len(solution.steps)):
            if i < state.low:
                ledger.infer(s, i, True)
            elif state.stopped_at is not None and i < first_error:
                ledger.infer(s, i, None, f"the search stopped at step {state.stopped_at}, whose prefix gave no verdict")
            elif i < first_error:
                ledger.infer(s, i, True)
            else:
                ledger.infer(s, i, False if i == first_error else after, after_reason)
    return ledger.outcome()
