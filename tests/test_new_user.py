"""What a new user trips on (issue 41, items 15-22): each output says what it counts and why, in one
convention. The scripted generator (tests/fakes.py) stands in for the engine, which is not the point here."""

import json

import pytest

import workers.vllm_generator
from labeler.cli import main
from labeler.inputs.readers import InputError, input_fingerprint, read_rows
from tests.conftest import shared_data, write_jsonl
from tests.fakes import CUT_MARKER, ScriptedGenerator

ANSWERS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 5)}


def rows(n: int = 4, cut: int = 0) -> list[dict]:
    """n rows of two steps; the first `cut` have a first step whose rollouts all run out of their budget."""
    items = list(ANSWERS.items())[:n]
    return [
        {"problem": problem, "answer": answer, "steps": [f"{CUT_MARKER} we add." if k < cut else "We add.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(items)
    ]


@pytest.fixture
def scripted(monkeypatch):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))


def label(tmp_path, data, *flags) -> list[str]:
    return ["label", "--input", str(data), "--output", str(tmp_path / "out"), "--model", "scripted", "--rollouts", "2", *flags]


def status_of(out, capsys) -> tuple[dict, str]:
    capsys.readouterr()
    assert main(["status", str(out), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert main(["status", str(out)]) == 0
    return status, capsys.readouterr().out


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
