"""The words the completer model sees: a problem as the user turn, the solution so far as the
start of the assistant turn. Steps are joined by blank lines, the format the instruction asks for."""

from __future__ import annotations

from typing import Sequence

STEP_SEPARATOR = "\n\n"
ANSWER_MARKER = "The answer is"
# Text that starts a new turn or a new problem: the solution is over.
DEFAULT_STOP = ("<|im_start|>", "<|endoftext|>", "\n\nProblem:", "\n\nQuestion:", "\nUser:", "\nHuman:")

INSTRUCTION = (
    "Solve the problem step by step. Write each step as a short paragraph, separated by a blank line. "
    f'End with a line of the form "{ANSWER_MARKER}: <answer>".'
)


def user_message(problem: str) -> str:
    return f"{problem.strip()}\n\n{INSTRUCTION}"


def assistant_prefix(steps: Sequence[str]) -> str:
    """The solution so far; empty when the model is to write a whole solution."""
    if not steps:
        return ""
    return STEP_SEPARATOR.join(step.strip() for step in steps) + STEP_SEPARATOR
