"""One rule for a reference answer that is a missing value (labeler/inputs/missing_answers.py's missing_answer):
null, NaN, inf, blank, or the text "nan", "None", "null", "<NA>" in any case, as pandas' astype(str) and CSV
exports write one. The label job rejects such a row, naming the row, the field and the value (labelling it
against the text "nan" made every step negative); the reward paths leave the answer part unmeasured. The same
values, the same outcome, in both."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from labeler.inputs.missing_answers import missing_answer
from labeler.checking.checker import AnswerChecker
from labeler.evaluation.solutions import with_placeholder_answer
from labeler.inputs.answers import read_answer_book
from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.records import RowError
from labeler.rewards import ProcessReward, RewardConfig
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from tests.test_rewards import FixedScorer
from workers.local_executor import LocalExecutor

MISSING = ["nan", "NaN", " None ", "none", "null", "NULL", "<NA>", "", "   ", None, float("nan"), float("inf")]
ANSWERS = ["5", "0", "none of them", "nanometre", "\\text{none}", 5, 0.0, "N/A"]  # answers, checked as such
PROBLEMS = {f"What is {i} times 5?": str(5 * i) for i in range(1, 6)}


def row(problem: str, answer) -> dict:
    return {"problem": problem, "answer": answer, "steps": ["5 it is.", "The answer is: 5"]}


@pytest.mark.parametrize("value", MISSING, ids=repr)
def test_a_missing_value_as_an_answer_column_is_rejected_naming_the_field_and_the_value(value):
    with pytest.raises(RowError) as error:
        to_source_row("processbench", 3, row("What is 1 times 5?", value), PresetOptions())
    assert error.value.field == "answer"
    if isinstance(value, str) and value.strip():
        assert f"holds the text {value.strip()!r}, how a missing value is written" in str(error.value), str(error.value)
    if isinstance(value, str) and value.strip().lower() == "none":  # a text that could be an answer: how to write one
        assert "\\text{none}" in str(error.value)


@pytest.mark.parametrize("value", ANSWERS, ids=repr)
def test_other_answers_are_read_as_answers(value):
    source = to_source_row("processbench", 0, row("What is 1 times 5?", value), PresetOptions())
    assert source.reference_answer == (str(int(value)) if isinstance(value, float) else str(value))


def test_the_label_path_and_the_reward_paths_read_the_same_values_as_missing():
    with ProcessReward(RewardConfig(prm="unused", answer_weight=1.0), scorer=FixedScorer([0.5])) as reward:
        results = reward.rewards(["q"] * len(MISSING + ANSWERS), ["The answer is $\\boxed{5}$."] * len(MISSING + ANSWERS), MISSING + ANSWERS)
    for value, result in zip(MISSING + ANSWERS, results, strict=True):
        try:
            to_source_row("processbench", 0, row("What is 1 times 5?", value), PresetOptions())
            rejected = False
        except RowError:
            rejected = True
        unmeasured = result.reason is not None and "no reference answer" in result.reason
        assert rejected == unmeasured == (missing_answer(value) is not None), value


def test_answers_read_from_elsewhere_in_the_row_follow_the_same_rule():
    # gsm8k's '#### N', math-shepherd's '+' final step, a math row's \boxed{}: "nan" there is no answer either
    gsm8k = {"question": "What is 1 times 5?", "answer": "It is 5.\n#### nan"}
    shepherd = {"input": "What is 1 times 5? Step 1: 1 times 5 is 5. ки\nStep 2: The answer is: None ки", "label": "+"}
    math_row = {"problem": "What is 1 times 5?", "solution": "It is $\\boxed{NaN}$."}
    for preset, raw in (("gsm8k", gsm8k), ("math-shepherd", shepherd), ("math", math_row)):
        with pytest.raises(RowError, match="no reference answer") as error:
            to_source_row(preset, 0, raw, PresetOptions())
        assert error.value.field == "answer" and "how a missing value is written" in str(error.value), (preset, str(error.value))
    # a math row whose answer column reads "nan" takes its \boxed{} answer, as for an absent column
    source = to_source_row("math", 0, {"problem": "p", "answer": "nan", "solution": "So $\\boxed{7}$."}, PresetOptions())
    assert source.reference_answer == "7"


def test_an_answers_file_with_a_missing_value_does_not_answer_the_problem(tmp_path):
    book = read_answer_book(str(write_jsonl(tmp_path / "answers.jsonl", [{"problem": "p1", "answer": "nan"}, {"problem": "p2", "answer": "4"}])))
    assert book.rows_unreadable == 1 and dict(book.answers) == {"p2": "4"}
    options = PresetOptions(answers=book)
    with pytest.raises(RowError, match="not in --answers"):
        to_source_row("processbench", 0, {"problem": "p1", "steps": ["a"]}, options)
    # a row whose own answer reads "None" takes the file's answer, as a row with none does
    assert to_source_row("processbench", 0, {"problem": "p2", "answer": "None", "steps": ["a"]}, options).reference_answer == "4"


def test_scoring_without_answers_takes_a_missing_value_as_no_answer():
    # `labeler score` needs no reference: a row whose answer reads "nan" (or NaN) is scored, not rejected
    for value in ("nan", float("nan"), "  "):
        raw = with_placeholder_answer("processbench", row("What is 1 times 5?", value), PresetOptions())
        assert to_source_row("processbench", 0, raw, PresetOptions()).steps


def test_a_label_job_rejects_rows_with_missing_answers_and_labels_the_others(tmp_path):
    good = [row(problem, answer) | {"steps": [f"{answer} it is.", f"The answer is: {answer}"]} for problem, answer in PROBLEMS.items()]
    missing = [row("What is 1 times 5?", value) for value in ("nan", "None", "null", "<NA>")]
    path = write_jsonl(tmp_path / "in.jsonl", good + missing)
    config = LabelConfig(input=str(path), output=str(tmp_path / "out"), model="scripted", rollouts=2, shard_size=4, max_rejected_share=1.0)
    with AnswerChecker(timeout_s=5) as checker:
        executor = LocalExecutor(lambda: ScriptedGenerator(PROBLEMS), checker)
        summary = run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)
    assert summary.solutions == len(good) and summary.rejected_rows == len(missing)
    rejected = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert [r["row_index"] for r in rejected] == list(range(len(good), len(good) + len(missing)))
    for r, value in zip(rejected, ("nan", "None", "null", "<NA>"), strict=True):
        assert r["field"] == "answer" and f"the text {value!r}, how a missing value is written" in r["reason"], r
