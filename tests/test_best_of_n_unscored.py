"""Best-of-N with candidates the PRM could not fully score or whose answer was not checked: they are never
ranked as if scored, and every figure says how much of it rests on them (labeler/evaluation/best_of_n.py)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.decoding.candidates import Candidate, CandidateSet
from labeler.decoding.reranking import build_pools
from labeler.evaluation.best_of_n import Pool, estimate, pool_accuracy, pool_unknown
from labeler.prm.solution_scores import AGGREGATES, aggregate
from labeler.prm.trajectory import CombinedScore


def candidate(solution_id, correct, answer, steps=2, unchecked_reason=None):
    return Candidate("p", solution_id, "q", "7", tuple(f"step {i}" for i in range(steps)), correct, answer, unchecked_reason, 0, False)


@pytest.mark.parametrize("how", AGGREGATES)
def test_a_partly_scored_solution_has_no_aggregate(how):
    assert aggregate([0.9, None, 0.8], how) is None
    assert aggregate([0.9, 0.8, None], how) is None
    assert aggregate([0.9, 0.8], how) is not None
    assert CombinedScore().combine([0.9, None], 0.5) is None


def test_selection_never_prefers_a_candidate_cut_at_the_prms_max_length():
    """The wrong candidate's first step scored high and its later steps were cut: it used to win by min, product and mean."""
    candidates = CandidateSet([candidate("a", False, "3"), candidate("b", True, "7")])
    pools = build_pools(candidates, [{"a": [0.99, None], "b": [0.5, 0.6]}])
    for how in AGGREGATES:
        assert pools[0].scores[f"0/{how}"][0] is None
        assert pool_accuracy(pools[0], 2)[f"select:0/{how}"] == 1
        assert pool_accuracy(pools[0], 2)[f"vote:0/{how}"] == 1


def test_unscored_candidates_do_not_tie_with_scored_ones_in_the_weighted_vote():
    # a scored wrong answer with weight 0 against an unscored right one: the scored one wins (it used to be a tie, 1/2)
    assert pool_accuracy(Pool("p", (False, True), ("3", "7"), {"s": (0.0, None)}), 2)["vote:s"] == 0
    # nothing scored in the subset: the vote counts answers, as majority vote does (it used to tie every answer, 1/2)
    unscored = Pool("p", (True, True, False), ("7", "7", "3"), {"s": (None, None, None)})
    assert pool_accuracy(unscored, 3)["vote:s"] == 1 == pool_accuracy(unscored, 3)["majority"]


def test_unknown_shares_by_hand():
    # 4 candidates: 0 correct, 1 wrong, 2 and 3 not checked (no answer); PRM scores 2 highest, 3 unscored
    scores = {"s": (0.5, 0.4, 0.9, None)}
    pool = Pool("p", (True, False, False, False), ("7", "3", None, None), scores, unchecked=(False, False, True, True))
    unknown = pool_unknown(pool, 2)
    assert unknown["random"] == pytest.approx(1 / 2)
    # pass@2 wrong with an unchecked candidate drawn: {1,2}, {1,3}, {2,3} of 6
    assert unknown["pass"] == pytest.approx(3 / 6)
    # selection picks 2 whenever drawn: {0,2}, {1,2}, {2,3}; 3 is picked in no subset (unscored, ranks last)
    assert unknown["select:s"] == pytest.approx(3 / 6)
    # votes get nothing to count only in {2,3}
    assert unknown["majority"] == unknown["vote:s"] == pytest.approx(1 / 6)
    assert pool_unknown(pool, 1)["select:s"] == pytest.approx(2 / 4)
    curves = estimate([pool], [1, 2])
    assert curves.unknown["select:s"] == pytest.approx([2 / 4, 3 / 6])
    # share of problems whose N candidates hold none the PRM fully scored: {3} at N=1, none at N=2
    assert curves.unscored["s"] == pytest.approx([1 / 4, 0])


pools_strategy = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n),  # answer keys; None: not checked
        st.lists(st.none() | st.floats(0, 1), min_size=n, max_size=n),  # PRM scores; None: not fully scored
        st.sets(st.sampled_from(["a", "b", "c"])),  # the answers the checker finds right
    )
)


