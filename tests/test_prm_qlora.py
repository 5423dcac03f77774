"""QLoRA (`labeler train --lora-rank R --load-in-4bit`): LoRA adapters on a frozen 4-bit NF4 base (bitsandbytes, on
the CPU here), saved as a full PRM whose backbone is the dequantized base with the adapters merged, which scores as the
4-bit model in training did; a stopped run resumes to the weights of an uninterrupted one."""

import json

import pytest
import torch
from safetensors import safe_open

from labeler.prm.config import SHARDING, TrainConfig
from labeler.prm.data import ExampleTensors, collate_packed
from labeler.prm.devices import place
from labeler.prm.lora import merged_state
from labeler.prm.model import ProcessRewardModel
from labeler.prm.qlora import QuantizationError, four_bit_config
from labeler.prm.scoring import step_and_trajectory_logits
from labeler.prm.stepwise import read_training_rows
from labeler.prm.trainer import TrainingError, _add_lora, _examples, _validation_metrics, train
from tests.test_prm_batching import assert_same_training, data_parallel_labels, train_data_parallel
from tests.test_prm_scale import lora_config, untied_copy
from tests.test_prm_training import model_state, small_config, small_labels


def qlora_config(labels, output, model, **overrides) -> TrainConfig:
    return lora_config(labels, output, model, load_in_4bit=True, **overrides)


def four_bit_layers(module: torch.nn.Module) -> dict[str, torch.nn.Module]:
    from bitsandbytes.nn import Linear4bit

    return {name: m for name, m in module.named_modules() if isinstance(m, Linear4bit)}


def in_training_model(config: TrainConfig) -> ProcessRewardModel:
    """The 4-bit model the run ended with: --model quantized again, the adapters injected and last/'s unmerged
    adapters and heads loaded, as a resume builds it (trainer._add_lora checks the base's fingerprint on the way)."""
    state = torch.load(f"{config.output}/last/training_state.pt", weights_only=True)
    prm = ProcessRewardModel.from_backbone(
        config.model, max_length=config.max_length, target=config.target, step_surprise=True,
        trajectory_head="trajectory_head.weight" in state["trainable"], quantization_config=four_bit_config(torch.float32),
    )  # fmt: skip
    _add_lora(prm, config, state)
    return prm


def validation_logits(prm: ProcessRewardModel, config: TrainConfig):
    """The validation split's step logits (and trajectory logits) from `prm`, as the trainer measures them."""
    rows = [read_training_rows(source.path) for source in config.sources]
    train_set, validation = _examples(config, prm, rows)
    sequences = [(e.input_ids, e.score_positions, e.trajectory_position, e.step_spans) for e in validation]
    return step_and_trajectory_logits(prm, sequences, config.batch_size, place("cpu", "fp32")), train_set, validation


