"""`labeler train --target soft` on labels of a strategy that stops a prefix's rollouts on their outcome (posterior,
adaptive: at the first correct one). A step of such a source keeps its N rollouts (a soft label) only when its early
rounds failed, so the steps left with a soft label are chosen by their outcomes: leaving the others out (skip) keeps
28 of 300 right steps of true rate 0.3 at a mean of 0.08. Such a source trains whole on its hard labels (any rollout
correct: a prefix stopped at its first correct rollout has exhaustive's hard label given the same draws), said in
one line per source on stderr, in the summary and in --json.

Labels here come from the strategies themselves (labeler.labeling.strategies.label on a scripted completer whose
every prefix reaches the answer with probability RATE), written by the job's own table builder."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.labeling.generation import Completion, GenerationResult, SamplingSettings
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from labeler.prm.config import TrainConfig
from labeler.prm.data import build_examples
from labeler.prm.model import ProcessRewardModel
from labeler.records import Solution
from labeler.store.reader import read_labelled_rows

RATE = 0.3
ROLLOUTS = 8


class RateGenerator:
    """Every rollout reaches the answer with probability RATE, drawn from its own seed: strategies that draw the same
    seeds see the same completions (exhaustive, posterior and adaptive do)."""

    model_name = "rate"

    def generate(self, requests, sampling):
        results = []
        for request in requests:
            right = [random.Random(request.seed + r).random() < RATE for r in range(request.n)]
            texts = ["Done.\n\nThe answer is: " + ("42" if ok else "41") for ok in right]
            results.append(GenerationResult(tuple(Completion(t, 5, "stop", sampling.max_new_tokens) for t in texts)))
        return results


def labelled(tmp_path, strategy: str, solutions: int = 60, **settings) -> str:
    """A labels folder of `strategy`'s labels for `solutions` solutions of 6 steps."""
    problems = [
        Solution(f"p{i}", f"s{i}", f"What is 20 + 22? ({i})", "42", tuple(f"Step {k} of {i}." for k in range(6)), "t", 0) for i in range(solutions)
    ]
    options = {"rollouts": ROLLOUTS, "sampling": SamplingSettings(max_new_tokens=16), "seed": 3, **settings}
    with AnswerChecker() as checker:
        out = label(strategy, problems, RateGenerator(), checker, StrategySettings(**options))
    folder = tmp_path / strategy
    folder.mkdir()
    pq.write_table(labels_table(out.labelled, Provenance("unit-0", "rate", strategy, 3, "x")), folder / "labels-0.parquet")
    return str(folder)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=256, target="soft").tokenizer


def targets_by_step(rows, examples) -> dict[tuple[str, int], float]:
    """(solution, step) -> its target; every step of these short solutions fits, so an example's targets are its
    labelled steps' in order."""
    by_id = {row.solution_id: row for row in rows}
    found = {}
    for example in examples:
        row = by_id[example.solution_id]
        labelled_steps = [i for i, hard in enumerate(row.hard_labels) if hard is not None]
        found.update({(example.solution_id, i): t for i, t in zip(labelled_steps, example.targets)})
    return found


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


@pytest.mark.parametrize("strategy, settings", [("posterior", {}), ("adaptive", {"ci_width": 0.01})])
def test_an_outcome_stopped_source_trains_whole_on_hard_labels_unbiased_against_exhaustive(tmp_path, tokenizer, strategy, settings):
    """(adaptive with a --ci-width no interval reaches before N: its prefixes stop at their first correct rollout
    alone, as posterior's do; a stop on the interval's width at 0 correct is a hard negative on fewer than N rollouts.)"""
    exhaustive_rows = read_labelled_rows(labelled(tmp_path, "exhaustive"))
    stopped_rows = read_labelled_rows(labelled(tmp_path, strategy, **settings))
    exhaustive_hard = {(row.solution_id, i): float(h) for row in exhaustive_rows for i, h in enumerate(row.hard_labels)}
    probed = {(row.solution_id, i) for row in stopped_rows for i, m in enumerate(row.label_method) if m in ("rollouts", "early_stop")}

    # exhaustive (no early stop) keeps c/N under soft: a mean near the true rate, not the hard labels'
    examples, stats = build_examples(exhaustive_rows, tokenizer, "soft", 256)
    soft = targets_by_step(exhaustive_rows, examples)
    assert stats.outcome_stopped is None and stats.trained["rollouts"] == {"soft": 300}
    assert abs(mean(soft[k] for k in soft if k[1] < 5) - RATE) < 0.05

    examples, stats = build_examples(stopped_rows, tokenizer, "soft", 256)  # the default: auto
    targets = targets_by_step(stopped_rows, examples)
    assert not stats.left_out and all(set(kinds) == {"hard"} for kinds in stats.trained.values())
    assert strategy in stats.outcome_stopped and "chosen by outcome" in stats.outcome_stopped
    # every step it probed trains on exhaustive's own hard label (the same draws), so their means agree
    assert len(probed) >= 200 and all(targets[k] == exhaustive_hard[k] for k in probed)
    expected = 1 - (1 - RATE) ** ROLLOUTS  # 0.94: the chance that any of N rollouts is right
    assert abs(mean(targets[k] for k in probed) - expected) < 0.05

    # skip (the previous default) keeps the steps whose early rounds failed: far below the true rate
    _, stats = build_examples(stopped_rows, tokenizer, "soft", 256, unmeasured_steps="skip")
    assert stats.outcome_stopped is None and stats.left_out["early_stop"] >= 200
    kept = [row.soft_labels[i] for row in stopped_rows for i, m in enumerate(row.label_method) if m == "rollouts"]
    assert not kept or mean(kept) < 0.2


