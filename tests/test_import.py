"""`labeler import`: ProcessBench, PRM800K and Math-Shepherd step labels as a labels output that
train, eval, export, report and status read unchanged; --answers joins reference answers."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.importing.config import ImportConfig
from labeler.importing.job import run_import
from labeler.inputs.answers import read_answer_book
from labeler.inputs.human_labels import AFTER_FIRST_ERROR, NEUTRAL_EXCLUDED, NO_RATING
from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.inputs.readers import InputError
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import plan_job
from labeler.records import RowError
from labeler.store.reader import read_labelled_rows
from schemas import SCHEMA_VERSION, validate_labels
from schemas.tables import first_error
from tests.conftest import shared_data, write_jsonl

DATA = Path(__file__).parent / "data"
PRM800K = DATA / "prm800k_sample.jsonl"
MATH_SHEPHERD = DATA / "math_shepherd_sample.jsonl"
ANSWERS = DATA / "math_shepherd_answers.jsonl"


def processbench_sample(tmp_path, erroneous=6, correct=6) -> Path:
    """Rows of the shared ProcessBench gsm8k file, some with a first error and some without."""
    rows = [json.loads(line) for line in shared_data("processbench/gsm8k.jsonl").read_text().splitlines()]
    picked = [r for r in rows if r["label"] >= 0][:erroneous] + [r for r in rows if r["label"] == -1][:correct]
    return write_jsonl(tmp_path / "processbench.jsonl", picked)


def import_cli(capsys, *args) -> dict:
    assert main(["import", *args, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def labels_of(output) -> list[dict]:
    return pq.read_table(Path(output) / "labels").to_pylist()


def rejected_of(output) -> list[dict]:
    return pq.read_table(Path(output) / "rejected").select(["row_index", "field", "reason"]).to_pylist()


def test_processbench_labels_the_steps_up_to_the_first_error(tmp_path, capsys):
    source = processbench_sample(tmp_path)
    summary = import_cli(capsys, "--preset", "processbench", "--input", str(source), "--output", str(tmp_path / "out"))
    assert summary["solutions"] == 12 and summary["label_source"] == "human" and summary["rejected_rows"] == 0
    reference = {row["id"]: row for row in map(json.loads, source.read_text().splitlines())}
    for row in labels_of(tmp_path / "out"):
        first_error, k = reference[row["problem_id"]]["label"], len(row["steps"])
        if first_error < 0:
            assert row["hard_labels"] == [True] * k and row["label_method"] == ["human"] * k
        else:
            assert row["hard_labels"] == [True] * first_error + [False] + [None] * (k - first_error - 1)
            assert row["label_method"][first_error + 1 :] == ["unlabelled"] * (k - first_error - 1)
            assert row["unlabelled_reason"][first_error + 1 :] == [AFTER_FIRST_ERROR] * (k - first_error - 1)
        assert row["first_error"] == first_error and row["steps"] == reference[row["problem_id"]]["steps"]
        assert row["soft_labels"] == [None] * k and row["n_rollouts"] == [0] * k and row["n_correct"] == [0] * k
        assert (row["label_source"], row["source"], row["strategy"], row["schema_version"]) == ("human", "processbench", "import", SCHEMA_VERSION)
        assert (row["thinking_steps"], row["trajectory_verdict"], row["trajectory_label"]) == (0, "unchecked", None)  # no answer checked
        assert row["reference_answer"] == reference[row["problem_id"]]["answer"] and row["generated_tokens"] == 0
    # the ids `labeler label` gives the same rows, so labels of both line up by solution_id
    plan = plan_job(LabelConfig(input=str(source), output=str(tmp_path / "mc"), model="m", preset="processbench"))
    planned = {row.source.row_index: row.given_solution().solution_id for unit in plan.units for row in unit.rows}
    assert {row["row_index"]: row["solution_id"] for row in labels_of(tmp_path / "out")} == planned

    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["input"]["spec"] == str(source) and manifest["model"]["label_source"] == "human"
    assert main(["status", str(tmp_path / "out"), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["state"], status["solutions"], status["rollouts"]) == ("finished", 12, 0)


@pytest.mark.parametrize(
    "neutral, expected, rejected",
    [
        ("exclude", [[True, True, None, True], [True, False], [True, True], [None, True]], 3),
        ("positive", [[True, True, True, True], [True, False], [True, True], [None, True], [True, True]], 2),
        ("negative", [[True, True, False, True], [True, False], [True, True], [None, True], [False, False]], 2),
    ],
)
def test_prm800k_ratings_and_the_neutral_flag(neutral, expected, rejected, tmp_path, capsys):
    summary = import_cli(capsys, "--preset", "prm800k", "--input", str(PRM800K), "--output", str(tmp_path / "out"), "--neutral", neutral)
    rows = sorted(labels_of(tmp_path / "out"), key=lambda row: row["row_index"])
    assert [row["hard_labels"] for row in rows] == expected and summary["rejected_rows"] == rejected
    assert [row["first_error"] for row in rows] == [first_error(e) for e in expected]  # null behind an unlabelled step
    assert rows[3]["unlabelled_reason"][0] == NO_RATING  # a step without a rating
    assert rows[2]["steps"][0] == "12 divided by 4 is 3."  # the rater's own step, rated +1
    if neutral == "exclude":
        assert rows[0]["label_method"][2] == "unlabelled" and rows[0]["unlabelled_reason"][2] == NEUTRAL_EXCLUDED
    reasons = {row["row_index"]: (row["field"], row["reason"]) for row in rejected_of(tmp_path / "out")}
    assert reasons[4][0] == "label" and "bad_problem" in reasons[4][1]
    assert reasons[5] == ("label", "label.steps[0]: rating 5 is not -1, 0 or 1")
    assert (6 in reasons) == (neutral == "exclude") and {row["label_source"] for row in rows} == {"human"}


def test_math_shepherd_tags_are_recorded_as_its_released_automatic_labels(tmp_path, capsys):
    output = tmp_path / "out"
    summary = import_cli(capsys, "--preset", "math-shepherd", "--input", str(MATH_SHEPHERD), "--output", str(output), "--answers", str(ANSWERS))
    rows = {row["row_index"]: row for row in labels_of(output)}
    assert summary["label_source"] == "monte-carlo" and sorted(rows) == [0, 1, 3, 6]
    assert rows[0]["hard_labels"] == [True, True, True] and rows[0]["reference_answer"] == "7"
    assert rows[1]["hard_labels"] == [True, False, False] and rows[1]["reference_answer"] == "30"  # joined, other whitespace
    assert rows[3]["hard_labels"] == [True, False, True] and rows[3]["first_error"] == 1  # kept as released
    for row in rows.values():
        assert row["label_source"] == "monte-carlo" and "not human" in row["model"]
    reasons = {row["row_index"]: (row["field"], row["reason"]) for row in rejected_of(output)}
    assert reasons[2][0] == "answer" and reasons[2][1].endswith(f"the problem is not in --answers {ANSWERS}")
    assert reasons[4] == ("label", "step tag 0 is '?', expected '+' or '-'")  # steps numbered from 0, as in every message
    assert reasons[5][0] == "answer" and "several different answers" in reasons[5][1]
    # without --answers the rows with a wrong final step have no reference answer
    without = tmp_path / "without"
    import_cli(capsys, "--preset", "math-shepherd", "--input", str(MATH_SHEPHERD), "--output", str(without), "--max-rejected-share", "1")
    assert sorted(row["row_index"] for row in labels_of(without)) == [0, 3, 6]
    assert "pass --answers FILE" in {r["row_index"]: r["reason"] for r in rejected_of(without)}[1]


def test_openrlhfs_process_reward_rows_import_with_the_labels_they_were_exported_with(tmp_path, capsys):
    released = tmp_path / "released"
    import_cli(capsys, "--preset", "math-shepherd", "--input", str(MATH_SHEPHERD), "--output", str(released), "--answers", str(ANSWERS))
    exported = tmp_path / "openrlhf.jsonl"
    assert main(["export", str(released), "--format", "openrlhf", "--output", str(exported)]) == 0
    capsys.readouterr()  # the export's summary
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert all(isinstance(row["label"], list) for row in rows)  # OpenRLHF's layout: a list of reward tokens
    rows.append(dict(rows[0], label=rows[0]["label"][:-1]))  # one token short
    rows.append(dict(rows[0], label=["+"] * (len(rows[0]["label"]) - 1) + ["?"]))
    write_jsonl(exported, rows)
    again = tmp_path / "again"
    import_cli(capsys, "--preset", "math-shepherd", "--input", str(exported), "--output", str(again), "--answers", str(ANSWERS),
               "--max-rejected-share", "1")  # fmt: skip
    before = sorted(row["hard_labels"] for row in labels_of(released))
    assert sorted(row["hard_labels"] for row in labels_of(again)) == before
    reasons = sorted(reason for _, field, reason in map(dict.values, rejected_of(again)) if field == "label")
    assert reasons[0].startswith(f"{len(rows[0]['label']) - 1} reward tokens for {len(rows[0]['label'])}") and "is '?'" in reasons[1]


def test_labeling_math_shepherd_joins_the_answers_file_too(tmp_path):
    config = LabelConfig(input=str(MATH_SHEPHERD), output=str(tmp_path / "o"), model="m", preset="math-shepherd", answers=str(ANSWERS))
    plan = plan_job(config)
    answers = {row.source.row_index: row.source.reference_answer for unit in plan.units for row in unit.rows}
    assert answers == {0: "7", 1: "30", 3: "30", 4: "7", 6: "8"}  # row 4's label is broken, but labelling does not read its tags
    assert {row.row_index: row.field for row in plan.rejected} == {2: "answer", 5: "answer"}
    assert "answers" not in LabelConfig(input="i", output="o", model="m").output_settings()  # old jobs keep their config hash
    assert config.config_hash() != LabelConfig(input=str(MATH_SHEPHERD), output="o", model="m", preset="math-shepherd").config_hash()


def test_an_answers_file_in_gsm8k_format_and_one_without_answers(tmp_path):
    gsm8k = write_jsonl(tmp_path / "gsm8k.jsonl", [{"question": "What is\n2 + 2?", "answer": "2 + 2 = 4\n#### 4"}])
    book = read_answer_book(str(gsm8k))
    assert book.answer_for("What is 2 + 2? ", "why") == "4"
    # a ProcessBench row from the hub has no answer column: the book fills it in, the row's own answer comes first
    row = {"id": "pb-0", "problem": "What is 2 + 2?", "steps": ["2 + 2 = 4."], "label": -1}
    with_book = PresetOptions(answers=book)
    assert to_source_row("processbench", 0, row, with_book).reference_answer == "4"
    assert to_source_row("processbench", 0, row | {"answer": "5"}, with_book).reference_answer == "5"
    with pytest.raises(RowError, match="missing column 'answer', and the problem is not in --answers"):
        to_source_row("processbench", 0, row | {"problem": "What is 3 + 3?"}, with_book)
    useless = write_jsonl(tmp_path / "useless.jsonl", [{"problem": "What is 1 + 1?", "answer": ""}])
    with pytest.raises(InputError, match="--answers .*useless.jsonl: no row with a problem and an answer; e.g. row 0: answer"):
        read_answer_book(str(useless))


def test_a_rerun_resumes_and_other_settings_are_refused(tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--preset", "prm800k", "--input", str(PRM800K), "--output", output, "--shard-size", "2"]
    first = import_cli(capsys, *args)
    assert (first["units_total"], first["units_run_now"]) == (2, 2)
    before = labels_of(output)
    again = import_cli(capsys, *args)
    assert again["units_run_now"] == 0 and labels_of(output) == before
    assert main(["import", *args, "--neutral", "positive", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labeler import: error:") and 'neutral: "exclude" -> "positive"' in err
    assert import_cli(capsys, *args, "--neutral", "positive", "--overwrite")["solutions"] == 5


def test_bad_usage_and_bad_input_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:
        main(["import", "--preset", "gsm8k", "--input", str(PRM800K), "--output", str(tmp_path / "o")])
    assert usage.value.code == 2 and "invalid choice: 'gsm8k'" in capsys.readouterr().err
    assert main(["import", "--preset", "prm800k", "--input", str(tmp_path / "no.jsonl"), "--output", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    # ProcessBench rows read as Math-Shepherd: every row rejected, the input refused with the commonest reason
    source = processbench_sample(tmp_path, erroneous=2, correct=1)
    assert main(["import", "--preset", "math-shepherd", "--input", str(source), "--output", str(tmp_path / "o"), "--quiet"]) == 2
    assert "every row rejected (3 of 3, read as math-shepherd)" in capsys.readouterr().err
    assert len(rejected_of(tmp_path / "o")) == 3 and not (tmp_path / "o" / "manifest.json").exists()  # its rows, no job
    assert main(["import", "--preset", "prm800k", "--input", str(PRM800K), "--output", str(tmp_path / "o"), "--shard-size", "0"]) == 2
    assert "--shard-size must be >= 1" in capsys.readouterr().err


def test_import_config_shares_the_input_settings_of_label():
    label_help = {name: f.metadata["help"] for name, f in LabelConfig.__dataclass_fields__.items()}
    for name in ("answers", "limit", "max_row_chars", "max_rejected_share", "columns", "split_rule"):
        assert ImportConfig.__dataclass_fields__[name].metadata["help"] == label_help[name]


def test_imported_processbench_labels_train_eval_export_and_report(tiny_model_dir, tmp_path, capsys):
    source = processbench_sample(tmp_path)
    output = tmp_path / "imported"
    run_import(ImportConfig(input=str(source), output=str(output), preset="processbench"), progress_enabled=False)
    validate_labels(pq.read_table(output / "labels"))

    # train: human steps train on their hard labels (soft is null), unlabelled ones are masked
    run = tmp_path / "run"
    code = main(["train", "--labels", str(output), "--output", str(run), "--model", str(tiny_model_dir), "--epochs", "1",
                 "--batch-size", "4", "--max-length", "1024", "--min-steps", "0", "--device", "cpu", "--validation-fraction", "0.25", "--json", "--quiet"])  # fmt: skip
    assert code == 0 and json.loads(capsys.readouterr().out)["epochs_done"] == 1
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["val_steps"] > 0

    # eval: the labels are the reference's own, so they agree with it exactly
    assert main(["eval", "--labels", str(output), "--reference", str(source), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (subset,) = report["subsets"]
    assert report["label_source"] == "human" and subset["matched"] == 12 and subset["f1"] == 1.0

    # export: the boolean formats stop before the first unlabelled step, just after the first error
    trl = tmp_path / "trl.jsonl"
    assert main(["export", str(output), "--format", "trl", "--output", str(trl)]) == 0
    capsys.readouterr()
    first_errors = {row["problem"]: row["label"] for row in map(json.loads, source.read_text().splitlines())}
    for record in map(json.loads, trl.read_text().splitlines()):
        first_error = first_errors[record["prompt"]]
        assert record["labels"] == ([True] * len(record["completions"]) if first_error < 0 else [True] * first_error + [False])

    # report: no soft labels, no rollouts, every solution's first error
    assert main(["report", str(output)]) == 0
    page = Path(capsys.readouterr().out.strip()).read_text()
    assert "<th>label sources</th><td class=number>human: 12</td>" in page
    rows = read_labelled_rows(output)
    assert {row.label_source for row in rows} == {"human"} and sum(row.first_error >= 0 for row in rows) == 6


def test_a_row_that_cannot_be_imported_is_found_by_bisection_and_only_it_is_rejected(tmp_path, capsys, monkeypatch):
    from labeler.importing import job as import_job
    from labeler.store.status import job_status

    args = ("--preset", "prm800k", "--input", str(PRM800K), "--neutral", "positive")
    import_cli(capsys, *args, "--output", str(tmp_path / "clean"))
    build_row = import_job._labels_row

    def poisoned(planned, *rest):
        if planned.source.row_index == 2:
            raise KeyError("a bug this one row trips")
        return build_row(planned, *rest)

    monkeypatch.setattr(import_job, "_labels_row", poisoned)
    summary = import_cli(capsys, *args, "--output", str(tmp_path / "out"))
    key = lambda row: row["row_index"]  # noqa: E731
    clean = [row for row in sorted(labels_of(tmp_path / "clean"), key=key) if row["row_index"] != 2]
    assert sorted(labels_of(tmp_path / "out"), key=key) == clean
    assert summary["solutions"] == 4 and summary["rejected_rows"] == 3  # the two rows the input rejects, and this one
    [poison] = [row for row in pq.read_table(tmp_path / "out" / "rejected").to_pylist() if row["row_index"] == 2]
    assert poison["stage"] == "import" and "KeyError" in poison["reason"] and "a bug this one row trips" in poison["reason"]
    assert job_status(str(tmp_path / "out"))["units_failed"] == 1


def test_report_knows_an_import_written_before_imports_recorded_their_kind(tmp_path, capsys):
    from labeler.evaluation.report import read_inputs
    from labeler.store.manifest import JOB_KIND_KEY

    output = tmp_path / "out"
    import_cli(capsys, "--preset", "processbench", "--input", str(processbench_sample(tmp_path, 2, 2)), "--output", str(output))
    manifest = json.loads((output / "manifest.json").read_text())
    del manifest[JOB_KIND_KEY]  # an older import: known by its model record (job_kind), not as a label job
    (output / "manifest.json").write_text(json.dumps(manifest))
    assert read_inputs(str(output)).manifest_rollouts is None  # an import samples no rollouts: none to count
