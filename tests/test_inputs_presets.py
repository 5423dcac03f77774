import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeler.inputs import readers as inputs
from labeler.ids import stable_id
from labeler.inputs.readers import InputError, input_fingerprint, parse_hub_spec, read_rows
from labeler.inputs.presets import (
    PRESET_NAMES,
    PresetOptions,
    detect_preset,
    last_boxed,
    resolve_preset,
    to_source_row,
)
from labeler.records import RowError
from tests.conftest import shared_data


GSM8K_ROW = {
    "question": "Tom has 1,000 apples and buys 2,500 more. How many now?",
    "answer": "He buys 2,500 apples.\n"
    "So he has 1000+2500=<<1000+2500=3500>>3,500 apples.\n#### 3,500",
    "id": "gsm-7",
}
MATH_ROW = {
    "problem": "What is $\\frac{1}{2} + \\frac{1}{2}$?",
    "solution": "Add the halves.\n\nThe sum is $\\boxed{\\frac{2}{2}} = \\boxed{1}$.",
    "answer": "1",
}
PROCESSBENCH_ROW = {
    "id": "math-3",
    "generator": "some-model",
    "problem": "Compute 2+3.",
    "steps": ["2+3 is 5.", "So the answer is \\boxed{5}."],
    "final_answer_correct": True,
    "label": -1,
    "answer": "5",
}
SHEPHERD_TEXT = (
    "Ann has 3 pens and buys 2. How many? Step 1: 3+2=<<3+2=5>>5 ки\nStep 2: The answer is: 5 ки"
)
MATH_SHEPHERD_ROW = {
    "input": SHEPHERD_TEXT,
    "label": SHEPHERD_TEXT.replace("ки", "+"),
    "task": "GSM8K",
}
PRM800K_ROW = {
    "labeler": "x",
    "question": {"problem": "What is 6 times 7?", "ground_truth_answer": "42"},
    "label": {
        "steps": [
            {
                "completions": [{"text": "6 times 7 is 42.", "rating": 1}],
                "human_completion": None,
                "chosen_completion": 0,
            },
            {
                "completions": [{"text": "Wrong turn.", "rating": -1}],
                "human_completion": {"text": "So the answer is 42.", "rating": None},
                "chosen_completion": None,
            },
            {
                "completions": [{"text": "Extra.", "rating": -1}, {"text": "Other."}],
                "human_completion": None,
                "chosen_completion": None,
            },
            {
                "completions": [{"text": "Never reached."}],
                "human_completion": None,
                "chosen_completion": 0,
            },
        ],
        "finish_reason": "found_error",
    },
}
DEFAULT = PresetOptions()


def read(preset, row, **options):
    return to_source_row(preset, 4, row, PresetOptions(**options))


def rejected_field(preset, row, **options):
    with pytest.raises(RowError) as caught:
        read(preset, row, **options)
    return caught.value.field


def write_jsonl(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


# --- reading files ------------------------------------------------------------------------


def test_jsonl_skips_blank_lines_without_counting_them(tmp_path):
    spec = write_jsonl(tmp_path / "in.jsonl", ['{"a": 1}', "", "   ", '{"a": 2}'])
    rows = list(read_rows(spec))
    assert [(r.row_index, r.data) for r in rows] == [(0, {"a": 1}), (1, {"a": 2})]
    assert rows[1].error is None and json.loads(rows[1].raw) == {"a": 2}


def test_malformed_jsonl_lines_are_row_errors_and_later_rows_still_read(tmp_path):
    spec = tmp_path / "in.jsonl"
    spec.write_bytes(b'{"a": 1}\n{"a": \n[1, 2]\n\xff\xfe\n{"a": 5}\n')
    rows = list(read_rows(str(spec)))
    assert [r.row_index for r in rows] == [0, 1, 2, 3, 4]
    assert [r.error.field if r.error else None for r in rows] == [None, "row", "row", "row", None]
    assert "not valid JSON" in rows[1].error.reason and rows[1].raw == '{"a":'
    assert "JSON object" in rows[2].error.reason and "UTF-8" in rows[3].error.reason
    assert rows[4].data == {"a": 5}


def test_limit_reads_the_first_rows_only(tmp_path):
    spec = write_jsonl(tmp_path / "in.jsonl", [json.dumps({"a": i}) for i in range(10)])
    assert [r.data["a"] for r in read_rows(spec, limit=3)] == [0, 1, 2]
    assert list(read_rows(spec, limit=0)) == []


def test_json_array_of_objects(tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps([{"a": 1}, "oops", {"a": 3}]))
    rows = list(read_rows(str(path), limit=3))
    assert [r.data for r in rows] == [{"a": 1}, None, {"a": 3}]
    assert rows[1].error.field == "row"


@pytest.mark.parametrize("content", ['{"a": 1}', '["x", "y"]', '{"a": 1}\n{"a": 2}\n', "[1, 2"])
def test_json_that_is_not_an_array_of_objects_is_an_input_error(tmp_path, content):
    path = tmp_path / "in.json"
    path.write_text(content)
    with pytest.raises(InputError):
        read_rows(str(path))


def test_parquet_is_read_in_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "_PARQUET_BATCH_ROWS", 4)
    path = tmp_path / "in.parquet"
    table = pa.table({"problem": [f"p{i}" for i in range(10)], "steps": [["s1", "s2"]] * 10})
    pq.write_table(table, path, row_group_size=3)
    rows = list(read_rows(str(path)))
    assert [r.row_index for r in rows] == list(range(10))
    assert rows[9].data == {"problem": "p9", "steps": ["s1", "s2"]}
    assert [r.data["problem"] for r in read_rows(str(path), limit=5)] == [
        "p0",
        "p1",
        "p2",
        "p3",
        "p4",
    ]