def make_pool(answers, scores, right, unscored_scores=None) -> Pool:
    correct = tuple(key is not None and key in right for key in answers)
    named = {"s": tuple(scores)}
    if unscored_scores is not None:
        named["t"] = tuple(unscored_scores)
    return Pool("p", correct, tuple(answers), named, unchecked=tuple(key is None for key in answers))


@settings(max_examples=200, deadline=None)
@given(pools_strategy, st.data())
def test_every_method_lies_between_worst_of_n_and_pass_at_n(drawn, data):
    """Every method's accuracy at N lies at or below pass@N (some candidate of the N is correct) and at or above
    worst-of-N (all N are correct): each picks an answer one of the N candidates states, or nothing. The floor is not
    random: a PRM that prefers wrong candidates picks below random, and that is a finding, not a bug. The checker is
    taken to agree with itself (an answer key is right or wrong for the whole pool), as it does for one reference."""
    answers, scores, right = drawn
    pool = make_pool(answers, scores, right)
    k = data.draw(st.integers(1, pool.size))
    results = pool_accuracy(pool, k, subsets=10_000)
    correct_count = sum(pool.correct)
    worst = math.comb(correct_count, k) / math.comb(pool.size, k)
    for name, value in results.items():
        assert worst - 1e-9 <= value <= results["pass"] + 1e-9, name
    for name, value in pool_unknown(pool, k).items():
        assert 0 <= value <= 1 - results[name] + 1e-9, name  # counted wrong for an unchecked answer: part of the wrong share


@settings(max_examples=300, deadline=None)
@given(pools_strategy, st.data())
def test_unscored_candidates_never_raise_a_prm_method(drawn, data):
    """What the candidates the PRM could not fully score say counts only in the subsets that hold no scored candidate
    (PRM selection then picks at random among them) or no scored candidate that states an answer (the weighted vote
    then counts the answers): making every unscored candidate right instead of wrong lifts PRM selection and the
    weighted vote by at most the share of those subsets."""
    answers, scores, right = drawn
    unscored = [i for i, s in enumerate(scores) if s is None]
    if not unscored:
        return
    k = data.draw(st.integers(1, len(scores)))
    answers = ["z" if i in unscored else key for i, key in enumerate(answers)]
    wrong, made_right = make_pool(answers, scores, right), make_pool(answers, scores, right | {"z"})
    low, high = pool_accuracy(wrong, k, subsets=10_000), pool_accuracy(made_right, k, subsets=10_000)
    only_unscored = math.comb(len(unscored), k) / math.comb(len(scores), k)
    assert estimate([wrong], [k]).unscored["s"] == pytest.approx([only_unscored])
    assert high["select:s"] - low["select:s"] <= only_unscored + 1e-9
    silent = sum(s is None or answers[i] is None for i, s in enumerate(scores))
    assert high["vote:s"] - low["vote:s"] <= math.comb(silent, k) / math.comb(len(scores), k) + 1e-9


# -- a NaN step score is no score ---------------------------------------------------------------------

finite_scores = st.lists(st.floats(0, 1), min_size=1, max_size=5)


@given(finite_scores, st.data())
def test_a_nan_step_score_makes_the_solution_unscored_by_every_aggregate(scores, data):
    """min([0.9, nan]) is 0.9 and max() skips a NaN as it pleases: a NaN step must leave no aggregate at all."""
    with_nan = list(scores)
    with_nan.insert(data.draw(st.integers(0, len(scores))), math.nan)
    for how in AGGREGATES:
        assert aggregate(with_nan, how) is None, how
        assert aggregate(scores, how) is not None
    assert CombinedScore().combine(with_nan, 0.9) is None
    assert CombinedScore().combine(scores, math.nan) is None


