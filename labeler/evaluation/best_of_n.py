"""Best-of-N accuracy from a pool of candidate solutions per problem, estimated over subsets of the pool.

For a problem whose pool holds n candidates, a method's accuracy at N (N <= n) is its expected
accuracy over the C(n, N) subsets of N candidates of the pool, each equally likely (N candidates
drawn without replacement); a curve point is the mean over problems. Where combinatorics gives
that expectation, it is computed exactly:

- pass@N (the oracle: some candidate is correct): 1 - C(n-c, N) / C(n, N), c correct in the pool;
- random (one of the N candidates at random): c / n, whatever N;
- PRM selection (the candidate with the highest score): rank the pool by score; the best score in
  a subset is that of level L (m_L candidates share it, a_L score higher) with probability
  [C(n-a_L, N) - C(n-a_L-m_L, N)] / C(n, N), and the pick is then uniform over the level's members
  (ties broken at random), correct with probability c_L / m_L.

Votes have no such closed form. Majority vote (the answer most candidates give) and PRM-weighted
vote (the answer with the largest sum of scores) are averaged over every subset when there are at
most `subsets` of them, else over `subsets` random subsets drawn with a seed derived from (seed,
problem id, N), so the figures are the same on every run and in any order of problems. Answers
vote by their answer key (labeler/checking/answer_keys.py); candidates without an answer add
nothing. A tie between answers earns the share of the tied answers that are correct (the
expectation of a random tie-break); a subset where nothing votes earns 0. An answer is as correct
as the share of the pool's candidates with its key that the checker found correct (1 or 0 unless
the checker disagrees with itself).

A candidate the PRM could not fully score (a step past its max length: its score is None, see
labeler/prm/solution_scores.py) is never ranked as if scored; it ranks below every scored one, the
same way in every PRM method: PRM selection picks it only from a subset that holds no scored
candidate (then at random among them), and the weighted vote counts only scored candidates, unless
no scored candidate of the subset states an answer, when it counts the answers as majority vote
does. `unscored` gives, per score and N, the share of problems whose N candidates hold no scored
one (where a PRM method is a random pick or a majority vote).

A candidate whose answer was not checked (cut by its budget, a timed-out check, no answer found)
is wrong and states no answer. `unknown` gives, per method and N, the share of problems the method
counts wrong only for such a candidate: the pick is one (random, PRM selection), no candidate of the
subset states an answer and one is unchecked (votes), or none is correct and one is unchecked
(pass@N). Exact for every method as a share; as how much higher the accuracy could be were the
unchecked candidates right, exact for pass@N, random and PRM selection, only a lower bound for the
votes (a right unchecked candidate would also vote, and could win subsets where others state answers).

A problem whose pool is smaller than N is evaluated on its whole pool; `problems_capped` counts them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from labeler.ids import derived_seed

PASS, RANDOM, MAJORITY = "pass", "random", "majority"
SELECT, VOTE = "select", "vote"  # method names: "select:<score>", "vote:<score>"
TIE_TOLERANCE = 1e-9  # relative: sums of the same weights in another order differ in the last bits


@dataclass(frozen=True)
class Pool:
    """The candidates of one problem: whether each is correct, the answer it states (its key; None:
    no answer), its scores by name (e.g. "prm-a/min"; None: not fully scored), and whether its
    answer was left unchecked (empty: every answer was checked)."""

    problem_id: str
    correct: tuple[bool, ...]
    answer_keys: tuple[str | None, ...]
    scores: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    unchecked: tuple[bool, ...] = ()

    def __post_init__(self):
        n = len(self.correct)
        lists = [self.answer_keys, *self.scores.values(), *([self.unchecked] if self.unchecked else [])]
        if any(len(values) != n for values in lists):
            raise ValueError(f"problem {self.problem_id}: every per-candidate list must have {n} entries")
        if any(c and u for c, u in zip(self.correct, self.unchecked)):
            raise ValueError(f"problem {self.problem_id}: a candidate whose answer was not checked cannot be correct")

    @property
    def size(self) -> int:
        return len(self.correct)


@dataclass
class Curves:
    n: list[int]
    problems: int
    problems_capped: list[int]  # per N: problems whose pool is smaller, evaluated on the whole pool
    accuracy: dict[str, list[float]]  # method name -> accuracy per N
    unknown: dict[str, list[float]] = field(default_factory=dict)  # method -> per N, share counted wrong for an unchecked answer
    unscored: dict[str, list[float]] = field(default_factory=dict)  # score -> per N, share of problems with no scored candidate
    # method -> per N, [low, high]: the 2.5th and 97.5th percentiles of the mean over problems resampled with replacement
    ci95: dict[str, list[list[float]]] = field(default_factory=dict)


BOOTSTRAP_RESAMPLES = 2000


def bootstrap_ci95(per_problem: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[float]:
    """[low, high] of a 95% percentile bootstrap interval of the mean of `per_problem` (problems drawn with
    replacement, seeded); [nan, nan] for no problems."""
    if not len(per_problem):
        return [math.nan, math.nan]
    values = np.asarray(per_problem, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def n_ladder(largest_pool: int) -> list[int]:
    """1, 2, 4, ... up to the largest pool, and the largest pool itself."""
    ladder = [2**i for i in range(max(largest_pool, 1).bit_length()) if 2**i <= largest_pool]
    return ladder + ([largest_pool] if largest_pool > 0 and ladder[-1] != largest_pool else [])


def method_names(score_names: Sequence[str]) -> list[str]:
    return [PASS, RANDOM, MAJORITY, *(f"{SELECT}:{s}" for s in score_names), *(f"{VOTE}:{s}" for s in score_names)]


def estimate(pools: Sequence[Pool], ns: Sequence[int], *, subsets: int = 1000, seed: int = 0) -> Curves:
    """Every method's accuracy at each N, the mean over `pools` (empty pools are left out)."""
    if subsets < 1:
        raise ValueError("subsets must be at least 1")
    pools = [pool for pool in pools if pool.size]
    score_names = sorted({name for pool in pools for name in pool.scores})
    missing = [pool.problem_id for pool in pools if set(pool.scores) != set(score_names)]
    if missing:
        raise ValueError(f"problem {missing[0]}: scores {sorted(pools[0].scores)} expected for every pool")
    names = method_names(score_names)
    totals = {name: [0.0] * len(ns) for name in names}
    per_problem = {name: [[] for _ in ns] for name in names}
    unknown = {name: [0.0] * len(ns) for name in names}
    unscored = {name: [0.0] * len(ns) for name in score_names}
    capped = [0] * len(ns)
    for pool in pools:
        for j, n in enumerate(ns):
            k = min(n, pool.size)
            capped[j] += k < n
            for name, value in pool_accuracy(pool, k, subsets=subsets, seed=seed).items():
                totals[name][j] += value
                per_problem[name][j].append(value)
            for name, value in pool_unknown(pool, k).items():
                unknown[name][j] += value
            for name, scores in pool.scores.items():
                unscored[name][j] += _none_drawn([s is None for s in scores], k)
    count = len(pools)

    def means(sums: dict[str, list[float]]) -> dict[str, list[float]]:
        return {name: [total / count if count else math.nan for total in values] for name, values in sums.items()}

    intervals = {name: [bootstrap_ci95(values, seed=seed) for values in by_n] for name, by_n in per_problem.items()}
    return Curves(list(ns), count, capped, means(totals), means(unknown), means(unscored), intervals)


