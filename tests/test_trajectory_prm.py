"""The PRM's trajectory side: a trajectory head trained beside the step head, `labeler score`'s
step, trajectory and combined scores, and `labeler select` writing the best trajectories."""

import json
import re

import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.config import TrainConfig
from labeler.prm.model import ProcessRewardModel
from labeler.prm.rendering import render_solution
from labeler.prm.trainer import train
from labeler.prm.trajectory import CombinedScore
from tests.conftest import write_jsonl
from tests.synthetic_labels import labels_row, write_labels


def trace_rows(count: int) -> list[dict]:
    """Traces of two thinking steps and a response; every other one goes wrong in its thinking."""
    rows = []
    for i in range(count):
        wrong = i % 2 == 1
        steps = [f"{i} + 1 = {i + 1}.", f"{i + 1} + 1 = {i + 3 if wrong else i + 2}.", f"So the answer is {i + 3 if wrong else i + 2}."]
        hard = [True, not wrong, not wrong]
        row = labels_row(f"p{i}", f"s{i}", "Add two.", steps, [1.0 if h else 0.0 for h in hard], hard)
        row |= {"thinking_steps": 2, "trajectory_verdict": "incorrect" if wrong else "correct", "trajectory_label": not wrong}
        rows.append(row)
    return rows


def trace_input(path, count: int):
    rows = [
        {"id": f"p{i}", "problem": "Add two.", "answer": str(i + 2), "response": f"<think>\n{i} + 1 = {i + 1}.\n\n{i + 1} + 1 = {i + 2}.\n</think>\n\nSo {i + 2}."}
        for i in range(count)
    ]
    return write_jsonl(path, rows)


