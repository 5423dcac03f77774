"""`labeler export`: TRL, Math-Shepherd, OpenRLHF and jsonl formats; misaligned labels refused; TRL's PRMTrainer reads ours."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.inputs.presets import PresetOptions, to_source_row
from schemas import LABELS_SCHEMA
from tests.synthetic_labels import labels_row, write_labels


@pytest.fixture
def job(tmp_path):
    return write_labels(
        tmp_path / "job",
        [
            labels_row("p1", "s1", "What is 2 + 3?", ["2 + 3 = 6.", "The answer is 6."], [0.25, 0.0], [True, False]),
            labels_row("p2", "s2", "What is 1 + 1?", ["Step 1: 1 + 1 = 2.", "Step 2: The answer is 2."], [0.75, 1.0], [True, True]),
            # a first-error search left the last step unlabelled: the boolean formats cut before it
            labels_row("p3", "s3", "What is 4 - 1?", ["4 - 1 = 3.", "So 3.", "The answer is 3."], [1.0, None, None], [True, True, None]),
        ],
    )


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_trl_format_has_boolean_labels_and_warns_about_float_truncation(job, tmp_path, capsys):
    out = tmp_path / "trl.jsonl"
    assert main(["export", str(job), "--format", "trl", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert "truncates float labels" in captured.err
    rows = read_lines(out)
    assert rows[0] == {"prompt": "What is 2 + 3?", "completions": ["2 + 3 = 6.", "The answer is 6."], "labels": [True, False]}
    assert rows[2] == {"prompt": "What is 4 - 1?", "completions": ["4 - 1 = 3.", "So 3."], "labels": [True, True]}
    assert all(isinstance(label, bool) for row in rows for label in row["labels"])
    assert "1 solutions cut" in captured.out

    assert main(["export", str(job), "--format", "trl", "--output", str(tmp_path / "trl.parquet"), "--threshold", "0.5"]) == 0
    table = pq.read_table(tmp_path / "trl.parquet")
    assert table.column("labels").to_pylist()[:2] == [[False, False], [True, True]]


def test_math_shepherd_format_round_trips_through_its_preset(job, tmp_path):
    out = tmp_path / "ms.jsonl"
    assert main(["export", str(job), "--format", "math-shepherd", "--output", str(out)]) == 0
    rows = read_lines(out)
    assert rows[0]["input"] == "What is 2 + 3? Step 1: 2 + 3 = 6. ки\nStep 2: The answer is 6. ки"
    assert rows[0]["label"] == "What is 2 + 3? Step 1: 2 + 3 = 6. +\nStep 2: The answer is 6. -"
    assert rows[1]["input"] == "What is 1 + 1? Step 1: 1 + 1 = 2. ки\nStep 2: The answer is 2. ки"  # no second "Step k:" marker
    # The labeler's own math-shepherd preset reads the export back: same problem, same steps.
    source = to_source_row("math-shepherd", 0, {**rows[1], "answer": "2"}, PresetOptions(answer_column="answer"))
    assert source.problem == "What is 1 + 1?" and source.steps == ("Step 1: 1 + 1 = 2.", "Step 2: The answer is 2.")


def test_jsonl_format_keeps_soft_labels_counts_and_nulls(job, tmp_path):
    out = tmp_path / "labels.jsonl"
    assert main(["export", str(job), "--format", "jsonl", "--output", str(out)]) == 0
    rows = read_lines(out)
    assert rows[0]["soft_labels"] == [0.25, 0.0] and rows[0]["n_correct"] == [1, 0] and rows[0]["first_error"] == 1
    assert rows[2]["soft_labels"] == [1.0, None, None] and rows[2]["label_method"] == ["rollouts", "inferred", "unlabelled"]


def test_misaligned_steps_and_labels_are_refused_before_writing(tmp_path, capsys):
    row = labels_row("p1", "broken", "Q", ["a", "b", "c"], [1.0, 0.0], [True, False])  # 3 steps, 2 labels
    folder = tmp_path / "job" / "labels"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=LABELS_SCHEMA), folder / "part-00000.parquet")
    for format in ("trl", "math-shepherd", "jsonl"):
        out = tmp_path / f"{format}.jsonl"
        assert main(["export", str(tmp_path / "job"), "--format", format, "--output", str(out)]) == 2
        error = capsys.readouterr().err.strip()
        assert error == "labeler export: error: solution broken: soft_labels has 2 entries for 3 steps"
        assert not out.exists()


def test_step_tag_inside_a_step_is_refused_for_math_shepherd(tmp_path, capsys):
    job = write_labels(tmp_path / "job", [labels_row("p", "s", "Q", ["a ки b"], [1.0], [True])])
    assert main(["export", str(job), "--format", "math-shepherd", "--output", str(tmp_path / "ms.jsonl")]) == 2
    assert "ки" in capsys.readouterr().err


def test_bad_output_name_exits_2(job, tmp_path, capsys):
    assert main(["export", str(job), "--format", "trl", "--output", str(tmp_path / "out.csv")]) == 2
    assert ".jsonl or .parquet" in capsys.readouterr().err


def test_trl_prm_trainer_trains_two_steps_on_our_export(job, tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    import datasets
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    from trl.experimental.prm import PRMConfig, PRMTrainer

    out = tmp_path / "trl.jsonl"
    assert main(["export", str(job), "--format", "trl", "--output", str(out)]) == 0
    dataset = datasets.load_dataset("json", data_files=str(out), split="train")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForTokenClassification.from_pretrained(tiny_model_dir, num_labels=2)
    args = PRMConfig(
        output_dir=str(tmp_path / "trl-run"),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-4,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        dataset_num_proc=None,
        max_length=256,
    )
    trainer = PRMTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    # TRL tokenised our rows: one label per step, at the step's last token, everything else ignored.
    labels = trainer.train_dataset[0]["labels"]
    assert [label for label in labels if label != -100] == [1, 0]
    result = trainer.train()
    assert trainer.state.global_step == 2
    assert result.training_loss > 0 and all(entry["loss"] == entry["loss"] for entry in trainer.state.log_history if "loss" in entry)


def test_jsonl_format_keeps_every_count_and_reason_and_a_first_error_known_only_when_it_is(tmp_path):
    rows = [
        labels_row("p1", "s1", "What is 2 + 3?", ["2 + 3 = 6.", "The answer is 6."], [0.25, 0.0], [True, False])
        | {"n_truncated": [2, 0], "n_timeouts": [0, 1]},
        # an unlabelled step before the first hard 0: the first error may be step 0 (Parquet says 1)
        labels_row("p2", "s2", "What is 1 + 1?", ["1 + 1 = 3.", "So 3.", "The answer is 3."], [None, 0.0, 0.0], [None, False, False]),
        # no hard 0, but a step unlabelled: the first error may be there (Parquet says -1)
        labels_row("p3", "s3", "What is 4 - 1?", ["4 - 1 = 3.", "So 3.", "The answer is 3."], [1.0, None, None], [True, True, None]),
    ]
    job = write_labels(tmp_path / "job", rows)
    old = labels_row("p4", "s4", "What is 1 + 2?", ["1 + 2 = 3."], [1.0], [True])
    del old["n_timeouts"]
    old_schema = pa.schema([field for field in LABELS_SCHEMA if field.name != "n_timeouts"])
    pq.write_table(pa.Table.from_pylist([old | {"schema_version": "1.4"}], schema=old_schema), job / "labels" / "zz-old.parquet")
    out = tmp_path / "labels.jsonl"
    assert main(["export", str(job), "--format", "jsonl", "--output", str(out)]) == 0
    by_id = {row["solution_id"]: row for row in read_lines(out)}
    assert by_id["s1"]["n_truncated"] == [2, 0] and by_id["s1"]["n_timeouts"] == [0, 1] and by_id["s1"]["first_error"] == 1
    assert by_id["s2"]["unlabelled_reason"] == ["synthetic", None, None] and by_id["s2"]["first_error"] is None
    assert by_id["s3"]["first_error"] is None
    assert by_id["s4"]["n_timeouts"] is None and by_id["s4"]["first_error"] == -1  # a 1.4 shard has no n_timeouts: not 0
    parquet = tmp_path / "labels.parquet"
    assert main(["export", str(job), "--format", "jsonl", "--output", str(parquet)]) == 0
    assert pq.read_table(parquet).sort_by("solution_id").column("first_error").to_pylist() == [1, None, None, -1]


# OpenRLHF's train_prm (openrlhf<=0.9.5) reads these fields with its --input_key/--label_key defaults,
# and these reward tokens with --reward_tokens + - (the positive first).
OPENRLHF_FIELDS = {"input", "label"}
REWARD_TOKENS = ("+", "-")


@pytest.fixture
def openrlhf_job(tmp_path):
    return write_labels(
        tmp_path / "openrlhf-job",
        [
            labels_row("p1", "s1", "What is 2 + 3?", ["2 + 3 = 6.", "The answer is 6."], [0.25, 0.0], [True, False]),
            labels_row("p2", "s2", "What is 1 + 1?", ["Step 1: 1 + 1 = 2.", "Step 2: The answer is 2."], [0.75, 1.0], [True, True]),
            # unlabelled steps after the first error (as ProcessBench leaves them): cut before them
            labels_row("p3", "s3", "What is 4 - 1?", ["4 - 1 = 5.", "So 5.", "The answer is 5."], [0.0, None, None], [False, None, None]),
            # no label on the first step: nothing to write, left out
            labels_row("p4", "s4", "What is 3 - 1?", ["3 - 1 = 2.", "The answer is 2."], [None, 1.0], [None, True]),
        ],
    )


def test_openrlhf_rows_hold_one_placeholder_per_label_and_never_label_an_unlabelled_step(openrlhf_job, tmp_path, capsys):
    out = tmp_path / "openrlhf.jsonl"
    assert main(["export", str(openrlhf_job), "--format", "openrlhf", "--output", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["solutions"], summary["steps"], summary["solutions_cut"], summary["solutions_skipped"]) == (3, 5, 1, 1)
    rows = read_lines(out)
    assert all(set(row) == OPENRLHF_FIELDS for row in rows)
    assert all(isinstance(row["input"], str) and isinstance(row["label"], list) and row["label"] for row in rows)
    assert all(label in REWARD_TOKENS for row in rows for label in row["label"])
    assert [row["input"].count("ки") for row in rows] == [len(row["label"]) for row in rows] == [2, 2, 1]
    assert rows[0] == {"input": "What is 2 + 3? Step 1: 2 + 3 = 6. ки\nStep 2: The answer is 6. ки", "label": ["+", "-"]}
    assert rows[2] == {"input": "What is 4 - 1? Step 1: 4 - 1 = 5. ки", "label": ["-"]}  # the unlabelled steps: not written
    # the same rows in Parquet, the label a list of strings
    assert main(["export", str(openrlhf_job), "--format", "openrlhf", "--output", str(tmp_path / "o.parquet")]) == 0
    table = pq.read_table(tmp_path / "o.parquet")
    assert table.schema.field("label").type == pa.list_(pa.string()) and table.to_pylist() == rows
    # --threshold: soft >= 0.5 is "+"
    assert main(["export", str(openrlhf_job), "--format", "openrlhf", "--output", str(out), "--threshold", "0.5"]) == 0
    assert [row["label"] for row in read_lines(out)] == [["-", "-"], ["+", "+"], ["-"]]


@pytest.mark.parametrize("placeholder", ["Step", "1", ":"])
def test_a_placeholder_that_the_text_around_the_steps_holds_is_refused(openrlhf_job, tmp_path, placeholder, capsys):
    out = tmp_path / "openrlhf.jsonl"
    argv = ["export", str(openrlhf_job), "--format", "openrlhf", "--output", str(out), "--placeholder", placeholder]
    assert main(argv) == 2 and not out.exists()
    assert f"the placeholder {placeholder!r} occurs" in capsys.readouterr().err


def test_openrlhf_placeholders_are_checked_with_the_models_tokenizer(openrlhf_job, tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "openrlhf.jsonl"
    argv = ["export", str(openrlhf_job), "--format", "openrlhf", "--output", str(out), "--tokenizer", str(tiny_model_dir)]
    # the tiny tokenizer spells ки in 4 tokens: OpenRLHF's reader would refuse it
    assert main(argv) == 2
    assert "reads 'ки' as 4 tokens; OpenRLHF needs one: choose another --placeholder" in capsys.readouterr().err
    assert not out.exists()
    # "x" is one token alone but another one after a space: no placeholder would be found, every label lost
    assert main([*argv, "--placeholder", "x"]) == 2
    assert "finds 0 placeholder tokens 'x' in its input for 2 labels" in capsys.readouterr().err
    # a special token is one token wherever it stands
    assert main([*argv, "--placeholder", "<|im_end|>"]) == 0
    capsys.readouterr()
    rows = read_lines(out)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    placeholder = tokenizer.encode("<|im_end|>", add_special_tokens=False)
    assert len(placeholder) == 1
    for row in rows:
        assert tokenizer(row["input"], add_special_tokens=False)["input_ids"].count(placeholder[0]) == len(row["label"])
    # the placeholder inside a step would read as another step's end
    job = write_labels(tmp_path / "tagged", [labels_row("p", "s", "Q", ["a <|im_end|> b"], [1.0], [True])])
    assert main(["export", str(job), "--format", "openrlhf", "--output", str(out), "--placeholder", "<|im_end|>"]) == 2
    assert "contains the step tag '<|im_end|>'" in capsys.readouterr().err


def test_placeholder_and_tokenizer_are_for_openrlhf_only(job, tmp_path, capsys):
    assert main(["export", str(job), "--format", "trl", "--output", str(tmp_path / "t.jsonl"), "--placeholder", "<x>"]) == 2
    assert "are for --format openrlhf" in capsys.readouterr().err
    assert main(["export", str(job), "--format", "openrlhf", "--output", str(tmp_path / "t.jsonl"), "--placeholder", "+"]) == 2
    assert "other than the reward tokens" in capsys.readouterr().err


def test_export_help_says_which_trl_and_openrlhf_read_the_formats(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "needs trl<=1.13 (gone from 1.14)" in help_text and "openrlhf<=0.9.5" in help_text


def test_a_trl_export_trains_back_in_labeler_train(job, tmp_path, tiny_model_dir):
    """TRL's format both ways: what `export --format trl` writes, `labeler train --labels` reads, labels unchanged."""
    from labeler.prm.stepwise import read_training_rows

    out = tmp_path / "trl.jsonl"
    assert main(["export", str(job), "--format", "trl", "--output", str(out)]) == 0
    read = read_training_rows(str(out))
    assert [(r.problem, r.steps, r.hard_labels) for r in read] == [
        (row["prompt"], tuple(row["completions"]), tuple(row["labels"])) for row in read_lines(out)
    ]
    assert main(["train", "--labels", str(out), "--output", str(tmp_path / "run"), "--model", str(tiny_model_dir), "--epochs", "1",
                 "--max-length", "384", "--min-steps", "0", "--device", "cpu", "--validation-fraction", "0", "--quiet"]) == 0  # fmt: skip
    assert (tmp_path / "run" / "best" / "prm.json").is_file()


