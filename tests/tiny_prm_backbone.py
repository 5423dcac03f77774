"""A tiny random Mistral for the PRM trainer tests, on the tiny Llama's tokenizer.

Its attention window of 8 tokens spans one synthetic step ("1 + 2 = 3." and the blank line that
follows it), so the score token sees its own step and little else: the model then learns the
sums of `tests.synthetic_labels` from scratch in a few hundred CPU steps. Same seed, same weights.
"""

from __future__ import annotations

from pathlib import Path

WINDOW = 8


def build_windowed_mistral(path: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.save_pretrained(path)
    config = MistralConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=512,
        sliding_window=WINDOW,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    MistralForCausalLM(config).save_pretrained(path)
    return path
