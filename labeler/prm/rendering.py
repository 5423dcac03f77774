"""How a solution is shown to the PRM: the one rendering shared by training and scoring.

    plain:  [bos] problem "\\n\\n" step_1 "\\n\\n" step_2 "\\n\\n" ... step_k "\\n\\n"
    chat:   <the chat template around the labeler's user turn, the assistant turn opened>
            step_1 "\\n\\n" step_2 "\\n\\n" ... step_k "\\n\\n"

`chat` shows the solution as the completer wrote it (workers/vllm_generator.py renders the same
user turn, labeler.labeling.prompts), so a backbone that was trained to write solutions reads one in
the format it knows; it is what `labeler train` picks for a tokenizer with a chat template
(`--rendering auto`). `plain` is the rendering of PRMs saved before it (their prm.json has no
`rendering`) and of backbones without a chat template.

The problem (or the chat head) and each step are tokenized on their own and the step separator's
tokens (a blank line, as the completer sees steps in `labeler.labeling.prompts`) follow every step.
The PRM reads step i's score at the last token of the separator after step i: that token has seen
the problem and steps 1..i, and it is the same token after every step, like Math-Shepherd's `ки`
tag. Tokenizing pieces apart keeps the score positions exact whatever the tokenizer merges across
boundaries. Each step's own tokens (without the separator) are its span: a PRM with a step-surprise
term reads the log-probabilities of those tokens (labeler.prm.model).

A reasoning trace (thinking_steps > 0) shows its thinking between `<think>` and `</think>`, each tag
a piece of its own followed by the separator, so the PRM tells the thinking from the response; the
tags get no score position.

A solution longer than `max_length` tokens is cut; the steps whose separator falls beyond the cut
get no position (no training target, no score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from labeler.inputs.traces import THINK_CLOSE, THINK_OPEN
from labeler.labeling.prompts import STEP_SEPARATOR, user_message

RENDERINGS = ("plain", "chat")
PLAIN, CHAT = RENDERINGS


@dataclass(frozen=True)
class RenderedSolution:
    input_ids: list[int]
    score_positions: list[int]  # one per step that fits, in step order
    step_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each kept step's own tokens

    @property
    def steps_kept(self) -> int:
        return len(self.score_positions)


def rendering_for(tokenizer, requested: str = "auto") -> str:
    """`auto`: chat when the tokenizer has a chat template, else plain; otherwise what is requested."""
    if requested != "auto":
        return requested
    return CHAT if getattr(tokenizer, "chat_template", None) else PLAIN


def render_solution(
    tokenizer, problem: str, steps: Sequence[str], max_length: int, thinking_steps: int = 0, rendering: str = PLAIN
) -> RenderedSolution:
    separator = _encode(tokenizer, STEP_SEPARATOR)
    if rendering == CHAT:
        # The template writes any BOS it wants, as the generator's prompt does.
        head = tokenizer.apply_chat_template([{"role": "user", "content": user_message(problem)}], add_generation_prompt=True, tokenize=False)
        ids = _encode(tokenizer, head)
        opened = head.rstrip().endswith(THINK_OPEN)  # the template opened the thinking already (DeepSeek-R1's does), as the generator sees it
    elif rendering == PLAIN:
        ids = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        ids += _encode(tokenizer, problem.strip()) + separator
        opened = False
    else:
        raise ValueError(f"unknown rendering {rendering!r}: one of {', '.join(RENDERINGS)}")
    positions, spans = [], []
    for i, step in enumerate(steps):
        if thinking_steps and i in (0, thinking_steps) and not (i == 0 and opened):  # the trace's tags, outside every step
            ids += _encode(tokenizer, THINK_OPEN if i == 0 else THINK_CLOSE) + separator
        start = len(ids)
        ids += _encode(tokenizer, step.strip())
        end = len(ids)
        ids += separator
        if len(ids) > max_length:
            break
        positions.append(len(ids) - 1)
        spans.append((start, end))
    return RenderedSolution(ids[:max_length], positions, spans)


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]
