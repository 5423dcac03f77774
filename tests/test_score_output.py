"""`labeler score --output`: a path that cannot take the lines is refused before the PRM loads, with a clear error,
and a write that fails after scoring says where the results are; never a traceback, never a stray FILE.tmp unsaid
(issue 53, item 14). The scorer is a test double: what is under test is the command's handling of its output."""

from __future__ import annotations

import json
import os

import pytest

from labeler.cli import main
from tests.conftest import write_jsonl

ROWS = [{"problem": "What is 1 + 1?", "steps": ["1 + 1 = 2.", "The answer is 2."], "answer": "2"} for _ in range(2)]


class ConstantScorer:
    name = "constant"

    def __init__(self, loaded: list):
        loaded.append(self)

    def step_scores(self, solutions):
        return [[0.9] * len(s.steps) for s in solutions]

    def step_and_trajectory_scores(self, solutions):
        return [(steps, None) for steps in self.step_scores(solutions)]

    def close(self):
        pass


@pytest.fixture
def loaded(monkeypatch) -> list:
    from labeler.cli import common

    scorers: list = []
    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: ConstantScorer(scorers))
    return scorers


def _score(tmp_path, output) -> int:
    data = write_jsonl(tmp_path / "in.jsonl", ROWS)
    return main(["score", "--prm", "unused", "--input", str(data), "--output", str(output), "--quiet", "--device", "cpu"])


def test_an_output_that_is_a_directory_is_refused_before_the_prm_loads(tmp_path, capsys, loaded):
    out = tmp_path / "scores"
    out.mkdir()
    assert _score(tmp_path, out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"--output {out} is a directory" in err
    assert not loaded and not (tmp_path / "scores.tmp").exists()


def test_an_output_whose_folder_is_missing_is_refused_before_the_prm_loads(tmp_path, capsys, loaded):
    out = tmp_path / "no-such-folder" / "scores.jsonl"
    assert _score(tmp_path, out) == 2
    assert f"--output {out}: its folder {out.parent} does not exist" in capsys.readouterr().err and not loaded


def test_a_write_that_fails_after_scoring_says_where_the_scores_are(tmp_path, capsys, loaded, monkeypatch):
    out = tmp_path / "scores.jsonl"

    def refuse(source, target):
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(os, "replace", refuse)
    assert _score(tmp_path, out) == 1
    err = capsys.readouterr().err
    kept = tmp_path / "scores.jsonl.tmp"
    assert "Traceback" not in err and f"the scores are in {kept}" in err and "Permission denied" in err
    assert [json.loads(line)["step_scores"] for line in kept.read_text().splitlines()] == [[0.9, 0.9], [0.9, 0.9]]


def test_scores_are_written_whole_and_no_temporary_file_is_left(tmp_path, loaded):
    out = tmp_path / "scores.jsonl"
    assert _score(tmp_path, out) == 0
    assert len(out.read_text().splitlines()) == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "scores.jsonl"]


def test_ctrl_c_while_scoring_says_nothing_was_written(tmp_path, capsys, loaded, monkeypatch):
    def interrupted(self, solutions):
        raise KeyboardInterrupt

    monkeypatch.setattr(ConstantScorer, "step_and_trajectory_scores", interrupted)
    monkeypatch.setattr(ConstantScorer, "step_scores", interrupted)
    assert _score(tmp_path, tmp_path / "scores.jsonl") == 130
    err = capsys.readouterr().err
    assert "resume" not in err and "labeler score: interrupted; nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
