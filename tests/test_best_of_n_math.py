"""The best-of-N estimators on hand-made pools, against values worked out by hand (exact fractions)."""

import itertools
import math
from fractions import Fraction

import pytest

from labeler.checking.answer_keys import answer_key
from labeler.evaluation.best_of_n import Pool, estimate, n_ladder, pass_at, pool_accuracy, selection_at, subset_picks


def close(value, fraction) -> bool:
    return value == pytest.approx(float(Fraction(fraction)), abs=1e-12)


def test_pass_at_n_is_exact_combinatorics():
    correct = [True, False, False, False]
    assert close(pass_at(correct, 1), "1/4")
    assert close(pass_at(correct, 2), "1/2")  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert close(pass_at(correct, 3), "3/4")
    assert close(pass_at(correct, 4), 1)
    assert pass_at([False] * 5, 5) == 0 and pass_at([True] * 5, 1) == 1


def test_selection_picks_the_best_score_of_the_subset():
    correct = [True, False, False, False]
    # the correct candidate scores highest: chosen whenever it is drawn
    top = [0.9, 0.8, 0.7, 0.1]
    assert [round(selection_at(top, correct, k), 12) for k in (1, 2, 3, 4)] == [0.25, 0.5, 0.75, 1.0]
    # scored lowest: chosen only when drawn alone
    low = [0.05, 0.8, 0.7, 0.1]
    assert [selection_at(low, correct, k) for k in (1, 2, 3, 4)] == [0.25, 0.0, 0.0, 0.0]
    # second best: chosen when drawn without the best one. k=2: subsets {0,x} with x != 1: 2 of 6
    second = [0.8, 0.9, 0.7, 0.1]
    assert close(selection_at(second, correct, 2), "1/3")
    assert close(selection_at(second, correct, 3), "1/4")  # {0,2,3} only, of 4


def test_selection_breaks_ties_at_random_and_ranks_unscored_last():
    correct = [True, False, True, False]
    assert all(close(selection_at([0.5] * 4, correct, k), "1/2") for k in (1, 2, 3, 4))  # all tied: random
    # 0 and 1 tie at the top, 2 and 3 below. k=2, 6 subsets: {0,1} -> 1/2; {0,2},{0,3} -> 1; {1,2},{1,3} -> 0; {2,3} -> 1 (2 beats 3)
    assert close(selection_at([0.9, 0.9, 0.5, 0.1], correct, 2), "7/12")  # (1/2 + 1 + 1 + 0 + 0 + 1) / 6
    # an unscored candidate is picked only when nothing scored is drawn
    assert close(selection_at([None, 0.2, None, 0.1], [True, False, False, False], 1), "1/4")
    assert selection_at([None, 0.2, None, 0.1], [True, False, False, False], 2) == pytest.approx(1 / 6 * 0.5)  # {0,2}: tie of two


def test_majority_vote_by_hand():
    # answers 7, 7, 3, 5; 7 is right
    pool = Pool("p", (True, True, False, False), ("7", "7", "3", "5"))
    # N=2, six subsets: {7,7} -> 1; four mixed pairs with a 7 -> tie, 1/2 each; {3,5} -> tie of wrong answers, 0
    assert close(pool_accuracy(pool, 2)["majority"], "1/2")
    # N=3, four subsets: {7,7,3}, {7,7,5} -> 1; {7,3,5} twice -> three-way tie, 1/3
    assert close(pool_accuracy(pool, 3)["majority"], "2/3")
    assert close(pool_accuracy(pool, 4)["majority"], 1)
    assert close(pool_accuracy(pool, 1)["majority"], "1/2") and close(pool_accuracy(pool, 1)["random"], "1/2")


def test_candidates_without_an_answer_do_not_vote():
    pool = Pool("p", (True, False, False), ("7", None, None))
    # N=2: {7, -} -> 7 wins; {-, -} -> nothing votes, 0
    assert close(pool_accuracy(pool, 2)["majority"], "2/3")
    assert pool_accuracy(Pool("q", (False, False), (None, None)), 2)["majority"] == 0