@pytest.fixture(scope="module")
def trajectory_prm(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("trajectory-prm")
    labels = write_labels(root / "labels", trace_rows(16))
    config = TrainConfig(labels=str(labels), output=str(root / "run"), model=str(tiny_model_dir), epochs=1, batch_size=4,
                         learning_rate=1e-3, max_length=384, min_steps=0, device="cpu", validation_fraction=0.25, step_surprise=False)  # fmt: skip
    result = train(config)
    return root / "run", result


def test_the_trajectory_head_is_trained_saved_and_validated(trajectory_prm):
    run, result = trajectory_prm
    prm = ProcessRewardModel.load(run / "best")
    assert prm.settings.trajectory_head and prm.trajectory_head is not None
    # saved as the second row of the token classifier's score layer (format 2)
    assert json.loads((run / "best" / "config.json").read_text())["id2label"] == {"0": "step", "1": "trajectory"}
    metrics = result.history[-1]
    assert {"val_trajectory_loss", "val_trajectory_accuracy", "val_trajectory_auc"} <= set(metrics) and metrics["val_trajectories"] == 4


def test_labels_without_trajectory_labels_train_no_trajectory_head(tiny_model_dir, tmp_path):
    rows = trace_rows(4)
    for row in rows:  # as read from a 1.2 shard
        row |= {"thinking_steps": 0, "trajectory_verdict": "timeout", "trajectory_label": None}
    labels = write_labels(tmp_path / "labels", rows)
    config = TrainConfig(labels=str(labels), output=str(tmp_path / "run"), model=str(tiny_model_dir), epochs=1, batch_size=4,
                         max_length=384, min_steps=0, device="cpu", validation_fraction=0, step_surprise=False)  # fmt: skip
    train(config)
    assert ProcessRewardModel.load(tmp_path / "run" / "best").trajectory_head is None
    assert json.loads((tmp_path / "run" / "best" / "config.json").read_text())["id2label"] == {"0": "step"}


def test_a_trace_is_rendered_with_its_think_tags_outside_the_steps(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    plain = render_solution(tokenizer, "Add.", ["a", "b", "c"], 512)
    trace = render_solution(tokenizer, "Add.", ["a", "b", "c"], 512, thinking_steps=2)
    assert len(trace.score_positions) == len(plain.score_positions) == 3
    assert tokenizer.decode(trace.input_ids, skip_special_tokens=True).endswith("Add.\n\n<think>\n\na\n\nb\n\n</think>\n\nc\n\n")
    assert tokenizer.decode(trace.input_ids[: trace.score_positions[1] + 1], skip_special_tokens=True).endswith("b\n\n")


def test_score_reports_step_trajectory_and_combined_scores(trajectory_prm, tmp_path, capsys):
    run, _ = trajectory_prm
    data = trace_input(tmp_path / "traces.jsonl", 6)
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--prm", str(run), "--input", str(data), "--output", str(out), "--trajectory-weight", "0.5", "--quiet", "--prm-backend", "torch"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6
    for line in lines:
        assert len(line["step_scores"]) == 3 and 0 < line["trajectory_score"] < 1
        expected = CombinedScore(trajectory_weight=0.5).combine(line["step_scores"], line["trajectory_score"])
        assert line["score_combined"] == pytest.approx(expected)
        assert line["score_mean"] == pytest.approx(sum(line["step_scores"]) / 3)
    assert re.search(r"^trajectories_scored +: 6$", capsys.readouterr().out, re.MULTILINE)


def test_select_keeps_the_best_share_as_a_fine_tuning_dataset(trajectory_prm, tmp_path, capsys):
    run, _ = trajectory_prm
    data = trace_input(tmp_path / "traces.jsonl", 6)
    out = tmp_path / "sft.jsonl"
    assert main(["select", "--prm", str(run), "--input", str(data), "--top", "0.5", "--output", str(out), "--quiet"]) == 0
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(kept) == 3  # ceil(0.5 x 6)
    assert [k["score"] for k in kept] == sorted((k["score"] for k in kept), reverse=True)
    assert "3 of 6 solutions kept (top 0.5 by combined" in capsys.readouterr().out
    first = kept[0]
    assert first["prompt"] == "Add two." and first["response"].startswith("<think>\n") and "\n</think>\n\nSo " in first["response"]
    # every solution not kept scores at most the lowest kept one
    scores_file = tmp_path / "scores.jsonl"
    assert main(["score", "--prm", str(run), "--input", str(data), "--output", str(scores_file), "--quiet"]) == 0
    combined = sorted((json.loads(line)["score_combined"] for line in scores_file.read_text().splitlines()), reverse=True)
    assert [k["score"] for k in kept] == pytest.approx(combined[:3])
    # the same selection from the score lines, written as parquet
    parquet = tmp_path / "sft.parquet"
    assert main(["select", "--scores", str(scores_file), "--input", str(data), "--top", "0.5", "--output", str(parquet), "--quiet"]) == 0
    assert [r["solution_id"] for r in pq.read_table(parquet).to_pylist()] == [k["solution_id"] for k in kept]


def test_select_refuses_what_it_cannot_rank(tiny_model_dir, trajectory_prm, tmp_path, capsys):
    run, _ = trajectory_prm
    data = trace_input(tmp_path / "traces.jsonl", 2)
    assert main(["select", "--prm", str(run), "--input", str(data), "--top", "0", "--output", str(tmp_path / "o.jsonl"), "--prm-backend", "torch"]) == 2
    assert "--top must be in (0, 1]" in capsys.readouterr().err
    assert main(["select", "--prm", str(run), "--input", str(data), "--top", "0.5", "--output", str(tmp_path / "o.txt"), "--prm-backend", "torch"]) == 2
    assert "must end in .jsonl or .parquet" in capsys.readouterr().err
    scores = write_jsonl(tmp_path / "partial.jsonl", [{"solution_id": "other", "step_scores": [0.5]}])
    assert main(["select", "--scores", str(scores), "--input", str(data), "--top", "0.5", "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "has no score for 2 of the input's 2 solutions" in capsys.readouterr().err
    # a PRM without a trajectory head has no combined score: --by mean still ranks
    rows = trace_rows(4)
    for row in rows:
        row |= {"trajectory_verdict": "timeout", "trajectory_label": None}
    labels = write_labels(tmp_path / "labels", rows)
    config = TrainConfig(labels=str(labels), output=str(tmp_path / "steps-only"), model=str(tiny_model_dir), epochs=1, batch_size=4,
                         max_length=384, min_steps=0, device="cpu", validation_fraction=0)  # fmt: skip
    train(config)
    args = ["select", "--prm", str(tmp_path / "steps-only"), "--input", str(data), "--top", "1", "--output", str(tmp_path / "o.jsonl"), "--prm-backend", "torch"]
    assert main(args) == 2 and "no solution has a combined score" in capsys.readouterr().err
    assert main([*args, "--by", "mean", "--quiet"]) == 0 and len((tmp_path / "o.jsonl").read_text().splitlines()) == 2


def test_combined_score_by_hand():
    combine = CombinedScore(trajectory_weight=1.0).combine
    assert combine([0.5, 1.0], 0.25) == pytest.approx((0.75 + 0.25) / 2)
    assert combine([0.5, 1.0, None], 0.25) is None  # a step past the length limit: not ranked as if scored
    assert CombinedScore(trajectory_weight=0).combine([0.2, 0.4], 0.9) == pytest.approx(0.3)
    assert combine([0.5], None) is None and combine([None], 0.5) is None
    with pytest.raises(ValueError, match="--trajectory-weight must be >= 0"):
        CombinedScore(trajectory_weight=-1)
    assert SolutionToScore("p", "s", "q", ("a",)).thinking_steps == 0