def test_qlora_trains_adapters_on_a_4bit_base_and_saves_a_full_prm_that_scores_as_the_model_in_training(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    config = qlora_config(labels, tmp_path / "run", tiny_model_dir)
    result = train(config)
    assert result.global_step == 10 and len(result.history) == 2
    assert result.history[0]["val_loss"] != result.history[1]["val_loss"]  # the model moved between the epochs

    live = in_training_model(config)
    quantized = four_bit_layers(live.backbone)
    assert len(quantized) == 14  # every linear layer of the 2 decoder layers, 4-bit under its adapters
    assert all(layer.weight.dtype == torch.uint8 and not layer.weight.requires_grad for layer in quantized.values())
    state = torch.load(tmp_path / "run" / "last" / "training_state.pt", weights_only=True)
    adapters = {name: t for name, t in state["trainable"].items() if ".lora_B." in name}
    assert len(adapters) == 14 and all(t.abs().max() > 0 for t in adapters.values())  # B starts at 0: every adapter trained

    # Only the adapters and the heads get gradients; the 4-bit base passes them through to the layers below.
    (trained_logits, trajectories), train_set, validation = validation_logits(live, config)
    live.train()
    batch = collate_packed(ExampleTensors(train_set), list(range(len(train_set))), live.pad_token_id)
    steps, ends = live.step_and_trajectory_logits(
        batch.input_ids, position_ids=batch.position_ids, score_index=batch.score_index, trajectory_index=batch.trajectory_index,
        spans=batch.spans,
    )  # fmt: skip
    (steps.sum() + ends.sum()).backward()
    with_grad = {name for name, p in live.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad == set(state["trainable"]) and all(".lora_" in name or not name.startswith("backbone.") for name in with_grad)

    # best/ and last/ hold plain float weights under plain names: no bitsandbytes, no peft, no quantization config
    for name in ("best", "last"):
        folder = tmp_path / "run" / name
        with safe_open(str(folder / "model.safetensors"), framework="pt") as weights:
            keys = list(weights.keys())
            assert {weights.get_tensor(key).dtype for key in keys} == {torch.float32}
        assert not [key for key in keys if any(part in key for part in ("lora", "absmax", "quant", "base_layer"))]
        assert "quantization_config" not in json.loads((folder / "config.json").read_text())
        plain = ProcessRewardModel.load(folder)
        assert not [type(m) for m in plain.modules() if type(m).__module__.split(".")[0] in ("bitsandbytes", "peft")]

    # last/ scores the validation steps as the 4-bit model in training does: a 4-bit layer computes x @ dequantized^T
    # exactly (in float32), so only the rounding of the merge differs (x W' with W' = W + s B A rounded once, against
    # x W + s (x A^T) B^T): measured 9.5e-7 at most on the step logits, 2.4e-7 on the trajectory logits (float32's
    # spacing near 1 is 1.2e-7); 1e-5 is ten times that, and far below what merging into --model's original weights
    # instead moves (1.6e-2 measured on this run) or dropping the adapters (0.66).
    (saved_logits, saved_trajectories), _, _ = validation_logits(ProcessRewardModel.load(tmp_path / "run" / "last"), config)
    flat_trained, flat_saved = torch.tensor(sum(trained_logits, [])), torch.tensor(sum(saved_logits, []))
    assert len(flat_trained) >= 4 and len([t for t in trajectories if t is not None]) >= 1
    torch.testing.assert_close(flat_saved, flat_trained, rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.tensor(saved_trajectories), torch.tensor(trajectories), rtol=0, atol=1e-5)
    # best/ measures the validation loss the run recorded for its epoch, when the 4-bit model in training measured it
    # (measured: 1.6e-8 apart)
    (best_logits, _), _, _ = validation_logits(ProcessRewardModel.load(tmp_path / "run" / "best"), config)
    recorded = result.history[result.best_epoch - 1]["val_loss"]
    assert _validation_metrics(best_logits, validation)["val_loss"] == pytest.approx(recorded, rel=0, abs=1e-6)

    # Scoring the 4-bit model in eval mode with no gradients (as validation does) left its packed weights as loaded:
    # bitsandbytes would repack them in place on CPUs with AVX512-BF16 (labeler.prm.qlora)
    before = {name: layer.weight.data.clone() for name, layer in four_bit_layers(live.backbone).items()}
    validation_logits(live, config)
    for name, layer in four_bit_layers(live.backbone).items():
        assert torch.equal(layer.weight.data, before[name]) and not getattr(layer.weight.quant_state, "packing_format_for_cpu", False), name


def test_qlora_without_step_surprise_saves_a_token_classifier_transformers_loads_without_bitsandbytes(tiny_model_dir, tmp_path):
    from transformers import AutoModelForTokenClassification

    labels = small_labels(tmp_path)
    train(qlora_config(labels, tmp_path / "run", tiny_model_dir, step_surprise=False, epochs=1))
    folder = tmp_path / "run" / "best"
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    classifier = AutoModelForTokenClassification.from_pretrained(folder)
    assert not four_bit_layers(classifier) and all(p.dtype == torch.float32 for p in classifier.parameters())
    weights = dict(classifier.named_parameters())
    for name, tensor in ProcessRewardModel.load(folder).backbone.state_dict().items():
        torch.testing.assert_close(weights[f"model.{name}"], tensor, rtol=0, atol=0, msg=name)


def test_an_interrupted_qlora_run_resumes_to_the_model_of_an_uninterrupted_one(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    train(qlora_config(labels, tmp_path / "whole", tiny_model_dir))
    stopped = train(qlora_config(labels, tmp_path / "cut", tiny_model_dir, max_steps=3))  # mid-epoch, before any validation
    assert stopped.stopped_early and stopped.global_step == 3
    resumed = train(qlora_config(labels, tmp_path / "cut", tiny_model_dir))
    assert resumed.resumed and resumed.global_step == 10
    whole, cut = model_state(tmp_path / "whole" / "last"), model_state(tmp_path / "cut" / "last")
    assert whole.keys() == cut.keys()
    for name in whole:
        assert torch.equal(whole[name], cut[name]), name
    saved = [torch.load(tmp_path / run / "last" / "training_state.pt", weights_only=True) for run in ("whole", "cut")]
    assert saved[0]["frozen_fingerprint"] == saved[1]["frozen_fingerprint"]
    for name, tensor in saved[0]["trainable"].items():
        assert torch.equal(tensor, saved[1]["trainable"][name]), name


def test_qlora_settings_that_cannot_work_are_refused(tiny_model_dir, tmp_path):
    labels = small_labels(tmp_path)
    with pytest.raises(ValueError, match="--load-in-4bit without --lora-rank"):
        small_config(labels, tmp_path / "run", tiny_model_dir, load_in_4bit=True)
    for sharding in [value for value in SHARDING if value != "none"]:
        with pytest.raises(ValueError, match=f"--load-in-4bit with --sharding {sharding}: QLoRA runs on one process or with DDP"):
            qlora_config(labels, tmp_path / "run", tiny_model_dir, sharding=sharding)

    # a run records load_in_4bit; resuming it with another value would put its adapters on another base
    train(qlora_config(labels, tmp_path / "run", tiny_model_dir, max_steps=2))
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["load_in_4bit"] is True
    with pytest.raises(TrainingError, match="load_in_4bit: true -> false"):
        train(lora_config(labels, tmp_path / "run", tiny_model_dir))
    train(lora_config(labels, tmp_path / "plain", tiny_model_dir, max_steps=2))
    with pytest.raises(TrainingError, match="load_in_4bit: false -> true"):
        train(qlora_config(labels, tmp_path / "plain", tiny_model_dir))


def test_a_qlora_resume_on_a_base_whose_weights_changed_is_refused(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    labels = small_labels(tmp_path)
    base = untied_copy(tiny_model_dir, tmp_path / "base")
    train(qlora_config(labels, tmp_path / "run", base, max_steps=2))
    layer = "model.layers.0.mlp.up_proj"
    before = four_bit_layers(AutoModelForCausalLM.from_pretrained(base, quantization_config=four_bit_config(torch.float32)))[layer]
    model = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1.01)  # the hub model was updated since
    model.save_pretrained(base)
    after = four_bit_layers(AutoModelForCausalLM.from_pretrained(base, quantization_config=four_bit_config(torch.float32)))[layer]
    # each block rescaled: the same 4-bit codes, other scales; the fingerprint reads the dequantized weights
    assert torch.equal(before.weight.data, after.weight.data)
    with pytest.raises(TrainingError, match="not the base model the saved adapters were trained on"):
        train(qlora_config(labels, tmp_path / "run", base))


def quantized_state(out_features: int = 8, in_features: int = 128, seed: int = 0):
    """A 4-bit layer's entries in a state dict as peft names them under its LoRA layer `q`, with its adapters."""
    from bitsandbytes.functional import quantize_4bit

    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=generator) * 0.02
    packed, quant_state = quantize_4bit(weight, blocksize=64, compress_statistics=True, quant_type="nf4")
    state = {"q.base_layer.weight": packed} | {f"q.base_layer.weight.{k}": v for k, v in quant_state.as_dict(packed=True).items()}
    a, b = torch.randn(2, in_features, generator=generator), torch.randn(out_features, 2, generator=generator)
    return state | {"q.lora_A.default.weight": a, "q.lora_B.default.weight": b, "norm.weight": torch.ones(in_features)}, quant_state, packed


def test_the_merge_dequantizes_the_4bit_base_and_refuses_quantization_entries_it_does_not_know():
    from bitsandbytes.functional import dequantize_4bit

    state, quant_state, packed = quantized_state()
    assert {key[len("q.base_layer.weight.") :] for key in state if key.startswith("q.base_layer.weight.")} == {
        "absmax", "quant_map", "nested_absmax", "nested_quant_map", "quant_state.bitsandbytes__nf4"
    }  # fmt: skip
    merged = merged_state(state, scaling=0.5)
    assert set(merged) == {"q.weight", "norm.weight"} and merged["q.weight"].dtype == torch.float32
    a, b = state["q.lora_A.default.weight"], state["q.lora_B.default.weight"]
    assert torch.equal(merged["q.weight"], dequantize_4bit(packed, quant_state) + (b @ a) * 0.5)

    for changed, message in [
        ({"q.base_layer.weight.code_v2": torch.zeros(16)}, "4-bit weight q.base_layer.weight this merge does not know \\('code_v2'"),
        ({"k.weight.absmax": torch.zeros(4)}, "k.weight.absmax: a quantization entry with no 4-bit weight"),
        ({"v.weight": torch.zeros(8, 1, dtype=torch.uint8)}, "v.weight: a packed \\(uint8\\) weight without its quantization state"),
    ]:
        with pytest.raises(QuantizationError, match=message):
            merged_state(state | changed, scaling=0.5)
    incomplete = {key: value for key, value in state.items() if not key.endswith(".absmax")}
    with pytest.raises(QuantizationError, match="q.base_layer.weight: its quantization state is incomplete"):
        merged_state(incomplete, scaling=0.5)
    orphan = {key: value for key, value in state.items() if key != "q.base_layer.weight"}
    with pytest.raises(QuantizationError, match="quantization state with no 4-bit weight"):
        merged_state(orphan, scaling=0.5)


def test_two_data_parallel_processes_train_qlora_as_one_process_with_twice_the_accumulation(tiny_model_dir, tmp_path):
    """DDP on two CPU processes (gloo): each quantizes --model alike, the adapters' gradients are averaged."""
    labels = data_parallel_labels(tmp_path)
    train(qlora_config(labels, tmp_path / "one", tiny_model_dir, gradient_accumulation_steps=2, validation_fraction=0.15))
    two = train_data_parallel(qlora_config(labels, tmp_path / "two", tiny_model_dir, validation_fraction=0.15))
    assert two["global_step"] == 6 and not two["resumed"]
    assert_same_training(tmp_path / "one", tmp_path / "two")


def test_qlora_on_gpt2_conv1d_layers_is_refused_as_lora_is(tiny_model_dir, tmp_path):
    """transformers turns GPT-2's Conv1D (weight stored transposed) into 4-bit Linear layers; merged and saved under
    GPT-2's names they would not load (or, square, load transposed): refused before training, as plain LoRA is."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=64, n_layer=1, n_head=2, n_positions=512)).save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    labels = small_labels(tmp_path)
    with pytest.raises(TrainingError, match="adapters on Conv1D layers are not supported"):
        train(lora_config(labels, tmp_path / "q", tmp_path / "gpt2", epochs=1, load_in_4bit=True))
    assert not (tmp_path / "q" / "best").exists()
