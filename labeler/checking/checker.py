"""Answer checker: did a completion reach the reference answer?

Three layers, cheapest first:

1. Extraction (in-process, linear time): the final answer of a completion -- the last
   ``\\boxed{}``/``\\fbox{}``, "The answer is ...", "Final Answer: ...", GSM8K ``#### N``, a bare
   answer, and (for plain-number references) the last number in the text.
2. Fast path (in-process, no sympy): normalised string match, exact number comparison
   (thousands separators, decimals vs fractions, scientific notation, percentages),
   multiple-choice letters. GSM8K-style answers never leave this layer.
3. Symbolic path (worker processes): LaTeX parsed by math-verify's grammar (latex2sympy2_extended,
   an ANTLR parser) and compared by math-verify/sympy. Every call runs under a hard deadline; an
   overrunning worker is killed and replaced. Nothing is ever ``eval``-ed: we never call
   math-verify's plain-expression extractor (it runs ``parse_expr``), and in the workers sympy's
   string parser (behind ``sympify(str)``/``parse_expr``) is guarded to accept only numeric
   literals and bare names -- the number tokens the LaTeX grammar hands to ``sympy.Number``.

A checker error or timeout is a verdict, never an exception.
"""

from __future__ import annotations

import enum
import logging
import multiprocessing
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing.connection import wait as _wait_connections
from typing import Sequence

logger = logging.getLogger(__name__)


class Verdict(str, enum.Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    UNPARSEABLE = "unparseable"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class CheckResult:
    verdict: Verdict
    extracted: str | None  # the extracted final answer of the prediction


# Answers longer than this are not answers (a model rambling inside \boxed{}); they never reach
# the symbolic layer. Plain string comparison still applies.
MAX_ANSWER_CHARS = 2_000
# Decimal exponents beyond this are not evaluated exactly in-process (10^{10^{10}}).
_MAX_EXACT_EXPONENT = 400
_MAX_NUMBER_DIGITS = 400

# --------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_MAX_BOX_CANDIDATES = 32


def _match_brace(text: str, open_idx: int, limit: int = 4 * MAX_ANSWER_CHARS + 2) -> int:
    """Index of the brace closing text[open_idx] == '{', or -1. Escaped braces are skipped; a group
    longer than `limit` is no answer and is not scanned to its end."""
    depth = 0
    i = open_idx
    n = min(len(text), open_idx + limit)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """Complete \\boxed{...}/\\fbox{...} groups, last first: (start, end, content)."""
    positions: list[int] = []
    for cmd in _BOX_COMMANDS:
        start = len(text)
        while len(positions) < 4 * _MAX_BOX_CANDIDATES:
            idx = text.rfind(cmd, 0, start)
            if idx < 0:
                break
            positions.append(idx)
            start = idx
    positions.sort(reverse=True)
    spans: list[tuple[int, int, str]] = []
    # Closed groups only; an unclosed (truncated) one is skipped. A bound on candidates keeps this
    # linear-ish even for a megabyte of "\boxed{".
    for idx in positions[:_MAX_BOX_CANDIDATES]:
        cmd_len = len("\\boxed") if text.startswith("\\boxed", idx) else len("\\fbox")
        j = idx + cmd_len
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            end = _match_brace(text, j)
            if end >= 0:
                spans.append((idx, end + 1, text[j + 1 : end]))
        elif j > idx + cmd_len and j < len(text):  # "\boxed 5": one token
            m = re.compile(r"[^\s$.,;]+").match(text, j)
            if m:
                spans.append((idx, m.end(), m.group(0)))
    spans.sort(key=lambda s: s[0], reverse=True)
    return spans


def _last_boxed(text: str) -> tuple[int, str] | None:
    """Start position and content of the last complete box; adjacent boxes ("\\boxed{2} and
    \\boxed{3}") are joined with commas."""
    spans = _boxed_spans(text)
    if not spans:
        return None
    group = [spans[0]]
    for prev in spans[1:]:
        gap = text[prev[1] : group[-1][0]]
        if len(gap) <= 40 and re.fullmatch(r"[\s$,;]*(?:\\\)|\\\]|\\\(|\\\[)?[\s$,;]*(?:and|or|,)?[\s$,;]*(?:\\\(|\\\[)?[\s$]*", gap):
            group.append(prev)
        else:
            break
    group.reverse()
    return group[0][0], ", ".join(g[2].strip() for g in group)


# "Final Answer: ...", "the answer is ...", "Answer: ..." at the start of a line or sentence; not
# "we may check our answer: 17 * 44 = 748".
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer\s*(?:is\s*:?|:|=)?"
    r"|\b(?:the|my|our|correct)\s+answer\s+is\s*:?"
    r"|(?:^|(?<=[\n*#>])|(?<=[.!?]\s))[ \t*#]*answer\s*(?:is\s*:?|:|=))",
    re.IGNORECASE,
)
_MATH_OPENERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def _looks_like_prose(content: str) -> bool:
    plain = re.sub(r"\\[A-Za-z]+(?:\{[^{}]*\})?", " ", content)
    return len(re.findall(r"[A-Za-z]{3,}", plain)) > 3 or bool(re.search(r"[.!?]\s+[A-Z]", content))


def _math_segment_at(text: str, pos: int, max_len: int = 4 * 2_000) -> tuple[str, int] | None:
    """(content, end) of the math segment opening at text[pos] ($$..$$, \\[..\\], \\(..\\), $..$)."""
    for opener, closer in _MATH_OPENERS:
        if text.startswith(opener, pos):
            if opener == "$" and text.startswith("$$", pos):
                continue
            start = pos + len(opener)
            end = text.find(closer, start, start + max_len)
            if opener == "$":
                # inline dollars stay on one line and a currency sign ("$7.00 in change") has no partner
                nl = text.find("\n", start, end if end >= 0 else start + max_len)
                if nl >= 0:
                    return None
            if end < 0:
                return None
            content = text[start:end]
            if opener == "$" and _looks_like_prose(content):
                return None  # two currency signs ("$5. She pays $"), not math
            return content, end + len(closer)
    return None


