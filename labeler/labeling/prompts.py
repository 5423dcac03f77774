"""The words the completer model sees: a problem as the user turn, the solution so far as the
start of the assistant turn. Steps are joined by blank lines, the format the instruction asks for."""

from __future__ import annotations

from typing import Sequence

from labeler.inputs.traces import STEP_SEPARATOR, render_trace

__all__ = ["STEP_SEPARATOR", "ANSWER_MARKER", "DEFAULT_STOP", "INSTRUCTION", "user_message", "assistant_prefix"]

ANSWER_MARKER = "The answer is"
# Text that starts a new turn or a new problem: the solution is over.
DEFAULT_STOP = ("<|im_start|>", "<|endoftext|>", "\n\nProblem:", "\n\nQuestion:", "\nUser:", "\nHuman:")

INSTRUCTION = (
    "Solve the problem step by step. Write each step as a short paragraph, separated by a blank line. "
    f'End with a line of the form "{ANSWER_MARKER}: <answer>".'
)


def user_message(problem: str) -> str:
    return f"{problem.strip()}\n\n{INSTRUCTION}"


def assistant_prefix(steps: Sequence[str], thinking_steps: int = 0) -> str:
    """The solution so far, ending with a step separator; empty when the model is to write a whole
    solution. A trace's prefix opens with `<think>` and, while it ends inside the thinking, leaves it
    open, so the model goes on thinking (labeler/inputs/traces.py)."""
    if not steps:
        return ""
    return render_trace(steps, min(thinking_steps, len(steps)), open_end=True)
