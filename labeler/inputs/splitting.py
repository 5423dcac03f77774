"""Step splitting: turn a solution text into the steps s1..sk that get labelled.

Blank-line and newline splits never cut inside a display-math environment, `\\[...\\]`,
`$$...$$` or an `[asy]...[/asy]` picture: a step made of half an `align*` block or one line of
Asymptote code is not a reasoning step a completer can continue from. The newline split also
keeps a block with the lines right before and after it, because MATH-style solutions break the
line around display math in mid-sentence ("... appears in the sum\n\\[...\\]where n is ...").

The `thinking` rule is for a reasoning model's thinking, hundreds of short paragraphs: it takes
the blank-line paragraphs (newline lines when the text has no blank line), then merges neighbours
into at most `max_steps` chunks of balanced length in characters: cut j of K-1 falls at the
paragraph boundary nearest to j/K of the text's characters. Characters, not tokens: the split is
the same whatever model labels or scores it, and needs no tokenizer to read an input. A paragraph
is never cut, so neither is display math; one longer than a chunk's share stays a chunk of its own
(then there are fewer than K).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from itertools import pairwise

SPLIT_RULES = ("auto", "blank-line", "newline", "step-prefix", "ki", "thinking")
DEFAULT_MAX_STEPS = 64  # the thinking rule's chunks per trace (--max-steps)

KI_TAG = "ки"  # Math-Shepherd's step tag (Cyrillic), placed after every step

_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")
_NEWLINE = re.compile(r"\n")
# "Step 3:" or "Step 3." at the start of a line, also as markdown "## Step 3:" or "**Step 3:**".
_STEP_MARKER = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?Step[ \t]+\d+[ \t]*\**[ \t]*[:.]", re.MULTILINE)
_BLOCKS = re.compile(
    r"\[asy\].*?\[/asy\]"
    r"|\\begin\{([A-Za-z]+\*?)\}.*?\\end\{\1\}"
    r"|\\\[.*?\\\]"
    r"|\$\$.*?\$\$",
    re.DOTALL,
)


def split_steps(text: str, rule: str = "auto", max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """Split `text` into non-empty, whitespace-stripped steps by `rule` (one of SPLIT_RULES);
    `max_steps` bounds the steps of the `thinking` rule only."""
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; expected one of {', '.join(SPLIT_RULES)}")
    text = text.replace("\r\n", "\n")
    if rule == "thinking":
        paragraphs, joiner = _paragraphs(text)
        return merge_balanced(paragraphs, max_steps, joiner)
    if rule == "auto":
        rule = _auto_rule(text)
    if rule == "ki":
        return _clean(text.split(KI_TAG))
    if rule == "step-prefix":
        return _cut_before(text, [m.start() for m in _STEP_MARKER.finditer(text)])
    if rule == "blank-line":
        return _split_outside_blocks(text, _BLANK_LINES)
    return _split_outside_blocks(text, _NEWLINE, glue_blocks=True)


def merge_balanced(pieces: list[str], max_steps: int, joiner: str = "\n\n") -> list[str]:
    """Neighbouring pieces joined (by `joiner`) into at most `max_steps` chunks of about equal
    characters: cut j goes at the piece boundary nearest to j/max_steps of the total."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    if len(pieces) <= max_steps:
        return pieces
    ends, total = [], 0  # ends[b]: characters up to the boundary after piece b
    for piece in pieces[:-1]:
        total += len(piece)
        ends.append(total)
    total += len(pieces[-1])
    cuts = set()
    for j in range(1, max_steps):
        target = j * total / max_steps
        after = bisect_left(ends, target)  # the first boundary at or past the target, and the one before it
        nearest = min((b for b in (after - 1, after) if 0 <= b < len(ends)), key=lambda b: (abs(ends[b] - target), b))
        cuts.add(nearest + 1)
    bounds = [0, *sorted(cuts), len(pieces)]
    return [joiner.join(pieces[a:b]) for a, b in pairwise(bounds)]


def _paragraphs(text: str) -> tuple[list[str], str]:
    """The paragraphs and the separator to join them again with."""
    paragraphs = _split_outside_blocks(text, _BLANK_LINES)
    if len(paragraphs) == 1 and "\n" in paragraphs[0]:  # no blank lines: one thought per line
        return _split_outside_blocks(text, _NEWLINE, glue_blocks=True), "\n"
    return paragraphs, "\n\n"


def _auto_rule(text: str) -> str:
    if KI_TAG in text:
        return "ki"
    if len(_STEP_MARKER.findall(text)) >= 2:
        return "step-prefix"
    if len(_split_outside_blocks(text, _BLANK_LINES)) >= 2:
        return "blank-line"
    return "newline"


def _split_outside_blocks(text: str, separator: re.Pattern[str], glue_blocks: bool = False) -> list[str]:
    """Split at `separator` except inside a block (or right next to one, with `glue_blocks`)."""
    reach = 1 if glue_blocks else 0
    blocks = [m.span() for m in _BLOCKS.finditer(text)]
    pieces, start = [], 0
    for sep in separator.finditer(text):
        if any(b_start < sep.end() + reach and sep.start() < b_end + reach for b_start, b_end in blocks):
            continue
        pieces.append(text[start : sep.start()])
        start = sep.end()
    pieces.append(text[start:])
    return _clean(pieces)


def _cut_before(text: str, cuts: list[int]) -> list[str]:
    """Pieces starting at each cut; text before the first marker is kept as its own step."""
    bounds = [0, *cuts, len(text)]
    return _clean(text[a:b] for a, b in pairwise(bounds))


def _clean(pieces) -> list[str]:
    return [p.strip() for p in pieces if p.strip()]