_SENTENCE_END = re.compile(r"(?<!\d)\.(?=\s|$)|\d\.(?=\s+[A-Z]|\s*$)|[!?](?=\s|$)|\n")


def _first_sentence(s: str) -> str:
    m = _SENTENCE_END.search(s)
    return s[: m.start() + (1 if m and s[m.start()].isdigit() else 0)] if m else s


def _clean_phrase_tail(tail: str) -> str | None:
    """The answer after an answer phrase: a math segment right after it, else the rest of the
    sentence ("The answer is 18 dollars." -> "18 dollars")."""
    stripped = tail.lstrip(" \t*:")
    if stripped.startswith("\n"):
        # "The final answer is\n\[ ... \]": only a display right below the phrase counts.
        stripped = stripped.lstrip()
        if not stripped.startswith(("\\[", "$$", "\\(", "$", "\\boxed", "\\fbox")):
            return None
    tail = stripped
    seg = _math_segment_at(tail, 0)
    if seg is not None:
        content, end = seg
        rest = _first_sentence(tail[end:]).strip()
        # "$5$ dollars" -> keep short unit words, they are stripped in normalisation.
        if rest and re.fullmatch(r"[A-Za-z][A-Za-z ]{0,30}[.!]?", rest) and not re.search(r"\bI hope\b", rest):
            content = content + " " + rest.rstrip(".!")
        return content.strip() or None
    line = tail.split("\n", 1)[0]
    line = re.split(r"\.?\s*I hope it is correct", line, maxsplit=1)[0]
    line = _first_sentence(line)
    cut = re.search(r"(?<=\S)\s*,?\s+(?:because|since|which|as|so)\s", line)
    if cut:
        line = line[: cut.start()]
    line = line.strip().strip("*").strip()
    if line.endswith(".") and not re.search(r"\d\.$", line):
        line = line[:-1]
    return line.strip() or None


_NOT_AN_ANSWER = re.compile(
    r"(?:correct|right|wrong|incorrect|reasonable|plausible|valid|consistent|confirmed|verified|indeed|not\b|"
    r"as\s+follows|given|shown|below|above|that\b|the\s+same|unchanged|still|clear|obvious|yes\b|no\b)",
    re.IGNORECASE,
)


def _last_phrase(text: str) -> tuple[int, str] | None:
    """The last "answer is ..." / "Final Answer: ..." / "#### N", with its position."""
    best: tuple[int, str] | None = None
    matches: deque[re.Match] = deque(maxlen=16)
    matches.extend(_ANSWER_PHRASE.finditer(text))
    # The last phrase that states something ("Final Answer: The final answer is 5" -> the second);
    # "so our answer is correct" states nothing.
    for m in reversed(matches):
        ans = _clean_phrase_tail(text[m.end() : m.end() + 4 * MAX_ANSWER_CHARS])
        if ans is not None and not _NOT_AN_ANSWER.match(ans):
            best = (m.start(), ans)
            break
    idx = text.rfind("####")
    if idx >= 0 and (best is None or idx > best[0]):
        tail = text[idx + 4 : idx + 4 + 4 * MAX_ANSWER_CHARS].split("\n", 1)[0].strip()
        tail = tail.strip("$ ").rstrip(".").strip()
        if tail:
            best = (idx, tail)
    return best


_CONCLUSION_CUE = re.compile(
    r"(?:\b(?:is|are|was|were|be|equals?|becomes?)|=|:)\s*(?:approximately|about|exactly|simply|just|equal\s+to|given\s+by)?\s*:?\s*$",
    re.IGNORECASE,
)
_CONCLUSION_START = re.compile(
    r"^\W*(?:therefore|thus|so|hence|finally|consequently|in\s+conclusion|in\s+summary|overall)\b", re.IGNORECASE
)
_MATH_OPEN_RE = re.compile(r"\$\$|(?<!\\)\$|\\\[|\\\(")
_BOLD_RE = re.compile(r"\*\*([^*\n]{1,120})\*\*")


def _math_segments(text: str) -> list[tuple[int, int, str]]:
    """Math segments of a (short) text, in order: (start, end, content)."""
    out = []
    pos = 0
    while True:
        m = _MATH_OPEN_RE.search(text, pos)
        if m is None:
            return out
        seg = _math_segment_at(text, m.start())
        if seg is None:
            pos = m.end()
            continue
        out.append((m.start(), seg[1], seg[0]))
        pos = seg[1]


def _sentence_start(before: str) -> int:
    """Index where the sentence that `before` ends in starts."""
    ends = [before.rfind(sep) + len(sep) for sep in (". ", ".\n", "\n", "\\]", "? ", "! ") if sep in before]
    return max(ends, default=0)


def _last_paragraph(text: str) -> tuple[int, str]:
    end = len(text.rstrip())
    base = max(0, end - 3000)
    cut = max(text.rfind("\n\n", base, end), text.rfind("\n \n", base, end))
    start = cut + 1 if cut >= 0 else base
    return start, text[start:end]


def _last_conclusion(text: str) -> tuple[int, str] | None:
    """An answer stated in the closing paragraph without a box or answer phrase:
    "Therefore, the area is \\(\\frac{8\\pi}{5}\\) square units." / "Thus, $\\cos x = -\\frac{24}{25}$." /
    "the least possible sum is **14**." The math (or bold) segment must follow a cue ("is", "=", ":",
    or a sentence opening "Therefore,") and end its sentence; a sentence that opens with
    "Therefore/Thus/So/..." outranks one that does not."""
    base, para = _last_paragraph(text)
    cands = [(s, e, c) for s, e, c in _math_segments(para)]
    cands += [(m.start(), m.end(), m.group(1)) for m in _BOLD_RE.finditer(para) if re.search(r"[\d\\]", m.group(1))]
    best = None
    for start, end, content in cands:
        before = para[:start].rstrip()
        sentence = before[_sentence_start(before) :]
        lead = sentence
        if not (_CONCLUSION_CUE.search(lead) or re.fullmatch(r"\W*(?:therefore|thus|so|hence|finally)\W*", lead, re.IGNORECASE)):
            continue
        if content.rstrip().endswith((",", ";")):
            continue  # the sentence goes on
        following = para[end:].lstrip()
        display = para.startswith(("\\[", "$$"), start)
        ended = content.rstrip().endswith(".") or not following or following[0] in ".!?" or (display and following[0].isupper())
        if not ended:
            after = _first_sentence(following)
            # only a few unit words may follow ("... is $12$ square units.")
            if len(re.findall(r"[A-Za-z]{2,}", after)) > 3 or _MATH_OPEN_RE.search(after) or "**" in after:
                continue
        content = content.strip().strip("*").strip()
        if not content:
            continue
        rank = 1 if (_CONCLUSION_START.search(sentence) or re.search(r"answer|final", sentence, re.IGNORECASE)) else 0
        key = (rank, start)
        if best is None or key > best[0]:
            best = (key, (base + start, content))
    return best[1] if best else None


