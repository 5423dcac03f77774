"""bench/train_memory.py: the memory arithmetic of docs/guides/train.md, checked against accelerate's own
estimate and DeepSpeed's ZeRO-3 estimate on a config of Qwen2.5-Math-7B-Instruct's shapes (built here: no hub)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import train_memory  # noqa: E402


@pytest.fixture(scope="module")
def qwen_7b_config(tmp_path_factory):
    from transformers import Qwen2Config

    path = tmp_path_factory.mktemp("qwen2-7b-config")
    Qwen2Config(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        vocab_size=152064, tie_word_embeddings=False, max_position_embeddings=4096,
    ).save_pretrained(path)  # fmt: skip
    return path


def test_the_arithmetic_agrees_with_accelerates_estimate_and_the_docs(qwen_7b_config, capsys):
    assert train_memory.main(["--model", str(qwen_7b_config), "--processes", "8", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["parameters"]["total"] == pytest.approx(7.62e9, rel=0.005)
    for dtype in ("float32", "bfloat16"):  # one process, whole model: weights + gradients + optimizer state
        assert figures["one_process_gb"][dtype] == pytest.approx(figures["accelerate_gb"][dtype], rel=1e-6)
    per_gpu = figures["per_process_gb"]
    # docs/guides/train.md: a whole 7B PRM does not fit one 80 GB GPU; sharded over 8 it leaves room for activations
    assert per_gpu["fp32 none"] > 80 and per_gpu["bf16-mixed none"] > 80
    assert per_gpu["bf16-mixed fsdp"] == pytest.approx(18.0, abs=0.05) and per_gpu["bf16 fsdp"] == pytest.approx(10.4, abs=0.05)
    # DeepSpeed's own ZeRO-3 estimate (18 bytes a parameter over 8, plus the largest layer in float32): within 10% of ours
    assert figures["deepspeed_zero3_gb"] == pytest.approx(18.1, abs=0.05)
    assert figures["deepspeed_zero3_gb"] == pytest.approx(per_gpu["bf16-mixed fsdp"], rel=0.1)


def test_lora_trains_the_adapters_and_heads_alone(qwen_7b_config, capsys):
    assert train_memory.main(["--model", str(qwen_7b_config), "--lora-rank", "16", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["parameters"]["trained"] == pytest.approx(40.4e6, rel=0.01)  # rank 16 on every linear layer of 28
    assert figures["per_process_gb"]["bf16 none"] == pytest.approx(15.6, abs=0.3)  # frozen bfloat16 weights, mostly
    per_gpu = figures["per_process_gb"]  # docs/guides/train.md's LoRA row
    assert per_gpu["bf16-mixed none"] == pytest.approx(46.4, abs=0.05) and per_gpu["bf16-mixed fsdp"] == pytest.approx(6.7, abs=0.05)
