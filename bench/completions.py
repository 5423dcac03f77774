"""Completions to replay through the labeler's CPU side without an engine (bench/cpu_side.py,
bench/checker_verdicts.py), in three families:

- `processbench`: realistic texts written by real models. A rollout from prefix s1..si of a
  ProcessBench solution is the rest of that solution from a later step, so it reads like a model's
  continuation and ends with the solution's own final answer; one in three ends instead with the
  reference answer (the rollouts of a prefix repeat a handful of answers, as a completer's do).
- `recorded`: the rollouts of a real labeling output (its rollouts/ table), replayed for the same
  problems: what a given model (the tiny random one, the embedded SmolLM2) really writes.
- `degenerate`: what weak or broken models write: a token repeated, a very long text, no answer,
  huge numbers, LaTeX soup, random characters.

`ReplayGenerator` answers the labeler's generate calls from such a pool, the choice of each request's
texts fixed by its seed; with `tokens_per_second` it also waits as long as an engine of that speed
would take (sleeping, so the CPU is free, like a GPU's time), to stand in for a GPU.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

FAMILIES = ("processbench", "recorded", "degenerate")
DEGENERATE_KINDS = ("repeated", "long", "no_answer", "huge_numbers", "latex_soup", "random_chars")
_CHARS_PER_TOKEN = 4  # the token count given to a text that was not generated (a ProcessBench step, a degenerate text)


def processbench_rows(data: Path = DATA, splits: Sequence[str] = ("gsm8k", "math"), limit: int | None = None) -> list[dict]:
    """The first `limit` rows of each split, interleaved (gsm8k, math, gsm8k, ...)."""
    per_split = []
    for split in splits:
        with (data / "processbench" / f"{split}.jsonl").open(encoding="utf-8") as f:
            per_split.append([json.loads(line) for line in f if line.strip()][:limit])
    return [row for group in zip(*per_split) for row in group]


def with_answer(text: str, answer: str) -> str:
    """`text` with its last \\boxed{...} (else its last number) replaced by `answer`."""
    start = text.rfind("\\boxed{")
    if start >= 0:
        depth, i = 0, start + len("\\boxed")
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[:start] + "\\boxed{" + answer + "}" + text[i + 1 :]
            i += 1
    numbers = list(re.finditer(r"-?\d[\d,]*(?:\.\d+)?", text))
    if numbers:
        m = numbers[-1]
        return text[: m.start()] + answer + text[m.end() :]
    return text + f" The answer is {answer}."


def processbench_pool(rows: Iterable[dict]) -> dict[str, list[tuple[str, int]]]:
    """problem -> candidate rollouts (text, tokens): the rest of its solution from each step on, and
    the same ending with the reference answer."""
    pool: dict[str, list[tuple[str, int]]] = {}
    for row in rows:
        steps = row["steps"]
        texts = []
        for cut in range(len(steps)):
            rest = "\n\n".join(steps[cut:])
            texts.append(rest)
            if cut % 3 == 0:
                texts.append(with_answer(rest, row["answer"]))
        pool.setdefault(row["problem"], []).extend((t, max(1, len(t) // _CHARS_PER_TOKEN)) for t in texts)
    return pool


def recorded_pool(output: Path) -> dict[str, list[tuple]]:
    """problem -> the rollouts a labeling output recorded for it (text, tokens, finish reason)."""
    import pyarrow.parquet as pq

    labels = pq.read_table(output / "labels", columns=["solution_id", "problem"]).to_pylist()
    problem_of = {row["solution_id"]: row["problem"] for row in labels}
    rollouts = pq.read_table(output / "rollouts", columns=["solution_id", "text", "tokens", "finish_reason"]).to_pylist()
    pool: dict[str, list[tuple]] = {}
    for r in rollouts:
        if r["finish_reason"] != "final_answer_check" and r["solution_id"] in problem_of:
            pool.setdefault(problem_of[r["solution_id"]], []).append((r["text"], r["tokens"], r["finish_reason"]))
    return pool


def degenerate_text(kind: str, rng: random.Random, answer: str) -> str:
    """One degenerate completion of `kind` (DEGENERATE_KINDS)."""
    if kind == "repeated":
        unit = rng.choice(["the ", "= ", "1 ", "\\\\", "So the answer is ", "\\boxed{", "$$ ", "0.", "Step "])
        return unit * rng.randint(200, 3000)
    if kind == "long":  # a rambling trace: many sentences with numbers, an answer at the very end
        sentences = [
            f"Then we add {rng.randint(1, 999)} to get {rng.randint(1, 9999)}, so the total is {rng.randint(1, 9999)}."
            for _ in range(rng.randint(300, 1500))
        ]
        return " ".join(sentences) + f" Therefore, the answer is {answer}."
    if kind == "no_answer":
        words = "we need to think about this problem carefully and consider each case in turn before concluding".split()
        return " ".join(rng.choice(words) for _ in range(rng.randint(50, 2000)))
    if kind == "huge_numbers":
        return rng.choice(
            [
                "The answer is " + "9" * rng.randint(500, 5000) + ".",
                "So the answer is $\\boxed{10^{10^{10^{10}}}}$.",
                "Thus $\\boxed{2^{3^{4^{5^{6}}}}}$.",
                "The answer is \\boxed{99999!}.",
                "We get " + " + ".join(str(rng.randint(10**20, 10**21)) for _ in range(200)) + " = " + "7" * 400,
                "\\boxed{" + "1" * 3000 + "}",
            ]
        )
    if kind == "latex_soup":
        pieces = ["\\frac{", "\\sqrt{", "}", "{", "^", "_", "\\left(", "\\right)", "x", "2", "+", "\\cdot", "\\int", "\\sum_{", "$", "\\boxed{", "\\\\", "&"]
        return "".join(rng.choice(pieces) for _ in range(rng.randint(100, 3000)))
    if kind == "random_chars":
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0x370, 0x3FF), rng.randint(0x4E00, 0x4FFF)])) for _ in range(rng.randint(50, 4000)))
    raise ValueError(f"unknown degenerate kind {kind!r}")


def degenerate_pool(rows: Iterable[dict], per_kind: int = 2, seed: int = 0) -> dict[str, list[tuple[str, int]]]:
    """problem -> `per_kind` degenerate completions of every kind."""
    pool: dict[str, list[tuple[str, int]]] = {}
    for i, row in enumerate(rows):
        rng = random.Random(f"{seed}:{i}")
        texts = [degenerate_text(kind, rng, row["answer"]) for kind in DEGENERATE_KINDS for _ in range(per_kind)]
        pool.setdefault(row["problem"], []).extend((t, max(1, len(t) // _CHARS_PER_TOKEN)) for t in texts)
    return pool


def degenerate_pairs(rows: Sequence[dict], per_kind: int = 1, seed: int = 0) -> list[tuple[str, str, str]]:
    """(completion, reference answer, problem) for degenerate completions of the rows' problems."""
    answers = {row["problem"]: row["answer"] for row in rows}
    return [(text, answers[problem], problem) for problem, texts in degenerate_pool(rows, per_kind, seed).items() for text, _ in texts]