# Numbers of prose, not exponents, subscripts or coefficients ("x^5", "a_2", "3x").
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.^_])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?![\w^(])|(?<![\w.^_])-?\.\d+(?![\w^(])")
_LATEX_WORD = re.compile(r"\\[A-Za-z]+")
_COMPUTED = re.compile(r"=\s*(?:\\\$|\$)?\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")


_NEGATION = re.compile(
    r"\bnot\s+(?:a\s+|the\s+)?(?:solution|equal|valid|possible|correct|answer|true)\b|\bno\s+(?:solution|answer)s?\b|"
    r"\bcannot\s+be\s+(?:determined|found|solved|computed)\b",
    re.IGNORECASE,
)


def _last_number(text: str) -> str | None:
    """The number a word-problem solution ends on: in the last sentence with a number, the last
    number the solution computed somewhere ("= 34" above, so "... a total of 34 hours ... in 4
    weeks" gives 34), else the last number."""
    tail = text[-4000:]
    nums = list(_NUMBER_IN_TEXT.finditer(tail))
    if not nums:
        return None
    last = nums[-1]
    chosen = last
    before = tail[: last.start()]
    sentence = tail[_sentence_start(before) : last.end() + 200]
    sentence = _first_sentence(sentence[: sentence.find(last.group(0)) + len(last.group(0))] + _first_sentence(tail[last.end() :]))
    if _NEGATION.search(sentence):
        return None  # "So x = 14 and y = 15 is not a solution.": no answer is stated
    if not re.search(r"=\s*(?:\\\$|\$)?\s*$", tail[max(0, last.start() - 8) : last.start()]):
        before = tail[: last.start()]
        s_start = _sentence_start(before)
        in_sentence = [m for m in nums if m.start() >= s_start]
        if len(in_sentence) > 1:
            results = {r.group(1).replace(",", "") for r in _COMPUTED.finditer(tail, 0, last.end())}
            computed = [m for m in in_sentence if m.group(0).replace(",", "") in results]
            if computed:
                chosen = computed[-1]
    s = chosen.group(0)
    rest = tail[chosen.end() : chosen.end() + 3]
    if rest.startswith("%") or rest.startswith("\\%"):
        s += "%"
    return s


def _looks_bare(text: str) -> bool:
    """A short answer string rather than prose: math with at most a few words ("18 dollars",
    "x = 3"), or one or two words without sentence punctuation ("Friday", "no solution")."""
    s = text.strip()
    if not s or len(s) > 200 or "\n" in s:
        return False
    words = re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", _LATEX_WORD.sub(" ", re.sub(r"\\text\{[^{}]*\}", " ", s)))
    if re.search(r"[\d\\=^_{}()\[\]+*/<>|]", s):
        return len(words) <= 3
    return len(words) <= 2 and not re.search(r"[.,;:!?'\"]\s*\S", s)


def _answer_from_sentence(s: str, last_number: bool) -> str:
    """A phrase answer that is a whole sentence ("Verna received $7.00 in change"): its math, or
    its number (word problems)."""
    if _looks_bare(s):
        return s
    segs = _math_segments(s)
    if segs:
        return segs[-1][2]
    if last_number:
        n = _last_number(s)
        if n is not None:
            return n
    return s


def extract_answer(text: str, *, last_number: bool = True) -> str | None:
    """The final answer stated in a completion or a whole solution, or None.

    Order: the latest of (last complete ``\\boxed{}``/``\\fbox{}``, last "answer is"/"Final Answer:"
    phrase, last ``#### N``); else a math answer stated in the closing paragraph ("Therefore, the
    area is $12\\pi$."); else the whole text when it is a bare answer; else, when
    ``last_number`` is set, the last number in the text.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    boxed = _last_boxed(text)
    phrase = _last_phrase(text)
    chosen: str | None = None
    if boxed is not None and (phrase is None or boxed[0] >= phrase[0] or "\\boxed" in phrase[1] or "\\fbox" in phrase[1]):
        chosen = boxed[1]
    elif phrase is not None:
        chosen = _answer_from_sentence(phrase[1], last_number)
    if chosen is None:
        concl = _last_conclusion(text)
        if concl is not None:
            chosen = concl[1]
    if chosen is None and _looks_bare(text):
        chosen = text.strip()
    if chosen is None and last_number:
        chosen = _last_number(text)
    if chosen is None:
        return None
    chosen = _strip_math_delimiters(chosen.strip())
    return chosen or None


def _strip_math_delimiters(s: str) -> str:
    changed = True
    while changed and s:
        changed = False
        for a, b in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**")):
            if len(s) >= len(a) + len(b) and s.startswith(a) and s.endswith(b):
                s = s[len(a) : len(s) - len(b)].strip()
                changed = True
        if s.endswith(".") and not re.search(r"\d\.$", s[-2:]) or s.endswith("\\."):
            s = s[:-1].rstrip()
            changed = True
    return s


def _extract_reference(reference: str) -> str | None:
    """A reference answer is normally bare; a whole reference solution is reduced to its answer."""
    if not isinstance(reference, str) or not reference.strip():
        return None
    s = reference.strip()
    if "####" in s or "\\boxed" in s or "\\fbox" in s or "\n" in s:
        got = extract_answer(s, last_number=False)
        if got is not None:
            return got
    return _strip_math_delimiters(s) or None


# --------------------------------------------------------------------------------------------
# Normalisation and the fast path
# --------------------------------------------------------------------------------------------

_UNIT_WORDS = (
    r"(?:dollars?|cents?|euros?|pounds?|yuan|units?|square\s+(?:units|feet|meters|inches|cm|m|ft)|"
    r"sq\.?\s*(?:units|ft|m|cm|in)|cubic\s+\w+|degrees?|radians?|percent|percentage|points?|"
    r"meters?|metres?|centimeters?|millimeters?|kilometers?|km|cm|mm|m|inches|inch|in|feet|foot|ft|"
    r"yards?|yd|miles?|mi|mph|kph|km/h|m/s|seconds?|secs?|s|minutes?|mins?|hours?|hrs?|h|days?|"
    r"weeks?|months?|years?|grams?|g|kilograms?|kg|mg|pounds?|lbs?|lb|ounces?|oz|liters?|litres?|"
    r"l|ml|gallons?|gal|cups?|quarts?|pints?)"
)
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACES_CMD = re.compile(r"\\(?:,|;|:|!|>|\s|quad|qquad|displaystyle|textstyle|left|right|big|Big|bigg|Bigg)(?![A-Za-z])")
_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![A-Za-z])")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![A-Za-z])|\^\s*\{\s*\\text\{o\}\s*\}")
_PERCENT = re.compile(r"\\?%|\s*\\text\{\s*percent\s*\}|\s+percent(?:age)?\b|\\percent(?![A-Za-z])")
_CURRENCY = re.compile(r"\\\$|\$|€|£|¥|₹|\\euro(?![A-Za-z])|\\pounds(?![A-Za-z])|\\text\{\s*dollars?\s*\}")


@dataclass(frozen=True)
class _Norm:
    text: str  # normalised LaTeX-ish text, spaces removed
    spaced: str  # normalised, spaces kept (for the symbolic layer)
    percent: bool


def _normalise(s: str) -> _Norm:
    s = s.strip()
    s = _strip_math_delimiters(s)
    s = s.replace("\\varnothing", "\\emptyset")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\dbinom", "\\binom")
    s = s.replace("\\le ", "\\leq ").replace("\\ge ", "\\geq ").replace("\u2212", "-")
    s = s.replace("\\\\", "\u27e8NL\u27e9")  # protect row separators of matrices/arrays
    s = s.replace("\\{", "\u27e8LB\u27e9").replace("\\}", "\u27e8RB\u27e9")  # protect set braces
    s = _SPACES_CMD.sub(" ", s)
    s = re.sub(r"\\(?=\d)", "", s)  # "\15" (a mangled "\$15") is 15
    s = s.replace("~", " ")
    if _TRIG.search(s):
        # inside trigonometry a degree sign is a unit to convert: \sin 15^\circ = \sin(15 pi/180)
        s = re.sub(r"(\d+(?:\.\d+)?)\s*(?:" + _DEGREE.pattern + ")", r"\\frac{\1\\pi}{180}", s)
    s = _DEGREE.sub("", s)
    percent = bool(_PERCENT.search(s))
    if percent:
        s = _PERCENT.sub("", s)
    s = _CURRENCY.sub("", s)
    # \text{...}: a unit after a quantity is dropped, otherwise the text is kept (\text{Friday}).
    s = re.sub(
        r"(?<=[\d}\s])\s*\\(?:text|mbox|mathrm)\s*\{\s*" + _UNIT_WORDS + r"(?:\^?\{?\d\}?)?\s*\.?\s*\}(?:\s*\^\s*\{?\d\}?)?",
        "",
        s,
    )
    for _ in range(4):
        new = _TEXT_CMD.sub(lambda m: m.group(1), s)
        if new == s:
            break
        s = new
    # Trailing unit words after a number: "18 dollars", "5 cm^2".
    s = re.sub(r"(?<=[\d}])\s*" + _UNIT_WORDS + r"(?:\^?\{?[23]\}?)?\s*\.?$", "", s, flags=re.IGNORECASE)
    # \frac12 -> \frac{1}{2}, \frac\pi2 -> \frac{\pi}{2}, \frac1{2x} -> \frac{1}{2x}, \sqrt2 -> \sqrt{2}
    tok = r"(\\[A-Za-z]+|[0-9A-Za-z])"
    s = re.sub(r"\\frac\s*" + tok + r"\s*" + tok, r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*" + tok + r"\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*" + tok, r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+)", r"\\sqrt{\1}", s)
    s = s.replace("\u27e8LB\u27e9", "\\{").replace("\u27e8RB\u27e9", "\\}").replace("\u27e8NL\u27e9", "\\\\")
    s = s.strip().rstrip(".").strip()
    spaced = re.sub(r"\s+", " ", s)
    return _Norm(text=re.sub(r"\s+", "", s), spaced=spaced, percent=percent)


_NUM_PLAIN = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[+-]?\.\d+")
_NUM_SCI = re.compile(
    r"(?P<m>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE](?P<e>[+-]?\d+)|(?:\\times|\\cdot|\*|x|×)10\^(?:\{(?P<e2>[+-]?\d+)\}|(?P<e3>[+-]?\d)))"
)
_NUM_POW10 = re.compile(r"10\^(?:\{(?P<e>[+-]?\d+)\}|(?P<e2>[+-]?\d))")
_NUM_FRAC = re.compile(r"(?P<sign>[+-]?)\\frac\{(?P<a>[+-]?\d+)\}\{(?P<b>[+-]?\d+)\}")
_NUM_SLASH = re.compile(r"(?P<a>[+-]?\d+)/(?P<b>[+-]?\d+)")


def _parse_number(t: str) -> Fraction | None:
    """An exact number from a normalised, space-free string, or None. Never evaluates code."""
    if not t or len(t) > _MAX_NUMBER_DIGITS:
        return None
    if t[0] == "(" and t[-1] == ")" and t.count("(") == 1:
        t = t[1:-1]
    try:
        if _NUM_PLAIN.fullmatch(t):
            return Fraction(t.replace(",", ""))
        m = _NUM_SCI.fullmatch(t)
        if m:
            e = int(m.group("e") or m.group("e2") or m.group("e3"))
            if abs(e) > _MAX_EXACT_EXPONENT:
                return None
            return Fraction(m.group("m")) * Fraction(10) ** e
        m = _NUM_POW10.fullmatch(t)
        if m:
            e = int(m.group("e") or m.group("e2"))
            if abs(e) > _MAX_EXACT_EXPONENT:
                return None
            return Fraction(10) ** e
        m = _NUM_FRAC.fullmatch(t) or _NUM_SLASH.fullmatch(t)
        if m:
            b = int(m.group("b"))
            if b == 0:
                return None
            v = Fraction(int(m.group("a")), b)
            return -v if m.groupdict().get("sign") == "-" else v
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _decimals(t: str) -> int | None:
    """Digits after the decimal point of a plain decimal literal, else None."""
    m = re.fullmatch(r"[+-]?[\d,]*\.(\d+)", t)
    return len(m.group(1)) if m else None


def _numbers_equal(a: Fraction, b: Fraction, a_text: str, b_text: str, rel_tol: float = 1e-9) -> bool:
    if a == b:
        return True
    if a == 0 or b == 0:
        return False
    # Floating-point noise (0.30000000000000004) only where a side is written as a decimal:
    # integers and fractions compare exactly (1000000001 is not 1000000000).
    # The difference must also stay below half a unit of the last digit both sides show
    # (123456789.1 is not 123456789.2).
    inexact = any("." in t or "e" in t.lower() for t in (a_text, b_text))
    if inexact and abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b)):
        shown = [_decimals(t) or 0 for t in (a_text, b_text) if "e" not in t.lower() and "10^" not in t]
        if not shown or abs(a - b) < Fraction(1, 2 * 10 ** min(shown)):
            return True
    # A decimal rounded to its shown precision matches an exact value that has no short decimal
    # form (0.333 vs 1/3, 3.14 vs 314/100 is not needed). At least 3 significant digits.
    for x, y, y_text in ((a, b, b_text), (b, a, a_text)):
        k = _decimals(y_text)
        if k is None or k < 2:
            continue
        sig = len(re.sub(r"[^\d]", "", y_text).lstrip("0"))
        if sig < 3:
            continue
        scaled = x * 10**k
        if scaled.denominator == 1:
            continue  # x is exact at that precision: rounding is no excuse
        if abs(x - y) <= Fraction(1, 2 * 10**k):
            return True
    return False


_MC = re.compile(r"\(?([A-J])\)?")
_MC_PRED = re.compile(r"\(?([A-Ja-j])\)?(?:$|[\s.:,)]|\\)")


def _mc_letter(ref_norm: str) -> str | None:
    m = _MC.fullmatch(ref_norm)
    return m.group(1) if m else None


def _equation_rhs(t: str) -> str | None:
    """The value an equation states: "x = 3" -> "3", "AB = 2 \\cdot 5 = 10" -> "10",
    "\\cos\\angle RPS = -\\frac{24}{25}" -> "-\\frac{24}{25}". None for inequalities and for several
    equations at once ("x = 1, y = 2"), which are compared whole."""
    if "=" not in t or re.search(r"\\(?:leq?|geq?|neq?|ne|approx)(?![A-Za-z])|[<>]", t):
        return None
    parts = t.split("=")
    lhs, rhs = parts[0].strip(), parts[-1].strip()
    if not lhs or not rhs:
        return None
    several = re.compile(r"[,;]|\\text|\\mbox|\\quad|\band\b|\bor\b")
    if any(several.search(p) for p in parts[:-1]):
        return None
    if several.search(rhs) and not _NUM_PLAIN.fullmatch(rhs.replace(" ", "")):
        return None
    return rhs


def _is_plain_number_reference(ref: str) -> bool:
    n = _normalise(ref)
    return _parse_number(n.text) is not None and "\\frac" not in n.text and "^" not in n.text


class _Fast(enum.Enum):
    CORRECT = 1
    INCORRECT = 2
    UNDECIDED = 3


_WORDS = re.compile(r"[A-Za-z]{2,}(?:[A-Za-z' -]*[A-Za-z])?")


def _fast_compare(pred: _Norm, ref: _Norm) -> _Fast:
    if not pred.text or not ref.text:
        return _Fast.UNDECIDED
    if pred.text == ref.text and pred.percent == ref.percent:
        return _Fast.CORRECT
    if (
        _WORDS.fullmatch(pred.text)
        and _WORDS.fullmatch(ref.text)
        and min(len(pred.text), len(ref.text)) >= 2
        and (max(len(pred.text), len(ref.text)) >= 3 or "no" in (pred.text.casefold(), ref.text.casefold()))
    ):
        # Word answers (\text{East}, Friday, "no"): case-insensitive; never handed to sympy,
        # which would read "east" as the product e*a*s*t.
        same = pred.spaced.casefold() == ref.spaced.casefold()
        return _Fast.CORRECT if same else _Fast.INCORRECT
    letter = _mc_letter(ref.text)
    if letter is not None:
        m = _MC_PRED.match(pred.text)
        if m and (m.end() == len(pred.text) or not pred.text[m.end() :].strip()[:1].isalpha()):
            return _Fast.CORRECT if m.group(1).upper() == letter else _Fast.INCORRECT
        if _parse_number(pred.text) is not None:
            return _Fast.INCORRECT
        return _Fast.UNDECIDED
    pred_texts = [pred.text]
    ref_texts = [ref.text]
    prhs, rrhs = _equation_rhs(pred.text), _equation_rhs(ref.text)
    if prhs is not None and rrhs is None:
        pred_texts.append(prhs)
    if rrhs is not None and prhs is None:
        ref_texts.append(rrhs)
    if pred.percent == ref.percent:
        for p in pred_texts:
            if p in ref_texts:
                return _Fast.CORRECT
    any_number_pair = False
    for p in pred_texts:
        pv = _parse_number(p)
        if pv is None:
            continue
        for r in ref_texts:
            rv = _parse_number(r)
            if rv is None:
                continue
            any_number_pair = True
            for pc, rc in _percent_candidates(pv, rv, pred.percent, ref.percent):
                if _numbers_equal(pc, rc, p, r):
                    return _Fast.CORRECT
    if any_number_pair and len(pred_texts) == 1 and len(ref_texts) == 1:
        return _Fast.INCORRECT
    if any_number_pair:
        return _Fast.INCORRECT
    return _Fast.UNDECIDED


def _percent_candidates(pv: Fraction, rv: Fraction, p_pct: bool, r_pct: bool):
    """5% equals 0.05, and equals 5 (the question asked for a percent); 500 never equals 5.

    X% read as the proportion X/100 only matches a bare value that looks like a proportion (not an
    integer above 1): "500%" against "5" is the classic slip of scaling twice, not a match."""
    if p_pct == r_pct:
        return [(pv, rv)]
    pct, bare = (pv, rv) if p_pct else (rv, pv)
    out = [(pct, bare)]
    if bare.denominator != 1 or abs(bare) <= 1:
        out.append((pct / 100, bare))
    return out


# --------------------------------------------------------------------------------------------
# Symbolic layer (runs inside worker processes)
# --------------------------------------------------------------------------------------------

# What sympy's string parser may still see in a worker: a numeric literal (the number tokens of the
# LaTeX grammar) or a bare name (sympy's own internals, e.g. unit prefixes: sympify("yotta")).
# Evaluating a lone name or number calls nothing; anything with an operator, call or attribute is refused.
_SAFE_SYMPY_STRING = re.compile(r"\s*(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[A-Za-z][A-Za-z0-9]*)\s*")


class UnsafeParseError(ValueError):
    """Raised instead of evaluating a non-numeric string with sympy's parse_expr."""


def _install_no_eval_guard() -> None:
    """Make sympy's string parser refuse anything but numeric literals, in this process.

    ``sympify(str)`` and ``parse_expr`` end in ``eval``. latex2sympy2_extended only passes number
    tokens (``sympy.Number("12.5")``); math-verify's plain-expression extractor would pass text, but
    we never use it. Every string parse goes through ``sympy_parser.stringify_expr`` (looked up at
    call time), so guarding it covers all import paths of ``parse_expr``.
    """
    from sympy.parsing import sympy_parser

    if getattr(sympy_parser, "_prm_guarded", False):
        return
    # sympy imports some modules lazily and they sympify constant strings at import time; load
    # them now, before the guard, by running the comparisons once on trusted input.
    try:
        import sympy
        import sympy.physics.units  # noqa: F401

        x = sympy.Symbol("x")
        sympy.simplify((x + 1) ** 2 - x**2 - 2 * x - 1)
        _symbolic_check(["\\frac{\\sqrt{2}}{2}", "x^2+2x+1", "(1,2]", "\\{1,2\\}", "x=3"], ["\\frac{1}{\\sqrt{2}}", "(x+1)^2"])
    except Exception:  # pragma: no cover
        pass
    original = sympy_parser.stringify_expr

    def guarded(s, local_dict, global_dict, transformations):
        if not isinstance(s, str) or not _SAFE_SYMPY_STRING.fullmatch(s):
            raise UnsafeParseError("refusing to evaluate a string that is not a number or a name")
        return original(s, local_dict, global_dict, transformations)

    sympy_parser.stringify_expr = guarded
    sympy_parser._prm_guarded = True

    # Belt and braces: the module-level aliases that math-verify and latex2sympy imported.
    def refuse(*_a, **_k):
        raise UnsafeParseError("parse_expr is disabled in checker workers")

    try:
        import latex2sympy2_extended.latex2sympy2 as l2s
        import math_verify.parser as mvp

        mvp.parse_expr = refuse
        mvp.parse_expr_cached = refuse
        l2s.parse_expr = refuse
    except Exception:  # pragma: no cover - import problems surface as unparseable verdicts
        pass


class _SoftTimeout(BaseException):
    pass


def _symbolic_parse(latex: str):
    """LaTeX -> sympy through math-verify's LaTeX grammar only; None when it does not parse."""
    from math_verify import LatexExtractionConfig, parse

    got = parse(
        "\\boxed{" + latex + "}",
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0)],
        fallback_mode="no_fallback",
        parsing_timeout=None,
    )
    return got or None


