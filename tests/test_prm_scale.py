"""The trainer at scale: fully sharded data parallelism (torch's FSDP2, `--sharding fsdp`) on two CPU
processes (gloo, the environment torchrun gives them) trains the model one unsharded process trains
with twice the accumulation, and resumes to it after a stop; LoRA adapters (`--lora-rank`, peft)
train, save merged into a full PRM that loads without peft, and resume exactly."""

import pytest
import torch

from labeler.prm.config import TrainConfig
from labeler.prm.lora import merged_state
from labeler.prm.model import ProcessRewardModel
from labeler.prm.trainer import TrainingError, train
from tests.test_prm_batching import assert_same_training, data_parallel_labels, train_data_parallel
from tests.test_prm_training import model_state, small_config, small_labels


def test_two_sharded_processes_train_the_model_of_one_unsharded_with_twice_the_accumulation(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    one = train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    assert one.global_step == 6
    two = tmp_path / "two"
    sharded = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15, sharding="fsdp"))
    assert sharded["global_step"] == 6 and sharded["epochs_done"] == 2 and not sharded["resumed"]
    assert_same_training(tmp_path / "one", two)
    assert ProcessRewardModel.load(two / "best").settings.threshold is not None  # gathered whole, with its validation threshold


def test_two_sharded_processes_stopped_and_resumed_train_the_model_of_one(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    two = tmp_path / "two"
    stopped = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15, sharding="fsdp", max_steps=4))
    assert stopped["global_step"] == 4 and stopped["stopped_early"]
    resumed = train_data_parallel(small_config(labels, two, tiny_model_dir, validation_fraction=0.15, sharding="fsdp"))
    assert resumed["resumed"] and resumed["global_step"] == 6
    assert_same_training(tmp_path / "one", two)


def test_sharding_without_processes_to_shard_across_is_refused(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    with pytest.raises(TrainingError, match="launch with torchrun"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="fsdp"))
    with pytest.raises(TrainingError, match="on the CPU, use --sharding fsdp"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="fsdp-offload"))


def lora_config(labels, output, model, **overrides) -> TrainConfig:
    return small_config(labels, output, model, lora_rank=4, learning_rate=1e-2, **overrides)