@settings(deadline=None)  # the first example imports torch (labeler.prm.scoring)
@given(st.lists(st.tuples(finite_scores, st.booleans()), min_size=1, max_size=6), st.sampled_from(AGGREGATES))
def test_best_of_n_never_selects_a_nan_scored_candidate(drawn, how):
    from labeler.evaluation.solutions import SolutionToScore
    from labeler.prm.scoring import scored_solution
    from labeler.prm.solution_scores import mark_best_of_n

    solutions, step_scores = [], []
    for i, (scores, nan) in enumerate(drawn):
        scores = [math.nan, *scores[1:]] if nan else scores
        solutions.append(SolutionToScore("p", f"s{i}", "q", tuple(f"step {j}" for j in range(len(scores)))))
        step_scores.append(scores)
    scored = [scored_solution(s, steps, None, CombinedScore()) for s, steps in zip(solutions, step_scores)]
    mark_best_of_n(scored, how)
    selected = [s for s in scored if s.selected]
    clean = [s for s, (_, nan) in zip(scored, drawn) if not nan]
    assert all(s.aggregates[how] is None for s, (_, nan) in zip(scored, drawn) if nan)  # counted apart, as unscored
    if clean:
        assert len(selected) == 1 and selected[0] in clean
        assert selected[0].aggregates[how] == max(s.aggregates[how] for s in clean)
    else:
        assert selected == []  # never silently picked
    # in the best-of-N estimate, a NaN-scored candidate ranks as an unscored one: the same figures as with None
    candidates = CandidateSet([candidate(f"s{i}", i % 2 == 0, str(i), steps=len(steps)) for i, steps in enumerate(step_scores)])
    as_nan = build_pools(candidates, [{f"s{i}": steps for i, steps in enumerate(step_scores)}])[0]
    as_none = build_pools(candidates, [{f"s{i}": [None if math.isnan(x) else x for x in steps] for i, steps in enumerate(step_scores)}])[0]
    for k in range(1, len(drawn) + 1):
        assert pool_accuracy(as_nan, k) == pool_accuracy(as_none, k)


def test_best_of_n_says_why_a_candidate_is_unscored_a_marker_in_its_problem_not_the_length_limit(tmp_path):
    """A real Math-Shepherd-format PRM (tiny) on a problem holding its 'ки' (a Russian word): the candidates are
    unscored for that reason, kept with the scores and said in the table, never as "past its max length"."""
    from labeler.decoding.reranking import PrmToUse, best_of_n, format_table
    from labeler.decoding.prm_scores import scoring_settings
    from labeler.prm.devices import place
    from labeler.prm.scorers import load_scorer
    from labeler.store.location import OutputLocation
    from tests.public_prms import build_math_shepherd

    spec = f"math-shepherd:{build_math_shepherd(tmp_path / 'shepherd')}"
    russian = [Candidate("r", f"r{i}", "У Ники 3 яблока и 2 груши. Сколько фруктов?", "5", ("3 + 2 = 5.",), i == 0, "5", None, 0, False) for i in range(2)]
    english = [Candidate("e", f"e{i}", "What is 3 + 2?", "5", ("3 + 2 = 5.",), True, "5", None, 0, False) for i in range(2)]
    location, loads = OutputLocation(tmp_path / "out"), []
    load = lambda: loads.append(1) or load_scorer(spec, placement=place("cpu", "fp32"))  # noqa: E731
    for _ in range(2):  # scored, then read back from the kept scores: the reason is kept with them
        results = best_of_n(location, CandidateSet(russian + english), [PrmToUse(spec, load, scoring_settings("fp32"))], subsets=8, seed=0)
        prm = results["prms"][0]
        assert prm["candidates_unscored"] == 2
        assert prm["candidates_unscored_by_reason"] == {
            "the problem contains the PRM's step marker 'ки', which its format reads as a step's end": 2
        }
        table = format_table(results)
        assert "2 candidates not fully scored (the problem contains the PRM's step marker 'ки'" in table and "max length" not in table
    assert len(loads) == 1


def test_a_nan_step_is_said_as_such_and_written_as_null():
    import json

    from labeler.evaluation.solutions import SolutionToScore
    from labeler.prm.scoring import scored_solution
    from labeler.prm.solution_scores import PAST_LENGTH_LIMIT, unscored_reason

    assert unscored_reason([0.9, math.nan]) == "the PRM gave step 1 nan, not a finite score"
    assert unscored_reason([0.9, None]) == PAST_LENGTH_LIMIT and unscored_reason([0.9, 0.8]) is None
    line = scored_solution(SolutionToScore("p", "s", "q", ("a", "b")), [0.9, math.nan], None, CombinedScore()).to_dict()
    assert line["step_scores"] == [0.9, None] and line["steps_scored"] == 1 and line["score_min"] is None
    json.dumps(line, allow_nan=False)  # valid JSON: no NaN written