def _symbolic_check(pred_variants: list[str], ref_variants: list[str]) -> str:
    """Runs in a worker. Returns a Verdict value."""
    from math_verify import verify

    refs = []
    for r in ref_variants:
        g = _symbolic_parse(r)
        if g:
            refs.append(g)
    preds = []
    for p in pred_variants:
        t = _symbolic_parse(p)
        if t:
            preds.append(t)
    if not preds:
        return Verdict.UNPARSEABLE.value
    if not refs:
        # Reference does not parse: only an exact normalised-string match could have counted,
        # and that was tried in the fast path.
        return Verdict.INCORRECT.value
    for g in refs:
        for t in preds:
            if verify(g, t, timeout_seconds=None, strict=True, allow_set_relation_comp=True) and not _much_more_complex(t, g):
                return Verdict.CORRECT.value
    return Verdict.INCORRECT.value


def _much_more_complex(pred_list, gold_list) -> bool:
    """An expression in variables that only equals the reference after simplification, while being
    far more complex, restates the question rather than answering it ("Simplify sec x/sin x -
    sin x/cos x": 1/(sin x cos x) - tan x is not an answer for cot x)."""
    import sympy

    try:
        pred, gold = pred_list[0], gold_list[0]
        if not (isinstance(pred, sympy.Expr) and isinstance(gold, sympy.Expr)) or not pred.free_symbols:
            return False
        return sympy.count_ops(pred) > 2 * sympy.count_ops(gold) + 3
    except Exception:
        return False