class ReplayGenerator:
    """The labeler's Generator (labeler/labeling/generation.py) over a pool of completions, no engine.

    A request gets `n` texts of its problem's pool, drawn with its seed (rollout r with seed + r, as vLLM
    does), so that a rerun replays the same completions; a recorded completion keeps its finish reason,
    the others stop (none is cut). `tokens_per_second`: sleep as long as an engine of that speed takes for
    the tokens returned (None: return at once). `stats_file`: a folder where it keeps, after every call, its
    busy seconds and the times of its first and last call (one file per generator, for Ray workers too)."""

    def __init__(self, pool: dict[str, list[tuple]], tokens_per_second: float | None = None, stats_file: Path | None = None,
                 model_name: str = "replay"):  # fmt: skip
        from labeler.labeling.prompts import user_message

        # the labeler's prompts name the problem in its instruction (labeler/labeling/prompts.py)
        self.pool = {user_message(problem): texts for problem, texts in pool.items()}
        self.tokens_per_second = tokens_per_second
        self.model_name = model_name
        self.stats_path = None if stats_file is None else Path(stats_file) / f"replay-{os.getpid()}-{id(self)}.json"
        self.busy = 0.0  # seconds spent generating (sleeping, standing in for the engine)
        self.first_start: float | None = None
        self.last_end = 0.0

    def generate(self, requests, sampling):
        from labeler.labeling.generation import Completion, GenerationResult

        started = time.time()
        results, tokens = [], 0
        for request in requests:
            candidates = self.pool.get(request.user_message)
            if not candidates:
                raise KeyError(f"replay: no completions recorded for the problem of {request.user_message[:80]!r}")
            completions = []
            for r in range(request.n):
                text, n_tokens, *finish = candidates[random.Random(request.seed + r).randrange(len(candidates))]
                completions.append(Completion(text, n_tokens, finish[0] if finish else "stop", budget=sampling.max_new_tokens))
                tokens += n_tokens
            results.append(GenerationResult(tuple(completions)))
        if self.tokens_per_second:
            time.sleep(max(0.0, tokens / self.tokens_per_second - (time.time() - started)))
        ended = time.time()
        self.busy += ended - started
        self.first_start = started if self.first_start is None else self.first_start
        self.last_end = ended
        if self.stats_path is not None:
            self.stats_path.write_text(json.dumps({"busy": self.busy, "first_start": self.first_start, "last_end": self.last_end}))
        return results

    def close(self) -> None:
        pass