def test_steps_not_measured_at_n_are_counted_and_said_in_every_format(tmp_path, capsys):
    """A posterior job's early-stopped and inferred steps: the boolean formats write their hard label (with --threshold
    too: they have no soft label to compare), and the summary counts them apart, by method."""
    posterior = labels_row("p1", "s1", "What is 2 + 3?", ["2 + 3 = 5.", "5 + 1 = 6.", "The answer is 6."], [0.5, None, None],
                           [True, True, True])  # fmt: skip
    posterior |= {"label_method": ["rollouts", "early_stop", "inferred"], "n_correct": [2, 1, 0], "n_rollouts": [4, 1, 0]}
    job = write_labels(tmp_path / "job", [posterior])
    for format in ("trl", "openrlhf", "math-shepherd", "jsonl"):
        out = tmp_path / f"{format}.jsonl"
        assert main(["export", str(job), "--format", format, "--output", str(out), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["not_measured"] == {"early_stop": 1, "inferred": 1}, format
    assert main(["export", str(job), "--format", "trl", "--output", str(tmp_path / "t.jsonl"), "--threshold", "0.75"]) == 0
    captured = capsys.readouterr()
    assert read_lines(tmp_path / "t.jsonl")[0]["labels"] == [False, True, True]
    assert "2 steps not measured at N (1 early_stop, 1 inferred) written from their hard label" in captured.out
    assert "no soft label to compare with --threshold 0.75" in captured.out
