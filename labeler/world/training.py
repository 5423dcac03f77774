"""Train the world model: a small Llama that learns to solve the world's problems step by step.

It sees each training problem exactly as `labeler label` would prompt it (the chat template around
the problem and the labeler's instruction, labeler/labeling/prompts.py) followed by the correct
solution, and learns the solution tokens only. A causal LM trained so continues any prefix: a right
one to the right answer, a wrong one (carried through) to a wrong answer."""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from labeler.inputs.traces import render_trace
from labeler.labeling.prompts import user_message
from labeler.world.problems import Problem, make_problems, solution_steps
from labeler.world.tokenizer import IM_END, train_tokenizer

__all__ = ["WorldModelSettings", "prompt_text", "train_world_model"]


@dataclass(frozen=True)
class WorldModelSettings:
    """What the world model is; the same settings and seed give the same model on one machine.

    One run trains two models: the *policy* (the run saved after `policy_step` steps: it samples the
    solutions that are labelled and the best-of-N candidates, and errs often enough to leave headroom) and
    the *completer* (the run's end: it completes prefixes for Monte-Carlo labels and is the PRMs' base).
    The completer must be stronger than the policy: a model that completes its own samples makes the same
    systematic mistakes from a right prefix that it made in the sample, and Monte-Carlo labels then put the
    first error early (measured in docs/benchmarks/world.md)."""

    hidden_size: int = 128
    layers: int = 4
    heads: int = 2  # head_dim 64: vLLM's CPU attention rejects smaller heads
    train_problems: int = 40_000
    steps: int = 3_000
    policy_step: int = 1_500
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    threads: int = 2  # torch's intra-op threads: a fixed count, so a machine with more cores sums in the same order
    seed: int = 0


def prompt_text(tokenizer, problem_text: str) -> str:
    """The prompt `labeler label` gives the model for a whole solution (workers/vllm_generator.py)."""
    return tokenizer.apply_chat_template([{"role": "user", "content": user_message(problem_text)}], add_generation_prompt=True, tokenize=False)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


POLICY_FOLDER = "policy"  # the policy's Hugging Face folder inside the completer's


def train_world_model(out: Path, settings: WorldModelSettings = WorldModelSettings(), held_out: set[str] = frozenset(),
                      log: Callable[[str], None] = _log, snapshots: dict[int, Path] | None = None) -> Path:  # fmt: skip
    """Train and save the completer and its tokenizer as a Hugging Face folder at `out`, and the policy
    (the run after `settings.policy_step` steps) in `out/policy`. Problems whose text is in `held_out` are
    never trained on. `snapshots` saves the run after more step counts too (for choosing `policy_step`).
    Returns `out`."""
    import torch

    if not 0 < settings.policy_step < settings.steps:
        raise ValueError(f"policy_step {settings.policy_step} must lie between 0 and steps {settings.steps}")
    for step, folder in (snapshots or {}).items():
        if step == settings.policy_step or Path(folder).resolve() in (Path(out).resolve(), (Path(out) / POLICY_FOLDER).resolve()):
            raise ValueError(f"a snapshot after {step} steps into {folder} would replace the policy's or the completer's save")
        if not 0 < step < settings.steps:
            raise ValueError(f"a snapshot after {step} steps is outside the run of {settings.steps}: it would never be saved")
    threads = torch.get_num_threads()
    deterministic, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(settings.threads)
    torch.use_deterministic_algorithms(True)
    try:
        _train(out, settings, held_out, log, snapshots)
    finally:  # the caller's process keeps its own settings
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    return out


def _train(out: Path, settings: WorldModelSettings, held_out, log, snapshots) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(settings.seed)
    out = Path(out)
    saves = {settings.policy_step: out / POLICY_FOLDER, **(snapshots or {})}
    problems = [p for p in make_problems(settings.train_problems, "train", settings.seed) if p.text not in held_out]
    texts = [_solution_text(p) for p in problems]
    prompts_seen = [f"user\n{user_message(p.text)}\nassistant\n" for p in problems[:2000]]
    tokenizer = train_tokenizer(prompts_seen + texts, out)
    examples = [_encode(tokenizer, p, t) for p, t in zip(problems, texts)]
    longest = max(len(ids) for ids, _ in examples)
    log(f"world model: {len(examples)} training problems, {sum(len(i) for i, _ in examples) / len(examples):.0f} tokens each "
        f"(longest {longest}), vocabulary {len(tokenizer)}")  # fmt: skip

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=settings.hidden_size, intermediate_size=4 * settings.hidden_size,
        num_hidden_layers=settings.layers, num_attention_heads=settings.heads, num_key_value_heads=settings.heads,
        max_position_embeddings=1024, tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config).to(torch.float32)
    log(f"world model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {settings.steps} steps of {settings.batch_size}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.01, betas=(0.9, 0.98))
    batches = _batches(examples, settings.batch_size, random.Random(settings.seed), tokenizer.pad_token_id)
    model.train()
    start, tokens = time.monotonic(), 0
    for step in range(settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = _learning_rate(step, settings)
        input_ids, labels, mask = next(batches)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += int(mask.sum())
        if step + 1 in saves:
            _save(model, tokenizer, saves[step + 1], settings, step + 1)
        if step % 100 == 0 or step == settings.steps - 1:
            elapsed = time.monotonic() - start
            eta = elapsed / (step + 1) * (settings.steps - step - 1)
            log(f"world model: step {step + 1}/{settings.steps} loss {loss.item():.4f} {tokens / elapsed:.0f} tokens/s ETA {eta:.0f} s")
    _save(model, tokenizer, out, settings, settings.steps)


def _save(model, tokenizer, folder: Path, settings: WorldModelSettings, trained_steps: int) -> None:
    """A Hugging Face folder of the run as it is after `trained_steps` steps (the settings are the whole run's)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "world_settings.json").write_text(json.dumps({**asdict(settings), "trained_steps": trained_steps}, indent=1) + "\n")


def _solution_text(problem: Problem) -> str:
    return render_trace(solution_steps(problem), 0)


def _encode(tokenizer, problem: Problem, solution: str) -> tuple[list[int], int]:
    """The token ids of prompt + solution + end of turn, and how many of them are the prompt."""
    prompt = tokenizer(prompt_text(tokenizer, problem.text), add_special_tokens=False)["input_ids"]
    answer = tokenizer(solution + IM_END, add_special_tokens=False)["input_ids"]
    return prompt + answer, len(prompt)


def _batches(examples, batch_size: int, rng: random.Random, pad_id: int):
    """Endless padded batches of examples of similar length (little padding); only the solution's
    tokens carry a loss."""
    import torch

    while True:
        order = sorted(rng.sample(range(len(examples)), len(examples)), key=lambda i: len(examples[i][0]) + rng.random() * 8)
        chunks = [order[i : i + batch_size] for i in range(0, len(order) - batch_size + 1, batch_size)] or [order]  # fewer than a batch: one
        rng.shuffle(chunks)
        for chunk in chunks:
            width = max(len(examples[i][0]) for i in chunk)
            ids = torch.full((len(chunk), width), pad_id)
            labels = torch.full((len(chunk), width), -100)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                tokens, prompt_len = examples[i]
                ids[row, : len(tokens)] = torch.tensor(tokens)
                labels[row, prompt_len : len(tokens)] = torch.tensor(tokens[prompt_len:])
                mask[row, : len(tokens)] = 1
            yield ids, labels, mask


def _learning_rate(step: int, settings: WorldModelSettings) -> float:
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
