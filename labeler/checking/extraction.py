"""Finding the final answer of a completion (and of a reference), in-process and in linear time:
the last ``\\boxed{}``/``\\fbox{}``, "The answer is ..."/"Final Answer: ...", GSM8K ``#### N``, an
answer stated in the closing paragraph, a bare answer, and optionally the last number."""

from __future__ import annotations

import re
from collections import deque

from labeler.checking import prose
from labeler.checking.quantities import Asked, parse_noun

# Answers longer than this are not answers (a model rambling inside \boxed{}); they never reach
# the symbolic layer. Plain string comparison still applies.
MAX_ANSWER_CHARS = 2_000


_BOX_COMMANDS = ("\\boxed", "\\fbox")
_MAX_BOX_CANDIDATES = 32
# A box whose group does not close within this many characters is over-long: it is the answer,
# and an unreadable one (never a reason to look for a number elsewhere).
_BOX_LIMIT = 4 * MAX_ANSWER_CHARS + 2
_UNCLOSED, _TOO_LONG = -1, -2


def _match_brace(text: str, open_idx: int, limit: int = _BOX_LIMIT) -> int:
    """Index of the brace closing text[open_idx] == '{'; _UNCLOSED when the text ends first (a
    truncated completion), _TOO_LONG when the group runs past `limit` (it is not scanned to its
    end). Escaped braces are skipped."""
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
    return _TOO_LONG if n < len(text) else _UNCLOSED


def _boxed_spans(text: str) -> list[tuple[int, int, str | None]]:
    """Complete \\boxed{...}/\\fbox{...} groups, last first: (start, end, content). An over-long
    group has content None and ends where its scan stopped; boxes starting inside it are dropped."""
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
            elif end == _TOO_LONG:
                spans.append((idx, j + _BOX_LIMIT, None))
        elif j > idx + cmd_len and j < len(text):  # "\boxed 5": one token
            m = re.compile(r"[^\s$.,;]+").match(text, j)
            if m:
                spans.append((idx, m.end(), m.group(0)))
    for start, end, _ in [s for s in spans if s[2] is None]:
        spans = [s for s in spans if not start < s[0] < end]
    spans.sort(key=lambda s: s[0], reverse=True)
    return spans


def _last_boxed(text: str) -> tuple[int, str | None, int] | None:
    """Start position, content and end of the last complete box; adjacent boxes ("\\boxed{2} and
    \\boxed{3}") are joined with commas. Content None: the last box is over-long."""
    spans = _boxed_spans(text)
    if not spans:
        return None
    if spans[0][2] is None:
        return spans[0][0], None, spans[0][1]
    group = [spans[0]]
    for prev in spans[1:]:
        if prev[2] is None:
            break
        gap = text[prev[1] : group[-1][0]]
        if len(gap) <= 40 and re.fullmatch(r"[\s$,;]*(?:\\\)|\\\]|\\\(|\\\[)?[\s$,;]*(?:and|or|,)?[\s$,;]*(?:\\\(|\\\[)?[\s$]*", gap):
            group.append(prev)
        else:
            break
    group.reverse()
    return group[0][0], ", ".join(g[2].strip() for g in group), group[-1][1]


# "Final Answer: ...", "the answer is ...", "Answer: ..." at the start of a line or sentence; not
# "we may check our answer: 17 * 44 = 748".
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer\s*(?:is\s*:?|:|=)?"
    r"|\b(?:the|my|our|correct)\s+(?:answer|option|choice)\s+is\s*:?"
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
            if opener == "$" and (_looks_like_prose(content) or _currency_pair(content, text[end + 1 : end + 2])):
                return None  # two currency signs ("$5. She pays $", "$30, so it costs $70"), not math
            return content, end + len(closer)
    return None


_PLAIN_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_COMMANDS_AND_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+")


def _currency_pair(content: str, after_close: str) -> bool:
    """"$30, so the grooming costs $" / "$3 = $42": a dollar sign before a digit, and what lies
    between it and the next one is prose (a word outside any command) or the next one is itself
    followed by a digit. Math opens with a digit too ("$2x + 3$"), but holds no words."""
    if not re.match(r"\s?-?\d", content):
        return False
    return after_close.isdigit() or bool(_PLAIN_WORD.search(_COMMANDS_AND_TEXT.sub(" ", content)))


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
    return _without_hedges(line.strip()) or None