def test_an_early_stop_step_makes_the_source_outcome_stopped_whatever_its_strategy(tmp_path, tokenizer):
    from dataclasses import replace

    rows = read_labelled_rows(labelled(tmp_path, "exhaustive", solutions=4))
    stopped = [replace(rows[0], label_method=("early_stop", *rows[0].label_method[1:]), soft_labels=(None, *rows[0].soft_labels[1:]))]
    _, stats = build_examples(stopped + rows[1:], tokenizer, "soft", 256)
    assert "early_stop" in stats.outcome_stopped and set(stats.trained["rollouts"]) == {"hard"}
    # --unmeasured-steps hard: measured steps soft anyway, the early_stop one on its hard label
    _, stats = build_examples(stopped + rows[1:], tokenizer, "soft", 256, unmeasured_steps="hard")
    assert stats.outcome_stopped is None and stats.trained["rollouts"] == {"soft": 19} and stats.trained["early_stop"] == {"hard": 1}


def test_train_says_in_one_line_per_source_that_it_trains_an_outcome_stopped_source_on_hard_labels(tmp_path, tiny_model_dir, capsys):
    posterior = labelled(tmp_path, "posterior", solutions=24)
    exhaustive = labelled(tmp_path, "exhaustive", solutions=24)
    argv = ["train", "--labels", posterior, "--labels", exhaustive, "--model", str(tiny_model_dir), "--epochs", "1", "--min-steps", "0",
            "--max-steps", "1", "--batch-size", "8", "--max-length", "256", "--device", "cpu"]  # fmt: skip
    assert main([*argv, "--output", str(tmp_path / "run"), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    line = f"{posterior}: posterior stops rollouts at the first correct one, so its soft labels are chosen by outcome: trained on hard labels"
    assert captured.err.count(line) == 1 and captured.err.count("chosen by outcome") == 1
    assert [note for note in result["steps"]["outcome_stopped"]] == [line + " (pass --target hard to say so, or --unmeasured-steps hard "
                                                                     "to train its measured steps soft anyway)"]  # fmt: skip
    assert main([*argv, "--output", str(tmp_path / "run")]) == 0  # finished: the summary, as text
    out = capsys.readouterr().out
    assert out.count(line) == 1


def test_unmeasured_steps_choices_and_default():
    config = TrainConfig(labels="x", output="y", model="m")
    assert config.unmeasured_steps == "auto"
    with pytest.raises(ValueError, match="--unmeasured-steps"):
        TrainConfig(labels="x", output="y", model="m", target="hard", unmeasured_steps="skip")
    assert TrainConfig(labels="x", output="y", model="m", target="hard").unmeasured_steps == "auto"


def test_a_run_saved_under_skip_resumes_under_auto_where_its_targets_are_the_same_and_is_told_what_to_pass_where_not(tmp_path, tiny_model_dir):
    from labeler.prm.trainer import TrainingError, train

    for strategy in ("exhaustive", "posterior"):
        labels = labelled(tmp_path, strategy, solutions=12)
        settings = {"labels": labels, "output": str(tmp_path / f"run-{strategy}"), "model": str(tiny_model_dir), "epochs": 1,
                    "batch_size": 4, "max_length": 256, "device": "cpu", "min_steps": 0}  # fmt: skip
        train(TrainConfig(**settings, max_steps=1, unmeasured_steps="skip"))  # the default before auto
        if strategy == "exhaustive":  # no step stopped on its outcome: auto gives the same targets, and resumes
            assert train(TrainConfig(**settings, max_steps=2)).global_step == 2
        else:
            with pytest.raises(TrainingError, match="under --unmeasured-steps skip, not as this run's: pass --unmeasured-steps skip"):
                train(TrainConfig(**settings, max_steps=2))
            assert train(TrainConfig(**settings, max_steps=2, unmeasured_steps="skip")).global_step == 2
