"""PRM scores join a solution by solution_id only when they are of its problem and steps: `labeler score` lines and
bon's kept scores carry the scored solution's fingerprint (labeler/review/joins.py), `labeler view` checks it, shows
another solution's scores under the same id as such, and says when a line without it (an older one) is unchecked."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from labeler.cli import main
from labeler.ids import solution_fingerprint
from tests.conftest import write_jsonl
from tests.review_support import ViewServer
from tests.synthetic_labels import labels_row, write_labels
from tests.test_rewards import FixedScorer

STEPS = ["1 + 1 = 2.", "2 + 2 = 4.", "4 + 4 = 8.", "The answer is 8."]
OTHER_STEPS = ["1 + 1 = 3.", "3 + 3 = 6.", "6 + 6 = 12.", "The answer is 12."]  # another run's sample: as many steps
PROBLEM = "Double one three times."


def test_labeler_score_lines_carry_the_fingerprint_of_what_they_scored(monkeypatch, tmp_path):
    from labeler.cli import common

    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": PROBLEM, "steps": STEPS, "answer": "8"}])
    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: FixedScorer([0.9]))
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--prm", "unused", "--input", str(data), "--output", str(out), "--quiet", "--device", "cpu"]) == 0
    [line] = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["solution_fingerprint"] == solution_fingerprint(PROBLEM, STEPS) != solution_fingerprint(PROBLEM, OTHER_STEPS)


def test_bon_kept_scores_carry_the_fingerprint_of_each_candidate(tmp_path):
    from labeler.decoding.prm_scores import candidate_step_scores, scores_file, scoring_settings
    from labeler.store.location import OutputLocation
    from tests.test_prm_score_cache import CANDIDATES

    location = OutputLocation(tmp_path / "out")
    candidate_step_scores(location, "qwen-prm:unused", CANDIDATES, lambda: FixedScorer([0.5]), scoring=scoring_settings("fp32"))
    kept = pq.read_table(tmp_path / "out" / scores_file("qwen-prm:unused")).column("solution_fingerprint").to_pylist()
    assert kept == [solution_fingerprint(c.problem, c.steps) for c in CANDIDATES]


def test_view_shows_another_solutions_scores_as_such_and_older_lines_as_unchecked(tmp_path):
    rows = [labels_row(f"p{i}", f"s{i}", PROBLEM, STEPS, [1.0] * 4, [True] * 4) for i in range(3)]
    shards = write_labels(tmp_path / "labels", rows)
    scores = tmp_path / "scores.jsonl"
    lines = [
        {"solution_id": "s0", "step_scores": [0.9, 0.8, 0.7, 0.6], "solution_fingerprint": solution_fingerprint(PROBLEM, STEPS)},
        {"solution_id": "s1", "step_scores": [0.2, 0.2, 0.2, 0.2], "solution_fingerprint": solution_fingerprint(PROBLEM, OTHER_STEPS)},
        {"solution_id": "s2", "step_scores": [0.5, 0.5, 0.5, 0.5]},  # written before lines carried the fingerprint
    ]
    scores.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ViewServer(shards, scores, log=tmp_path / "view.log") as server:
        table = server.http.get("/").text
        assert "0.600" in table and "0.200" not in table and "scores of a different solution with this id" in table
        assert "0.500 <span class=\"muted\">unchecked</span>" in table
        listed = server.http.get("/", params={"prm_min": "0"}).text
        assert "/solution/0/s1" not in listed and "/solution/0/s0" in listed
        other = server.http.get("/solution/0/s1").text
        assert "0.200" not in other and "of a different solution with this id: not shown" in other
        unchecked = server.http.get("/solution/0/s2").text
        assert "PRM scores.jsonl: 0.500" in unchecked and "unchecked" in unchecked
        checked = server.http.get("/solution/0/s0").text
        assert "PRM scores.jsonl: 0.900" in checked and "unchecked" not in checked


def test_select_refuses_score_lines_of_another_solution_under_the_same_id(tmp_path, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": PROBLEM, "steps": STEPS, "answer": "8"}])
    from labeler.evaluation.solutions import read_solutions
    from labeler.inputs.presets import PresetOptions

    [solution] = read_solutions(str(data), None, PresetOptions()).solutions
    scores = tmp_path / "scores.jsonl"
    line = {"solution_id": solution.solution_id, "step_scores": [0.9] * 4, "solution_fingerprint": solution_fingerprint(PROBLEM, OTHER_STEPS)}
    scores.write_text(json.dumps(line) + "\n")
    args = ["select", "--scores", str(scores), "--input", str(data), "--top", "1", "--by", "min", "--output", str(tmp_path / "o.jsonl"), "--quiet"]
    assert main(args) == 2
    assert "line 1: scores of another solution" in capsys.readouterr().err
    scores.write_text(json.dumps(line | {"solution_fingerprint": solution_fingerprint(PROBLEM, STEPS)}) + "\n")
    assert main(args) == 0