# "probably 18", "about 12 days", "I think 7": a hedge before the answer is not part of it.
_HEDGE = re.compile(
    r"^(?:(?:probably|likely|approximately|approx\.?|about|around|roughly|exactly|precisely|just|maybe|perhaps|definitely|clearly|simply|"
    r"i\s+think|i\s+believe|i\s+guess|i\s+would\s+say)\b[\s,:]*)+",
    re.IGNORECASE,
)
# "13, not 12", "13 (not 12)", "13 rather than 12": a rejected value after the answer is not part of it.
_REJECTION_TAIL = re.compile(r"(?:\s*[,;]\s*|\s+|\s*\(\s*)(?:and\s+|but\s+)?(?:not|rather\s+than|instead\s+of)\s+[^()]{1,40}?\)?\s*$", re.IGNORECASE)


def _without_hedges(answer: str) -> str:
    out = _HEDGE.sub("", answer) if _HEDGE.match(answer) else answer
    if re.search(r"\b(?:not|rather|instead)\b", out, re.IGNORECASE):
        cut = _REJECTION_TAIL.sub("", out)
        out = cut if cut.strip() else out
    return out.strip() or answer


_NOT_AN_ANSWER = re.compile(
    r"(?:correct|right|wrong|incorrect|reasonable|plausible|valid|consistent|confirmed|verified|indeed|not\b|"
    r"as\s+follows|given|shown|below|above|that\b|the\s+same|unchanged|still|clear|obvious|yes\b|no\b)",
    re.IGNORECASE,
)


_PHRASE_WINDOW = 1500
_PHRASE_KEYWORD = re.compile("answer|option|choice")


def _phrases(text: str, start: int):
    """The answer phrases from `start` on, in order. Every phrase contains one of the words
    "answer", "option", "choice": the regex runs only around them (a scan of the whole text costs
    ten times more)."""
    low = text.lower()
    last_end = start
    for k in _PHRASE_KEYWORD.finditer(low, start):
        p = k.start()
        if p >= last_end:
            m = _ANSWER_PHRASE.search(text, max(last_end, p - 24), p + 64)
            if m is not None and m.start() <= p:
                last_end = m.end()
                yield m


def _last_phrase(text: str) -> tuple[int, str] | None:
    """The last "answer is ..." / "Final Answer: ..." / "#### N", with its position."""
    best: tuple[int, str] | None = None
    # The last phrase that states something ("Final Answer: The final answer is 5" -> the second);
    # "so our answer is correct" states nothing. The closing part of the text first (cheap); the
    # whole text only when no phrase there states an answer (the same result: the last 16 phrases).
    starts = (len(text) - _PHRASE_WINDOW, 0) if len(text) > 2 * _PHRASE_WINDOW else (0,)
    for start in starts:
        matches: deque[re.Match] = deque(maxlen=16)
        matches.extend(_phrases(text, start))
        for m in reversed(matches):
            ans = _clean_phrase_tail(text[m.end() : m.end() + 4 * MAX_ANSWER_CHARS])
            if ans is not None and not _NOT_AN_ANSWER.match(ans):
                best = (m.start(), ans)
                break
        if best is not None or len(matches) == 16:
            break
    idx = text.rfind("####")
    if idx >= 0 and (best is None or idx > best[0]):
        tail = text[idx + 4 : idx + 4 + 4 * MAX_ANSWER_CHARS].split("\n", 1)[0].strip()
        tail = tail.strip("$ ").rstrip(".").strip()
        if tail:
            best = (idx, tail)
    return best


_CUE_WINDOW = 200  # characters before the end of a lead where its cue may start
_CONCLUSION_CUE = re.compile(
    r"(?:\b(?:is|are|was|were|be|equals?|becomes?|gives?|get|obtain|yields?|at)|=|:)\s*(?:therefore|thus|then|approximately|about|exactly|simply|just|equal\s+to|given\s+by)?\s*:?\s*$",
    re.IGNORECASE,
)
_CONCLUSION_START = re.compile(
    r"^\W*(?:therefore|thus|so|hence|finally|consequently|in\s+conclusion|in\s+summary|overall)\b", re.IGNORECASE
)
_MATH_OPEN_RE = re.compile(r"\$\$|(?<!\\)\$|\\\[|\\\(")
_BOLD_RE = re.compile(r"\*\*([^*\n]{1,120})\*\*")