def _worker_main(conn, soft_timeout_s: float | None, memory_limit_bytes: int | None) -> None:  # pragma: no cover - runs in a child
    import signal

    if memory_limit_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        except Exception:
            pass
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    try:
        import sympy  # noqa: F401
        import math_verify  # noqa: F401

        _install_no_eval_guard()
    except Exception:
        pass

    def on_alarm(signum, frame):
        raise _SoftTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, pred_variants, ref_variants = msg
        try:
            if soft_timeout_s:
                signal.setitimer(signal.ITIMER_REAL, soft_timeout_s)
            try:
                verdict = _symbolic_check(pred_variants, ref_variants)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _SoftTimeout:
            verdict = Verdict.TIMEOUT.value
        except RecursionError:
            verdict = Verdict.UNPARSEABLE.value
        except MemoryError:
            verdict = Verdict.TIMEOUT.value
        except Exception:
            verdict = Verdict.UNPARSEABLE.value
        try:
            conn.send((task_id, verdict))
        except (OSError, ValueError):
            return


# --------------------------------------------------------------------------------------------
# Worker pool with hard per-call deadlines
# --------------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, ctx, soft_timeout_s: float | None, memory_limit_bytes: int | None):
        parent, child = ctx.Pipe(duplex=True)
        self.conn = parent
        self.proc = ctx.Process(target=_worker_main, args=(child, soft_timeout_s, memory_limit_bytes), daemon=True, name="answer-checker")
        try:
            self.proc.start()
        finally:
            child.close()
        self.ready = False
        self.started_at = time.monotonic()
        self.task: int | None = None
        self.deadline = 0.0

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.join(timeout=5)
        except Exception:
            pass
        try:
            self.conn.close()
        except Exception:
            pass


