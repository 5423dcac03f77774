"""`labeler train` on labels that were not measured at N (issue 53, items 3, 12, 13, 14): steps a search strategy
stopped early, inferred or retraced are not trained as Monte-Carlo estimates, every step is counted by what it is,
and the run says what it did on stderr and in its summary (stdout holds only the result)."""

import json
from dataclasses import replace

import pytest

from labeler.cli import main
from labeler.prm.config import TrainConfig
from labeler.prm.data import build_examples
from labeler.prm.model import ProcessRewardModel
from labeler.prm.trainer import train
from labeler.store.reader import read_labelled_rows
from tests.synthetic_labels import labels_row, write_labels


def posterior_like_rows(problems: int = 12) -> list[dict]:
    """Solutions of three steps of true rate 0.3, as a posterior job labels them: the first step measured at N
    (0.25, 1 of 4), the second stopped at its first correct rollout (early_stop: hard True, soft null, 1 of 1), the
    third deduced from it (inferred: hard True, no rollout)."""
    rows = []
    for p in range(problems):
        for s in range(2):
            row = labels_row(f"p{p}", f"p{p}-s{s}", "Add the numbers.", ["1 + 1 = 2.", "2 + 2 = 4.", "4 + 4 = 8."],
                             [0.25, None, None], [False, True, True])  # fmt: skip
            row |= {"label_method": ["rollouts", "early_stop", "inferred"], "n_correct": [1, 1, 0], "n_rollouts": [4, 1, 0]}
            row |= {"unlabelled_reason": [None, None, None], "first_error": 0}
            rows.append(row)
    return rows


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft").tokenizer


def test_the_constant_names_every_method_not_measured_at_n():
    from schemas.tables import NOT_MEASURED_AT_N

    assert {"early_stop", "inferred", "retraced"} == set(NOT_MEASURED_AT_N)


def test_soft_targets_leave_out_steps_not_measured_at_n_and_count_them_by_method(tmp_path, tokenizer):
    rows = read_labelled_rows(write_labels(tmp_path, posterior_like_rows(2)))
    # by default (auto) a source with early_stop steps trains whole on its hard labels (tests/test_prm_outcome_stopped.py)
    auto, stats = build_examples(rows, tokenizer, "soft", 64)
    assert [e.targets for e in auto] == [[0.0, 1.0, 1.0]] * 4 and "early_stop" in stats.outcome_stopped
    soft, stats = build_examples(rows, tokenizer, "soft", 64, unmeasured_steps="skip")
    # the mean soft target is the measured steps' (0.25), not pulled up to 0.5 by early-stopped and inferred 1.0s
    assert [e.targets for e in soft] == [[0.25], [0.25], [0.25], [0.25]]
    assert stats.left_out == {"early_stop": 4, "inferred": 4}
    assert stats.trained == {"rollouts": {"soft": 4}}
    assert stats.steps_with_target == 4
    # on request, they train on their hard label beside the soft targets, and are counted as such
    mixed, stats = build_examples(rows, tokenizer, "soft", 64, unmeasured_steps="hard")
    assert [e.targets for e in mixed] == [[0.25, 1.0, 1.0]] * 4
    assert stats.trained == {"rollouts": {"soft": 4}, "early_stop": {"hard": 4}, "inferred": {"hard": 4}} and not stats.left_out
    hard, stats = build_examples(rows, tokenizer, "hard", 64)
    assert [e.targets for e in hard] == [[0.0, 1.0, 1.0]] * 4
    assert stats.trained == {"rollouts": {"hard": 4}, "early_stop": {"hard": 4}, "inferred": {"hard": 4}}


def test_a_retraced_step_is_not_measured_either(tmp_path, tokenizer):
    (row,) = read_labelled_rows(write_labels(tmp_path, posterior_like_rows(1)[:1]))
    retraced = replace(row, label_method=("rollouts", "retraced", "unlabelled"), hard_labels=(False, True, None))
    examples, stats = build_examples([retraced], tokenizer, "soft", 64, unmeasured_steps="skip")
    assert [e.targets for e in examples] == [[0.25]]
    assert stats.left_out == {"retraced": 1} and stats.steps_unlabelled == 1
    # a human label (no soft label, but measured: it is the label) still trains on its hard label under soft
    human = replace(row, label_method=("human",) * 3, soft_labels=(None,) * 3, label_source="human")
    examples, stats = build_examples([human], tokenizer, "soft", 64)
    assert [e.targets for e in examples] == [[0.0, 1.0, 1.0]] and stats.trained == {"human": {"hard": 3}}


