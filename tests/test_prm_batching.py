"""The trainer's batches: packed rows keep each solution's attention to itself, so training on them
follows the padded layout's loss curve with a fraction of the pad tokens; data-parallel training
(two CPU processes with the environment torchrun gives them, gloo) trains the model one process
trains with twice the accumulation, and resumes to it."""

import json
import multiprocessing
import os
import queue
import re
import socket
import time
from dataclasses import asdict, replace

import pytest
import torch

from labeler.cli import main

from labeler.prm.data import ExampleTensors, PRMExample, build_examples, collate, collate_packed, pack_rows, padding_ratio, plan_rows
from labeler.prm.devices import place
from labeler.prm.model import ProcessRewardModel
from labeler.prm.trainer import TrainingError, TrainResult, packing_keeps_solutions_apart, train
from labeler.store.reader import read_labelled_rows
from tests.synthetic_labels import arithmetic_rows, write_labels
from tests.test_prm_training import model_state, small_config, small_labels
from tests.tiny_prm_backbone import build_windowed_mistral

@pytest.fixture(scope="module")
def windowed_model_dir(tiny_model_dir, tmp_path_factory):
    return build_windowed_mistral(tmp_path_factory.mktemp("windowed-mistral"), tiny_model_dir)


def test_rows_hold_every_solution_once_within_the_capacity_and_come_out_balanced():
    lengths = [50, 30, 30, 20, 10, 40, 25, 5]
    rows = pack_rows(lengths, capacity=80)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    filled = [sum(lengths[i] for i in row) for row in rows]
    assert len(rows) == 3 and max(filled) <= 80 and max(filled) - min(filled) <= 10
    assert pack_rows([100, 10], capacity=60) == [[0], [1]]  # a solution longer than the capacity gets a row of its own
    assert pack_rows([3, 4], capacity=100) == [[0, 1]]
    # by default, the rows that pad least without more attention work than padding to the longest would do
    assert plan_rows([40, 40, 40]) == [[0], [1], [2]]  # nothing to gain: one solution a row, as padded
    # padded: 6 rows of 100 (attention 6 x 100^2); packed: 2 rows of 160 and 140 (2 x 160^2), 320 tokens instead of 600
    assert plan_rows([100, 60, 50, 40, 30, 20]) == [[0, 3, 5], [1, 2, 4]]
    assert plan_rows([100, 60, 50, 40, 30, 20], max_length=128) == [[0], [1, 4, 5], [2, 3]]  # rows of at most 128 tokens
    assert plan_rows([100, 10, 10, 10, 10], pack_length=60) == [[0], [1, 2, 3, 4]]  # --pack-length: the fewest rows of that many


def test_a_packed_batch_puts_each_solution_and_its_targets_where_they_belong():
    shapes = [(6, [2, 5], [1.0, 0.0]), (3, [2], [0.5]), (4, [1, 3], [0.25, 1.0])]  # tokens, score positions, targets
    trajectories = [(5, 1.0), (None, None), (3, 0.0)]  # the last step's position and the trajectory label; none for solution 1
    examples = [
        PRMExample("p", f"s{i}", list(range(10 * i + 1, 10 * i + 1 + n)), positions, targets, [True] * len(targets), 1.0, 0, *trajectory)
        for i, ((n, positions, targets), trajectory) in enumerate(zip(shapes, trajectories))
    ]
    batch = collate_packed(ExampleTensors(examples), [0, 1, 2], pad_token_id=0, pack_length=7)
    assert batch.input_ids.shape == (2, 7) and batch.real_tokens == 13 and batch.solutions == 3
    flat_ids = batch.input_ids.flatten()
    # solution i's tokens are 10i+1, 10i+2, ...: row 0 holds solution 0, row 1 solutions 1 and 2
    assert flat_ids[batch.score_index].tolist() == [3, 6, 13, 22, 24]
    assert batch.targets.tolist() == [1.0, 0.0, 0.5, 0.25, 1.0]
    assert flat_ids[batch.trajectory_index].tolist() == [6, 24] and batch.trajectory_targets.tolist() == [1.0, 0.0]
    for row in batch.position_ids.tolist():
        assert row[0] == 0  # each row starts a solution; positions restart at every solution
    assert sorted(batch.position_ids[batch.input_ids != 0].tolist()) == sorted([*range(6), *range(3), *range(4)])
    assert padding_ratio([6, 3, 4], [[0, 1, 2]], "packed", 7) == pytest.approx(14 / 13)
    assert padding_ratio([6, 3, 4], [[0, 1, 2]], "padded", 7) == pytest.approx(18 / 13)