def untied_copy(model_dir, path):
    """The tiny Llama with an output layer of its own (as Qwen2.5-7B has), not its embeddings."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, tie_word_embeddings=False)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(path)
    return path


def test_lora_trains_adapters_alone_and_saves_them_merged_into_a_full_prm(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    model = untied_copy(tiny_model_dir, tmp_path / "untied")
    result = train(lora_config(labels, tmp_path / "run", model))
    assert result.global_step > 0
    base = ProcessRewardModel.from_backbone(str(model), max_length=384, target="soft", step_surprise=True).state_dict()
    trained = model_state(tmp_path / "run" / "last")  # loads with no peft: plain names, full weights
    assert not any("lora" in name for name in trained)
    moved = {name for name in base if not name.startswith(("head.", "trajectory_head.", "surprise_weight")) and not torch.equal(base[name], trained[name])}
    assert moved and all(name.endswith("proj.weight") for name in moved)  # the adapted linear layers, merged; nothing else
    assert "output_layer.weight" in base  # the output layer (not tied here) is the base model's: frozen too
    state = torch.load(tmp_path / "run" / "last" / "training_state.pt", weights_only=True)
    assert {name.split(".")[0] for name in state["trainable"] if ".lora_" not in name} == {"head", "trajectory_head", "surprise_weight"}


def test_an_interrupted_lora_run_resumes_to_the_model_of_an_uninterrupted_one(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    train(lora_config(labels, tmp_path / "whole", tiny_model_dir))
    stopped = train(lora_config(labels, tmp_path / "cut", tiny_model_dir, max_steps=3))
    assert stopped.stopped_early
    resumed = train(lora_config(labels, tmp_path / "cut", tiny_model_dir))
    assert resumed.resumed
    whole, cut = model_state(tmp_path / "whole" / "last"), model_state(tmp_path / "cut" / "last")
    for name in whole:
        assert torch.equal(whole[name], cut[name]), name
    with pytest.raises(TrainingError, match="other settings"):
        train(lora_config(labels, tmp_path / "cut", tiny_model_dir, lora_alpha=1.0, epochs=3))


def test_two_sharded_processes_train_lora_as_one_process_does(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    train(lora_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    two = tmp_path / "two"
    train_data_parallel(lora_config(labels, two, tiny_model_dir, validation_fraction=0.15, sharding="fsdp"))
    assert_same_training(tmp_path / "one", two)


def test_the_merge_adds_the_scaled_low_rank_update_to_its_layer_and_drops_the_adapters():
    w, a, b = torch.randn(3, 5), torch.randn(2, 5), torch.randn(3, 2)
    state = {
        "layers.0.q.base_layer.weight": w, "layers.0.q.lora_A.default.weight": a, "layers.0.q.lora_B.default.weight": b,
        "layers.0.q.base_layer.bias": torch.ones(3), "norm.weight": torch.ones(5),
    }  # fmt: skip
    merged = merged_state(state, scaling=0.5)
    assert set(merged) == {"layers.0.q.weight", "layers.0.q.bias", "norm.weight"}
    torch.testing.assert_close(merged["layers.0.q.weight"], w + 0.5 * b @ a)


def test_lora_on_a_token_classifier_prm_saves_a_checkpoint_transformers_loads_without_peft(tiny_model_dir, tmp_path):
    from transformers import AutoModelForTokenClassification

    labels = small_labels(tmp_path)
    train(lora_config(labels, tmp_path / "run", tiny_model_dir, step_surprise=False))
    classifier = AutoModelForTokenClassification.from_pretrained(tmp_path / "run" / "best")
    prm = ProcessRewardModel.load(tmp_path / "run" / "best")
    weights = dict(classifier.named_parameters())
    for name, tensor in prm.backbone.state_dict().items():  # the merged backbone, as the classifier reads it
        torch.testing.assert_close(weights[f"model.{name}"], tensor, msg=name)


def test_bad_lora_targets_and_accelerate_engines_are_refused_with_what_to_do(tiny_model_dir, tmp_path, monkeypatch):
    labels = small_labels(tmp_path)
    with pytest.raises(TrainingError, match="--lora-target-modules no_such_proj"):
        train(lora_config(labels, tmp_path / "run", tiny_model_dir, lora_target_modules="no_such_proj"))
    with pytest.raises(ValueError, match="--lora-target-modules: name at least one"):
        lora_config(labels, tmp_path / "run", tiny_model_dir, lora_target_modules=" , ")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(TrainingError, match="pass --sharding fsdp"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir))
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(TrainingError, match="pass --sharding deepspeed"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir))
    with pytest.raises(TrainingError, match="launch with torchrun"):  # asked for by the flag as well: on to the launch check
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed"))
    with pytest.raises(ValueError, match="DeepSpeed's bf16 mode keeps float32 master weights"):
        small_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed", precision="bf16")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    with pytest.raises(TrainingError, match="asks for ZeRO stage 2, optimizer offload: --sharding deepspeed runs ZeRO stage 3"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed"))
    for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(TrainingError, match="asks for FSDP"):  # an FSDP config is not run as DeepSpeed either
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed"))
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("DS_ACCELERATOR", "cuda")
    with pytest.raises(TrainingError, match="DS_ACCELERATOR=cuda but the run trains on cpu"):
        train(small_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed"))


# make faults, not make test: make test keeps the sharded stop and resume by --max-steps (above).
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["fsdp", "deepspeed"])
def test_a_sharded_run_killed_mid_training_resumes_to_the_model_of_an_uninterrupted_one(tiny_model_dir, tmp_path, engine):
    """torchrun with two processes and --sharding fsdp (or deepspeed), SIGKILLed (the whole group) once last/ holds step 4 or
    more; the same command run again ends where one unsharded process with twice the accumulation ends."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    labels = data_parallel_labels(tmp_path)
    epochs = 8  # 3 optimizer steps an epoch: 24 in all, last/ saved after each
    train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15, epochs=epochs))
    two = tmp_path / "two"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "labeler.cli", "train", "--labels", str(labels),
        "--output", str(two), "--model", str(tiny_model_dir), "--sharding", engine, "--device", "cpu", "--epochs", str(epochs),
        "--batch-size", "4", "--learning-rate", "1e-3", "--max-length", "384", "--min-steps", "0", "--validation-fraction", "0.15",
        "--save-steps", "1", "--quiet",
    ]  # fmt: skip
    environment = os.environ | {"OMP_NUM_THREADS": "1"}
    run = subprocess.Popen(command, start_new_session=True, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = two / "last" / "training_state.pt"
    deadline = time.monotonic() + 300
    killed_at = None
    while run.poll() is None and time.monotonic() < deadline:
        try:
            step = torch.load(state, weights_only=True)["global_step"]
        except Exception:  # not written yet, or being swapped in
            step = 0
        if step >= 4:
            os.killpg(run.pid, signal.SIGKILL)
            killed_at = step
            break
        time.sleep(0.02)
    run.wait(timeout=60)
    assert killed_at is not None and killed_at < 3 * epochs, f"the run ended before it could be killed: {run.stderr.read().decode()[-2000:]}"
    again = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_training(tmp_path / "one", two)
    epochs_written = [json.loads(line)["epoch"] for line in (two / "metrics.jsonl").read_text().splitlines()]
    assert epochs_written == list(range(1, epochs + 1))  # no epoch's line lost or written twice by the kill


@pytest.mark.parametrize("engine", ["fsdp", "deepspeed"])
def test_a_sharded_lora_run_with_dropout_resumes_to_the_uninterrupted_one(tiny_model_dir, tmp_path, engine):
    """Each process's own random state comes back on resume (dropout draws differ between processes)."""
    labels = data_parallel_labels(tmp_path)
    settings = {"validation_fraction": 0.15, "sharding": engine, "lora_dropout": 0.3}
    train_data_parallel(lora_config(labels, tmp_path / "whole", tiny_model_dir, **settings))
    train_data_parallel(lora_config(labels, tmp_path / "cut", tiny_model_dir, max_steps=2, **settings))
    resumed = train_data_parallel(lora_config(labels, tmp_path / "cut", tiny_model_dir, **settings))
    assert resumed["resumed"] and resumed["global_step"] == 6
    whole, cut = model_state(tmp_path / "whole" / "last"), model_state(tmp_path / "cut" / "last")
    for name in whole:
        assert torch.equal(whole[name], cut[name]), name


@pytest.mark.parametrize("engine", ["fsdp", "deepspeed"])
def test_two_sharded_processes_in_bf16_mixed_train_near_one_unsharded(tiny_model_dir, tmp_path, engine):
    """bf16-mixed sharded gathers the weights in bfloat16 (FSDP's mixed precision; DeepSpeed's bf16 mode keeps them so),
    not autocast's copies: close, not equal."""
    labels = data_parallel_labels(tmp_path)
    one = train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15,
                             precision="bf16-mixed"))  # fmt: skip
    two = train_data_parallel(small_config(labels, tmp_path / "two", tiny_model_dir, validation_fraction=0.15, precision="bf16-mixed",
                                           sharding=engine))  # fmt: skip
    for a, b in zip(one.history, two["history"], strict=True):
        assert b["val_loss"] == pytest.approx(a["val_loss"], rel=0.02) and b["train_loss"] == pytest.approx(a["train_loss"], rel=0.02)