# "$f(x) = x^2$ for every real number $x$.": a qualifier ends the statement
_QUALIFYING_REST = re.compile(r"(?:for\s+(?:all|every|each|any)|where|with)\b[^.!?\n]{0,80}[.!?]?\s*$", re.IGNORECASE)
# "Comparing coefficients, $a = 3$ and $b = 5$.": an introductory phrase and a comma lead to the statement
_INTRO_PHRASE = re.compile(r"\W*(?:[A-Za-z]+\s+){0,4}[A-Za-z]+\s*,\s*")
_JOINER = re.compile(r"\s*(?:,\s*(?:and|or)?|and|or|;)\s*")


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
    cands.sort()
    best = None
    for idx, (start, end, content) in enumerate(cands):
        # "$x = 2$, $y = -1$" / "$a=3$ and $b=5$": the segments before it in the same sentence join it
        joined = [content.strip().strip("*").strip()]
        first = start
        for p_start, p_end, p_content in reversed(cands[:idx]):
            if p_end > first or not _JOINER.fullmatch(para[p_end:first]):
                break
            joined.insert(0, p_content.strip().strip("*").strip())
            first = p_start
        before = para[:first].rstrip()
        sentence = before[_sentence_start(before) :]
        lead = sentence
        # the cue ends the lead: searched from near its end (from the start it is quadratic on a long lead)
        if not (_CONCLUSION_CUE.search(lead, max(0, len(lead.rstrip()) - _CUE_WINDOW)) or re.fullmatch(r"\W*(?:therefore|thus|so|hence|finally)\W*", lead, re.IGNORECASE) or (lead.rstrip().endswith(",") and _INTRO_PHRASE.fullmatch(lead))):
            continue
        if content.rstrip().endswith((",", ";")):
            continue  # the sentence goes on
        following = para[end:].lstrip()
        display = para.startswith(("\\[", "$$"), start)
        ended = content.rstrip().endswith(".") or not following or following[0] in ".!?" or (display and following[0].isupper())
        ended = ended or bool(_QUALIFYING_REST.match(following))
        if not ended:
            after = _first_sentence(following)
            # only a few unit words may follow ("... is $12$ square units.")
            if len(re.findall(r"[A-Za-z]{2,}", after)) > 3 or _MATH_OPEN_RE.search(after) or "**" in after:
                continue
        content = ", ".join(j for j in joined if j)
        if not content:
            continue
        if len(joined) == 1:
            content += _unit_after(following)  # "... is $12$ inches.": the unit stays with the number
        if _NEGATION.search(_first_sentence(sentence + para[first:])):
            continue  # "So $x = 14$ and $y = 15$ is not a solution."
        rank = 1 if (_CONCLUSION_START.search(sentence) or re.search(r"answer|final", sentence, re.IGNORECASE)) else 0
        key = (rank, start)
        if best is None or key > best[0]:
            best = (key, (base + first, content), end)
    if best is None:
        return None
    # A later sentence that states a value in plain text ("... is 985.") closes the solution instead.
    rest = para[best[2] :]
    later = _last_sentence(rest) if _SENTENCE_END.search(rest) else ""
    if later and later not in _first_sentence(rest.lstrip(" .,;:")) and _PLAIN_STATEMENT.search(later) and "$" not in later and "\\(" not in later:
        return None
    return best[1]