def test_broken_parquet_is_an_input_error(tmp_path):
    path = tmp_path / "in.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="Parquet"):
        read_rows(str(path))


@pytest.mark.parametrize("name", ["missing.jsonl", "data.csv", "folder.jsonl"])
def test_unreadable_inputs_are_input_errors(tmp_path, name):
    (tmp_path / "data.csv").write_text("a,b\n")
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(InputError):
        read_rows(str(tmp_path / name))


def test_hub_spec_parsing():
    assert parse_hub_spec("hf:openai/gsm8k:main@test") == ("openai/gsm8k", "main", "test")
    assert parse_hub_spec("hf:HuggingFaceH4/MATH-500@test[:10]") == (
        "HuggingFaceH4/MATH-500",
        None,
        "test[:10]",
    )
    assert parse_hub_spec("hf:Qwen/ProcessBench:gsm8k") == ("Qwen/ProcessBench", "gsm8k", "train")
    with pytest.raises(InputError):
        parse_hub_spec("hf:@test")


def test_hub_dataset_loads_through_datasets(monkeypatch):
    import datasets

    calls = []

    def fake_load(name, config, split, **kwargs):
        calls.append((name, config, split, kwargs))
        return [{"question": "q", "answer": "a"}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    assert [r.data for r in read_rows("hf:openai/gsm8k:main@test")] == [
        {"question": "q", "answer": "a"}
    ]
    list(read_rows("hf:org/other", trust_remote_code=True))
    assert calls == [
        ("openai/gsm8k", "main", "test", {}),
        ("org/other", None, "train", {"trust_remote_code": True}),
    ]


def test_hub_dataset_that_cannot_load_is_an_input_error(monkeypatch):
    import datasets

    def failing_load(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", failing_load)
    with pytest.raises(InputError, match="offline"):
        read_rows("hf:no/such-dataset")


def test_fingerprint_follows_content_not_path(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", ['{"a": 1}'])
    copy = write_jsonl(tmp_path / "b.jsonl", ['{"a": 1}'])
    changed = write_jsonl(tmp_path / "c.jsonl", ['{"a": 2}'])
    assert input_fingerprint(first) == input_fingerprint(copy) != input_fingerprint(changed)
    assert input_fingerprint("hf:openai/gsm8k:main@test") == "hf:openai/gsm8k:main@test"
    with pytest.raises(InputError):
        input_fingerprint(str(tmp_path / "missing.jsonl"))


# --- presets ------------------------------------------------------------------------------


def test_gsm8k():
    row = read("gsm8k", GSM8K_ROW)
    assert row.problem == GSM8K_ROW["question"]
    assert row.reference_answer == "3500"
    assert row.steps == ("He buys 2,500 apples.", "So he has 1000+2500=3,500 apples.")
    assert (row.problem_id, row.row_index, row.source) == ("gsm-7", 4, "gsm8k")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"answer": "He has 3500 apples."}, "answer"),
        ({"answer": "He has 3500 apples.\n####   "}, "answer"),
        ({"answer": "#### 3500"}, "steps"),
        ({"answer": None}, "answer"),
        ({"question": ""}, "problem"),
        ({"question": ["not", "text"]}, "problem"),
    ],
)
def test_gsm8k_bad_rows(change, field):
    assert rejected_field("gsm8k", GSM8K_ROW | change) == field


