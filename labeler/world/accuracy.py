"""How often the world model solves a problem from scratch, greedily: printed after training, never assumed."""

from __future__ import annotations

from pathlib import Path

from labeler.checking.extraction import extract_answer
from labeler.world.problems import Problem

__all__ = ["generated_answer", "greedy_accuracy", "stated_answer"]


def stated_answer(text: str) -> str | None:
    """The answer a world solution states (its "The answer is" line), as every world figure reads it."""
    return extract_answer(text, last_number=False)


def generated_answer(tokenizer, row) -> str | None:
    """The stated answer of a generated row of token ids; None when it never ended (cut by the token limit)."""
    if tokenizer.eos_token_id not in row.tolist():
        return None
    return stated_answer(tokenizer.decode(row, skip_special_tokens=True))


def greedy_accuracy(model_dir: Path, problems: list[Problem], batch_size: int = 50, max_new_tokens: int = 320) -> dict:
    """{"problems", "correct", "accuracy"}: greedy solutions (transformers, on the CPU) whose stated
    answer equals the problem's. A solution cut by `max_new_tokens` or stating none is wrong."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from labeler.world.training import prompt_text

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    correct = 0
    for i in range(0, len(problems), batch_size):
        batch = problems[i : i + batch_size]
        encoded = tokenizer([prompt_text(tokenizer, p.text) for p in batch], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            generated = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False,
                                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        for problem, row in zip(batch, generated[:, encoded["input_ids"].shape[1] :]):
            correct += generated_answer(tokenizer, row) == str(problem.answer)
    return {"problems": len(problems), "correct": correct, "accuracy": correct / len(problems) if problems else None}
