"""Greedy sampling (--temperature below GREEDY_BELOW) draws one completion per prompt: vLLM refuses n > 1 once the
model is loaded. Every command that samples several completions of one prompt refuses it before an engine starts,
exit 2, naming the flags (the outside read's finding 3; labeler label's own refusal: tests/test_cli.py)."""

import pytest

import workers.vllm_generator
from labeler.cli import main
from tests.conftest import write_jsonl


@pytest.fixture
def no_engine(monkeypatch):
    def start_engine(model, config):
        raise AssertionError("an engine was started for settings that are refused")

    monkeypatch.setattr(workers.vllm_generator, "start_engine", start_engine)


def problems(tmp_path):
    return write_jsonl(tmp_path / "p.jsonl", [{"id": "q0", "problem": "What is 1 plus 1?", "answer": "2"}])


def test_search_refuses_greedy_sampling_of_several_proposals_before_an_engine_starts(tmp_path, capsys, no_engine):
    code = main([
        "search", "--input", str(problems(tmp_path)), "--output", str(tmp_path / "out"), "--prm", str(tmp_path / "no-prm"),
        "--model", "scripted", "--temperature", "0", "--beams", "2", "--proposals", "3", "--no-best-of-n", "--candidates", "1",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--temperature 0" in err and "--beams 2" in err and "--proposals 3" in err and "greedy" in err, err


def test_search_with_best_of_n_names_its_own_flags_too(tmp_path, capsys, no_engine):
    code = main([
        "search", "--input", str(problems(tmp_path)), "--output", str(tmp_path / "out"), "--prm", str(tmp_path / "no-prm"),
        "--model", "scripted", "--temperature", "0", "--beams", "1", "--proposals", "2",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--beams 1" in err and "--proposals 2" in err, err


def test_bon_refuses_greedy_sampling_of_several_candidates_before_an_engine_starts(tmp_path, capsys, no_engine):
    code = main([
        "bon", "--input", str(problems(tmp_path)), "--output", str(tmp_path / "out"), "--model", "scripted",
        "--temperature", "0", "--candidates", "4",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--temperature 0" in err and "greedy" in err and "4" in err, err
