"""--sample-solutions: whatever the preset, label solutions sampled from each row's problem, against the
reference answer the preset reads, instead of the row's own solution (the issue: GSM8K rows took
`--preset columns --problem-column question --answer-column ...`, found by trial)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from labeler.cli import build_parser
from labeler.cli.label import config_from_args
from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.inputs.readers import read_rows
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import normalise_rows, plan_rows, preset_options
from tests.conftest import shared_data, write_jsonl


def gsm8k_rows(limit: int | None = None) -> list[dict]:
    path = shared_data("gsm8k/test.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit]


def label_config(*argv: str) -> LabelConfig:
    return config_from_args(build_parser().parse_args(["label", "--output", "out", *argv]), "m")


def test_the_flag_sets_the_setting_and_help_explains_it(capsys):
    assert label_config("--preset", "gsm8k", "--sample-solutions").sample_solutions
    assert not label_config("--preset", "gsm8k").sample_solutions
    with pytest.raises(SystemExit):
        build_parser().parse_args(["label", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--sample-solutions sample new solutions instead of labelling the input's own" in text
    assert "whatever its --preset" in text and "GSM8K's after '####'" in text


def test_gsm8k_with_the_flag_reads_every_real_row_as_problem_and_final_answer():
    rows = gsm8k_rows()
    config = label_config("--input", str(shared_data("gsm8k/test.jsonl")), "--preset", "gsm8k", "--sample-solutions")
    read = normalise_rows(read_rows(config.input), config)
    assert read.preset == "gsm8k" and read.rows_read == len(rows) == 1319 and read.rejected == []
    assert [source.steps for source in read.sources] == [None] * len(rows)  # problem-only: the job samples
    assert [source.reference_answer for source in read.sources] == [row["final_answer"] for row in rows]
    assert [source.problem for source in read.sources] == [row["question"].strip() for row in rows]
    assert [source.problem_id for source in read.sources] == [row["id"] for row in rows]
    assert "####" not in " ".join(source.reference_answer for source in read.sources)


def test_without_the_flag_gsm8k_rows_keep_their_solutions():
    config = label_config("--input", str(shared_data("gsm8k/test.jsonl")), "--preset", "gsm8k", "--limit", "20")
    read = normalise_rows(read_rows(config.input, config.limit), config)
    assert all(source.steps for source in read.sources)
    assert [source.reference_answer for source in read.sources] == [row["final_answer"] for row in gsm8k_rows(20)]


def test_the_plan_counts_solutions_per_problem_for_each_row(tmp_path):
    data = write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows(10))
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="m", preset="gsm8k", sample_solutions=True,
                         solutions_per_problem=3, shard_size=6)  # fmt: skip
    plan = plan_rows(read_rows(str(data)), config)
    assert [len(unit.rows) for unit in plan.units] == [2, 2, 2, 2, 2]  # 3 sampled solutions a row, 6 a unit
    assert all(row.needs_solutions for unit in plan.units for row in unit.rows)


PRESET_ROWS = [  # (preset, row, reference answer): the answer where each preset finds it
    ("gsm8k", {"question": "Q?", "answer": "It is 2+2=<<2+2=4>>4.\n#### 4"}, "4"),
    ("math", {"problem": "P?", "solution": "So $x=\\boxed{7}$."}, "7"),
    ("math", {"problem": "P?", "solution": "Step.", "answer": "8"}, "8"),
    ("processbench", {"problem": "P?", "steps": ["a", "b"], "answer": "9"}, "9"),
    ("math-shepherd", {"input": "P? Step 1: a ки\nStep 2: The answer is: 5 ки", "label": "P? Step 1: a +\nStep 2: The answer is: 5 +"}, "5"),
    ("prm800k", {"question": {"problem": "P?", "ground_truth_answer": "6"}, "label": {"steps": []}}, "6"),  # its steps are not read
    ("trace", {"problem": "P?", "response": "<think>hmm</think>The answer is 3", "answer": "3"}, "3"),
]


@pytest.mark.parametrize("preset,row,answer", PRESET_ROWS, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(PRESET_ROWS)])
def test_every_preset_honours_it(preset, row, answer):
    source = to_source_row(preset, 0, row, PresetOptions(sample_solutions=True))
    assert (source.problem, source.reference_answer, source.steps, source.thinking_steps, source.complete) == ("P?" if preset != "gsm8k" else "Q?", answer, None, 0, True)
    if preset != "prm800k":  # without it, the row's own solution is labelled
        assert to_source_row(preset, 0, row, PresetOptions()).steps


def test_columns_preset_and_an_answer_column_override_take_it_too():
    options = PresetOptions.from_columns("auto", 50_000, {"problem": "q", "answer": "a", "solution": "s"}, sample_solutions=True)
    assert to_source_row("columns", 0, {"q": "Q?", "a": "1", "s": "one\n\ntwo"}, options).steps is None
    options = PresetOptions.from_columns("auto", 50_000, {"answer": "final_answer"}, sample_solutions=True)
    row = gsm8k_rows(1)[0]
    source = to_source_row("gsm8k", 0, {**row, "answer": None}, options)  # the solution column is not read at all
    assert (source.reference_answer, source.steps) == (row["final_answer"], None)


def test_a_malformed_solution_is_not_read_when_the_answer_column_gives_the_answer():
    from labeler.inputs.presets import RowError

    row = {"problem": "P?", "solution": 123, "answer": "8"}  # a solution that is not text
    source = to_source_row("math", 0, row, PresetOptions(sample_solutions=True))
    assert (source.problem, source.reference_answer, source.steps) == ("P?", "8", None)
    with pytest.raises(RowError, match="solution"):  # labelling the row's own solution still reads it, and refuses it
        to_source_row("math", 0, row, PresetOptions())
    with pytest.raises(RowError, match="solution"):  # no answer column: the \boxed{} answer is read from it, and refused
        to_source_row("math", 0, {"problem": "P?", "solution": 123}, PresetOptions(sample_solutions=True))


def test_it_is_in_the_config_hash_only_when_given():
    plain = LabelConfig(input="i", output="o", model="m")
    assert "sample_solutions" not in plain.output_settings()  # jobs started before it keep their hash and resume
    sampled = LabelConfig(input="i", output="o", model="m", sample_solutions=True)
    assert sampled.output_settings()["sample_solutions"] is True and sampled.config_hash() != plain.config_hash()
    assert preset_options(sampled).sample_solutions and not preset_options(plain).sample_solutions


def test_a_label_run_samples_and_labels_new_solutions_for_gsm8k_rows(tmp_path):
    from labeler.checking.checker import AnswerChecker
    from labeler.labeling.job import run_job
    from tests.fakes import ScriptedGenerator
    from workers.local_executor import LocalExecutor

    rows = gsm8k_rows(3)
    data = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", preset="gsm8k", sample_solutions=True,
                         solutions_per_problem=2, rollouts=2)  # fmt: skip
    generator = ScriptedGenerator({row["question"]: row["final_answer"] for row in rows}, sampled_solution="First.\n\nThe answer is: {answer}")
    with AnswerChecker() as checker:
        run_job(config, executor=LocalExecutor(lambda: generator, checker), model_info={"name": "scripted"}, progress_enabled=False)
    labels = pq.read_table(tmp_path / "out" / "labels").to_pylist()
    assert len(labels) == 6 and all(label["steps"][0] == "First." for label in labels)
    assert sorted({label["reference_answer"] for label in labels}) == sorted(row["final_answer"] for row in rows)
    assert all(label["solution_tokens"] > 0 for label in labels)  # sampled, not the rows' own solutions