def pool_accuracy(pool: Pool, k: int, *, subsets: int = 1000, seed: int = 0) -> dict[str, float]:
    """Every method's expected accuracy on one pool with N = k candidates."""
    if not 1 <= k <= pool.size:
        raise ValueError(f"problem {pool.problem_id}: N={k} outside 1..{pool.size}")
    results = {PASS: pass_at(pool.correct, k), RANDOM: sum(pool.correct) / pool.size}
    for name, scores in pool.scores.items():
        results[f"{SELECT}:{name}"] = selection_at(scores, pool.correct, k)
    votes = vote_at(pool, k, subsets=subsets, seed=derived_seed(seed, pool.problem_id, str(k)))
    results[MAJORITY] = votes.pop(MAJORITY)
    results.update({f"{VOTE}:{name}": value for name, value in votes.items()})
    return results


def pool_unknown(pool: Pool, k: int) -> dict[str, float]:
    """Per method, the probability that it counts this pool wrong at N = k only for a candidate whose
    answer was not checked (module docstring)."""
    unchecked = pool.unchecked or (False,) * pool.size
    silent = [key is None for key in pool.answer_keys]
    no_vote = _none_drawn(silent, k) - _none_drawn([s and not u for s, u in zip(silent, unchecked)], k)
    results = {
        PASS: _none_drawn(pool.correct, k, negate=True) - _none_drawn([c or u for c, u in zip(pool.correct, unchecked)], k, negate=True),
        RANDOM: sum(unchecked) / pool.size,
        MAJORITY: no_vote,
    }
    for name, scores in pool.scores.items():
        results[f"{SELECT}:{name}"] = selection_at(scores, unchecked, k)
        results[f"{VOTE}:{name}"] = no_vote
    return results


