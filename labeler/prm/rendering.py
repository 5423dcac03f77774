"""How a solution is shown to the PRM: the one rendering shared by training and scoring.

    [bos] problem "\\n\\n" step_1 "\\n\\n" step_2 "\\n\\n" ... step_k "\\n\\n"

The problem and each step are tokenized on their own and the step separator's tokens (a blank
line, as the completer sees steps in `labeler.labeling.prompts`) follow every step. The PRM reads step i's
score at the last token of the separator after step i: that token has seen the problem and steps
1..i, and it is the same token after every step, like Math-Shepherd's `ки` tag. Tokenizing pieces
apart keeps the score positions exact whatever the tokenizer merges across boundaries.

A reasoning trace (thinking_steps > 0) shows its thinking between `<think>` and `</think>`, each tag
a piece of its own followed by the separator, so the PRM tells the thinking from the response; the
tags get no score position.

A solution longer than `max_length` tokens is cut; the steps whose separator falls beyond the cut
get no position (no training target, no score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labeler.inputs.traces import THINK_CLOSE, THINK_OPEN
from labeler.labeling.prompts import STEP_SEPARATOR


@dataclass(frozen=True)
class RenderedSolution:
    input_ids: list[int]
    score_positions: list[int]  # one per step that fits, in step order

    @property
    def steps_kept(self) -> int:
        return len(self.score_positions)


def render_solution(tokenizer, problem: str, steps: Sequence[str], max_length: int, thinking_steps: int = 0) -> RenderedSolution:
    separator = _encode(tokenizer, STEP_SEPARATOR)
    ids = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    ids += _encode(tokenizer, problem.strip()) + separator
    positions = []
    for i, step in enumerate(steps):
        if thinking_steps and i in (0, thinking_steps):  # the trace's tags, outside every step
            ids += _encode(tokenizer, THINK_OPEN if i == 0 else THINK_CLOSE) + separator
        ids += _encode(tokenizer, step.strip()) + separator
        if len(ids) > max_length:
            break
        positions.append(len(ids) - 1)
    return RenderedSolution(ids[:max_length], positions)


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]