def _pool_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class _Pool:
    """Worker processes, each with one task at a time and a hard deadline per task.

    A worker that overruns its deadline is SIGKILLed and replaced (the task's verdict is
    ``timeout``); one that dies on its own (a crash) gets its task once more, then ``timeout``.
    Workers start lazily; tasks go only to workers that have finished importing sympy, so start-up
    time never counts against a task's deadline.
    """

    STARTUP_TIMEOUT_S = 120.0
    MAX_START_FAILURES = 3
    MAX_ATTEMPTS = 2

    def __init__(self, n_workers: int, timeout_s: float, memory_limit_bytes: int | None, soft_timeout: bool = True):
        self.n_workers = max(1, n_workers)
        self.timeout_s = timeout_s
        self.soft_timeout_s = max(0.05, timeout_s * 0.8) if soft_timeout else None
        self.memory_limit_bytes = memory_limit_bytes
        self.ctx = _pool_context()
        self.workers: list[_Worker] = []
        self.kills = 0  # workers killed for overrunning their deadline
        self.crashes = 0  # workers that died on their own
        self.start_failures = 0

    def _spawn(self) -> _Worker | None:
        try:
            return _Worker(self.ctx, self.soft_timeout_s, self.memory_limit_bytes)
        except Exception:
            logger.exception("answer checker: cannot start a worker process")
            self.start_failures += 1
            return None

    def _replace(self, w: _Worker) -> None:
        w.kill()
        w.task = None
        if w in self.workers:
            self.workers.remove(w)
        if self.start_failures < self.MAX_START_FAILURES:
            new = self._spawn()
            if new is not None:
                self.workers.append(new)

    def run(self, tasks: list[tuple[list[str], list[str]]]) -> list[Verdict]:
        results: list[Verdict | None] = [None] * len(tasks)
        attempts = [0] * len(tasks)
        pending = deque(range(len(tasks)))
        self.start_failures = 0
        self.workers = [w for w in self.workers if w.proc.is_alive() or self._discard(w)]
        while len(self.workers) < min(self.n_workers, len(tasks)) and self.start_failures < self.MAX_START_FAILURES:
            new = self._spawn()
            if new is not None:
                self.workers.append(new)
        while pending or any(w.task is not None for w in self.workers):
            if not self.workers:
                if self.start_failures >= self.MAX_START_FAILURES:
                    logger.error("answer checker: worker processes fail to start; symbolic checks get 'timeout'")
                    break
                new = self._spawn()
                if new is not None:
                    self.workers.append(new)
                continue
            for w in list(self.workers):
                if pending and w.ready and w.task is None:
                    tid = pending.popleft()
                    attempts[tid] += 1
                    try:
                        w.conn.send((tid, tasks[tid][0], tasks[tid][1]))
                    except Exception:
                        attempts[tid] -= 1
                        pending.appendleft(tid)
                        self.crashes += 1
                        self._replace(w)
                        continue
                    w.task = tid
                    w.deadline = time.monotonic() + self.timeout_s
            waiting = [w for w in self.workers if w.task is not None or not w.ready]
            if not waiting:
                continue
            next_deadline = min(w.deadline if w.task is not None else w.started_at + self.STARTUP_TIMEOUT_S for w in waiting)
            ready = _wait_connections([w.conn for w in waiting], timeout=max(0.0, next_deadline - time.monotonic()))
            by_conn = {id(w.conn): w for w in waiting}
            for conn in ready:
                w = by_conn[id(conn)]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    # Died on its own (a crash, the OS out of memory): retry its task once elsewhere.
                    if w.task is not None:
                        self.crashes += 1
                        if attempts[w.task] < self.MAX_ATTEMPTS:
                            pending.appendleft(w.task)
                        else:
                            results[w.task] = Verdict.TIMEOUT
                    else:
                        self.start_failures += 1
                    self._replace(w)
                    continue
                if msg[0] == "ready":
                    w.ready = True
                    continue
                tid, verdict = msg
                if w.task == tid:
                    results[tid] = Verdict(verdict)
                    w.task = None
            now = time.monotonic()
            for w in list(self.workers):
                if w.task is not None and now >= w.deadline:
                    results[w.task] = Verdict.TIMEOUT
                    self.kills += 1
                    self._replace(w)
                elif not w.ready and w.task is None and now >= w.started_at + self.STARTUP_TIMEOUT_S:
                    self.start_failures += 1
                    self._replace(w)
        return [r if r is not None else Verdict.TIMEOUT for r in results]

    def _discard(self, w: _Worker) -> bool:
        w.kill()
        return False

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except Exception:
                pass
        deadline = time.monotonic() + 2.0
        for w in self.workers:
            w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            w.kill()
        self.workers.clear()