def test_math_takes_the_answer_column_and_splits_the_solution():
    row = read("math", MATH_ROW)
    assert row.reference_answer == "1"
    assert row.steps == ("Add the halves.", "The sum is $\\boxed{\\frac{2}{2}} = \\boxed{1}$.")
    assert row.problem_id == stable_id(MATH_ROW["problem"]) and row.source == "math"


def test_math_falls_back_to_the_last_boxed_answer():
    solution = "So $x = \\boxed{\\frac{1}{\\sqrt{2}}}$, not \\boxed{2}... wait: \\boxed{\\{1, 2\\}}"
    row = read("math-500", {"problem": "p", "solution": solution})
    assert row.reference_answer == "\\{1, 2\\}" and row.source == "math"
    assert last_boxed("$\\boxed{\\frac{1}{\\sqrt{2}}}$") == "\\frac{1}{\\sqrt{2}}"
    assert last_boxed("\\boxed{1} and \\boxed{unclosed") == "1"
    assert last_boxed("no box") is None


def test_math_without_solution_leaves_steps_to_sample():
    assert read("math", {"problem": "p", "answer": 42}).steps is None
    assert read("math", {"problem": "p", "answer": 42}).reference_answer == "42"
    assert read("math", {"problem": "p", "answer": 2.0, "solution": None}).reference_answer == "2"
    assert read("math", {"problem": "p", "answer": 0.5}).reference_answer == "0.5"


def test_math_split_rule_comes_from_the_options():
    row = read("math", MATH_ROW | {"solution": "a\nb\n\nc"}, split_rule="newline")
    assert row.steps == ("a", "b", "c")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"answer": None, "solution": "No box here."}, "answer"),
        ({"answer": "", "solution": "x"}, "answer"),
        ({"answer": True}, "answer"),
        ({"solution": " \n\n "}, "solution"),
        ({"solution": 12}, "solution"),
        ({"problem": 3}, "problem"),
        ({"problem": None}, "problem"),
    ],
)
def test_math_bad_rows(change, field):
    assert rejected_field("math", MATH_ROW | change) == field


def test_processbench():
    row = read("processbench", PROCESSBENCH_ROW)
    assert row.problem_id == "math-3"
    assert row.steps == ("2+3 is 5.", "So the answer is \\boxed{5}.")
    assert row.reference_answer == "5" and row.source == "processbench"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"steps": []}, "steps"),
        ({"steps": ["ok", ""]}, "steps"),
        ({"steps": ["ok", 5]}, "steps"),
        ({"steps": "one string"}, "steps"),
        ({"steps": None}, "steps"),
        ({"answer": "  "}, "answer"),
        ({"problem": ""}, "problem"),
        ({"id": {"nested": 1}}, "id"),
    ],
)
def test_processbench_bad_rows(change, field):
    assert rejected_field("processbench", PROCESSBENCH_ROW | change) == field


def test_math_shepherd_reads_the_answer_of_a_correct_final_step():
    row = read("math-shepherd", MATH_SHEPHERD_ROW)
    assert row.problem == "Ann has 3 pens and buys 2. How many?"
    assert row.steps == ("Step 1: 3+2=<<3+2=5>>5", "Step 2: The answer is: 5")
    assert row.reference_answer == "5"
    assert row.problem_id == stable_id(row.problem)


def test_math_shepherd_takes_the_last_stated_answer():
    text = "Q? Step 1: The answer is: 4? No. ки\nStep 2: 2+3=5. The answer is: 5 ки"
    row = read("math-shepherd", {"input": text, "label": text.replace("ки", "+")})
    assert row.reference_answer == "5"


def test_math_shepherd_with_a_wrong_final_step_needs_an_answer_column():
    wrong = MATH_SHEPHERD_ROW | {"label": MATH_SHEPHERD_ROW["label"][:-1] + "-", "gold": 6}
    with pytest.raises(RowError) as caught:
        read("math-shepherd", wrong)
    assert caught.value.field == "answer" and caught.value.reason.startswith("no reference answer")
    assert read("math-shepherd", wrong, answer_column="gold").reference_answer == "6"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"input": "A question without steps. ки"}, "steps"),
        ({"input": "Q? Step 1: no tags at all"}, "steps"),
        ({"input": "Step 1: 5 ки"}, "problem"),
        ({"input": "Q? Step 1: 3+2=5 ки\nStep 2: so five ки"}, "answer"),
        ({"input": "Q? Step 1: 3+2=5 ки\nStep 2: The answer is: ки"}, "answer"),
        ({"label": None}, "answer"),
        ({"input": None}, "problem"),
    ],
)
def test_math_shepherd_bad_rows(change, field):
    assert rejected_field("math-shepherd", MATH_SHEPHERD_ROW | change) == field


