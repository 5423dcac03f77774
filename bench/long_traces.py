"""Long reasoning traces made from real step-by-step solutions, for bench/strategies.py --trace-steps.

How a ProcessBench solution of k steps becomes a trace of L steps (L drawn from the asked range):

1. Its first k-1 steps are the thinking, its last step (the one with the final answer) the response.
2. Each thinking step is cut into sentences (at a sentence end followed by a capital letter, never
   inside `$...$`; display math stays in its sentence) and each line: its content paragraphs.
3. Short reflection paragraphs of the kind reasoning models write ("Wait, let me check that
   again.") are spread evenly between the content paragraphs until there are L-1 paragraphs
   (when the content alone has more, the trace preset's --max-steps L-1 merges them instead).
4. The row is written as `<think>paragraphs</think>response`, read by the trace preset with
   `--max-steps L-1`, so the thinking is exactly its L-1 paragraphs (or merged chunks).

The human first error of ProcessBench (step e, or -1) moves to the trace step holding the first
paragraph of step e (the response when e is the last step). The reflections say nothing new, so the
trace goes wrong where the solution did; they only make it long, as thinking is long.

`SimulatedCompleter` is a stand-in for a model, to show the search on long traces at a chosen
success rate in seconds: rollout r of a prefix before the human first error reaches the answer with
probability p_good, after it with p_bad (drawn from the request's seed + r, so every strategy sees
the same rollouts). It measures the strategies, not a model.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.inputs.traces import THINK_CLOSE
from labeler.inputs.splitting import split_steps
from labeler.labeling import prompts
from labeler.labeling.generation import Completion, GenerationResult

REFLECTIONS = (
    "Wait, let me check that again.",
    "Hmm, that seems consistent so far.",
    "Let me make sure no term was dropped.",
    "Okay, so far so good.",
    "Let me re-read the problem to be sure of what it asks.",
    "I should double-check the arithmetic here.",
    "Right, that matches what we had before.",
    "Is there a simpler way to see this? Let me keep going.",
)
WRONG_ANSWER = "987654321"  # what the simulated completer answers when it misses (no reference answer is this)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class LongTrace:
    row: dict  # a trace preset row: id, problem, answer, response
    steps: int  # trace steps: thinking chunks plus the response
    first_error: int  # the human first error, moved into the trace; -1 none
    max_steps: int  # the --max-steps that splits it as built


def sentences(step: str) -> list[str]:
    pieces = []
    for line in split_steps(step, "newline"):
        start = 0
        for cut in _SENTENCE_END.finditer(line):
            if line.count("$", 0, cut.start()) % 2 == 0 and "\\[" not in line[start : cut.start()]:
                pieces.append(line[start : cut.start()].strip())
                start = cut.end()
        pieces.append(line[start:].strip())
    return [piece for piece in pieces if piece]


def lengthen(row: dict, target_steps: int, max_steps: int | None = None) -> LongTrace:
    """The ProcessBench row `row` as a trace of about `target_steps` steps (see the module doc), split
    as a job with `--max-steps max_steps` splits it (default target_steps - 1: exactly the target)."""
    steps = row["steps"]
    if len(steps) < 2 or target_steps < 3:
        raise ValueError("needs a solution of 2 steps or more and a target of 3 steps or more")
    content = [(i, sentence) for i, step in enumerate(steps[:-1]) for sentence in sentences(step)]
    wanted = target_steps - 1
    reflections = max(0, wanted - len(content))
    rng = random.Random(hashlib.sha256(str(row["id"]).encode()).hexdigest())
    paragraphs, first_paragraph = [], {}
    for j, (origin, sentence) in enumerate(content):
        first_paragraph.setdefault(origin, len(paragraphs))
        paragraphs.append(sentence)
        for _ in range((j + 1) * reflections // len(content) - j * reflections // len(content)):
            paragraphs.append(rng.choice(REFLECTIONS))
    trace_row = {
        "id": row["id"],
        "problem": row["problem"],
        "answer": row["answer"],
        "response": "<think>\n" + "\n\n".join(paragraphs) + "\n</think>\n\n" + steps[-1],
    }
    max_steps = max_steps or wanted
    source = to_source_row("trace", 0, trace_row, PresetOptions(max_steps=max_steps, max_row_chars=10**7))
    human = row.get("label", -1)
    if human < 0:
        first_error = -1
    elif human >= len(steps) - 1:
        first_error = source.thinking_steps  # the response
    else:
        first_error = _chunk_holding(source.steps[: source.thinking_steps], paragraphs[: first_paragraph[human] + 1])
    return LongTrace(trace_row, len(source.steps), first_error, max_steps)


def _chunk_holding(chunks: tuple[str, ...], paragraphs_so_far: list[str]) -> int:
    """The chunk holding the last of `paragraphs_so_far` (chunks are consecutive paragraphs joined)."""
    written = "\n\n".join(paragraphs_so_far)
    total = 0
    for index, chunk in enumerate(chunks):
        total += len(chunk) + 2
        if total >= len(written) + 2:
            return index
    return len(chunks) - 1


def _uniform(seed: int, what: str) -> float:
    """A uniform draw in [0, 1) from a seed; hashed, since random.Random's first draws from
    consecutive seeds are far from independent."""
    return int(hashlib.sha256(f"{seed}:{what}".encode()).hexdigest()[:13], 16) / 16**13


class SimulatedCompleter:
    """A Generator whose rollouts reach the answer with a known chance per prefix (module doc)."""

    model_name = "simulated-completer"
    dtype, max_model_len = "none", 10**9

    def __init__(self, traces: list[LongTrace], p_good: float, p_bad: float, tokens: tuple[int, int] = (40, 160)):
        self.p_good, self.p_bad, self.tokens = p_good, p_bad, tokens
        self.on_track: dict[str, tuple[bool, str]] = {}  # assistant prefix -> (before the first error?, reference)
        for trace in traces:
            source = to_source_row("trace", 0, trace.row, PresetOptions(max_steps=trace.max_steps, max_row_chars=10**7))
            for i in range(len(source.steps)):
                prefix = prompts.assistant_prefix(source.steps[: i + 1], source.thinking_steps)
                self.on_track[prefix] = (trace.first_error < 0 or i < trace.first_error, source.reference_answer)

    def describe(self) -> dict:
        return {"model": self.model_name, "model_revision": "simulated", "dtype": self.dtype, "max_model_len": self.max_model_len}

    def generate(self, requests, sampling) -> list[GenerationResult]:
        results = []
        for request in requests:
            before, answer = self.on_track[request.assistant_prefix]
            completions = []
            for r in range(request.n):
                draw, length = _uniform(request.seed + r, "verdict"), _uniform(request.seed + r, "tokens")
                correct = draw < (self.p_good if before else self.p_bad)
                text = f"Continuing.\n\nThe answer is: {answer if correct else WRONG_ANSWER}"
                if request.thinking:  # from inside the thinking, a rollout closes it before it answers
                    text = f"That settles it.\n{THINK_CLOSE}\n\n{text}"
                tokens = self.tokens[0] + int(length * (self.tokens[1] - self.tokens[0] + 1))
                completions.append(Completion(text, tokens, "stop", sampling.max_new_tokens))
            results.append(GenerationResult(tuple(completions)))
        return results

    def close(self) -> None:
        pass