def _none_drawn(flags: Sequence[bool], k: int, negate: bool = False) -> float:
    """The probability that all k candidates drawn have the flag (without it, with `negate`)."""
    having = sum(not f for f in flags) if negate else sum(flags)
    return math.comb(having, k) / math.comb(len(flags), k)


def pass_at(correct: Sequence[bool], k: int) -> float:
    n, c = len(correct), sum(correct)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def selection_at(scores: Sequence[float | None], correct: Sequence[bool], k: int) -> float:
    """Expected correctness of the best-scored of k candidates drawn from the pool (ties at random)."""
    n = len(scores)
    levels: dict[float, list[int]] = {}
    for i, score in enumerate(scores):
        levels.setdefault(-math.inf if score is None else float(score), []).append(i)
    total, above, expected = math.comb(n, k), 0, 0.0
    for value in sorted(levels, reverse=True):
        members = levels[value]
        m = len(members)
        best_here = math.comb(n - above, k) - math.comb(n - above - m, k)  # subsets whose best level is this one
        expected += best_here / total * sum(correct[i] for i in members) / m
        above += m
    return expected


def vote_at(pool: Pool, k: int, *, subsets: int, seed: int) -> dict[str, float]:
    """Majority vote and each score's weighted vote over subsets of k candidates (module docstring)."""
    keys = sorted({key for key in pool.answer_keys if key is not None})
    results = {MAJORITY: 0.0, **{name: 0.0 for name in pool.scores}}
    if not keys:
        return results
    column = {key: j for j, key in enumerate(keys)}
    answers = len(keys)
    # each candidate's answer as a column; candidates without one vote in a last column, left out
    answer_of = np.array([answers if key is None else column[key] for key in pool.answer_keys])
    correct = np.array(pool.correct, dtype=float)
    given = np.bincount(answer_of, minlength=answers + 1)[:answers]
    key_correct = np.bincount(answer_of, weights=correct, minlength=answers + 1)[:answers] / given
    picks = subset_picks(pool.size, k, subsets, seed)
    cells = (np.arange(len(picks))[:, None] * (answers + 1) + answer_of[picks]).ravel()  # (subset, answer) of each pick

    def totals(weights: np.ndarray | None) -> np.ndarray:
        summed = np.bincount(cells, weights=None if weights is None else weights[picks].ravel(), minlength=len(picks) * (answers + 1))
        return summed.reshape(len(picks), answers + 1)[:, :answers]

    counts = totals(None)
    present = counts > 0
    results[MAJORITY] = _credit(counts, present, key_correct)
    for name, scores in pool.scores.items():
        weights = np.array([0.0 if s is None else float(s) for s in scores])
        scored_votes = totals(np.array([s is not None for s in scores], dtype=float))
        by_prm = (scored_votes > 0).any(axis=1, keepdims=True)  # else no scored candidate states an answer: count them all
        results[name] = _credit(np.where(by_prm, totals(weights), counts), np.where(by_prm, scored_votes > 0, present), key_correct)
    return results


def subset_picks(n: int, k: int, subsets: int, seed: int) -> np.ndarray:
    """Subsets of k of range(n), one per row: all of them when there are at most `subsets`, else
    `subsets` uniformly random ones (seeded)."""
    if math.comb(n, k) <= subsets:
        return np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(-1, k)
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((subsets, n)), axis=1)[:, :k]


def _credit(totals: np.ndarray, present: np.ndarray, key_correct: np.ndarray) -> float:
    """Mean over subsets of the correctness of the winning answer, ties sharing the credit."""
    masked = np.where(present, totals, -np.inf)
    best = masked.max(axis=1, keepdims=True)
    tied = present & (masked >= best - TIE_TOLERANCE * np.maximum(1.0, np.abs(best)))
    n_tied = tied.sum(axis=1)
    credit = (tied * key_correct).sum(axis=1) / np.maximum(n_tied, 1)
    return float(credit.mean())