def test_prm800k_follows_chosen_then_human_then_first_completion():
    row = read("prm800k", PRM800K_ROW)
    assert row.problem == "What is 6 times 7?" and row.reference_answer == "42"
    assert row.steps == ("6 times 7 is 42.", "So the answer is 42.", "Extra.")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"question": "text"}, "problem"),
        ({"question": {"problem": "p", "ground_truth_answer": None}}, "answer"),
        ({"question": {"ground_truth_answer": "1"}}, "problem"),
        ({"label": {"steps": []}}, "steps"),
        ({"label": {"finish_reason": "give_up"}}, "steps"),
        ({"label": {"steps": [{"completions": [{"text": "a"}], "chosen_completion": 3}]}}, "steps"),
        ({"label": {"steps": [{"completions": [{"text": ""}], "chosen_completion": 0}]}}, "steps"),
    ],
)
def test_prm800k_bad_rows(change, field):
    assert rejected_field("prm800k", PRM800K_ROW | change) == field


def test_columns_preset():
    row = {
        "uid": 17,
        "prompt": " Add 1 and 1. ",
        "gold": "2",
        "trace": ["1+1=2", "done"],
        "text": "a\n\nb",
    }
    flags = {"problem_column": "prompt", "answer_column": "gold", "id_column": "uid"}
    with_steps = read("columns", row, steps_column="trace", **flags)
    assert (with_steps.problem, with_steps.problem_id, with_steps.steps) == (
        "Add 1 and 1.",
        "17",
        ("1+1=2", "done"),
    )
    assert read("columns", row, solution_column="text", **flags).steps == ("a", "b")
    assert read("columns", row, **flags).steps is None
    assert rejected_field("columns", row | {"uid": None}, **flags) == "id"
    assert rejected_field("columns", row | {"gold": None}, **flags) == "answer"
    assert rejected_field("columns", {"uid": 1, "gold": "2"}, **flags) == "problem"


def test_column_flags_override_a_preset():
    row = {"q": "What is 1+1?", "answer": "1+1=2\n#### 2", "id": "x"}
    assert read("gsm8k", row, problem_column="q").problem == "What is 1+1?"
    processbench = PROCESSBENCH_ROW | {"text": "one\n\ntwo"}
    assert read("processbench", processbench, solution_column="text").steps == ("one", "two")


def test_overlong_rows_are_rejected():
    assert rejected_field("processbench", PROCESSBENCH_ROW, max_row_chars=20) == "row"
    assert rejected_field("math", MATH_ROW | {"solution": "x" * 100}, max_row_chars=50) == "row"


# --- choosing a preset ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "row, preset",
    [
        (GSM8K_ROW, "gsm8k"),
        (MATH_ROW, "math"),
        ({"problem": "p", "answer": "1"}, "math"),
        (PROCESSBENCH_ROW, "processbench"),
        ({"problem": "p", "steps": ["a"], "id": "x"}, "processbench"),  # the hub's copy: no answer
        (MATH_SHEPHERD_ROW, "math-shepherd"),
        (PRM800K_ROW, "prm800k"),
    ],
)
def test_detect_preset(row, preset):
    assert detect_preset(row) == preset
    assert resolve_preset(None, row, DEFAULT) == preset


def test_detect_preset_refuses_ambiguous_rows():
    with pytest.raises(InputError, match=r"several presets \(gsm8k, math\)"):
        detect_preset(GSM8K_ROW | MATH_ROW)


def test_detect_preset_refuses_unknown_rows():
    with pytest.raises(InputError, match="pass --preset or column flags"):
        detect_preset({"prompt": "p", "completion": "c"})


def test_resolve_preset():
    assert resolve_preset("math-500", None, DEFAULT) == "math"
    assert (
        resolve_preset(None, None, PresetOptions(problem_column="q", answer_column="a"))
        == "columns"
    )
    assert resolve_preset("gsm8k", None, PresetOptions(problem_column="q")) == "gsm8k"


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("gsm9k", DEFAULT, ", ".join(PRESET_NAMES)),
        (None, PresetOptions(problem_column="q"), "needs --problem-column and --answer-column"),
        ("prm800k", PresetOptions(steps_column="s"), "does not take --steps-column"),
        ("math", PresetOptions(steps_column="s", solution_column="t"), "not both"),
        ("math", PresetOptions(split_rule="sentences"), "unknown split rule"),
        (None, DEFAULT, "no readable row"),
    ],
)
def test_resolve_preset_errors(name, options, message):
    with pytest.raises(InputError, match=message):
        resolve_preset(name, None, options)


