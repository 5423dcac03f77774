"""A Beta-Binomial model of prefixes' success rates, learnt from a job's own rollout counts.

Each prefix has a rate p at which its rollouts reach the answer; across the prefixes of a job, p is
taken to follow a Beta(a, b) prior. The prior is fitted by maximum likelihood to the (correct, drawn)
counts measured so far: the probability of a prefix's observed sequence of outcomes is
B(a + c, b + n - c) / B(a, b), whatever rule decided when to stop drawing (a search that stops at the
first success leaves the likelihood of p unchanged), so counts of early-stopped prefixes are evidence too.

Prefixes drawn only once say where rates lie on average but nothing of how spread they are (every
concentration fits n = 1 counts alike), so a prior is fitted only from enough prefixes drawn twice or
more; and ties (within rounding) go to the larger concentration, the prior that stops later.

What the `posterior` strategy asks of it: given a prefix with 0 correct of n drawn, the chance that
m more draws (up to the N exhaustive would draw) contain a success,
1 - B(a, b + n + m) / B(a, b + n): the chance that exhaustive-N would call the prefix positive where
stopping now calls it negative. And given a prefix reached by rollouts of a shorter one that wrote it word for
word, c correct of n, the chance that its own N rollouts (exhaustive's) would all fail,
B(a + c, b + n - c + N) / B(a + c, b + n - c): the chance that exhaustive-N would call it negative where
passing it on those rollouts calls it positive.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

# The fit searches a grid of the prior's mean and concentration (a + b); a grid keeps it exact to reproduce
# and cheap (the counts collapse to their few distinct (c, n) pairs).
_MEANS = tuple(i / 100 for i in range(1, 100))
# Concentrations from 0.03 (rates all but at 0 or 1, as a sure completer gives) to about 100 (all alike). The floor
# bounds how sure a fit can make the search where every prefix either always or never reached the answer (the
# likelihood then grows without end as the concentration falls).
_CONCENTRATIONS = tuple(round(0.03 * 1.25**k, 8) for k in range(37))


def log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@dataclass(frozen=True)
class BetaPrior:
    a: float = 1.0
    b: float = 1.0

    def chance_of_success(self, drawn_without_success: int, more: int) -> float:
        """The chance that `more` draws from a prefix contain a success, given `drawn_without_success` draws that had
        none."""
        if more <= 0:
            return 0.0
        n = drawn_without_success
        return 1.0 - math.exp(log_beta(self.a, self.b + n + more) - log_beta(self.a, self.b + n))

    def chance_all_fail(self, correct: int, drawn: int, more: int) -> float:
        """The chance that `more` fresh draws from a prefix all fail, given `correct` successes in `drawn` draws:
        B(a + c, b + n - c + m) / B(a + c, b + n - c)."""
        a, b = self.a + correct, self.b + drawn - correct
        return math.exp(log_beta(a, b + more) - log_beta(a, b)) if more > 0 else 1.0

    def log_likelihood(self, counts: Counter) -> float:
        """Of the observed outcome sequences, `counts` mapping (correct, drawn) to how many prefixes had them."""
        base = log_beta(self.a, self.b)
        return sum(times * (log_beta(self.a + c, self.b + n - c) - base) for (c, n), times in counts.items())


UNIFORM = BetaPrior(1.0, 1.0)


def fit_prior(counts: Iterable[tuple[int, int]], minimum_prefixes: int) -> BetaPrior | None:
    """The Beta prior of largest likelihood for (correct, counted) counts of distinct prefixes, over the grid above;
    None while fewer than `minimum_prefixes` prefixes were counted twice or more (too little to say how spread
    rates are)."""
    tally = Counter((c, n) for c, n in counts if n > 0)
    if sum(times for (_, n), times in tally.items() if n >= 2) < minimum_prefixes:
        return None
    return _fit(frozenset(tally.items()))


@functools.lru_cache(maxsize=64)
def _fit(tally_items: frozenset) -> BetaPrior:
    tally = Counter(dict(tally_items))
    candidates = (BetaPrior(mean * k, (1 - mean) * k) for mean in _MEANS for k in _CONCENTRATIONS)
    return max(candidates, key=lambda prior: (round(prior.log_likelihood(tally), 9), prior.a + prior.b))
