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

Math-Shepherd's `ки` is a step tag only where it stands alone as Math-Shepherd writes it, " ки" after
each step: a space or tab (or the text's start) before it, whitespace (or the text's end) after it. "ки"
is also two letters of Russian words ("Ники", "яблоки", "ру́ки" with a stress mark, "10-ки", a word
hyphenated across lines), which are text, never cut. STRAY_KI finds what looks like a tag out of place
(" ки." before punctuation, "= 7ки" or "$x$ки" touching a number or formula): the math-shepherd preset
refuses such a row rather than read two steps as one.

Every rule is linear in the text (a reward server splits whatever a policy writes): blocks are
found in one pass, each opener paired with the first closer after it, and an opener with no closer
(an unclosed `\\begin{align}`) is no block.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from itertools import pairwise

SPLIT_RULES = ("auto", "blank-line", "newline", "step-prefix", "ki", "thinking")
DEFAULT_MAX_STEPS = 64  # the thinking rule's chunks per trace (--max-steps)

KI_TAG = "ки"  # Math-Shepherd's step tag (Cyrillic), placed after every step
# The tag: a space, a tab or the text's start before it, whitespace or the text's end after it (module docstring)
KI_TAGS = re.compile(r"(?<![^ \t])ки(?!\S)")
# A tag out of place: as a tag before punctuation (" ки."), or after a digit or the end of a formula ("= 7ки", "$x$ки")
STRAY_KI = re.compile(r"(?<![^ \t])ки(?=[.,;:!?)\]}$])|(?<=[0-9$)\]}])ки(?!\S)")

_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")
_NEWLINE = re.compile(r"\n")
# "Step 3:" or "Step 3." at the start of a line, also as markdown "## Step 3:" or "**Step 3:**".
_STEP_MARKER = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?Step[ \t]+\d+[ \t]*(?:\*+[ \t]*)?[:.]", re.MULTILINE)
# Blocks never cut: [asy]...[/asy], \begin{env}...\end{env}, \[...\], $$...$$.
_OPENERS = re.compile(r"\[asy\]|\\begin\{([A-Za-z]+\*?)\}|\\\[|\$\$")
_CLOSERS = {"[asy]": "[/asy]", "\\[": "\\]", "$$": "$$"}
_ENV_END = re.compile(r"\\end\{([A-Za-z]+\*?)\}")


def split_steps(text: str, rule: str = "auto", max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """Split `text` into non-empty, whitespace-stripped steps by `rule` (one of SPLIT_RULES);
    `max_steps` bounds the steps of the `thinking` rule only."""
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; expected one of {', '.join(SPLIT_RULES)}")
    text = text.replace("\r\n", "\n")
    if rule == "ki" or rule == "auto" and KI_TAGS.search(text):
        return _clean(KI_TAGS.split(text))
    markers = [m.start() for m in _STEP_MARKER.finditer(text)] if rule in ("auto", "step-prefix") else []
    if rule == "step-prefix" or rule == "auto" and len(markers) >= 2:
        return _cut_before(text, markers)
    blocks = _blocks(text)
    if rule == "thinking":
        paragraphs, joiner = _paragraphs(text, blocks)
        return merge_balanced(paragraphs, max_steps, joiner)
    if rule in ("auto", "blank-line"):
        paragraphs = _split_outside_blocks(text, _BLANK_LINES, blocks)
        if rule == "blank-line" or len(paragraphs) >= 2:
            return paragraphs
    return _split_outside_blocks(text, _NEWLINE, blocks, glue_blocks=True)


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


def _paragraphs(text: str, blocks: list[tuple[int, int]]) -> tuple[list[str], str]:
    """The paragraphs and the separator to join them again with."""
    paragraphs = _split_outside_blocks(text, _BLANK_LINES, blocks)
    if len(paragraphs) == 1 and "\n" in paragraphs[0]:  # no blank lines: one thought per line
        return _split_outside_blocks(text, _NEWLINE, blocks, glue_blocks=True), "\n"
    return paragraphs, "\n\n"


def _blocks(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each block, in order: from each opener to the first closer after it, as a lazy
    `opener.*?closer` would match, found in one pass (the lazy pattern is quadratic on an unclosed opener)."""
    env_ends: dict[str, list[tuple[int, int]]] = defaultdict(list)  # env name -> (start, end) of each \end{name}
    for end in _ENV_END.finditer(text):
        env_ends[end[1]].append(end.span())
    found: dict[str, int] = {}  # closer -> its first place at or after the last search (-1: none); searches go forward only
    blocks, position = [], 0
    while opener := _OPENERS.search(text, position):
        if opener[1] is not None:
            ends = env_ends[opener[1]]
            k = bisect_left(ends, (opener.end(), 0))
            end = ends[k][1] if k < len(ends) else -1
        else:
            closer = _CLOSERS[opener[0]]
            at = found.get(closer)
            if at is None or 0 <= at < opener.end():
                at = found[closer] = text.find(closer, opener.end())
            end = at + len(closer) if at >= 0 else -1
        if end < 0:  # never closed: not a block; the text after the opener may still hold blocks
            position = opener.start() + 1
            continue
        blocks.append((opener.start(), end))
        position = end
    return blocks


def _split_outside_blocks(text: str, separator: re.Pattern[str], blocks: list[tuple[int, int]], glue_blocks: bool = False) -> list[str]:
    """Split at `separator` except inside a block (or right next to one, with `glue_blocks`)."""
    reach = 1 if glue_blocks else 0
    pieces, start, b = [], 0, 0
    for sep in separator.finditer(text):
        while b < len(blocks) and blocks[b][1] + reach <= sep.start():  # blocks wholly before this separator
            b += 1
        if b < len(blocks) and blocks[b][0] < sep.end() + reach:  # the first block not before it touches it
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
