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

from dataclasses import dataclass, field
from typing import Sequence

from labeler.labeling.generation import Generator
from labeler.records import Solution
from labeler.labeling.rollouts import BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import StrategySettings, checked_final_steps, sampled_prefixes


@dataclass
class _Search:
    """One solution's search over its sampled prefixes 0..size-1.

    A probe that gives no verdict (every rollout cut by the budget) is stepped over: the search goes
    on as if that prefix were not there, and the step stays unlabelled. A prefix beyond the context
    ends the solution's prefixes there (every longer one is beyond it too).
    """

    size: int
    low: int = 0  # every prefix before it is known positive
    high: int | None = None  # a prefix known negative (None: none found yet)
    gallop: int = 0  # next galloping probe, while high is None
    unknown: set[int] = field(default_factory=set)  # probed, no verdict
    # doubted positive prefixes searched before, newest last, each with the `high` to go back to once none before it
    # is found negative (None: the search was galloping)
    doubted: list[tuple[int, int | None]] = field(default_factory=list)

    def next_probe(self) -> int | None:
        if self.high is None:
            candidate = next((i for i in range(self.gallop, self.size) if i not in self.unknown), None)
            if candidate is not None:
                return candidate
            self.high = self.size  # galloped past the end: bisect what is left, "size" meaning none negative
        left = [i for i in range(self.low, self.high) if i not in self.unknown]
        if not left:
            if self.doubted and self.doubted[-1][0] == self.high:  # nothing before the doubted prefix is negative
                step, high = self.doubted.pop()
                self.low, self.high = step + 1, None if high is None else min(high, self.size)
                return self.next_probe()
            return None
        middle = (self.low + self.high) // 2
        return min(left, key=lambda i: (abs(i - middle), i))

    def doubt(self, step: int) -> None:
        """A positive probe most of whose rollouts failed: success rates fall at an error, so a prefix before it may be
        negative (the search would step over it). Look for a negative before it first, as if it were negative; if there
        is none, go on after it as after any positive probe."""
        if self.high is None:
            self.gallop = 2 * step + 1 if step else 1
        self.doubted.append((step, self.high))
        self.high = step

    def observe(self, step: int, positive: bool | None) -> None:
        if positive is None:
            self.unknown.add(step)
        elif positive:
            self.low = step + 1
            if self.high is None:
                self.gallop = 2 * step + 1 if step else 1
        else:
            self.high = step

    def written_through(self, step: int) -> None:
        """A correct rollout of a positive probe wrote the solution word for word through prefix `step`, and reached the
        answer from there: that prefix and every shorter one are positive; galloping, the next probe is the one after
        it, where the rollout left the solution."""
        self.low = max(self.low, step + 1)
        if self.high is None:
            self.gallop = step + 1

    def beyond_context(self, step: int) -> None:
        self.size = min(self.size, step)
        if self.high is not None:
            self.high = min(self.high, self.size)

    @property
    def first_negative(self) -> int | None:
        """The first negative sampled prefix, or None when no sampled prefix was found negative."""
        return self.high if self.high is not None and self.high < self.size else None


def search(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    searches = [_Search(size=sampled_prefixes(solution, settings.final_step, checker)) for solution in solutions]
    final_checks = checked_final_steps(solutions, settings.final_step, checker)
    while True:
        probes = []
        for s, state in enumerate(searches):
            step = None if s in ledger.failed else state.next_probe()
            if step is not None:
                probes.append(Probe(s, step, 0, settings.rollouts))
        if not probes and not final_checks:
            break
        for probe, correct in zip(probes, ledger.record(sampler.send(probes), checker, final_checks=final_checks)):
            if probe.solution in ledger.failed:  # rejected whole
                continue
            if ledger.closed(probe.solution, probe.step):
                searches[probe.solution].beyond_context(probe.step)
            else:
                searches[probe.solution].observe(probe.step, None if correct is None else correct > 0)
        final_checks = ()
    infer_from_searches(ledger, solutions, searches, settings)
    return ledger.outcome()


def infer_from_searches(ledger: StepLedger, solutions: Sequence[Solution], searches: list[_Search], settings: StrategySettings) -> None:
    """The labels a finished search implies for the steps it did not sample: positive before its last positive probe,
    negative at its first negative one (and after it, by --after-first-error), unlabelled in between."""
    after = False if settings.after_first_error == "negative" else None
    after_reason = "after the first error (--after-first-error unlabelled)"
    for s, (solution, state) in enumerate(zip(solutions, searches)):
        first_error = state.first_negative
        if first_error is None:  # every sampled prefix positive; a checked last step keeps its own label
            first_error = len(solution.steps)
        undecided = "no probe between the last positive prefix and the first negative one gave a verdict"
        for i in range(len(solution.steps)):
            if i < state.low:
                ledger.infer(s, i, True)
            elif i >= state.size and state.first_negative is None:
                ledger.infer(s, i, None, "its prefix, or a shorter one, does not fit the model's context")
            elif i < first_error:
                ledger.infer(s, i, None, undecided)
            else:
                ledger.infer(s, i, False if i == first_error else after, after_reason)