# --- the shared public data -------------------------------------------------------------------


def read_all(spec):
    rows = list(read_rows(spec))
    preset = resolve_preset(None, rows[0].data, DEFAULT)
    accepted, rejected = [], []
    for raw in rows:
        try:
            accepted.append(to_source_row(preset, raw.row_index, raw.data, DEFAULT))
        except RowError as error:
            rejected.append((raw.row_index, error))
    return preset, accepted, rejected


def shared_file(relative):
    return str(shared_data(relative))


def test_all_of_processbench_reads_without_rejections():
    total = 0
    for name in ("gsm8k", "math"):
        preset, accepted, rejected = read_all(shared_file(f"processbench/{name}.jsonl"))
        assert preset == "processbench" and rejected == []
        assert all(row.steps and row.reference_answer for row in accepted)
        total += len(accepted)
    assert total == 1400


@pytest.mark.parametrize(
    "relative, preset, count",
    [("gsm8k/test.jsonl", "gsm8k", 1319), ("math500/test.jsonl", "math", 500)],
)
def test_gsm8k_and_math500_read_without_rejections(relative, preset, count):
    detected, accepted, rejected = read_all(shared_file(relative))
    assert (detected, len(accepted), rejected) == (preset, count, [])
    assert all(row.steps for row in accepted)


def test_math_shepherd_in_russian_splits_at_the_tags_only_and_its_labels_line_up():
    from labeler.inputs.human_labels import math_shepherd_tags

    text = "У Ники 3 яблока. Сколько? Step 1: У Ники 3 яблока, яблоки не съедены. ки\nStep 2: The answer is: 3 ки"
    label = text.replace(" ки\n", " +\n").replace(" ки", " -")  # "ки" of "Ники" and "яблоки" is text: it stays
    row = read("math-shepherd", {"input": text, "label": label, "gold": "3"}, answer_column="gold")
    assert row.problem == "У Ники 3 яблока. Сколько?"
    assert row.steps == ("Step 1: У Ники 3 яблока, яблоки не съедены.", "Step 2: The answer is: 3")
    assert math_shepherd_tags({"input": text, "label": label}, len(row.steps)) == (True, False)


def test_math_shepherd_tag_messages_number_steps_from_0():
    from labeler.inputs.human_labels import math_shepherd_tags
    from labeler.records import RowError

    text = "Step 1: a ки\nStep 2: b ки"
    with pytest.raises(RowError, match=r"step tag 1 is '\?'"):
        math_shepherd_tags({"input": text, "label": "Step 1: a +\nStep 2: b ?"}, 2)
    with pytest.raises(RowError, match="differs from 'input' before step tag 1:"):
        math_shepherd_tags({"input": text, "label": "Step 1: a +\nStep 9: b +"}, 2)


@pytest.mark.parametrize(
    "text",
    [
        "Tom has 3. Step 1: He buys 5 more, so 3 + 5 = 8 ки.\nStep 2: The answer is: 8 ки",  # a tag before punctuation
        "Tom has 3. Step 1: He buys 4 more, so 3 + 4 = 7ки\nStep 2: The answer is: 7 ки",  # a tag touching a digit
    ],
)
def test_a_math_shepherd_tag_that_ends_no_step_refuses_the_row_never_two_steps_read_as_one(text):
    with pytest.raises(RowError, match=r"step 0 holds 'ки' where no step ends") as caught:
        read("math-shepherd", {"input": text, "label": text.replace("ки", "+")})
    assert caught.value.field == "steps"


@pytest.mark.parametrize(
    "text, field",
    [
        ("Solve: x ки y? Step 1: x = 2 ки\nStep 2: The answer is: 4 ки", "problem"),  # labels would be read one step off
        ("Solve: x + y? Step 1: x = 2 ки\nStep 2: The answer is: 4 ки\nDone.", "steps"),  # a step without its tag
    ],
)
def test_a_math_shepherd_row_whose_tags_and_steps_do_not_line_up_is_refused(text, field):
    row = {"input": text, "label": text.replace("ки", "+"), "answer": "4"}
    assert rejected_field("math-shepherd", row, answer_column="answer") == field
