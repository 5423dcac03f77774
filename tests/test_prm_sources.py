"""`labeler train` on several label sources: --labels DIR[:WEIGHT], the weight scaling each step's loss,
the split by problem across sources, resume; and labels shards of schema 1.2 still read."""

import json
import math
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from labeler.cli import main
from labeler.evaluation.human_agreement import predictions_from_labels
from labeler.prm.config import LabelSource, TrainConfig
from labeler.prm.data import build_examples, collate, epoch_order, split_by_problem, weighted_loss
from labeler.prm.model import ProcessRewardModel
from labeler.prm.trainer import TrainingError, train
from labeler.store.reader import read_labelled_rows
from schemas import LABELS_SCHEMA
from tests.synthetic_labels import arithmetic_rows, labels_row, write_labels


def human_rows(rows: list[dict]) -> list[dict]:
    """The same solutions labelled as an import labels them: hard labels only, label_method human."""
    return [
        labels_row(
            row["problem_id"], row["solution_id"] + "-human", row["problem"], row["steps"], [None] * len(row["steps"]), row["hard_labels"],
            label_method=["human"] * len(row["steps"]), label_source="human", strategy="import",
        )  # fmt: skip
        for row in rows
    ]


def write_schema_1_2(directory, rows: list[dict]):
    """Shards as prm-labeler wrote them before schema 1.3: no label_source column."""
    schema = pa.schema([f for f in LABELS_SCHEMA if f.name != "label_source"], metadata={b"prm_labeler.table": b"labels", b"prm_labeler.schema_version": b"1.2"})
    folder = directory / "labels"
    folder.mkdir(parents=True, exist_ok=True)
    old = [{key: value for key, value in row.items() if key != "label_source"} | {"schema_version": "1.2"} for row in rows]
    pq.write_table(pa.Table.from_pylist(old, schema=schema), folder / "part-00000.parquet")
    return directory


@pytest.fixture
def sources(tmp_path):
    """Monte-Carlo labels in a 1.2 shard, and human labels of the same problems' solutions."""
    mc = arithmetic_rows(problems=4, solutions_per_problem=2, seed=3)
    return write_schema_1_2(tmp_path / "mc", mc), write_labels(tmp_path / "human", human_rows(mc))


def config(labels, output, model, **overrides) -> TrainConfig:
    settings = {"labels": labels, "output": str(output), "model": str(model), "epochs": 1, "batch_size": 16, "learning_rate": 1e-3}
    return TrainConfig(**(settings | {"max_length": 384, "device": "cpu", "validation_fraction": 0.0, "min_steps": 0} | overrides))


def test_weighted_loss_is_the_mean_of_weight_times_cross_entropy():
    logits, targets = torch.tensor([0.3, -1.2, 2.0, 0.0]), torch.tensor([1.0, 0.0, 0.25, 1.0])
    weights = torch.tensor([1.0, 1.0, 3.0, 0.5])
    per_step = [-(t * math.log(torch.sigmoid(x)) + (1 - t) * math.log(1 - torch.sigmoid(x))) for x, t in zip(logits, targets)]
    assert weighted_loss(logits, targets, weights).item() == pytest.approx(sum(w * l for w, l in zip(weights.tolist(), per_step)) / 4)
    plain = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)
    assert weighted_loss(logits, targets, torch.ones(4)).item() == plain.item()  # weight 1 everywhere: the plain mean


def test_the_weight_scales_the_loss_the_trainer_reports(tiny_model_dir, tmp_path, sources):
    mc, human = sources
    plain = {"step_surprise": False, "rendering": "plain"}  # the head alone, on the plain rendering, as rebuilt below
    train(config((str(mc), f"{human}:3"), tmp_path / "run", tiny_model_dir, trajectory_loss_weight=0, **plain))  # the step loss alone
    reported = json.loads((tmp_path / "run" / "metrics.jsonl").read_text())["train_loss"]

    # By hand: the untrained PRM (same seed, same head, its bias at the targets' weighted mean) on the one batch of the epoch.
    from labeler.prm.trainer import _priors

    torch.manual_seed(0)
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft", **plain)
    examples = []
    for index, (path, weight) in enumerate([(mc, 1.0), (human, 3.0)]):
        examples += build_examples(read_labelled_rows(path), prm.tokenizer, "soft", 384, weight, index)[0]
    prm.start_at_prior(*_priors(examples))
    batch = collate([examples[i] for i in epoch_order(len(examples), 0, 0)], prm.pad_token_id)
    with torch.no_grad():
        logits = prm(batch.input_ids, batch.attention_mask)[batch.step_mask]
    targets, weights = batch.targets[batch.step_mask], batch.weights[batch.step_mask]
    per_step = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    assert sorted(set(weights.tolist())) == [1.0, 3.0]
    assert reported == pytest.approx((weights * per_step).sum().item() / len(per_step), rel=1e-5)
    assert reported != pytest.approx(per_step.mean().item(), rel=1e-3)  # the weight did change it
    # a human step (soft null) trains on its hard label as 0/1
    assert set(targets[weights == 3.0].tolist()) == {0.0, 1.0}


