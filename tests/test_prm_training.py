"""`labeler train`: the trainer learns, its checkpoints load, an interrupted run resumes exactly."""

import json
import subprocess
import sys
import time

import pytest
import torch

from labeler.cli import main
from labeler.prm.devices import place
from labeler.store.reader import read_labelled_rows
from labeler.prm.data import build_examples, split_by_problem
from labeler.prm.rendering import render_solution
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scorers import CheckpointScorer
from labeler.prm.scoring import score_solutions
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.config import TrainConfig
from labeler.prm.trainer import TrainingError, train
from tests.synthetic_labels import arithmetic_rows, labels_row, write_labels
from tests.tiny_prm_backbone import build_windowed_mistral


@pytest.fixture(scope="module")
def windowed_model_dir(tiny_model_dir, tmp_path_factory):
    return build_windowed_mistral(tmp_path_factory.mktemp("windowed-mistral"), tiny_model_dir)


def held_out_accuracy(checkpoint, labels_dir) -> tuple[float, float]:
    """Accuracy of the step scores against the hard labels, and of the trajectory scores against the trajectory labels."""
    prm = ProcessRewardModel.load(checkpoint)
    rows = read_labelled_rows(labels_dir)
    solutions = [SolutionToScore(r.problem_id, r.solution_id, r.problem, r.steps) for r in rows]
    scored = score_solutions(CheckpointScorer(prm, place("cpu", "fp32"), batch_size=32), solutions)
    pairs = [(score >= 0.5, hard) for s, r in zip(scored, rows) for score, hard in zip(s.step_scores, r.hard_labels)]
    trajectories = [(s.trajectory_score >= 0.5) == r.trajectory_label for s, r in zip(scored, rows)]
    return sum(predicted == hard for predicted, hard in pairs) / len(pairs), sum(trajectories) / len(trajectories)


def test_trainer_learns_step_correctness_on_held_out_problems(windowed_model_dir, tmp_path):
    train_labels = write_labels(tmp_path / "train", arithmetic_rows(problems=150, solutions_per_problem=4, seed=1))
    held_out = write_labels(tmp_path / "held-out", arithmetic_rows(problems=40, solutions_per_problem=4, seed=99, prefix="h"))
    config = TrainConfig(
        labels=str(train_labels),
        output=str(tmp_path / "run"),
        model=str(windowed_model_dir),
        target="hard",
        epochs=16,
        batch_size=16,
        learning_rate=1e-3,
        max_length=256,
        validation_fraction=0.2,
        select_best="val_loss",  # the loss holds the trajectory head's too: its best is both heads' best
        device="cpu",
    )
    started = time.monotonic()
    result = train(config)
    seconds = time.monotonic() - started

    accuracy, trajectory_accuracy = held_out_accuracy(tmp_path / "run" / "best", held_out)
    print(f"held-out step accuracy {accuracy:.4f}, trajectory accuracy {trajectory_accuracy:.4f} after {seconds:.1f}s of training")
    assert accuracy >= 0.95
    assert trajectory_accuracy >= 0.9  # the trajectory head, trained beside the step head: does the solution reach its answer
    # The held-out problems are new: no problem id of theirs was trained on.
    assert not {r.problem_id for r in read_labelled_rows(held_out)} & {r.problem_id for r in read_labelled_rows(train_labels)}

    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == list(range(1, 17)) and result.epochs_done == 16
    assert {"train_loss", "val_loss", "val_step_accuracy", "val_auc", "learning_rate", "seconds", "best"} <= set(metrics[-1])
    assert metrics[-1]["train_loss"] < metrics[0]["train_loss"]
    best = min(metrics, key=lambda m: m["val_loss"])
    assert result.best_epoch == best["epoch"] and [m["epoch"] for m in metrics if m["best"]][-1] == best["epoch"]
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    assert len(split["validation_problem_ids"]) == 30


def small_labels(tmp_path, problems=12):
    return write_labels(tmp_path / "labels", arithmetic_rows(problems=problems, solutions_per_problem=2, seed=5))


def small_config(labels, output, model, **overrides) -> TrainConfig:
    settings = {"labels": str(labels), "output": str(output), "model": str(model), "epochs": 2, "batch_size": 4}
    return TrainConfig(**(settings | {"learning_rate": 1e-3, "max_length": 384, "device": "cpu", "min_steps": 0} | overrides))