_PLAIN_VALUE = r"(?:[A-Za-z]\s*=\s*)?-?(?:\d+(?:\.\d+)?(?:\s*/\s*\d+)?|\.\d+)"
# "Solving gives x = 5 and x = -2." / "the probability is 3/4." / "Hence the value of k is -4 dollars."
_PLAIN_STATEMENT = re.compile(
    r"(?:\b(?:is|are|was|were|be|equals?|gives?|get|obtain|yields?|therefore|thus|so|hence|that)\b|:)\s*"
    r"(?:therefore|thus|then|exactly|just)?\s*"
    r"(?P<values>" + _PLAIN_VALUE + r"(?:\s*(?:,\s*(?:and|or)?|and|or)\s*" + _PLAIN_VALUE + r")*)"
    r"(?P<tail>(?:\s+[A-Za-z]+){0,3})\s*[.!]?\s*$",
    re.IGNORECASE,
)
_SUBORDINATE = re.compile(r"\b(?:when|whenever|if|unless|where|while|since|because|assuming|suppose|supposing|provided|until|after|before)\b", re.IGNORECASE)
_WORD_STATEMENT = re.compile(r"\b(?:is|are|was|were|be|on|:)\s+(?:the\s+)?\**(?P<word>[A-Za-z][A-Za-z\-]{1,30})\**\s*[.!]?\s*$", re.IGNORECASE)
_BOLD_LINE = re.compile(r"^\s*\*\*(?:[^*:\n]{0,40}:\s*)?(?P<content>[^*\n]{1,80}?)\s*\*\*\s*\.?\s*$")


def _last_sentence(text: str) -> str:
    body = text.rstrip()
    tail = body[-600:]
    start = _sentence_start(tail.rstrip(".!").rstrip())
    return tail[start:].strip()


def _plain_statement(text: str, expect_word: bool) -> str | None:
    """An answer the closing sentence states in plain text, no math delimiters: values after a
    cue ("... is 3/4.", "gives x = 5 and x = -2."), or a word when the reference is a word."""
    sentence = _last_sentence(text)
    if not sentence or "$" in sentence or "\\(" in sentence:
        return None
    m = _PLAIN_STATEMENT.search(sentence)
    if m is not None and _SUBORDINATE.search(sentence[: m.start()].rsplit(",", 1)[-1]):
        m = None  # "the expression equals 1 when x is 2": a condition, not the conclusion
    named = _named_statement(sentence)
    if named is not None:
        return named
    if m is not None:
        tail = m.group("tail").strip()
        values = m.group("values").strip()
        return values + (" " + tail if tail and not re.search(r"\d", tail) else "")
    if expect_word:
        m = _WORD_STATEMENT.search(sentence)
        if m is not None:
            return m.group("word")
    return None


_NAMED_CLAUSE = re.compile(
    r"^(?:(?:so|thus|therefore|hence|finally)\b,?\s*)?(?:the\s+)?(?P<name>[A-Za-z]+)(?:\s+[a-z]+){0,2}?\s+(?:is|=|equals|has|gets)\s+(?P<value>-?(?:\d+(?:\.\d+)?(?:/\d+)?|\.\d+))$",
    re.IGNORECASE,
)


def _named_statement(sentence: str) -> str | None:
    """"The largest value is 5 and the smallest is -5." -> "largest = 5, smallest = -5"."""
    clauses = [c.strip() for c in re.split(r",\s*(?:and\s+)?|\s+and\s+", sentence.rstrip(" .!")) if c.strip()]
    if len(clauses) < 2:
        return None
    out = []
    for c in clauses:
        m = _NAMED_CLAUSE.match(c)
        if m is None:
            return None
        out.append(f"{m.group('name')} = {m.group('value')}")
    return ", ".join(out)


def _bold_final_line(text: str) -> str | None:
    """The last line is all bold: "**14**", "**Final result: 7**"."""
    last = text.rstrip().rsplit("\n", 1)[-1]
    m = _BOLD_LINE.match(last)
    return m.group("content").strip() if m else None


_LATEX_WORD = re.compile(r"\\[A-Za-z]+")
_COMPUTED = re.compile(r"=\s*(?:\\\$|\$)?\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")


_NEGATION = re.compile(
    r"\bnot\s+(?:a\s+|the\s+)?(?:solution|equal|valid|possible|correct|answer|true)\b|\bno\s+(?:solution|answer)s?\b|"
    r"\bcannot\s+be\s+(?:determined|found|solved|computed)\b",
    re.IGNORECASE,
)


