"""`labeler score`: inputs as `label` reads them, per-step probabilities, solution scores, best-of-N."""

import json
import math

import pytest

from labeler.cli import main
from labeler.prm.model import ProcessRewardModel
from labeler.prm.solution_scores import ScoredSolution, aggregate, mark_best_of_n
from tests.conftest import write_jsonl
from tests.synthetic_labels import labels_row, write_labels


def test_aggregates_by_hand():
    scores = [0.9, 0.5, 0.8]
    assert aggregate(scores, "min") == 0.5
    assert aggregate(scores, "product") == pytest.approx(0.36)
    assert aggregate(scores, "last") == 0.8
    assert aggregate(scores, "mean") == pytest.approx(2.2 / 3)
    # a step without a score (past the PRM's length limit): no aggregate, not one of the steps that fit
    assert aggregate([0.9, None, 0.5], "mean") is None and aggregate([None], "mean") is None
    assert aggregate([0.9, None], "min") is None and aggregate([0.9, None], "last") is None


def test_best_of_n_picks_the_highest_score_per_problem():
    def solution(problem, name, scores):
        return ScoredSolution(problem, name, None, scores, aggregates={how: aggregate(scores, how) for how in ("min", "product", "last")})

    scored = [solution("p", "a", [0.9, 0.2]), solution("p", "b", [0.6, 0.6]), solution("q", "c", [None])]
    mark_best_of_n(scored, "min")
    assert [s.selected for s in scored] == [False, True, False]  # q: its only solution has no score, so none is picked
    mark_best_of_n(scored, "last")
    assert [s.selected for s in scored] == [False, True, False]
    mark_best_of_n(scored, "product")
    assert [s.solution_id for s in scored if s.selected and s.problem_id == "p"] == ["b"]


@pytest.fixture(scope="module")
def untrained_prm(tiny_model_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("prm") / "best"
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=48, target="soft", rendering="plain").save(path)  # 48 tokens: some solutions cut
    return path


def score_lines(capsys, *args) -> list[dict]:
    assert main(["score", *args, "--quiet", "--device", "cpu"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_scoring_an_input_file_as_label_reads_it(untrained_prm, tmp_path, capsys):
    # ProcessBench rows without an answer column (as on the hub): scoring does not need one.
    rows = [{"problem": "What is 1 + 1?", "steps": ["1 + 1 = 2.", "The answer is 2."], "label": -1} for _ in range(2)]
    rows.append(
        {
            "problem": "What is 2 + 2?",
            "steps": ["2 + 2 = 5.", "So the answer is 5, which is what we were asked for in the end."],
            "label": 0,
        }
    )
    rows.append({"problem": "What is 3 + 3?", "steps": []})  # nothing to score: rejected
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    lines = score_lines(capsys, "--prm", str(untrained_prm), "--input", str(data), "--preset", "processbench")
    assert len(lines) == 3 and [line["row_index"] for line in lines] == [0, 1, 2]
    assert len({line["solution_id"] for line in lines}) == 3  # identical rows still get distinct ids, as in a labeling job
    first = lines[0]
    assert len(first["step_scores"]) == 2 and all(0 < s < 1 for s in first["step_scores"])
    assert first["score_min"] == min(first["step_scores"]) and first["score_last"] == first["step_scores"][-1]
    assert first["score_product"] == pytest.approx(math.prod(first["step_scores"]))
    assert [line["selected"] for line in lines[:2]].count(True) == 1
    assert not lines[2]["selected"]  # its problem's only solution is not fully scored: nothing to select
    # the PRM reads at most 48 tokens: the long last step of row 2 gets no score
    assert lines[2]["step_scores"][1] is None and lines[2]["steps_scored"] == 1


def test_scoring_labels_shards_writes_the_output_file(untrained_prm, tmp_path, capsys):
    job = write_labels(
        tmp_path / "job", [labels_row("p", f"s{i}", "Add.", ["1 + 1 = 2."] * (i + 1), [1.0] * (i + 1), [True] * (i + 1)) for i in range(3)]
    )
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--prm", str(untrained_prm.parent), "--input", str(job), "--output", str(out), "--json", "--quiet", "--prm-backend", "torch"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["solutions"] == 3 and summary["problems"] == 1 and summary["steps_scored"] == 6
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["solution_id"] for line in lines] == ["s0", "s1", "s2"] and sum(line["selected"] for line in lines) == 1


def test_score_bad_usage_exits_2(untrained_prm, tmp_path, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": "Q", "steps": ["a"]}])
    assert main(["score", "--prm", str(tmp_path), "--input", str(data), "--prm-backend", "torch"]) == 2
    assert "not a saved PRM" in capsys.readouterr().err
    assert main(["score", "--prm", str(untrained_prm), "--input", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_score_summary_counts_the_solutions_cut_at_max_length_apart(untrained_prm, tmp_path, capsys):
    rows = [
        {"problem": "What is 1 + 1?", "steps": ["1 + 1 = 2.", "The answer is 2."]},
        {"problem": "What is 2 + 2?", "steps": ["2 + 2 = 5.", "So the answer is 5, which is what we were asked for in the end."]},
    ]
    data, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "scores.jsonl"
    args = ["score", "--prm", str(untrained_prm), "--input", str(data), "--preset", "processbench", "--output", str(out), "--quiet", "--prm-backend", "torch"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["solutions"], summary["steps_scored"], summary["steps_past_max_length"]) == (2, 3, 1)
    assert summary["solutions_not_fully_scored"] == 1  # row 1: its last step is past the PRM's 48 tokens
    assert summary["problems_without_selection"] == 1  # row 1 is its problem's only solution
    assert main(args) == 0
    assert summary["unscored_reasons"] == {"past the PRM's length limit": 1}
    assert "1 solution not fully scored, by reason: past the PRM's length limit: 1" in capsys.readouterr().out