def model_state(checkpoint) -> dict[str, torch.Tensor]:
    return ProcessRewardModel.load(checkpoint).state_dict()


def test_best_and_last_checkpoints_load_and_score(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    train(small_config(labels, tmp_path / "run", tiny_model_dir))
    for name in ("best", "last"):
        prm = ProcessRewardModel.load(tmp_path / "run" / name)
        assert prm.settings.base_model == str(tiny_model_dir) and prm.settings.max_length == 384
        scored = score_solutions(CheckpointScorer(prm, place("cpu", "fp32")), [SolutionToScore("p", "s", "Add the numbers.", ("1 + 1 = 2.", "2 + 2 = 5."))])
        assert len(scored[0].step_scores) == 2 and all(0 < score < 1 for score in scored[0].step_scores)
    assert (tmp_path / "run" / "last" / "training_state.pt").is_file()
    assert not (tmp_path / "run" / "best" / "training_state.pt").exists()


def test_an_interrupted_run_resumes_to_the_model_of_an_uninterrupted_one(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    train(small_config(labels, tmp_path / "whole", tiny_model_dir))

    # 10 of the 12 problems train: 20 solutions, 5 steps an epoch. Stop part-way through epoch 1.
    stopped = train(small_config(labels, tmp_path / "resumed", tiny_model_dir, max_steps=3))
    assert stopped.stopped_early and stopped.global_step == 3 and stopped.epochs_done == 0
    assert not (tmp_path / "resumed" / "metrics.jsonl").exists()
    resumed = train(small_config(labels, tmp_path / "resumed", tiny_model_dir))
    assert resumed.resumed and resumed.epochs_done == 2 and resumed.global_step == 10

    whole, again = model_state(tmp_path / "whole" / "last"), model_state(tmp_path / "resumed" / "last")
    assert whole.keys() == again.keys()
    for name in whole:
        torch.testing.assert_close(again[name], whole[name], msg=name)
    losses = lambda run: [json.loads(line)["train_loss"] for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
    assert losses("resumed") == pytest.approx(losses("whole"))

    # A finished run does nothing more; more epochs continue it.
    assert train(small_config(labels, tmp_path / "resumed", tiny_model_dir)).global_step == 10
    assert train(small_config(labels, tmp_path / "resumed", tiny_model_dir, epochs=3)).epochs_done == 3


def test_a_resume_with_other_settings_or_labels_is_refused(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    train(small_config(labels, tmp_path / "run", tiny_model_dir, epochs=1))
    with pytest.raises(TrainingError, match="learning_rate"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir, learning_rate=5e-4))
    other = write_labels(tmp_path / "other", arithmetic_rows(problems=12, solutions_per_problem=2, seed=6))
    with pytest.raises(TrainingError, match="other labels"):
        train(small_config(other, tmp_path / "run", tiny_model_dir))


def test_soft_and_hard_targets_and_steps_without_labels(tiny_model_dir, tmp_path):
    rows = [
        labels_row("p1", "s1", "Add.", ["1 + 1 = 2.", "2 + 2 = 5.", "3 + 3 = 6."], [0.75, None, None], [True, False, None]),
        labels_row("p2", "s2", "Add.", ["1 + 2 = 3."], [None], [None]),
    ]
    labels = read_labelled_rows(write_labels(tmp_path, rows))
    tokenizer = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft").tokenizer
    soft, stats = build_examples(labels, tokenizer, "soft", 64)
    # an inferred step (not measured at N) gets no soft target; unlabelled steps no target at all
    assert [e.targets for e in soft] == [[0.75]] and stats.left_out == {"inferred": 1}
    assert (stats.steps_unlabelled, stats.solutions_dropped) == (2, 1)
    mixed, _ = build_examples(labels, tokenizer, "soft", 64, unmeasured_steps="hard")
    assert [e.targets for e in mixed] == [[0.75, 0.0]]  # on request, it trains on its hard label
    hard, _ = build_examples(labels, tokenizer, "hard", 64)
    assert [e.targets for e in hard] == [[1.0, 0.0]]


def test_rendering_marks_each_step_at_its_separator_and_cuts_long_solutions(tiny_model_dir):
    tokenizer = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft").tokenizer
    separator = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    rendered = render_solution(tokenizer, "What is 1 + 1?", ["1 + 1 = 2.", "The answer is 2."], max_length=512)
    assert len(rendered.score_positions) == 2 and rendered.score_positions[-1] == len(rendered.input_ids) - 1
    for position in rendered.score_positions:
        assert rendered.input_ids[position - len(separator) + 1 : position + 1] == separator
    assert tokenizer.decode(rendered.input_ids[: rendered.score_positions[0] + 1]).endswith("What is 1 + 1?\n\n1 + 1 = 2.\n\n")
    cut = render_solution(tokenizer, "What is 1 + 1?", ["1 + 1 = 2.", "The answer is 2."], max_length=rendered.score_positions[0] + 3)
    assert cut.score_positions == rendered.score_positions[:1] and len(cut.input_ids) == rendered.score_positions[0] + 3


def test_split_keeps_each_problem_on_one_side(tiny_model_dir, tmp_path):
    labels = read_labelled_rows(small_labels(tmp_path, problems=20))
    tokenizer = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft").tokenizer
    examples, _ = build_examples(labels, tokenizer, "soft", 64)
    train_set, validation = split_by_problem(examples, 0.25, seed=0)
    assert len({e.problem_id for e in validation}) == 5
    assert not {e.problem_id for e in train_set} & {e.problem_id for e in validation}
    assert split_by_problem(list(reversed(examples)), 0.25, seed=0)[1] == list(reversed(validation))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "labeler.cli", *args], check=False, capture_output=True, text=True, timeout=300)


def test_train_help_lists_its_flags():
    result = run_cli("train", "--help")
    assert result.returncode == 0
    for flag in (
        "--labels",
        "--output",
        "--model",
        "--target",
        "--epochs",
        "--batch-size",
        "--learning-rate",
        "--max-length",
        "--validation-fraction",
        "--select-best",
        "--device",
        "--precision",
        "--trust-remote-code",
        "--save-steps",
        "--max-steps",
    ):
        assert flag in result.stdout


def test_train_bad_input_is_one_line_and_exit_2(tiny_model_dir, tmp_path, capsys):
    def train_cli(*args: str) -> tuple[int, str]:
        code = main(["train", *args])
        return code, capsys.readouterr().err

    code, err = train_cli("--labels", str(tmp_path / "nope"), "--output", str(tmp_path / "run"), "--model", str(tiny_model_dir), "--quiet")
    assert code == 2 and err.count("\n") == 1 and "no such file" in err
    labels = small_labels(tmp_path)
    code, err = train_cli("--labels", str(labels), "--output", str(tmp_path / "run"), "--model", str(tiny_model_dir), "--epochs", "0")
    assert code == 2 and err.strip() == "labeler train: error: --epochs must be >= 1, got 0"
    code, err = train_cli("--labels", str(labels), "--output", str(tmp_path / "run"), "--model", str(tmp_path / "no-model"), "--quiet")
    assert code == 2 and err.startswith("labeler train: error: cannot load model") and err.count("\n") == 1


def test_train_command_writes_metrics_and_prints_a_summary(tiny_model_dir, tmp_path, capsys):
    labels = small_labels(tmp_path)
    code = main(
        [
            "train",
            "--labels",
            str(labels),
            "--output",
            str(tmp_path / "run"),
            "--model",
            str(tiny_model_dir),
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--max-length",
            "384",
            "--min-steps",
            "0",
            "--device",
            "cpu",
            "--json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["epochs_done"] == 1 and result["best_epoch"] == 1
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1


def test_a_rerun_with_the_same_max_steps_trains_nothing_and_the_summary_names_what_exists(tiny_model_dir, tmp_path, capsys):
    labels, run = small_labels(tmp_path), tmp_path / "run"
    argv = ["train", "--labels", str(labels), "--output", str(run), "--model", str(tiny_model_dir), "--epochs", "2", "--batch-size", "4",
            "--max-length", "384", "--min-steps", "0", "--device", "cpu", "--quiet"]  # fmt: skip
    # 5 steps an epoch: --max-steps 4 stops inside epoch 1, before any best/
    assert main([*argv, "--max-steps", "4"]) == 0
    first = capsys.readouterr().out
    assert "optimizer steps : 4 (4 in this call)" in first and "nothing trained" not in first
    assert "last epoch      : none finished in this call" in first and "best epoch      : none yet" in first
    assert first.split("checkpoints     : ")[1] == f"{run}/last\n"  # no best/ yet
    trained = model_state(run / "last")

    assert main([*argv, "--max-steps", "4", "--json"]) == 0  # rerun as is: not one step more
    again = json.loads(capsys.readouterr().out)
    assert again["global_step"] == 4 and again["steps_trained"] == 0 and again["stopped_early"]
    assert again["checkpoints"] == [str(run / "last")]
    assert main([*argv, "--max-steps", "4"]) == 0
    assert "optimizer steps : 4 (nothing trained in this call: the run is at --max-steps 4" in capsys.readouterr().out
    for name, tensor in model_state(run / "last").items():
        torch.testing.assert_close(tensor, trained[name], msg=name)

    # scoring the run folder names the checkpoint to pass; its last/ scores
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"problem": "Add.", "steps": ["1 + 1 = 2.", "2 + 2 = 5."]}) + "\n")
    assert main(["score", "--prm", str(run), "--input", str(data), "--quiet", "--prm-backend", "torch"]) == 2
    err = capsys.readouterr().err
    assert "no best/ checkpoint yet" in err and f"pass {run}/last" in err and err.count("\n") == 1
    assert "stopped before its first epoch ended (--max-steps, or interrupted)" in err  # not blamed on --max-steps alone
    assert main(["score", "--prm", str(run / "last"), "--input", str(data), "--quiet", "--prm-backend", "torch"]) == 0
    capsys.readouterr()

    # at an epoch's end (step 5 ends epoch 1): a rerun trains nothing either; without --max-steps it goes on
    run = tmp_path / "at-an-epoch-end"
    assert train(small_config(labels, run, tiny_model_dir, max_steps=5)).steps_trained == 5
    stopped = train(small_config(labels, run, tiny_model_dir, max_steps=5))
    assert (stopped.global_step, stopped.steps_trained, stopped.epochs_done, stopped.stopped_early) == (5, 0, 1, True)
    assert stopped.checkpoints == [str(run / "best"), str(run / "last")]
    done = train(small_config(labels, run, tiny_model_dir))
    assert (done.global_step, done.steps_trained, done.epochs_done, done.stopped_early) == (10, 5, 2, False)