def test_lora_settings_that_cannot_mean_what_they_say_are_refused(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    for overrides, message in [
        ({"lora_alpha": 32.0}, "--lora-alpha without --lora-rank"),
        ({"lora_target_modules": "q_proj", "lora_dropout": 0.1}, "--lora-dropout, --lora-target-modules without --lora-rank"),
        ({"lora_rank": 4, "lora_target_modules": "all-linear,q_proj"}, "give it alone"),
        ({"lora_rank": 4, "precision": "bf16"}, "use bf16-mixed"),
    ]:
        with pytest.raises(ValueError, match=message):
            small_config(labels, tmp_path / "run", tiny_model_dir, **overrides)
    with pytest.raises(TrainingError, match="no layer of the backbone is named nonexistent"):
        train(lora_config(labels, tmp_path / "run", tiny_model_dir, lora_target_modules="q_proj,nonexistent"))
    with pytest.raises(TrainingError, match="self_attn.*not supported"):  # peft's reason, not the first line of a module's printout
        train(lora_config(labels, tmp_path / "run", tiny_model_dir, lora_target_modules="self_attn"))
    assert train(lora_config(labels, tmp_path / "upper", tiny_model_dir, lora_target_modules="ALL-LINEAR", epochs=1)).global_step > 0


def test_a_lora_resume_on_a_base_whose_weights_changed_is_refused(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    labels = small_labels(tmp_path)
    base = untied_copy(tiny_model_dir, tmp_path / "base")
    train(lora_config(labels, tmp_path / "run", base, max_steps=2))
    model = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1.01)  # the hub model was updated since
    model.save_pretrained(base)
    with pytest.raises(TrainingError, match="not the base model the saved adapters were trained on"):
        train(lora_config(labels, tmp_path / "run", base))


def test_two_deepspeed_zero3_processes_train_the_model_of_one_unsharded_and_resume_to_it(tiny_model_dir, tmp_path):
    labels = data_parallel_labels(tmp_path)
    train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    two = tmp_path / "two"
    settings = {"validation_fraction": 0.15, "sharding": "deepspeed", "gradient_checkpointing": True}  # recomputed layers gathered again
    stopped = train_data_parallel(small_config(labels, two, tiny_model_dir, max_steps=4, **settings))
    assert stopped["global_step"] == 4 and stopped["stopped_early"]
    assert sorted(p.name for p in (two / "last" / "deepspeed" / "state").glob("*optim_states.pt")) == [
        f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" for rank in (0, 1)
    ]  # each process's partition of the optimizer, beside the whole PRM
    resumed = train_data_parallel(small_config(labels, two, tiny_model_dir, **settings))
    assert resumed["resumed"] and resumed["global_step"] == 6
    assert_same_training(tmp_path / "one", two)
    assert ProcessRewardModel.load(two / "best").settings.threshold is not None


def test_deepspeed_trains_when_processes_read_their_step_tokens_in_different_numbers_of_chunks(tiny_model_dir, tmp_path):
    """ProcessBench solutions, four a micro-batch: a process's step tokens fill one to three chunks of the output
    layer's log-probabilities (model.py LOG_PROB_CHUNK), and ZeRO-3 gathers that layer at each call, so the processes
    agree on a count (they stopped on a mismatched collective before)."""
    import math
    import sys
    from pathlib import Path

    from labeler.prm.model import LOG_PROB_CHUNK
    from tests.synthetic_labels import write_labels

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from trainer import DEFAULT_INPUT, processbench_rows

    labels = write_labels(tmp_path / "labels", processbench_rows(DEFAULT_INPUT, 16))
    settings = {"max_length": 2048, "epochs": 1, "validation_fraction": 0.0}
    one = train(small_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, **settings))
    prm = ProcessRewardModel.load(tmp_path / "one" / "last")
    counts = [sum(len(step) for step in prm.tokenizer(row["steps"])["input_ids"]) for row in processbench_rows(DEFAULT_INPUT, 16)]
    fewest, most = (math.ceil(sum(four) / LOG_PROB_CHUNK) for four in (sorted(counts)[:4], sorted(counts)[-4:]))
    assert fewest < most  # micro-batches of 4 need different numbers of chunks
    two = train_data_parallel(small_config(labels, tmp_path / "two", tiny_model_dir, sharding="deepspeed", **settings))
    assert two["global_step"] == one.global_step
    assert two["history"][-1]["train_loss"] == pytest.approx(one.history[-1]["train_loss"], rel=1e-4)


