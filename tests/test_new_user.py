"""What a new user trips on (issue 41, items 15-22): each output says what it counts and why, in one
convention. The scripted generator (tests/fakes.py) stands in for the engine, which is not the point here."""

import json
import logging

import pytest

import workers.vllm_generator
from labeler.cli import main
from labeler.inputs.readers import InputError, input_fingerprint, read_rows
from tests.conftest import shared_data, status_of, write_jsonl
from tests.fakes import CUT_MARKER, ScriptedGenerator

ANSWERS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 5)}


def rows(n: int = 4, cut: int = 0) -> list[dict]:
    """n rows of two steps; the first `cut` have a first step whose rollouts all run out of their budget."""
    items = list(ANSWERS.items())[:n]
    return [
        {"problem": problem, "answer": answer, "steps": [f"{CUT_MARKER}! we add." if k < cut else "We add.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(items)
    ]


@pytest.fixture
def scripted(monkeypatch):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))


def label(tmp_path, data, *flags) -> list[str]:
    return ["label", "--input", str(data), "--output", str(tmp_path / "out"), "--model", "scripted", "--rollouts", "2", *flags]


def one_error(capsys, args) -> str:
    capsys.readouterr()
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# -- 18: why rows were left out, one denominator, reasons shown ------------------------------------
def test_a_json_error_that_names_its_position_reads_once(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"problem": "a\tb", "answer": "1"}\n{"problem": "x", "answer": \n')  # a raw tab; a cut line
    reasons = [row.error.reason for row in read_rows(str(path))]
    assert reasons[0].startswith("not valid JSON: Invalid control character") and "at at" not in reasons[0], reasons
    assert reasons[1].startswith("not valid JSON: Expecting value at column "), reasons


def test_status_counts_rows_rejected_on_input_in_its_denominator_and_label_shows_their_reasons(tmp_path, scripted, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(3) + [{"problem": "What is 9 plus 9?", "steps": ["18."]}])  # no answer
    assert main(label(tmp_path, data, "--quiet")) == 0
    assert "warning: row 3 rejected: answer: " in capsys.readouterr().err  # 0-based, as in rejected/
    status, text = status_of(tmp_path / "out", capsys)
    assert (status["input_rows_read"], status["input_rows_rejected"]) == (4, 1)
    assert "rows      : 4/4 input rows" in text and "1 rejected on input" in text


def test_an_import_refused_for_its_rejected_rows_names_each_reason(tmp_path, capsys):
    rows_ = [{"problem": "p", "steps": ["a"], "label": -1}] * 2 + [{"steps": ["a"], "answer": "1", "label": -1}] * 2
    data = write_jsonl(tmp_path / "bad.jsonl", rows_)
    line = one_error(capsys, ["import", "--preset", "processbench", "--input", str(data), "--output", str(tmp_path / "out")])
    assert line.count("(e.g. row ") == 2, line  # both reasons, each with a row


def test_export_says_why_solutions_were_left_out(tmp_path, scripted, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(4, cut=1))  # the first solution's first step: every rollout cut
    assert main(label(tmp_path, data, "--quiet")) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "out"), "--format", "trl", "--output", str(tmp_path / "trl.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "1 left out: their first step is unlabelled" in out, out


# -- 20: another job kind, train's changes -----------------------------------------------------------
def test_an_import_into_a_label_output_is_one_line_naming_both_kinds(tmp_path, scripted, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    assert main(label(tmp_path, data, "--quiet")) == 0
    source = shared_data("processbench/gsm8k.jsonl")
    line = one_error(capsys, ["import", "--preset", "processbench", "--input", str(source), "--limit", "4", "--output", str(tmp_path / "out")])
    assert "holds the output of `labeler label`, not of `labeler import`" in line, line
    # and the other way round: a label job into an import's output
    imported = tmp_path / "imported"
    assert main(["import", "--preset", "processbench", "--input", str(source), "--limit", "4", "--output", str(imported), "--quiet"]) == 0
    line = one_error(capsys, ["label", "--input", str(data), "--output", str(imported), "--model", "scripted", "--quiet"])
    assert "holds the output of `labeler import`, not of `labeler label`" in line, line


# -- 22: a folder as the input; an import has no rate ----------------------------------------------
def test_a_folder_is_read_as_its_files_of_one_kind_in_name_order(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "b.jsonl", [{"n": 2}, {"n": 3}])
    write_jsonl(folder / "a.jsonl", [{"n": 0}, {"n": 1}])
    (folder / "README.md").write_text("not an input")
    read = [(row.row_index, row.data["n"]) for row in read_rows(str(folder))]
    assert read == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert input_fingerprint(str(folder)).startswith("folder:")
    before = input_fingerprint(str(folder))
    write_jsonl(folder / "b.jsonl", [{"n": 2}])
    assert input_fingerprint(str(folder)) != before
    write_jsonl(folder / "c.parquet.json", [{"n": 9}])
    with pytest.raises(InputError, match="more than one kind"):
        list(read_rows(str(folder)))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no .jsonl, .json, .parquet files"):
        read_rows(str(empty))


def test_status_of_an_import_shows_no_generation_rate(tmp_path, capsys):
    out = tmp_path / "imported"
    source = shared_data("processbench/gsm8k.jsonl")
    assert main(["import", "--preset", "processbench", "--input", str(source), "--limit", "4", "--output", str(out), "--quiet"]) == 0
    status, text = status_of(out, capsys)
    assert status["job"] == "import" and status["tokens_per_second"] is None
    assert "tokens/s" not in text and "rate      : none: nothing is generated" in text, text


# -- 16: cut rollouts and undetermined first errors, in the summary, status and its JSON ----------
def test_the_summary_and_status_count_cut_rollouts_and_undetermined_first_errors(tmp_path, scripted, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(4, cut=3))  # 3 of 4 solutions: every rollout of step 0 cut
    assert main(label(tmp_path, data)) == 0
    captured = capsys.readouterr()
    # rollouts: 2 per first step, a final check per solution; the 6 of the first steps cut
    assert "rollouts           : 12 (6 cut by their token budget)" in captured.out, captured.out
    assert "first errors       : 3 of 4 solutions undetermined" in captured.out
    assert "warning: 6 of 12 rollouts (50%) were cut by their token budget (--max-new-tokens 256)" in captured.err
    assert "3 of 4 solutions have an undetermined first error" in captured.err
    status, text = status_of(tmp_path / "out", capsys)
    assert (status["truncated_rollouts"], status["undetermined_first_errors"]) == (6, 3)
    assert len(status["warnings"]) == 2
    assert "12 rollouts, 6 cut by their token budget); 3 with an undetermined first error" in text, text
    assert "warning   : 6 of 12 rollouts (50%)" in text


def test_train_names_the_old_and_new_value_and_a_finished_run_is_not_resumed(tiny_model_dir, tmp_path, caplog):
    from labeler.prm.trainer import TrainingError, train
    from tests.synthetic_labels import arithmetic_rows, write_labels
    from tests.test_prm_sources import config

    labels = str(write_labels(tmp_path / "labels", arithmetic_rows(problems=2, solutions_per_problem=2, seed=1)))
    train(config(labels, tmp_path / "run", tiny_model_dir))
    with caplog.at_level(logging.INFO, logger="labeler"):
        again = train(config(labels, tmp_path / "run", tiny_model_dir))
    messages = [record.getMessage() for record in caplog.records]
    assert not again.resumed or any("nothing to do" in message for message in messages), messages
    assert not any(message.startswith("resuming") for message in messages), messages
    with pytest.raises(TrainingError, match=r"changed: learning_rate: 0\.001 -> 0\.002\)"):
        train(config(labels, tmp_path / "run", tiny_model_dir, learning_rate=2e-3))


def test_final_answer_on_given_solutions_loads_no_model(tmp_path, monkeypatch, capsys):
    starts = []
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: starts.append(model) or ScriptedGenerator(ANSWERS))
    data = write_jsonl(tmp_path / "in.jsonl", rows(3))
    assert main(label(tmp_path, data, "--strategy", "final-answer", "--quiet")) == 0
    assert starts == [] and "solutions labelled : 3" in capsys.readouterr().out
    assert main(label(tmp_path, data, "--strategy", "final-answer", "--quiet")) == 0  # a rerun resumes: the same record
    problems = write_jsonl(tmp_path / "problems.jsonl", [{"problem": p, "answer": a} for p, a in list(ANSWERS.items())[:2]])
    assert main(["label", "--input", str(problems), "--output", str(tmp_path / "sampled"), "--model", "scripted", "--strategy",
                 "final-answer", "--quiet"]) == 0  # fmt: skip
    assert starts == ["scripted"]  # rows without a solution: sampled by the model


def test_dry_run_reads_the_output_a_rerun_would_resume(tmp_path, scripted, monkeypatch, capsys):
    """On an output that holds the job: what a rerun would skip (its committed units) and what is left; with other
    settings, the refusal a real run would give. Still no model, nothing written."""
    data = write_jsonl(tmp_path / "in.jsonl", rows(4))
    assert main(label(tmp_path, data, "--quiet", "--shard-size", "2")) == 0
    manifest = tmp_path / "out" / "manifest.json"
    before = manifest.read_bytes()
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: pytest.fail("a model loaded"))
    capsys.readouterr()
    assert main(label(tmp_path, data, "--dry-run", "--shard-size", "2")) == 0
    out = capsys.readouterr().out
    assert "units              : 2, 2 committed in --output (a rerun skips them), 0 to run" in out
    assert "rollouts           : at most 0 " in out
    assert main(label(tmp_path, data, "--dry-run", "--shard-size", "2", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["units_committed"] == 2
    error = one_error(capsys, label(tmp_path, data, "--dry-run", "--shard-size", "2", "--rollouts", "8"))
    assert "different config (changed: rollouts: 2 -> 8)" in error and "--overwrite" in error
    assert manifest.read_bytes() == before


def test_a_job_that_generates_nothing_says_so_no_model_no_rate_no_warning(tmp_path, monkeypatch, capsys):
    """final-answer on given solutions: no 'loading model' line, no rate in `labeler status` (its engine record says
    nothing was generated), and its undetermined first errors are what the strategy gives, not a warning."""
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: pytest.fail("a model loaded"))
    data = write_jsonl(tmp_path / "in.jsonl", rows(3))
    assert main(label(tmp_path, data, "--strategy", "final-answer")) == 0
    captured = capsys.readouterr()
    assert "loading model" not in captured.err and "model ready" not in captured.err
    assert "warning" not in captured.err and "undetermined" not in captured.err
    assert "final-answer labels only the last step" in captured.out
    status, text = status_of(tmp_path / "out", capsys)
    assert status["tokens_per_second"] is None and status["rollouts_per_second"] is None and status["warnings"] == []
    assert "rate      : none: nothing is generated" in text


# -- 21: --dry-run ------------------------------------------------------------------------------
def test_dry_run_shows_the_plan_and_warns_of_one_step_solutions_before_any_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: pytest.fail("a model loaded"))
    one_step = [{"problem": p, "answer": a, "solution": f"We add and get {a}, so the answer is {a}."} for p, a in ANSWERS.items()]
    two_steps = [{"problem": "What is 4 plus 4?", "answer": "8", "solution": "We add.\n\nThe answer is: 8"}]
    data = write_jsonl(tmp_path / "in.jsonl", one_step[:3] + two_steps + [{"problem": "What is 9 plus 9?", "answer": "18"}])
    assert main(label(tmp_path, data, "--dry-run", "--rollouts", "8")) == 0
    captured = capsys.readouterr()
    assert "rows               : 5 read, 0 rejected" in captured.out
    assert "solutions          : 4 given, 4 to sample" in captured.out
    assert "    1 :      3 ####" in captured.out and "    2 :      1 ####" in captured.out
    # the two-step solution's first prefix; the 4 last steps checked (counted as the job counts them)
    assert "rollouts           : at most 12 (of the given solutions of the units to run; exhaustive's count: 8 sampled, 4 final answers checked)" in captured.out
    assert "tokens             : at most 2048 for rollouts, 2048 to sample solutions" in captured.out
    assert "3 of 4 solutions are one step under --split auto" in captured.err
    assert not (tmp_path / "out").exists()
    assert main(label(tmp_path, data, "--dry-run", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["steps_per_solution"] == {"1": 3, "2": 1}