def test_hard_unmeasured_steps_with_hard_targets_is_refused_as_meaningless():
    with pytest.raises(ValueError, match="--unmeasured-steps"):
        TrainConfig(labels="x", output="y", model="m", target="hard", unmeasured_steps="hard")


def test_a_validation_split_too_small_to_choose_by_is_said(tmp_path, tokenizer):
    from labeler.prm.data import validation_too_small

    rows = read_labelled_rows(write_labels(tmp_path, posterior_like_rows(1)))
    examples, _ = build_examples(rows, tokenizer, "hard", 64)
    assert "1 problem" in validation_too_small(examples)
    assert validation_too_small([]) is None  # no split at all is said elsewhere


def run_train(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["train", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_on_posterior_labels_says_what_it_trained_how_and_json_is_all_of_stdout(tiny_model_dir, tmp_path, capsys):
    labels = write_labels(tmp_path / "labels", posterior_like_rows())
    argv = ["--labels", str(labels), "--model", str(tiny_model_dir), "--epochs", "1", "--batch-size", "4", "--max-length", "384",
            "--min-steps", "12", "--device", "cpu", "--unmeasured-steps", "skip"]  # fmt: skip
    code, out, err = run_train(capsys, *argv, "--output", str(tmp_path / "run"), "--json")
    assert code == 0, err
    result = json.loads(out)  # nothing but the JSON on stdout
    # 10 train problems of 2 solutions, 5 micro-batches of 4: 5 steps an epoch, so --min-steps 12 makes 3 epochs, said once
    assert result["epochs_planned"] == 3 and result["epochs_done"] == 3
    assert err.count("--min-steps 12") == 1 and "3 epochs, not --epochs 1" in err
    assert result["steps"]["left_out"] == {"early_stop": 24, "inferred": 24}
    assert result["steps"]["trained"] == {"rollouts": {"soft": 24}} and (result["steps"]["train"], result["steps"]["validation"]) == (20, 4)
    assert "left out of the soft loss: 24 early_stop, 24 inferred" in err
    assert "ETA" in err  # progress lines give the time left for the whole run
    assert "too small to choose" in err  # 2 validation problems whose steps are all wrong
    assert "(best so far)" not in err and "best so far, by a validation split too small to choose by" in err

    code, out, err = run_train(capsys, *argv, "--output", str(tmp_path / "run"))  # the finished run, as text
    summary = {key.strip(): value for key, value in (line.split(" : ", 1) for line in out.splitlines())}
    assert summary["epochs done"] == "3 of 3 (--epochs 1 raised by --min-steps 12)"
    assert summary["steps"].startswith("24 with a target (20 train, 4 validation): 24 rollouts on their soft label; left out: 24 early_stop, 24 inferred")


def test_an_output_that_is_a_file_and_refused_runs_leave_no_folder(tiny_model_dir, tmp_path, capsys):
    labels = write_labels(tmp_path / "labels", posterior_like_rows(2))
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    code, out, err = run_train(capsys, "--labels", str(labels), "--output", str(taken), "--model", str(tiny_model_dir), "--device", "cpu")
    assert code == 2 and out == "" and err.count("\n") == 1 and "is a file" in err
    new = tmp_path / "deep" / "run"
    code, _, err = run_train(capsys, "--labels", str(tmp_path / "nope"), "--output", str(new), "--model", str(tiny_model_dir), "--quiet")
    assert code == 2 and not (tmp_path / "deep").exists()
    # every step left out of the soft loss: refused with what to pass, and no folder left behind
    only_unmeasured = [row | {"label_method": ["early_stop"] * 3, "soft_labels": [None] * 3} for row in posterior_like_rows(2)]
    write_labels(tmp_path / "unmeasured", only_unmeasured)
    code, _, err = run_train(capsys, "--labels", str(tmp_path / "unmeasured"), "--output", str(new), "--model", str(tiny_model_dir),
                             "--device", "cpu", "--quiet", "--unmeasured-steps", "skip")  # fmt: skip
    assert code == 2 and "--target hard" in err and "--unmeasured-steps hard" in err and not (tmp_path / "deep").exists()


def test_a_lora_run_resumed_from_a_mid_epoch_last_keeps_the_chosen_threshold(tiny_model_dir, tmp_path):
    from tests.synthetic_labels import arithmetic_rows

    labels = write_labels(tmp_path / "labels", arithmetic_rows(problems=12, solutions_per_problem=2, seed=5))
    settings = {"labels": str(labels), "model": str(tiny_model_dir), "epochs": 2, "batch_size": 4, "learning_rate": 1e-2,
                "max_length": 384, "device": "cpu", "min_steps": 0, "lora_rank": 4, "save_steps": 1, "validation_fraction": 0.3}  # fmt: skip
    run = tmp_path / "run"
    first = train(TrainConfig(output=str(run), max_steps=6, **settings))  # epoch 1 validated (5 steps), one step of epoch 2
    chosen = first.history[0]["val_threshold"] if first.history else None
    assert chosen is not None  # the split has right and wrong solutions to choose by
    assert json.loads((run / "last" / "prm.json").read_text())["threshold"] == chosen
    train(TrainConfig(output=str(run), max_steps=7, **settings))  # resumed: --save-steps writes last/ before any validation
    assert json.loads((run / "last" / "prm.json").read_text())["threshold"] == chosen


def test_train_json_on_stdout_parses_in_a_fresh_process(tiny_model_dir, tmp_path):
    """A fresh process: DeepSpeed's accelerator notice (printed on stdout the first time transformers looks for it,
    with or without --sharding) must not land before the JSON."""
    import subprocess
    import sys

    labels = write_labels(tmp_path / "labels", posterior_like_rows(4))
    result = subprocess.run(
        [sys.executable, "-m", "labeler.cli", "train", "--labels", str(labels), "--output", str(tmp_path / "run"), "--model",
         str(tiny_model_dir), "--max-length", "384", "--min-steps", "0", "--epochs", "1", "--device", "cpu", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["epochs_done"] == 1


def test_a_lora_run_shows_no_bitsandbytes_warning_by_default(tiny_model_dir, tmp_path):
    """peft imports bitsandbytes, which warns on CPUs about an optional kernels package: noise under the quiet default."""
    import subprocess
    import sys

    labels = write_labels(tmp_path / "labels", posterior_like_rows(4))
    argv = [sys.executable, "-m", "labeler.cli", "train", "--labels", str(labels), "--model", str(tiny_model_dir), "--lora-rank", "4",
            "--max-length", "384", "--min-steps", "0", "--max-steps", "1", "--device", "cpu"]  # fmt: skip
    result = subprocess.run([*argv, "--output", str(tmp_path / "run")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "bitsandbytes" not in result.stderr + result.stdout


def test_a_run_saved_before_unmeasured_steps_existed_is_told_what_to_pass_to_resume(tiny_model_dir, tmp_path):
    labels = write_labels(tmp_path / "labels", posterior_like_rows(6))
    settings = {"labels": str(labels), "output": str(tmp_path / "run"), "model": str(tiny_model_dir), "epochs": 1, "batch_size": 4,
                "max_length": 384, "device": "cpu", "min_steps": 0, "max_steps": 1}  # fmt: skip
    train(TrainConfig(**settings, unmeasured_steps="hard"))  # how runs trained before the flag: their hard label
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    del saved["unmeasured_steps"]
    (tmp_path / "run" / "train_config.json").write_text(json.dumps(saved))
    from labeler.prm.trainer import TrainingError

    with pytest.raises(TrainingError, match="pass --unmeasured-steps hard"):
        train(TrainConfig(**settings | {"max_steps": 2}))
    assert train(TrainConfig(**settings | {"max_steps": 2}, unmeasured_steps="hard")).global_step == 2