def test_log_probabilities_read_in_extra_chunks_are_the_same_and_call_the_layer_as_often_as_asked(monkeypatch):
    from labeler.prm import model

    monkeypatch.setattr(model, "LOG_PROB_CHUNK", 3)
    layer, calls = torch.nn.Linear(4, 7), []
    layer.register_forward_hook(lambda *args: calls.append(1))
    hidden, targets = torch.randn(5, 4), torch.randint(0, 7, (5,))
    alone = model.token_log_probs(layer, hidden, targets)
    assert len(calls) == 2
    padded = model.token_log_probs(layer, hidden, targets, chunks=4)
    assert len(calls) == 2 + 4 and torch.equal(alone, padded)
    with pytest.raises(ValueError, match="need 2 chunks"):
        model.token_log_probs(layer, hidden, targets, chunks=1)


def test_lora_under_deepspeed_bf16_merges_its_adapters_in_float32(tiny_model_dir, tmp_path):
    """DeepSpeed's bf16 mode holds the frozen base in bfloat16 (no master copy): the checkpoint keeps those values in
    float32 and adds the adapters' update to them in float32, rather than rounding the merge to bfloat16."""
    from transformers import AutoModelForCausalLM

    labels = data_parallel_labels(tmp_path)
    config = lora_config(labels, tmp_path / "run", tiny_model_dir, sharding="deepspeed", precision="bf16-mixed", epochs=1,
                         validation_fraction=0.15)  # fmt: skip
    train_data_parallel(config)
    saved = model_state(tmp_path / "run" / "last")
    assert {tensor.dtype for tensor in saved.values()} == {torch.float32}
    state = torch.load(tmp_path / "run" / "last" / "training_state.pt", weights_only=True)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).state_dict()
    name = "layers.0.mlp.down_proj"
    a, b = (state["trainable"][f"backbone.{name}.lora_{x}.default.weight"].float() for x in "AB")
    wanted = base[f"model.{name}.weight"].bfloat16().float() + (b @ a) * (config.resolved_lora_alpha / config.lora_rank)
    torch.testing.assert_close(saved[f"backbone.{name}.weight"], wanted, rtol=0, atol=1e-6)
