"""A step or trajectory score that is not a finite number (NaN, inf) is no score, wherever scores leave the
scorer: None (JSON null) in ProcessReward's step_scores, the reward server's answers, `labeler score` lines and
bon's kept scores, with its reason naming the value; never written as NaN (not JSON) or read as a value."""

from __future__ import annotations

import json
import math

import httpx

from labeler.cli import main
from labeler.rewards import ProcessReward, RewardConfig
from tests.conftest import write_jsonl
from tests.test_rewards import TWO_STEPS, FixedScorer

NAN, INF = float("nan"), float("inf")


def strict_json(text: str):
    """JSON as the standard reads it: NaN and Infinity are not JSON."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_non_finite_step_score_leaves_process_reward_as_none_with_its_value_named():
    for bad, named in ((NAN, "nan"), (INF, "inf"), (-INF, "-inf")):
        reward = ProcessReward(RewardConfig(prm="unused"), scorer=FixedScorer([0.9, bad]))
        [result] = reward.rewards(["What is 2 + 3?"], [TWO_STEPS])
        assert result.step_scores == [0.9, None], result.step_scores
        assert result.value is None and result.process is None
        assert f"step 1 {named}, not a finite score" in result.reason, result.reason
        strict_json(json.dumps(result.to_dict()))


def test_the_reward_server_answers_a_nan_step_score_as_null_over_http(monkeypatch):
    from labeler.cli import common
    from tests.test_reward_server import PROBLEM, RESPONSE, ServedHere

    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: FixedScorer([0.9, NAN]))
    with ServedHere("--prm", "qwen-prm:unused") as served:
        answer = httpx.post(f"{served.url}/rewards", json={"problems": [PROBLEM], "completions": [RESPONSE]}, timeout=60)
        assert answer.status_code == 200, answer.text
        [reward] = strict_json(answer.text)["rewards"]
        assert reward["step_scores"][1] is None and reward["value"] is None
        assert "not a finite score" in reward["reason"]
        assert httpx.get(f"{served.url}/health", timeout=60).status_code == 200


class TrajectoryScorer:
    """A stand-in for a PRM with a trajectory head: fixed step scores and a fixed trajectory score."""

    name = "trajectory"

    def __init__(self, steps, trajectory):
        self.steps, self.trajectory = steps, trajectory

    def step_scores(self, solutions):
        return [steps for steps, _ in self.step_and_trajectory_scores(solutions)]

    def step_and_trajectory_scores(self, solutions):
        return [([self.steps[i % len(self.steps)] for i in range(len(s.steps))], self.trajectory) for s in solutions]


def test_labeler_score_writes_a_nan_trajectory_as_null_with_its_reason_and_select_reads_it(monkeypatch, tmp_path, capsys):
    from labeler.cli import common

    data = write_jsonl(
        tmp_path / "in.jsonl",
        [{"problem": "What is 1 + 1?", "steps": ["1 + 1 = 2.", "The answer is 2."], "answer": "2"} for _ in range(2)],
    )
    out = tmp_path / "scores.jsonl"
    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: TrajectoryScorer([0.9, INF], NAN))
    assert main(["score", "--prm", "unused", "--input", str(data), "--output", str(out), "--quiet", "--device", "cpu"]) == 0
    lines = [strict_json(line) for line in out.read_text().splitlines()]
    assert lines[0]["step_scores"] == [0.9, None] and lines[0]["trajectory_score"] is None
    assert lines[0]["score_combined"] is None and lines[0]["score_min"] is None
    assert lines[0]["unscored_reason"] == "the PRM gave step 1 inf, not a finite score"
    capsys.readouterr()

    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: TrajectoryScorer([0.9, 0.8], NAN))
    assert main(["score", "--prm", "unused", "--input", str(data), "--output", str(out), "--quiet", "--device", "cpu"]) == 0
    lines = [strict_json(line) for line in out.read_text().splitlines()]
    assert lines[0]["score_min"] == 0.8 and lines[0]["trajectory_score"] is None and lines[0]["score_combined"] is None
    assert lines[0]["unscored_reason"] == "the PRM's trajectory head gave nan, not a finite score"
    # its own reader takes the file
    args = ["select", "--scores", str(out), "--input", str(data), "--top", "1", "--by", "mean", "--output", str(tmp_path / "o.jsonl"), "--quiet"]
    assert main(args) == 0
    assert math.isclose(strict_json((tmp_path / "o.jsonl").read_text().splitlines()[0])["score"], 0.85)


def test_bon_keeps_a_nan_step_score_as_null_with_its_reason(tmp_path):
    import pyarrow.parquet as pq

    from labeler.decoding.prm_scores import candidate_step_scores, scores_file, scoring_settings
    from labeler.store.location import OutputLocation
    from tests.test_prm_score_cache import CANDIDATES

    location, spec = OutputLocation(tmp_path / "out"), "qwen-prm:unused"
    _, scores, reasons = candidate_step_scores(
        location, spec, CANDIDATES, lambda: FixedScorer([0.9, NAN]), scoring=scoring_settings("fp32")
    )
    assert scores == [[0.9, None]] * 2 and reasons == ["the PRM gave step 1 nan, not a finite score"] * 2
    kept = pq.read_table(tmp_path / "out" / scores_file(spec)).column("step_scores").to_pylist()
    assert kept == [[0.9, None]] * 2


def test_view_reads_a_nan_in_kept_bon_scores_as_missing_never_as_a_minimum(tmp_path):
    """A bon output kept by an older version may hold NaN: min([0.9, nan]) would be 0.9."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from labeler.decoding.prm_scores import METADATA_KEY, SCORES_DIR, SCORES_SCHEMA
    from labeler.review.index import SolutionIndex
    from labeler.review.sources import _bon_scores, open_sources
    from labeler.store.location import OutputLocation
    from tests.synthetic_labels import labels_row, write_labels

    steps = ["1 + 1 = 2.", "The answer is 2."]
    out = write_labels(tmp_path / "out", [labels_row("p0", "s0", "What is 1 + 1?", steps, [1.0, 1.0], [True, True])])
    (out / SCORES_DIR).mkdir(parents=True)
    table = pa.Table.from_pylist([{"solution_id": "s0", "step_scores": [0.9, NAN]}], schema=SCORES_SCHEMA)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps({"spec": "old"}).encode()}), out / SCORES_DIR / "old.parquet")
    [kept] = _bon_scores(OutputLocation(str(out)))
    assert kept.scores["s0"] == [0.9, None]
    sources = open_sources([str(out)])
    sources.scores = [kept.__class__("old", {"s0": [0.9, NAN]})]  # however a score list came in
    row = SolutionIndex(sources).table().to_pylist()[0]
    assert row["prm_min"] is None and row["prm_partial"] is True