def test_packed_processbench_math_batches_hold_at_most_1_1_tokens_per_real_token():
    """The issue's target on its data: ProcessBench MATH by the SmolLM2 tokenizer, random batches of 16
    and 32, --max-length 2048 (padding each batch to its longest solution: 2.3 and 2.6)."""
    import json

    from transformers import AutoTokenizer

    from labeler.prm.data import epoch_order, micro_batches
    from labeler.prm.rendering import render_solution
    from tests.conftest import shared_data
    from workers.embedded_model import ensure_embedded_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model())
    rows = [json.loads(line) for line in shared_data("processbench/math.jsonl").read_text().splitlines()]
    lengths = [len(render_solution(tokenizer, row["problem"], row["steps"], 2048).input_ids) for row in rows]
    for batch_size, padded_at_least in ((16, 2.2), (32, 2.4)):
        groups = micro_batches(len(lengths), epoch_order(len(lengths), 0, 0), batch_size)
        assert padding_ratio(lengths, groups, "padded", max_length=2048) > padded_at_least
        assert padding_ratio(lengths, groups, "packed", max_length=2048) <= 1.1


@pytest.mark.parametrize("backbone", ["tiny_llama", "windowed_mistral"])
@torch.no_grad()
def test_packed_solutions_get_the_logits_they_get_alone(backbone, tiny_model_dir, windowed_model_dir, tmp_path):
    folder = tiny_model_dir if backbone == "tiny_llama" else windowed_model_dir
    prm = ProcessRewardModel.from_backbone(str(folder), max_length=384, target="soft").eval()
    torch.nn.init.normal_(prm.head.weight, std=1.0)  # a head that shows differences in the hidden states
    rows = read_labelled_rows(write_labels(tmp_path, arithmetic_rows(problems=6, solutions_per_problem=2, seed=3)))
    examples, _ = build_examples(rows, prm.tokenizer, "soft", 128)
    data = ExampleTensors(examples)
    packed = collate_packed(data, list(range(len(examples))), prm.pad_token_id, pack_length=60)
    assert packed.input_ids.shape[0] < len(examples)  # several solutions share rows
    got = prm(packed.input_ids, position_ids=packed.position_ids, score_index=packed.score_index)
    padded = collate(examples, prm.pad_token_id)
    expected = prm(padded.input_ids, padded.attention_mask)
    # the packed row order differs from the example order: compare per solution
    by_solution = []
    for i, example in enumerate(examples):
        by_solution.append(expected[i, example.score_positions])
    row_order = [i for row in pack_rows(data.lengths, 60) for i in row]
    torch.testing.assert_close(got, torch.cat([by_solution[i] for i in row_order]), rtol=1e-5, atol=1e-5)
    assert packing_keeps_solutions_apart(prm, data, place("cpu", "fp32"))


def test_the_packing_check_catches_a_backbone_that_lets_solutions_attend_to_each_other(tiny_model_dir, tmp_path):
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft")
    rows = read_labelled_rows(write_labels(tmp_path, arithmetic_rows(problems=2, solutions_per_problem=1, seed=3)))
    data = ExampleTensors(build_examples(rows, prm.tokenizer, "soft", 128)[0])
    backbone_forward = prm.backbone.forward
    prm.backbone.forward = lambda position_ids=None, **kwargs: backbone_forward(**kwargs)  # drops the position ids
    assert not packing_keeps_solutions_apart(prm, data, place("cpu", "fp32"))


def metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_packed_training_follows_the_padded_loss_curve_with_less_padding(tiny_model_dir, tmp_path, caplog):
    labels = small_labels(tmp_path, problems=12)
    weighted = write_labels(tmp_path / "weighted", arithmetic_rows(problems=4, solutions_per_problem=2, seed=8, prefix="w"))
    sources = (str(labels), f"{weighted}:3")  # a second label source whose steps weigh 3 in the loss
    common = {"epochs": 2, "batch_size": 6, "gradient_accumulation_steps": 2, "validation_fraction": 0.25, "rendering": "plain"}  # plain: lengths vary, packing gains
    config = lambda out, **more: replace(small_config(labels, out, tiny_model_dir, **common, **more), labels=sources)  # noqa: E731
    padded = train(config(tmp_path / "padded", batching="padded"))
    caplog.clear()
    with caplog.at_level("INFO", logger="labeler.train"):
        packed = train(config(tmp_path / "packed"))
    done = [r.getMessage() for r in caplog.records if "done in" in r.getMessage()]
    ratios = [float(re.search(r"([0-9.]+) tokens per real token", line).group(1)) for line in done]
    assert ratios == pytest.approx([record["padded_per_real_token"] for record in metrics(tmp_path / "packed")], abs=0.005)
    assert padded.global_step == packed.global_step == 4
    for old, new in zip(metrics(tmp_path / "padded"), metrics(tmp_path / "packed"), strict=True):
        assert new["train_loss"] == pytest.approx(old["train_loss"], rel=1e-4)
        assert new["val_loss"] == pytest.approx(old["val_loss"], rel=1e-4)
        assert new["padded_per_real_token"] < old["padded_per_real_token"]
        assert {"solutions_per_second", "tokens_per_second"} <= set(new)
        assert new["val_trajectory_loss"] == pytest.approx(old["val_trajectory_loss"], rel=1e-4)
    old_weights, new_weights = model_state(tmp_path / "padded" / "last"), model_state(tmp_path / "packed" / "last")
    assert "trajectory_head.weight" in old_weights  # the trajectory head trains in both layouts (the labels carry trajectory labels)
    initial = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft").state_dict()
    moved = max((old_weights[name] - initial[name]).abs().max().item() for name in initial if name.startswith("backbone."))
    assert moved > 1e-3  # training changed the weights by far more than the tolerance below
    for name in old_weights:
        # atol 5e-5: the step-surprise term's gradient (a log-softmax over the vocabulary at each span token) sums in another
        # order in each layout (measured: at most 1.4e-5 on weights of about 0.08)
        torch.testing.assert_close(new_weights[name], old_weights[name], rtol=1e-4, atol=5e-5, msg=name)