def _last_number(text: str, asked: Asked | None = None) -> str | None:
    """The number a word-problem solution ends on, with the words after it ("8 millimeters"): in
    the closing sentence when it states one in words ("Jean can fill fourteen bags."), else in the
    last sentence with a number, read by prose.read_sentence (currency, rejected values, clauses,
    circumstances, mixed units), preferring a value the solution computed somewhere ("= 34" above,
    so "... a total of 34 hours ... in 4 weeks" gives 34)."""
    tail = text[-4000:]
    closing = _last_sentence(tail)
    if closing and not re.search(r"\d", closing):
        worded = prose.words_to_digits(closing)
        if worded != closing and not _NEGATION.search(closing):
            return prose.read_sentence(worded, asked)
    span = prose.last_number_span(tail)
    if span is None:
        return None
    last_start, last_end = span
    start = _sentence_start(tail[:last_start])
    sentence = tail[start:last_end] + _first_sentence(tail[last_end : last_end + 600])
    if _NEGATION.search(sentence):
        return None  # "So x = 14 and y = 15 is not a solution.": no answer is stated
    computed = frozenset(r.group(1).replace(",", "") for r in _COMPUTED.finditer(tail, 0, last_end))
    return prose.read_sentence(sentence, asked, computed)


def _looks_bare(text: str) -> bool:
    """A short answer string rather than prose: math with at most a few words ("18 dollars",
    "x = 3"), or one or two words without sentence punctuation ("Friday", "no solution")."""
    s = text.strip()
    if not s or len(s) > 200 or "\n" in s:
        return False
    if _CHOICE_WITH_TEXT.fullmatch(s):
        return True  # "B. Cone", "(C) Plane"
    if prose.looks_like_prose(s) and (re.search(r"\d", s) or prose.words_to_digits(s) != s):
        return False  # "Priya pays $42.", "She gets twelve pieces.": a sentence, read for its number
    words = re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", _LATEX_WORD.sub(" ", re.sub(r"\\text\{[^{}]*\}", " ", s)))
    if re.search(r"[\d\\=^_{}()\[\]+*/<>|]", s):
        return len(words) <= 3
    return len(words) <= 2 and not re.search(r"[.,;:!?'\"]\s*\S", s)


_CHOICE_WITH_TEXT = re.compile(r"\(?[A-J](?:\)|\.|:)\s*[A-Za-z][A-Za-z' \-]{0,40}\.?|\([A-J]\)")
_COUNT_CLAUSE = re.compile(r"^\s*(\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s+([A-Za-z][A-Za-z' \-]{0,40}?)\s*(?:[,;(]|\s+(?:because|since|which|as|so)\b|\.?\s*$)")


def _answer_from_sentence(s: str, last_number: bool, asked: Asked | None = None) -> str:
    """A phrase answer that is a whole sentence ("Verna received $7.00 in change"): its math, or
    its number (word problems). A count that opens it is the answer: "7 crayons, 2 in each box"."""
    if _looks_bare(s):
        return s
    m = _COUNT_CLAUSE.match(s)
    if m and parse_noun(m.group(2).split()) is not None:
        return m.group(1) + " " + m.group(2)
    segs = _math_segments(s)
    if segs:
        return segs[-1][2]
    if last_number:
        n = _last_number(s, asked)
        if n is not None:
            return n
    return s


def extract_answer(text: str, *, last_number: bool = True) -> str | None:
    """The final answer stated in a completion or a whole solution, or None.

    Order: the latest of (last complete ``\\boxed{}``/``\\fbox{}``, last "answer is"/"Final Answer:"
    phrase, last ``#### N``); else a math answer stated in the closing paragraph ("Therefore, the
    area is $12\\pi$."); else an all-bold last line; else a plain-text statement closing the text
    ("gives x = 5 and x = -2.", when ``last_number`` is off); else the whole text when it is a bare
    answer; else, when ``last_number`` is set, the last number in the text.
    """
    return extract_answer_traced(text, last_number=last_number)[0]