def test_the_split_is_by_problem_across_sources(tiny_model_dir, tmp_path, sources):
    mc, human = sources
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft")
    examples = [e for i, path in enumerate((mc, human)) for e in build_examples(read_labelled_rows(path), prm.tokenizer, "soft", 128, 1.0, i)[0]]
    train_set, validation = split_by_problem(examples, 0.25, seed=0)
    held_out = {e.problem_id for e in validation}
    assert held_out and not held_out & {e.problem_id for e in train_set}
    assert {(e.problem_id, e.source) for e in validation} == {(p, s) for p in held_out for s in (0, 1)}  # both sources of each

    train(config((str(mc), str(human)), tmp_path / "run", tiny_model_dir, validation_fraction=0.25, batch_size=4))
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    assert set(split["validation_problem_ids"]) == held_out
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text())
    assert set(metrics["val_loss_by_source"]) == {str(mc), str(human)}


def test_several_sources_resume_and_a_changed_source_list_is_refused(tiny_model_dir, tmp_path, sources):
    mc, human = sources
    labels = (str(mc), f"{human}:2")
    train(config(labels, tmp_path / "whole", tiny_model_dir, batch_size=4, epochs=2))
    stopped = train(config(labels, tmp_path / "run", tiny_model_dir, batch_size=4, epochs=2, max_steps=3))
    assert stopped.stopped_early and stopped.global_step == 3
    moved = tmp_path / "moved"
    shutil.copytree(mc, moved)  # a source that moved keeps the run resumable
    resumed = train(config((str(moved), f"{human}:2"), tmp_path / "run", tiny_model_dir, batch_size=4, epochs=2))
    assert resumed.resumed and resumed.epochs_done == 2
    whole, again = (ProcessRewardModel.load(tmp_path / name / "last").state_dict() for name in ("whole", "run"))
    for name in whole:
        torch.testing.assert_close(again[name], whole[name], msg=name)

    with pytest.raises(TrainingError, match=r"changed: labels \(weights 1, 2 -> 1, 3\)"):
        train(config((str(mc), f"{human}:3"), tmp_path / "run", tiny_model_dir, batch_size=4, epochs=2))
    with pytest.raises(TrainingError, match=r"labels \(weights 1, 2 -> 1\)"):
        train(config(str(mc), tmp_path / "run", tiny_model_dir, batch_size=4, epochs=2))
    with pytest.raises(TrainingError, match="other labels"):  # the same weights, the sources swapped
        train(config((f"{human}:1", f"{mc}:2"), tmp_path / "run", tiny_model_dir, batch_size=4, epochs=2))


def test_labels_flags_and_their_weights():
    source = LabelSource.parse
    assert source("runs/mc") == LabelSource("runs/mc", 1.0) and source("runs/human:0.5") == LabelSource("runs/human", 0.5)
    assert source("s3://bucket/job") == LabelSource("s3://bucket/job") and source("s3://bucket/job:2") == LabelSource("s3://bucket/job", 2.0)
    assert source("runs/a:b") == LabelSource("runs/a:b")  # not a number: part of the path
    assert TrainConfig(labels="one", output="o", model="m").labels == ("one",)
    with pytest.raises(ValueError, match="given twice"):
        TrainConfig(labels=("a", "a:2"), output="o", model="m")


@pytest.mark.parametrize("weight", ["0", "-1", "nan", "inf"])
def test_a_weight_that_is_not_finite_and_positive_exits_2(weight, tmp_path, capsys):
    assert main(["train", "--labels", "a", "--labels", f"b:{weight}", "--output", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == f"labeler train: error: --labels b:{weight}: the weight must be a finite number > 0, got {weight}"


def test_schema_1_2_shards_read_as_monte_carlo_labels(tmp_path, sources):
    mc, human = sources
    assert {row.label_source for row in read_labelled_rows(mc)} == {"monte-carlo"}
    assert {p.label_source for p in predictions_from_labels(str(mc))} == {"monte-carlo"}
    # a folder holding shards of both versions
    mixed = tmp_path / "mixed" / "labels"
    mixed.mkdir(parents=True)
    shutil.copy(mc / "labels" / "part-00000.parquet", mixed / "part-00000.parquet")
    shutil.copy(human / "labels" / "part-00000.parquet", mixed / "part-00001.parquet")
    rows = read_labelled_rows(mixed)
    assert [row.label_source for row in rows] == ["monte-carlo"] * 8 + ["human"] * 8
