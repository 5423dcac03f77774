"""`labeler eval` on a PRM's scores (issue 41): a score that is not a finite number is no prediction, said with
the value, never a step predicted wrong (nan >= threshold is False); a score line of another solution under the same
ids (its solution_fingerprint names other steps) is not compared with this reference solution."""

import json
import math

import pytest

from labeler.evaluation.human_agreement import match, predictions_from_scores, predictions_from_step_scores
from labeler.evaluation.references import ReferenceSet, ReferenceSolution
from labeler.evaluation.solutions import SolutionToScore
from labeler.ids import solution_fingerprint

STEPS = ("Add 2 and 2.", "That is 4.", "The answer is: 4")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_step_the_prm_gave_a_non_finite_score_is_no_prediction_with_the_value_named(bad):
    solution = SolutionToScore("p", "s", "What is 2 + 2?", STEPS)
    [prediction] = predictions_from_step_scores([solution], [[0.9, bad, 0.8]], threshold=0.5)
    assert prediction.correct == (True, None, True) and prediction.scores == (0.9, None, 0.8)
    assert "not a finite score" in prediction.unpredicted_reason(1) and str(bad) in prediction.unpredicted_reason(1)


def test_a_score_line_with_a_nan_step_is_no_prediction_there(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text(json.dumps({"problem_id": "p", "solution_id": "s", "step_scores": [0.9, math.nan, 0.8]}) + "\n")
    [prediction] = predictions_from_scores(str(path), threshold=0.5)
    assert prediction.correct == (True, None, True) and prediction.scores == (0.9, None, 0.8)
    assert "not a finite score" in prediction.unpredicted_reason(1)


def test_a_score_line_of_another_solution_with_these_ids_is_not_compared(tmp_path):
    reference = ReferenceSet("gsm8k", "processbench", [ReferenceSolution("p", STEPS, -1, problem="What is 2 + 2?", row_index=0)], 0)
    other = ("Add 2 and 3.", "That is 5.", "The answer is: 5")
    lines = [
        {"problem_id": "p", "solution_id": "s", "step_scores": [0.9, 0.9, 0.9], "solution_fingerprint": solution_fingerprint("What is 2 + 2?", other)},
    ]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    matched, counts = match(reference, predictions_from_scores(str(path)))
    assert matched == [] and counts["other_solution"] == 1
    path.write_text(json.dumps(lines[0] | {"solution_fingerprint": solution_fingerprint("What is 2 + 2?", STEPS)}) + "\n")
    matched, counts = match(reference, predictions_from_scores(str(path)))
    assert len(matched) == 1 and counts["other_solution"] == 0


def test_a_solution_the_prm_cannot_read_says_why_not_the_length_limit():
    solution = SolutionToScore("p", "s", "What is 2 + 2? ки", STEPS)
    why = "the problem contains the PRM's step marker 'ки', which its format reads as a step's end"
    [prediction] = predictions_from_step_scores([solution], [[None, None, None]], why_unscored=lambda _: why)
    assert prediction.correct == (None, None, None) and [prediction.unpredicted_reason(i) for i in range(3)] == [why] * 3
    [cut] = predictions_from_step_scores([solution], [[0.9]], why_unscored=lambda _: why)  # scored in part: cut by length
    assert cut.correct == (True, None, None) and cut.unpredicted_reason(1) == "step scores cut at max_length"


def test_score_lines_of_several_solutions_of_one_problem_are_told_apart_by_their_fingerprints(tmp_path):
    other = ("Add 2 and 3.", "That is 5.", "The answer is: 5")
    reference = ReferenceSet(
        "prm800k", "prm800k",
        [ReferenceSolution("p", STEPS, -1, problem="Q", row_index=0), ReferenceSolution("p", other, 1, problem="Q", row_index=1)], 0,
    )  # fmt: skip
    lines = [
        {"problem_id": "p", "solution_id": f"s{i}", "step_scores": scores, "solution_fingerprint": solution_fingerprint("Q", steps)}
        for i, (steps, scores) in enumerate([(other, [0.9, 0.2, 0.1]), (STEPS, [0.9, 0.8, 0.7])])
    ]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    matched, counts = match(reference, predictions_from_scores(str(path)))
    assert counts["ambiguous"] == 0 and [m.prediction.scores for m in matched] == [(0.9, 0.8, 0.7), (0.9, 0.2, 0.1)]


@pytest.mark.parametrize("scores, error", [([10**400, 0.5], None), ("abc", "step_scores is str")])
def test_a_bad_score_line_is_no_score_or_a_line_named_never_a_traceback(tmp_path, scores, error):
    from labeler.evaluation.human_agreement import PredictionsError

    path = tmp_path / "scores.jsonl"
    path.write_text(json.dumps({"problem_id": "p", "solution_id": "s", "step_scores": scores}) + "\n")
    if error is None:
        [prediction] = predictions_from_scores(str(path))
        assert prediction.correct == (None, True) and "not a finite score" in prediction.unpredicted_reason(0)
    else:
        with pytest.raises(PredictionsError, match=rf"scores.jsonl:1: not a `labeler score` line .*{error}"):
            predictions_from_scores(str(path))