def test_the_summary_says_when_no_epoch_was_measurable_by_the_selection_metric_and_shows_missing_metrics():
    """--select-best val_auc with one class in validation: roc_auc is None every epoch; best/ still holds an epoch
    (the first one, written when none is measurable), so the summary says which, and shows val_auc as n/a."""
    from dataclasses import replace
    from types import SimpleNamespace

    from labeler.cli.train import _summary
    from labeler.prm.trainer import TrainResult

    config = SimpleNamespace(max_steps=None, epochs=2, select_best="val_auc", validation_fraction=0.1)
    result = TrainResult(output="run", epochs_done=2, global_step=10, best_epoch=None, best_metric=None, stopped_early=False,
                         resumed=False, history=[{"train_loss": 0.5, "val_loss": 0.6, "val_auc": None}],
                         steps_trained=10, checkpoints=["run/best", "run/last"])  # fmt: skip
    summary = dict(_summary(config, result))
    assert summary["best epoch"] == "none measurable by val_auc (it was n/a every epoch); best/ holds epoch 1"
    assert summary["last epoch"] == "train_loss 0.5000, val_loss 0.6000, val_auc n/a"
    assert dict(_summary(config, replace(result, checkpoints=["run/last"])))["best epoch"].startswith("none yet")


def test_a_resume_writes_the_metrics_line_a_kill_left_out_and_no_line_twice(tmp_path):
    from labeler.prm.trainer import restore_metrics

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"epoch": 1, "train_loss": 0.5}) + "\n")
    restore_metrics(tmp_path, 2, json.dumps({"epoch": 2, "train_loss": 0.4}))  # killed after last/ of epoch 2, before its line
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]
    restore_metrics(tmp_path, 2, json.dumps({"epoch": 2, "train_loss": 0.4}))  # its line is there: nothing added
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]
    restore_metrics(tmp_path, 1, None)  # a line past the saved epochs (not written by this trainer, but possible by hand): dropped
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1]


def test_a_metrics_line_cut_mid_write_is_dropped_and_written_again(tmp_path):
    from labeler.prm.trainer import restore_metrics

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"epoch": 1, "train_loss": 0.5}) + '\n{"epoch": 2, "tra')
    restore_metrics(tmp_path, 2, json.dumps({"epoch": 2, "train_loss": 0.4}))
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [{"epoch": 1, "train_loss": 0.5}, {"epoch": 2, "train_loss": 0.4}]
