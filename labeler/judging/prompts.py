"""The words the judge sees: the problem and the solution's steps as paragraphs numbered from 0, and
the request to name the earliest wrong one in \\boxed{} (-1 when every paragraph is correct), the
critique protocol of ProcessBench (Zheng et al., 2024). The text is ours.

A template is plain text in which the placeholders below are replaced (nothing else in it is special,
braces included): {problem} and {paragraphs} are required, {last_index} is optional.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

PROBLEM, PARAGRAPHS, LAST_INDEX = "{problem}", "{paragraphs}", "{last_index}"
REQUIRED_PLACEHOLDERS = (PROBLEM, PARAGRAPHS)
PLACEHOLDERS = {
    PROBLEM: "the problem's text",
    PARAGRAPHS: "the steps, each as <paragraph_i> ... </paragraph_i>, i from 0, separated by blank lines",
    LAST_INDEX: "the number of the last paragraph (the step count minus one)",
}
_PLACEHOLDER = re.compile("|".join(re.escape(name) for name in PLACEHOLDERS))

DEFAULT_TEMPLATE = """You are reviewing a solution to a math problem. The solution is cut into paragraphs, \
numbered from 0 to {last_index}, each between <paragraph_i> and </paragraph_i> tags.

# Problem

{problem}

# Solution

{paragraphs}

# Your task

Check the paragraphs in order, one at a time: the arithmetic, the algebra, how the problem is read, \
and whether each paragraph follows from the ones before it. Find the first paragraph that contains \
a mistake; later paragraphs do not matter once one is wrong.

Finish with one last line that gives the number of that paragraph inside \\boxed{}, such as \\boxed{1}. \
If no paragraph contains a mistake, finish with \\boxed{-1}."""


class TemplateError(ValueError):
    """A prompt template the judge cannot use; the message says what it lacks."""


def check_template(template: str) -> None:
    """TemplateError when `template` is empty or lacks a required placeholder."""
    if not template.strip():
        raise TemplateError("the prompt template is empty")
    missing = [name for name in REQUIRED_PLACEHOLDERS if name not in template]
    if missing:
        raise TemplateError(
            f"the prompt template has no {' and no '.join(missing)}; it needs {' and '.join(REQUIRED_PLACEHOLDERS)} "
            f"({LAST_INDEX} is optional)"
        )


def paragraphs(steps: Sequence[str]) -> str:
    return "\n\n".join(f"<paragraph_{i}>\n{step.strip()}\n</paragraph_{i}>" for i, step in enumerate(steps))


def critique_prompt(template: str, problem: str, steps: Sequence[str]) -> str:
    """The template with its placeholders filled in, in one pass: text that the problem or a step
    brings in is never replaced again."""
    values = {PROBLEM: problem.strip(), PARAGRAPHS: paragraphs(steps), LAST_INDEX: str(len(steps) - 1)}
    return _PLACEHOLDER.sub(lambda match: values[match.group(0)], template)