def extract_answer_traced(text: str, *, last_number: bool = True, expect_word: bool = False, asked: Asked | None = None) -> tuple[str | None, str]:
    """(answer, the rule that found it). ``expect_word``: the reference is a word ("Evelyn"), so a
    closing "... is Evelyn." states it. ``asked``: what the question asks for, which names the
    clause of a closing sentence that states the answer ("70 gold coins and 40 silver coins")."""
    if not isinstance(text, str) or not text.strip():
        return None, "empty"
    boxed = _last_boxed(text)
    phrase = _last_phrase(text)
    if boxed is not None and boxed[1] is None:
        if phrase is None or phrase[0] < boxed[2]:
            return None, "over-long box"  # the answer is an over-long box (a phrase inside it is part of it)
        boxed = None  # a phrase after it is the answer
    chosen: str | None = None
    how = "none"
    if boxed is not None and (phrase is None or boxed[0] >= phrase[0] or "\\boxed" in phrase[1] or "\\fbox" in phrase[1]):
        chosen, how = boxed[1] + _unit_after(text[boxed[2] : boxed[2] + 80]), "last box"
    elif phrase is not None:
        chosen, how = _answer_from_sentence(phrase[1], last_number, asked), "answer phrase"
    if chosen is None:
        concl = _last_conclusion(text)
        if concl is not None:
            chosen, how = concl[1], "closing statement"
    if chosen is None:
        chosen = _bold_final_line(text)
        how = "bold last line"
    if chosen is None and (not last_number or expect_word):
        chosen = _plain_statement(text, expect_word)
        how = "plain closing statement"
    if chosen is None and _looks_bare(text):
        chosen, how = text.strip(), "bare answer"
    if chosen is None:
        chosen, how = _bare_last_line(text, last_number), "bare last line"
    if chosen is None and last_number:
        chosen, how = _last_number(text, asked), "last number"
    if chosen is None and not last_number and _one_statement(text):
        # for a reference that is no plain number, only a whole text that is one sentence stating
        # one value: "She eats 3/8 of the pizza.", "The midpoint is Q = (3, -4)."
        chosen, how = prose.read_sentence(text.strip().rstrip("."), asked), "prose sentence"
    if chosen is None:
        return None, "no answer found"
    chosen = _strip_math_delimiters(chosen.strip())
    return (chosen or None), how


def _bare_last_line(text: str, last_number: bool) -> str | None:
    """A last line that is a bare answer after some prose ("Let's see.\n10\\pi"): the answer is
    that line, not a number taken out of it. For a plain-number reference only a line of LaTeX or
    a single token; a line of plain arithmetic ("9 * 2 = 18") is left to the last-number rule."""
    body = text.rstrip()
    cut = body.rfind("\n")
    if cut < 0:
        return None
    line = body[cut + 1 :].strip()
    if not line or not _looks_bare(line) or prose.looks_like_prose(line):
        return None
    if last_number and not (re.search(r"[\\^{}]", line) or " " not in line):
        return None
    return line


_UNIT_AFTER = re.compile(r"[\s$]*(?:\\\)|\\\])?[\s$]*(?:\\text\{\s*)?([A-Za-z][A-Za-z ]{0,30}?)\}?\s*(?:[.!]\s*|$)")


def _unit_after(following: str) -> str:
    """" inches" when the words right after an answer's math or box, to the end of its sentence,
    are a unit ("$\\boxed{12}$ inches.", "is $12$ square feet."); else "". A count noun or other
    words are left out (they were never part of a boxed answer)."""
    m = _UNIT_AFTER.match(following)
    if m is None:
        return ""
    words = m.group(1).split()
    noun = parse_noun(words) if 0 < len(words) <= 3 else None
    return " " + " ".join(words) if noun is not None and (noun.unit is not None or noun.rate) else ""


def _one_statement(text: str) -> bool:
    """One sentence of prose that states one value (a number or a point) and no condition."""
    s = text.strip()
    if not prose.looks_like_prose(s) or _SENTENCE_END.search(s.rstrip(".!")) or _SUBORDINATE.search(s):
        return False
    return len(prose.numbers_in(s)) == 1 or prose.states_a_point(s)


def _strip_math_delimiters(s: str) -> str:
    if not s or s[0] not in "$\\*" and s[-1] not in ".\\":
        return s  # nothing to strip (most answers)
    changed = True
    while changed and s:
        changed = False
        for a, b in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**")):
            if len(s) >= len(a) + len(b) and s.startswith(a) and s.endswith(b):
                s = s[len(a) : len(s) - len(b)].strip()
                changed = True
        if s.endswith(".") and not (len(s) > 1 and s[-2].isdigit()) or s.endswith("\\."):
            s = s[:-1].rstrip()
            changed = True
        if s.endswith("\\") and not s.endswith("\\\\"):  # a stray trailing backslash
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
