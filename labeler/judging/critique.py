"""Reading the verdict of a critique: the 0-based index of the earliest wrong paragraph, or -1 for none.

The prompt asks for the index in \\boxed{} on the last line (labeler/judging/prompts.py); judges do not
always comply, so, in this order:

1. the last \\boxed{...} of the critique, wherever it is (a critique that changes its mind boxes its
   final answer last): an integer, optionally wrapped as "paragraph 3", "\\text{3}", "$3$"; "none"
   or "no error" reads as -1;
2. without a box, the critique's last non-empty line alone: a bare integer ("3", "Answer: -1"), one
   paragraph or step it names ("Paragraph 3", "the earliest error is in step 4"), or words that say
   there is none ("No error.", "All paragraphs are correct"). A line that names more than one is
   ambiguous and not read.

Numbers are read in the prompt's numbering, from 0: "step 4" is index 4. An index that is not a
paragraph of the solution (nor -1) is refused. What cannot be read is None with the reason; the judge
then samples that critique again with another seed (labeler/judging/unit.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.judgments import NO_ERROR

_BOXED = "\\boxed"
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_NAMED = re.compile(r"^(?:paragraph|step)?\s*(?:_|#|no\.?|number)?\s*([-+]?\d+)$")
_NONE_WORDS = re.compile(r"^(?:none|no errors?|no mistakes?|not found|n/?a)$")
_MENTION = re.compile(r"\b(?:paragraph|step)s?\s*(?:_|#|no\.?\s*|number\s*)?(-?\d+)\b")
_BARE = re.compile(r"^(?:(?:the\s+)?(?:final\s+)?(?:answer|index|verdict|earliest\s+error)(?:\s+is)?\s*[:=]?\s*)?([-+]?\d+)$")
_NO_ERROR_PHRASE = re.compile(
    r"\b(?:no\s+(?:errors?|mistakes?|incorrect\s+(?:paragraphs?|steps?))(?:\s+(?:found|were\s+found))?"
    r"|(?:all|every)\s+(?:of\s+the\s+)?(?:paragraphs?|steps?)\s+(?:are|is)\s+correct"
    r"|(?:the\s+)?(?:whole\s+|entire\s+)?solution\s+is\s+(?:entirely\s+|fully\s+)?correct"
    r"|not\s+found)\b"
)
_MINUS_ONE = re.compile(r"(?<![\w.])-1(?![\w.])")


@dataclass(frozen=True)
class ParsedCritique:
    index: int | None  # the earliest wrong paragraph, -1 for none; None: the critique could not be read
    problem: str | None = None  # why it could not be read

    @property
    def parsed(self) -> bool:
        return self.index is not None


def parse_critique(text: str, n_steps: int) -> ParsedCritique:
    """The index a critique of a solution of `n_steps` steps names (rules in the module's docstring)."""
    if not text.strip():
        return ParsedCritique(None, "the critique is empty")
    boxes = boxed_contents(text)
    if boxes:
        index = _index_in_box(boxes[-1])
        if index is None:
            return ParsedCritique(None, f"its last \\boxed{{}} holds {_shown(boxes[-1])}, not a paragraph index")
    else:
        line = next(line for line in reversed(text.splitlines()) if line.strip())
        found = _indices_in_line(line)
        if len(found) != 1:
            if found:
                return ParsedCritique(None, f"no \\boxed{{}}, and its last line names several paragraphs ({', '.join(map(str, sorted(found)))})")
            return ParsedCritique(None, f"no \\boxed{{}}, and its last line names no paragraph: {_shown(line)}")
        index = found.pop()
    if not NO_ERROR <= index < n_steps:
        return ParsedCritique(None, f"it names paragraph {index}, and the solution's paragraphs are 0 to {n_steps - 1}")
    return ParsedCritique(index)


def boxed_contents(text: str) -> list[str]:
    """What each \\boxed{...} of `text` holds, in order (nested braces kept; an unclosed box is left out)."""
    found, start = [], text.find(_BOXED)
    while start >= 0:
        position = start + len(_BOXED)
        while position < len(text) and text[position] == " ":
            position += 1
        if position < len(text) and text[position] == "{":
            depth, end = 0, position
            while end < len(text):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    break
                end += 1
            if depth == 0:
                found.append(text[position + 1 : end])
        start = text.find(_BOXED, position)
    return found


def _index_in_box(content: str) -> int | None:
    value = _WRAPPERS.sub(r"\1", content)
    value = value.replace("$", "").replace("\\", " ").strip().strip(".").strip().lower()
    value = re.sub(r"\s+", " ", value)
    if _NONE_WORDS.match(value):
        return NO_ERROR
    match = _NAMED.match(value)
    return int(match.group(1)) if match else None


def _indices_in_line(line: str) -> set[int]:
    """Every index the line names: a bare number, the paragraphs or steps it mentions, -1 for none."""
    text = re.sub(r"[*`#>]", " ", line).strip().lower()
    text = re.sub(r"\s+", " ", text).strip(" .!:")
    bare = _BARE.match(text)
    if bare:
        return {int(bare.group(1))}
    found = {int(number) for number in _MENTION.findall(text)}
    if _NO_ERROR_PHRASE.search(text) or _MINUS_ONE.search(text):
        found.add(NO_ERROR)
    return found


def _shown(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