def test_weighted_vote_sums_the_scores_of_each_answer():
    pool = Pool("p", (True, True, False), ("7", "7", "3"), {"prm/min": (0.2, 0.2, 0.5)})
    results = pool_accuracy(pool, 3)
    assert results["vote:prm/min"] == 0  # 0.2 + 0.2 < 0.5
    assert results["majority"] == 1 and results["select:prm/min"] == 0
    # N=2: {7,7} -> 1; {7,3} twice -> 3 wins
    assert close(pool_accuracy(pool, 2)["vote:prm/min"], "1/3")
    heavier = Pool("p", (True, True, False), ("7", "7", "3"), {"prm/min": (0.3, 0.3, 0.5)})
    assert pool_accuracy(heavier, 3)["vote:prm/min"] == 1  # 0.6 > 0.5


def test_equivalent_answers_vote_together():
    keys = tuple(answer_key(a) for a in ("0.5", "\\frac{1}{2}", "1/2", "x = 2", "2"))
    assert keys == ("1/2", "1/2", "1/2", "2", "2")
    pool = Pool("p", (True, True, True, False, False), keys)
    assert pool_accuracy(pool, 5)["majority"] == 1


def test_curves_average_over_problems_and_cap_small_pools():
    big = Pool("a", (True, False, False, False), ("1", "2", "3", "4"), {"s": (0.9, 0.8, 0.7, 0.1)})
    small = Pool("b", (False, True), ("5", "6"), {"s": (0.4, 0.6)})
    curves = estimate([big, small, Pool("empty", (), (), {"s": ()})], [1, 2, 4])
    assert curves.problems == 2 and curves.problems_capped == [0, 0, 1]
    assert curves.accuracy["select:s"] == pytest.approx([(0.25 + 0.5) / 2, (0.5 + 1) / 2, (1 + 1) / 2])
    assert curves.accuracy["pass"] == pytest.approx([(0.25 + 0.5) / 2, (0.5 + 1) / 2, 1.0])
    assert curves.accuracy["random"] == pytest.approx([0.375] * 3)
    with pytest.raises(ValueError, match="entries"):
        Pool("bad", (True, False), ("1",))


def test_n_ladder():
    assert n_ladder(1) == [1] and n_ladder(8) == [1, 2, 4, 8] and n_ladder(12) == [1, 2, 4, 8, 12] and n_ladder(64)[-1] == 64


def test_votes_are_exact_over_all_subsets_when_few_and_seeded_random_subsets_otherwise():
    assert subset_picks(6, 3, 20, seed=0).shape == (20, 3)  # C(6,3) = 20: every subset, once
    assert {tuple(row) for row in subset_picks(6, 3, 20, seed=0)} == set(itertools.combinations(range(6), 3))
    random_ones = subset_picks(6, 3, 19, seed=0)
    assert random_ones.shape == (19, 3) and all(len(set(row)) == 3 for row in random_ones)
    # 12 candidates, answers by thirds, N=6: C(12,6) = 924 subsets, brute force against 200 random ones
    correct = tuple(i < 4 for i in range(12))
    keys = tuple(str(i % 3) if i >= 4 else "right" for i in range(12))
    pool = Pool("p", correct, keys)
    exact = pool_accuracy(pool, 6, subsets=1000)["majority"]
    brute = []
    for chosen in itertools.combinations(range(12), 6):
        counts = {}
        for i in chosen:
            counts[keys[i]] = counts.get(keys[i], 0) + 1
        best = max(counts.values())
        tied = [key for key, count in counts.items() if count == best]
        brute.append(("right" in tied) / len(tied))
    assert exact == pytest.approx(sum(brute) / math.comb(12, 6))
    sampled = pool_accuracy(pool, 6, subsets=200, seed=3)["majority"]
    assert sampled == pool_accuracy(pool, 6, subsets=200, seed=3)["majority"]  # seeded: the same every time
    assert sampled != pool_accuracy(pool, 6, subsets=200, seed=4)["majority"]
    assert abs(sampled - exact) < 0.1
    # the curve does not depend on the order of problems
    other = Pool("q", correct[::-1], keys[::-1])
    assert estimate([pool, other], [6], subsets=200).accuracy == estimate([other, pool], [6], subsets=200).accuracy
