import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from labeler.labeling.monte_carlo import hard_label, soft_label
from schemas.tables import first_error
from labeler.labeling.rollouts import prefix_seed
from labeler.labeling.strategies import StrategySettings, label
from labeler.records import Solution, StepCounts
from tests.fakes import WRONG_MARKER, ScriptedGenerator


def test_label_arithmetic():
    assert soft_label(StepCounts(n_correct=3, n_rollouts=8)) == 0.375
    assert soft_label(StepCounts(measured_by="inferred", inferred_hard=True)) is None
    assert hard_label(StepCounts(measured_by="inferred", inferred_hard=False)) is False
    assert hard_label(StepCounts(measured_by="unlabelled")) is None
    assert first_error([True, None, False]) is None  # the unlabelled step may be the first error: not known
    assert first_error([True, None]) is None  # nor is "none" known
    assert first_error([True, False, None]) == 1
    assert hard_label(StepCounts(n_correct=1, n_rollouts=8)) is True
    assert hard_label(StepCounts(n_correct=0, n_rollouts=8)) is False
    assert first_error([True, True, False, True]) == 2
    assert first_error([True, True]) == -1
    assert first_error([False]) == 0
    with pytest.raises(ValueError):
        soft_label(StepCounts(n_correct=0, n_rollouts=0))


def solution(sid: str, steps: list[str], problem: str = "What is 2+2?", answer: str = "4") -> Solution:
    return Solution(problem_id="p", solution_id=sid, problem=problem, reference_answer=answer, steps=tuple(steps), source="test", row_index=0)


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


SAMPLING = SamplingSettings(max_new_tokens=32)


def label_exhaustively(solutions, generator, checker, *, rollouts, sampling, seed, final_step="check"):
    settings = StrategySettings(rollouts=rollouts, sampling=sampling, seed=seed, final_step=final_step)
    return label("exhaustive", solutions, generator, checker, settings)


def test_counts_follow_the_scripted_outcomes(checker):
    good = solution("good", ["2 plus 2 is 4.", "So we have 4.", "The answer is: 4"])
    bad = solution("bad", ["2 plus 2 is 5. " + WRONG_MARKER, "So 5.", "The answer is: 5"])
    generator = ScriptedGenerator({"What is 2+2?": "4"})
    outcome = label_exhaustively([good, bad], generator, checker, rollouts=6, sampling=SAMPLING, seed=3)
    assert generator.calls == [4]  # one batched call: 2 sampled prefixes x 2 solutions
    by_id = {item.solution.solution_id: item for item in outcome.labelled}
    for i in range(2):
        seed = prefix_seed(3, good, i)
        expected = sum((seed + r) % 3 != 0 for r in range(6))
        assert by_id["good"].steps[i].n_correct == expected
        assert by_id["good"].steps[i].n_rollouts == 6
        assert by_id["good"].steps[i].measured_by == "rollouts"
        assert by_id["bad"].steps[i].n_correct == 0
    # the final step states its answer and is checked directly, as one rollout
    assert (by_id["good"].steps[2].n_correct, by_id["good"].steps[2].n_rollouts) == (1, 1)
    assert (by_id["bad"].steps[2].n_correct, by_id["bad"].steps[2].n_rollouts) == (0, 1)
    assert by_id["good"].steps[2].measured_by == "final_answer"
    assert len(outcome.rollouts) == 2 * 6 * 2 + 2
    assert {r.verdict for r in outcome.rollouts} <= {"correct", "incorrect"}


def test_final_step_by_rollouts(checker):
    sol = solution("s", ["2 plus 2 is 4.", "The answer is: 4"])
    generator = ScriptedGenerator({"What is 2+2?": "4"})
    outcome = label_exhaustively([sol], generator, checker, rollouts=4, sampling=SAMPLING, seed=0, final_step="rollouts")
    assert [step.n_rollouts for step in outcome.labelled[0].steps] == [4, 4]
    assert all(step.measured_by == "rollouts" for step in outcome.labelled[0].steps)


def test_one_step_solution_with_check_needs_no_generation(checker):
    generator = ScriptedGenerator({"What is 2+2?": "4"})
    outcome = label_exhaustively([solution("one", ["The answer is: 4"])], generator, checker, rollouts=8, sampling=SAMPLING, seed=0)
    assert generator.calls == []
    assert outcome.labelled[0].steps[0].n_rollouts == 1


def test_seeds_depend_on_ids_not_on_batch_position(checker):
    a = solution("a", ["x.", "y.", "The answer is: 4"])
    b = solution("b", ["x.", "z.", "The answer is: 4"])
    generator = ScriptedGenerator({"What is 2+2?": "4"})
    forward = label_exhaustively([a, b], generator, checker, rollouts=5, sampling=SAMPLING, seed=1)
    backward = label_exhaustively([b, a], generator, checker, rollouts=5, sampling=SAMPLING, seed=1)
    counts = lambda outcome: {i.solution.solution_id: [s.n_correct for s in i.steps] for i in outcome.labelled}  # noqa: E731
    assert counts(forward) == counts(backward)


def test_a_request_the_engine_cannot_run_fails_its_solution_only(checker):
    ok = solution("ok", ["fine.", "The answer is: 4"])
    broken = solution("broken", ["TOO LONG", "The answer is: 4"])
    generator = ScriptedGenerator({"What is 2+2?": "4"}, fail_when="TOO LONG")
    outcome = label_exhaustively([ok, broken], generator, checker, rollouts=3, sampling=SAMPLING, seed=0)
    assert [item.solution.solution_id for item in outcome.labelled] == ["ok"]
    assert [s.solution_id for s, _ in outcome.failed] == ["broken"]
    assert "engine error" in outcome.failed[0][1]
    assert all(r.solution_id == "ok" for r in outcome.rollouts)
