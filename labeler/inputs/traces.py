"""Trajectory-response pairs: a reasoning model's thinking, then the response it gives after it.

Two layouts carry them (the `trace` preset reads both, labeler/inputs/presets.py):

- one text holding `<think>THINKING</think>RESPONSE`. The `<think>` may be missing, when the chat
  template opened the thinking in the prompt (DeepSeek-R1's does): the text before `</think>` is then
  the thinking. A `<think>` that is never closed is thinking cut off before its response.
- a reasoning field (`reasoning`, `reasoning_content`, `thinking`) beside the response field.

The thinking is split into steps by the `thinking` split rule (labeler/inputs/splitting.py); the
response stays whole, one final step after them (SourceRow.thinking_steps says where the thinking
ends). `render_trace` writes a trace back as one text, the way the completer and a fine-tuned model see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
STEP_SEPARATOR = "\n\n"  # between steps: what the completer (labeler/labeling/prompts.py) and the PRM see


@dataclass(frozen=True)
class ParsedTrace:
    thinking: str | None  # None: the text has no thinking block
    response: str  # "" when there is none (thinking cut off, or nothing after it)
    finished: bool  # False: the thinking was never closed, so no response was written


def parse_trace(text: str) -> ParsedTrace:
    """Thinking and response of a `<think>...</think>response` text; ValueError when text comes
    before the `<think>` (a layout this does not know)."""
    close = text.find(THINK_CLOSE)
    open_ = text.find(THINK_OPEN)
    if open_ != -1 and (close == -1 or open_ < close) and text[:open_].strip():
        raise ValueError(f"text before {THINK_OPEN}: expected the thinking first")
    start = open_ + len(THINK_OPEN) if open_ != -1 and (close == -1 or open_ < close) else 0
    if close == -1:
        if open_ == -1:
            return ParsedTrace(None, text.strip(), True)
        return ParsedTrace(text[start:].strip(), "", False)
    return ParsedTrace(text[start:close].strip(), text[close + len(THINK_CLOSE) :].strip(), True)


def has_think_tags(text: object) -> bool:
    return isinstance(text, str) and (THINK_CLOSE in text or text.lstrip().startswith(THINK_OPEN))


def response_part(completion: str) -> str:
    """What a completion answers with: the text after its last `</think>` (all of it when it has none)."""
    close = completion.rfind(THINK_CLOSE)
    return completion if close == -1 else completion[close + len(THINK_CLOSE) :]


def render_trace(steps: Sequence[str], thinking_steps: int, *, open_end: bool = False) -> str:
    """Steps as one text: `<think>\\nthinking\\n</think>\\n\\nresponse` for a trace (thinking_steps > 0),
    the steps joined by blank lines otherwise. `open_end`: a prefix to continue, ending with the
    separator (inside the thinking when the steps end there)."""
    steps = [step.strip() for step in steps]
    if not thinking_steps:
        text = STEP_SEPARATOR.join(steps)
        return text + STEP_SEPARATOR if open_end and steps else text
    thinking, response = steps[:thinking_steps], steps[thinking_steps:]
    text = f"{THINK_OPEN}\n" + STEP_SEPARATOR.join(thinking)
    if not response:
        return text + STEP_SEPARATOR if open_end else text
    text += f"\n{THINK_CLOSE}{STEP_SEPARATOR}" + STEP_SEPARATOR.join(response)
    return text + STEP_SEPARATOR if open_end else text