# --------------------------------------------------------------------------------------------
# Public checker
# --------------------------------------------------------------------------------------------


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)


class AnswerChecker:
    """Compares completions with reference answers. Thread-safe; check calls never raise.

    ``timeout_s``: hard limit of one symbolic comparison (the worker is killed past it).
    ``workers``: worker processes for symbolic work (default: all cores), started on first need.
    ``last_number``: "auto" uses the last-number fallback only when the reference is a plain
    number (word problems); True/False force it.
    ``memory_limit_mb``: address-space limit of each worker (a runaway big-number computation
    fails there instead of swapping the host).
    ``soft_timeout``: also interrupt a slow comparison inside the worker at 80% of the timeout
    (cheaper than a kill); with False every overrun is a kill.

    Programs using it must guard their entry point with ``if __name__ == "__main__":`` like any
    spawn/forkserver multiprocessing user (the workers re-import the main module).
    """

    CACHE_SIZE = 65536

    def __init__(
        self,
        timeout_s: float = 5.0,
        workers: int | None = None,
        *,
        last_number: bool | str = "auto",
        memory_limit_mb: int | None = 4096,
        soft_timeout: bool = True,
    ):
        self.timeout_s = float(timeout_s)
        self.workers = workers if workers is not None else _default_workers()
        self.last_number = last_number
        self.memory_limit_bytes = memory_limit_mb * 1024 * 1024 if memory_limit_mb else None
        self.soft_timeout = soft_timeout
        self._pool: _Pool | None = None
        self._lock = threading.Lock()
        # symbolic verdicts by (pred variants, ref variants); timeouts are not cached
        self._cache: dict[tuple[tuple[str, ...], tuple[str, ...]], Verdict] = {}

    # -- public API ---------------------------------------------------------------------------

    def check(self, prediction: str, reference: str) -> CheckResult:
        return self.check_many([(prediction, reference)])[0]

    def check_many(self, pairs: Sequence[tuple[str, str]]) -> list[CheckResult]:
        try:
            pairs = list(pairs)
        except Exception:
            logger.warning("answer checker: check_many needs a sequence of (prediction, reference) pairs")
            return []
        results: list[CheckResult | None] = [None] * len(pairs)
        symbolic: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[int, str | None]]] = {}
        for i, pair in enumerate(pairs):
            try:
                prediction, reference = pair
                res, task = self._fast(prediction, reference)
            except Exception:  # never raise: an unexpected input is unparseable
                logger.debug("answer checker: fast path failed", exc_info=True)
                res, task = CheckResult(Verdict.UNPARSEABLE, None), None
            if res is not None:
                results[i] = res
                continue
            extracted, pv, rv = task
            key = (tuple(pv), tuple(rv))
            cached = self._cache.get(key)
            if cached is not None:
                results[i] = CheckResult(cached, extracted)
            else:
                symbolic.setdefault(key, []).append((i, extracted))
        if symbolic:
            keys = list(symbolic)
            try:
                with self._lock:
                    if self._pool is None:
                        self._pool = _Pool(self.workers, self.timeout_s, self.memory_limit_bytes, self.soft_timeout)
                    verdicts = self._pool.run([(list(k[0]), list(k[1])) for k in keys])
            except Exception:
                logger.exception("answer checker: worker pool failed")
                verdicts = [Verdict.TIMEOUT] * len(keys)
            for key, verdict in zip(keys, verdicts):
                if verdict is not Verdict.TIMEOUT:
                    if len(self._cache) >= self.CACHE_SIZE:
                        self._cache.clear()
                    self._cache[key] = verdict
                for i, extracted in symbolic[key]:
                    results[i] = CheckResult(verdict, extracted)
        return [r if r is not None else CheckResult(Verdict.UNPARSEABLE, None) for r in results]

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def __enter__(self) -> "AnswerChecker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            if self._pool is not None:
                self._pool.close()
        except Exception:
            pass

    # -- internals ----------------------------------------------------------------------------

    def _fast(self, prediction: str, reference: str):
        """(result, None) when decided in-process, else (None, (extracted, pred_variants, ref_variants))."""
        if not isinstance(prediction, str) or not isinstance(reference, str):
            return CheckResult(Verdict.UNPARSEABLE, None), None
        ref = _extract_reference(reference)
        if ref is None:
            return CheckResult(Verdict.UNPARSEABLE, None), None
        if self.last_number == "auto":
            use_last = _is_plain_number_reference(ref)
        else:
            use_last = bool(self.last_number)
        extracted = extract_answer(prediction, last_number=use_last)
        if extracted is None:
            return CheckResult(Verdict.UNPARSEABLE, None), None
        if len(extracted) > 4 * MAX_ANSWER_CHARS or len(ref) > 4 * MAX_ANSWER_CHARS:
            # Not an answer (a model rambling inside \boxed{}): only an exact match counts.
            verdict = Verdict.CORRECT if extracted.strip() == ref.strip() else Verdict.UNPARSEABLE
            return CheckResult(verdict, extracted), None
        pn, rn = _normalise(extracted), _normalise(ref)
        decision = _fast_compare(pn, rn)
        if decision is _Fast.CORRECT:
            return CheckResult(Verdict.CORRECT, extracted), None
        if decision is _Fast.INCORRECT:
            return CheckResult(Verdict.INCORRECT, extracted), None
        if not pn.text:
            return CheckResult(Verdict.UNPARSEABLE, extracted), None
        if len(pn.spaced) > MAX_ANSWER_CHARS:
            return CheckResult(Verdict.UNPARSEABLE, extracted), None
        if len(rn.spaced) > MAX_ANSWER_CHARS:
            return CheckResult(Verdict.INCORRECT, extracted), None
        return None, (extracted, _symbolic_variants(pn, rn), _symbolic_variants(rn, pn))


def _symbolic_variants(n: _Norm, other: _Norm) -> list[str]:
    """The strings the symbolic layer parses for one side: the answer; the right side of a simple
    "x = value" when the other side is no such equation; with a percent sign the other side lacks,
    both value and value/100."""
    out = [n.spaced]
    rhs = _equation_rhs(n.spaced)
    if rhs is not None and _equation_rhs(other.spaced) is None:
        out.append(rhs)
    if n.percent and not other.percent:
        out = out + [f"\\frac{{{v}}}{{100}}" for v in out]
    return out