def _data_parallel_worker(rank: int, world_size: int, port: int, config, results) -> None:
    # the environment torchrun gives each of its processes
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    results.put((rank, asdict(train(config))))


def train_data_parallel(config, world_size: int = 2) -> dict:
    """`train(config)` in `world_size` processes, as torchrun runs `labeler train`; process 0's result.
    The processes are spawned, not forked: a fork of this process (which may hold a live vLLM engine of
    other tests, and torch's thread pools) can die or hang in the child."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_data_parallel_worker, args=(r, world_size, port, config, results)) for r in range(world_size)]
    for process in processes:
        process.start()
    by_rank = {}
    deadline = time.monotonic() + 900
    while len(by_rank) < world_size:
        try:
            rank, result = results.get(timeout=5)
            by_rank[rank] = result
        except queue.Empty:
            dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            assert not dead, f"a training process died (exit codes {dead})"
            assert time.monotonic() < deadline, "the training processes gave no result in 15 minutes"
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert by_rank[1]["process_rank"] == 1 and by_rank[0]["process_rank"] == 0
    assert all("val_loss" not in record for record in by_rank[1]["history"])  # process 0 alone validates
    return by_rank[0]


def data_parallel_labels(tmp_path):
    rows = arithmetic_rows(problems=14, solutions_per_problem=2, seed=5)  # 12 train problems, 24 solutions: 6 micro-batches of 4 an epoch
    for row in rows[3:]:  # trajectory labels on 3 solutions only: most micro-batches have none for the trajectory head
        row |= {"trajectory_verdict": "unchecked", "trajectory_label": None}
    return write_labels(tmp_path / "labels", rows)


def assert_same_training(one, two) -> None:
    alone, together = model_state(one / "last"), model_state(two / "last")
    assert "trajectory_head.weight" in alone  # both heads trained, and compared
    for name in alone:
        torch.testing.assert_close(together[name], alone[name], rtol=1e-4, atol=1e-5, msg=name)
    for a, b in zip(metrics(one), metrics(two), strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4) and b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-4)


def test_two_processes_train_the_model_of_one_with_twice_the_accumulation(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    one = train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    assert one.global_step == 6  # 3 steps an epoch, 2 epochs
    two = tmp_path / "two"
    together = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15))
    assert together["global_step"] == 6 and together["epochs_done"] == 2 and not together["resumed"]
    assert_same_training(tmp_path / "one", two)
    with pytest.raises(TrainingError, match="trained on 2 processes, this run has 1"):
        train(small_config(labels, two, tiny_model_dir, validation_fraction=0.15, epochs=3))


# make faults, not make test: make test keeps two processes against one (above) and a resume on one process
# (tests/test_prm_training.py: test_an_interrupted_run_resumes_to_the_model_of_an_uninterrupted_one).
@pytest.mark.slow
def test_two_processes_stopped_and_resumed_train_the_model_of_one(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    two = tmp_path / "two"
    stopped = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15, max_steps=4))
    assert stopped["global_step"] == 4 and stopped["stopped_early"]
    resumed = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15))
    assert resumed["resumed"] and resumed["global_step"] == 6 and resumed["epochs_done"] == 2
    assert_same_training(tmp_path / "one", two)


def test_under_torchrun_only_process_0_prints_the_result(monkeypatch, tiny_model_dir, tmp_path, capsys):
    import labeler.prm.trainer

    result = TrainResult(str(tmp_path), 1, 3, None, None, False, False, process_rank=1)
    monkeypatch.setattr(labeler.prm.trainer, "train", lambda config: result)
    argv = ["train", "--labels", str(tmp_path), "--output", str(tmp_path / "run"), "--model", str(tiny_model_dir), "--json", "--quiet"]
    assert main(argv) == 0 and capsys.readouterr().out == ""
    result.process_rank = 0
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["global_step"] == 3
