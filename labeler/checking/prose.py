"""Reading the answer a sentence of prose states: "The boots cost $104.", "She paid $1,430.",
"Jean can fill fourteen bags.", "Tom has 15 red marbles and 36 blue marbles.", "It takes 2 hours
and 40 minutes.", "So the answer is 13, not 12."

Rules, in order (``read_sentence``):
1. Numbers of prose: digits with thousands separators, decimals and fractions ("3/8"), a currency
   sign or a percent sign, a unit glued to the number ("48g", "540m": in prose a glued letter is a
   unit); numbers written as words ("forty-two", "a dozen") when the sentence has no digits; a
   point "Q = (3, -4)" or a tuple "(3, -4)".
2. A rejected number is not the answer: "not 12", "(not 12)", "rather than 12", "instead of 12".
3. After a conclusion marker ("so", "therefore", "thus", "hence", "which means") only what follows
   it counts: "100 / 8 = 12.5, so she must buy 13 packs" states 13.
4. A circumstance that opens the sentence ("After 3 days, she has 42 apples.", "If she fills 7
   boxes, ...") is not what it states; its main clause is. Questions repeat their circumstances
   ("... after 3 days?"), so rule 5 alone would pick the phrase. The phrase's number stays the
   answer when the main clause's names another quantity than the one asked ("In 3 hours, it covers
   180 miles." asked how many hours) or the main clause states none, when it names the quantity
   asked and no number of the main clause does ("After 3 days, she has 42." asked after how many
   days), and when both do but the asking sentence's words are the phrase's ("After paying $5 for
   lunch, he has $15 left." asked how much he paid for lunch).
5. Clauses joined by "and" / "," / ";" that each state one number: the clause that names what the
   question asks ("gold coins", "sell", "Harald") states the answer, when exactly one names it best.
6. A number in a trailing circumstance ("after the $30 discount", "from the $50 bill", "of the 12
   cookies") is not the one the clause states; the one before it is.
7. Two numbers offered as alternatives ("12 or 13 days") are both the answer (a set, so a single
   reference never equals it).
8. A duration in mixed units ("2 hours and 40 minutes") is one quantity, in the unit the question
   asks for, else in the smaller unit ("160 minutes").
The answer keeps the words after its number ("8 millimeters shorter"), so that a unit or count
noun other than the one asked makes it wrong (quantities.py), whichever way it was found.

Pure string functions, linear in the sentence; no sympy.
"""

from __future__ import annotations

import re
from fractions import Fraction

from labeler.checking.quantities import _UNITS, _VERBS, Asked, conflict, content_words, lemma, parse_noun

# ---------------------------------------------------------------------------------------------
# Numbers written as words
# ---------------------------------------------------------------------------------------------

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6}
_NUMBER_WORD = "|".join(sorted([*_SMALL, *_TENS, *_SCALES, "dozen"], key=len, reverse=True))
# A run of number words: "forty-two", "one hundred and five", "twenty eight hundred", "a dozen".
_WORD_RUN = re.compile(
    r"(?<![A-Za-z\-])(?:negative\s+)?(?:(?:a|one)\s+dozen|(?:" + _NUMBER_WORD + r")(?:(?:\s*-\s*|\s+(?:and\s+)?)(?:" + _NUMBER_WORD + r"))*)(?![A-Za-z\-])",
    re.IGNORECASE,
)
# "one" is a pronoun after these words ("each one", "the one") and before these ("one of them").
_ONE_PRONOUN_BEFORE = frozenset("each every any no the this that which another some someone anyone no-one every".split())
_ONE_PRONOUN_AFTER = frozenset("of another by more than".split())


def _words_value(run: str) -> int | None:
    """The value of a run of number words, or None when they do not make one number ("five six")."""
    words = [w for w in re.split(r"[\s\-]+", run.lower()) if w and w != "and"]
    if words[0] == "negative":
        rest = _words_value(" ".join(words[1:])) if len(words) > 1 else None
        return None if rest is None else -rest
    if words[:2] in (["a", "dozen"], ["one", "dozen"]) and len(words) == 2:
        return 12
    total, current, last = 0, 0, None  # last: the kind of the previous word
    for w in words:
        if w in _SMALL:
            if last in ("small", "teen") or (last == "tens" and (_SMALL[w] >= 10 or _SMALL[w] == 0)):
                return None  # "five six", "twenty eleven"
            current += _SMALL[w]
            last = "teen" if _SMALL[w] >= 10 else "small"
        elif w in _TENS:
            if last in ("small", "teen", "tens"):
                return None
            current += _TENS[w]
            last = "tens"
        elif w == "hundred":
            if last == "hundred" or current == 0:
                return None
            current *= 100
            last = "hundred"
        elif w in ("thousand", "million"):
            if current == 0 or last in ("thousand", "million"):
                return None
            total += current * _SCALES[w]
            current, last = 0, w
        elif w == "dozen":
            if current == 0:
                return None
            current *= 12
            last = "dozen"
        else:
            return None
    return total + current


def words_to_digits(text: str) -> str:
    """Number words replaced by digits: "She pays forty-two dollars." -> "She pays 42 dollars.";
    "each one" (a pronoun) stays."""

    def repl(m: re.Match) -> str:
        run = m.group(0)
        if run.lower() == "one":
            before = re.findall(r"[A-Za-z\-]+", text[: m.start()])
            after = re.match(r"\s*([A-Za-z]+)", text[m.end() :])
            if before and before[-1].lower() in _ONE_PRONOUN_BEFORE or after is not None and after.group(1).lower() in _ONE_PRONOUN_AFTER:
                return run
        value = _words_value(run)
        return run if value is None else str(value)

    return _WORD_RUN.sub(repl, text)


def is_number_words(text: str) -> bool:
    """The whole text is one number in words, possibly followed by a few words ("seven",
    "twenty eight", "fourteen bags")."""
    m = _WORD_RUN.match(text.strip())
    return m is not None and _words_value(m.group(0)) is not None and not re.search(r"\d", text)


# ---------------------------------------------------------------------------------------------
# Numbers in prose
# ---------------------------------------------------------------------------------------------

# Unit abbreviations that may be glued to a number in prose ("48g", "540m", "2h").
_GLUED_UNITS = frozenset("mm cm m km in ft yd mi mg g kg lb lbs oz ml l L s sec min h hr hrs".split())
_NUMBER = re.compile(
    r"(?<![\w.^_/\\])(?P<cur>\\?\$\s?)?(?P<num>-?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?(?:/\d+(?![\d.,]))?|-?\.\d+)"
    r"(?P<glued>[A-Za-z]{1,3}(?![A-Za-z]))?(?P<pct>\s?\\?%)?(?![\w^(]|\.\d|-[A-Za-z])"
)
_POINT = re.compile(r"(?:(?P<name>[A-Z](?:_\{?\w+\}?)?'?)\s*=\s*)?\(\s*-?[\d.]+(?:/\d+)?(?:\s*,\s*-?[\d.]+(?:/\d+)?)+\s*\)")
_REJECTED = re.compile(r"(?:\bnot|\brather\s+than|\binstead\s+of|\bisn't|\bwasn't|\bother\s+than)\s+(?:the\s+|a\s+)?(?:\\?\$\s?)?$", re.IGNORECASE)
_CONCLUSION = re.compile(r"(?:^|,\s*|\s)(?:so|therefore|thus|hence|which\s+means|meaning|that\s+means)\b(?!\s+(?:far|that|much|many|on)\b),?", re.IGNORECASE)
# A number in a trailing circumstance of its clause: "after the $30 discount", "from the $50 bill".
_CIRCUMSTANCE = re.compile(
    r"^[^,;]*?\b(?:(?:after|from|of|before|than|with|without|off|out\s+of|instead\s+of|beyond|besides|in|during|within)\s+"
    r"(?:[A-Za-z']+\s+){0,3}|over\s+(?:[A-Za-z']+\s+){1,3})(?:\\?\$\s?)?$",
    re.IGNORECASE,
)
# A circumstance that opens a sentence, up to its comma: "After 3 days,", "By the end of week 4,",
# "If she fills 7 boxes,", "In 2 years,". A comma or point inside a number ("1,000", "2.5") does not end it.
_LEADING = re.compile(
    r"\W*(?P<opener>after|before|until|till|since|because|if|when|whenever|once|unless|given|assuming|"
    r"by|in|within|during|over|for|at|on|from|with|without|of|out\s+of|among|including|excluding)\b(?:[^,;:!?.]|[,.](?=\d)){1,80}?,(?!\d)",
    re.IGNORECASE,
)
# Openers of a subordinate clause (it may have a subject and a verb: "If she fills 7 boxes,"); the
# others open a phrase, which has none ("In total he walked 8 miles, ..." is the main clause).
_SUBORDINATORS = frozenset("after before until till since because if when whenever once unless given assuming".split())
_CLAUSE_WORDS = re.compile(r"\b(?:he|she|they|it|we|i|you|[a-z]{3,}ed)\b|=|<<", re.IGNORECASE)
# What follows such a phrase is the main clause ("she has", "Tom will be", "12 passed"), not a
# relative or joined clause ("..., which cost $21", "..., and ...") or a participle ("..., making 42").
_MAIN_START = re.compile(
    r"\s*(?!(?:which|who|whom|whose|that|where|while|and|but|or|nor|so|plus|minus|not|each|per)\b|[A-Za-z]+ing\b)[A-Za-z$\d\\]",
    re.IGNORECASE,
)
_JOINED = re.compile(r"\b(?:and|but|so|then|while)\b", re.IGNORECASE)
_CLAUSE_SPLIT = re.compile(r",(?!\d)\s*(?:and\s+|but\s+)?|;\s*|\s+(?:and|but|while|whereas)\s+", re.IGNORECASE)
_NOUN_WORDS = re.compile(r"[ \t]*((?:[A-Za-z][A-Za-z'\-]*[ \t]*){1,5})")
# Words that end the noun phrase after a number, and (first) that it has none: "$18 every day".
_STOP_NOUN = frozenset(
    "and or but so because since which who whom whose while as if when then to that than this these those the his her their its my "
    "our your every each some any on in at for from with by into during after before until over out off up down back away".split()
)
_AFTER_HEAD_ONLY = frozenset("of per a an".split())  # "bags of flour", "miles per hour", "hours a week"
# Duration or length in two units: "2 hours and 40 minutes", "5 feet 3 inches".
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_UNIT_INCHES = {"inch": 1, "foot": 12, "yard": 36}
_MIXED = re.compile(
    r"(?<!\d)(?P<a>\d+(?:\.\d+)?)\s*(?P<ua>[A-Za-z]+)\s*(?:,\s*|\s+)(?:and\s+)?(?P<b>\d+(?:\.\d+)?)\s*(?P<ub>[A-Za-z]+)(?![A-Za-z])",
)
class _Num:
    __slots__ = ("start", "end", "text", "unit", "percent", "currency")

    def __init__(self, m: re.Match, unit: str | None):
        self.start, self.end = m.start(), m.end()
        self.text = m.group("num").replace(",", "")
        self.unit = unit
        self.percent = bool(m.group("pct"))
        self.currency = bool(m.group("cur"))


def numbers_in(sentence: str) -> list[_Num]:
    """The numbers of a sentence of prose, in order; a number glued to letters that are not a unit
    ("3x", "2nd") is not one."""
    out = []
    for m in _NUMBER.finditer(sentence):
        glued = m.group("glued")
        if glued is not None and glued not in _GLUED_UNITS:
            continue
        out.append(_Num(m, glued))
    return out


def states_a_point(sentence: str) -> bool:
    """The sentence ends on a point or tuple of numbers ("... is Q = (3, -4).")."""
    points = list(_POINT.finditer(sentence))
    return bool(points) and not numbers_in(sentence[points[-1].end() :])


def last_number_span(text: str) -> tuple[int, int] | None:
    """(start, end) of the last number of prose in `text` (numbers_in(text)[-1], without building
    the others); its closing part is searched first."""
    for start in (max(0, len(text) - 800), 0):
        last = None
        for m in _NUMBER.finditer(text, start):
            glued = m.group("glued")
            if glued is None or glued in _GLUED_UNITS:
                last = m
        if last is not None:
            return last.start(), last.end()
        if start == 0:
            break
    return None


def _in_unit(value: Fraction, table: dict[str, int], target: str) -> str:
    """`value` in the table's base unit (seconds, inches), as a number of `target`s."""
    v = value / table[target]
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def _mixed_quantity(sentence: str, num: _Num, asked: Asked | None) -> str | None:
    """"2 hours and 40 minutes" as one quantity, when `num` is one of its two numbers."""
    for m in _MIXED.finditer(sentence):
        if not (m.start("a") <= num.start < m.end()):
            continue
        ua, ub = lemma(m.group("ua")), lemma(m.group("ub"))
        ua, ub = (_UNITS.get(ua) or _UNITS.get(m.group("ua").lower()) or (None, None))[1], (_UNITS.get(ub) or _UNITS.get(m.group("ub").lower()) or (None, None))[1]
        for table in (_UNIT_SECONDS, _UNIT_INCHES):
            if ua in table and ub in table and table[ua] > table[ub]:
                total = Fraction(m.group("a")) * table[ua] + Fraction(m.group("b")) * table[ub]
                target = asked.unit if asked is not None and asked.unit in table else ub
                return f"{_in_unit(total, table, target)} {target}s"
        return None
    return None


def _noun_after(sentence: str, num: _Num) -> str:
    """The few words after a number that may name what it counts ("8 millimeters shorter")."""
    if num.unit:
        return num.unit
    m = _NOUN_WORDS.match(sentence, num.end)
    if m is None or not m.group(1).strip():
        return ""
    words = []
    for w in m.group(1).split():
        low = w.lower()
        if low in _STOP_NOUN or low in _AFTER_HEAD_ONLY and not words or low in _VERBS or "'" in low or len(low) > 4 and low.endswith("ed") and not low.endswith("eed"):
            break  # "1 student scored full marks": a verb ends the noun phrase
        words.append(w)
    while words and words[-1].lower() in _AFTER_HEAD_ONLY:
        words.pop()
    return " ".join(words[:4])


def _state(sentence: str, num: _Num, asked: Asked | None) -> str:
    mixed = _mixed_quantity(sentence, num, asked)
    if mixed is not None:
        return mixed
    noun = _noun_after(sentence, num)
    value = num.text + ("%" if num.percent else "")
    return value + (" " + noun if noun and not num.percent else "")


_OR = re.compile(r"[\sA-Za-z\-,]{0,20}?\s*\b(?:or|maybe|perhaps|possibly|probably)\s+(?:even\s+)?(?:\\?\$\s?)?", re.IGNORECASE)


def _alternative(sentence: str, nums: list[_Num], i: int) -> int | None:
    """Index of a number offered beside nums[i] as an alternative ("12 or 13", "either 6 or 7",
    "at least 12, maybe 15")."""
    if i > 0 and _OR.fullmatch(sentence[nums[i - 1].end : nums[i].start]):
        return i - 1
    if i + 1 < len(nums) and _OR.fullmatch(sentence[nums[i].end : nums[i + 1].start]):
        return i + 1
    return None


def read_sentence(sentence: str, asked: Asked | None = None, computed: frozenset[str] = frozenset()) -> str | None:
    """The answer a sentence of prose states, with the words after its number, or None when it
    states no number. `asked`: what the question asks for; `computed`: values the text computed
    earlier ("= 34"), preferred among several numbers of a sentence without a conclusion marker."""
    s = sentence.strip()
    if not s:
        return None
    if not re.search(r"\d", s):
        s = words_to_digits(s)
    points = list(_POINT.finditer(s))
    nums = [n for n in numbers_in(s) if not _REJECTED.search(s[max(0, n.start - 24) : n.start])]
    if points and (not nums or points[-1].end() >= nums[-1].end):
        return points[-1].group(0)
    if not nums:
        return None
    # after the last conclusion marker, only what follows it
    marks = [m for m in _CONCLUSION.finditer(s) if m.end() <= nums[-1].start]
    region_start = marks[-1].end() if marks else 0
    region = [n for n in nums if n.start >= region_start] or nums
    chosen = len(region) - 1
    if len(region) > 1 and _alternative(s, region, chosen) is None:
        chosen = _asked_beside(s, region, asked)
        if chosen is None:
            region = _main_clause(s, region_start, region, asked)
            chosen = _named_clause(s, region, asked)
        if chosen is None:
            chosen = len(region) - 1
            if computed:
                hits = [i for i, n in enumerate(region) if n.text in computed]
                if hits and not re.search(r"=\s*(?:\\?\$)?\s*$", s[max(0, region[-1].start - 8) : region[-1].start]):
                    chosen = hits[-1]
            while chosen > 0 and _in_circumstance(s[region[chosen - 1].end : region[chosen].start]):
                chosen -= 1
    alt = _alternative(s, region, chosen)
    if alt is not None:
        a, b = sorted((chosen, alt))
        return f"{_state(s, region[a], asked)} or {_state(s, region[b], asked)}"
    return _state(s, region[chosen], asked)


def _main_clause(s: str, start: int, region: list[_Num], asked: Asked | None = None) -> list[_Num]:
    """The numbers of `region` after the circumstances that open the sentence (from `start`, where
    its statement begins): "After 3 days, she has 42 apples." states 42. A question repeats its
    circumstance ("... after 3 days?"), so the words it shares with the question alone never make
    that phrase the answer. All of them when no number follows the phrases. The one number of the
    phrases that names the quantity asked stays the answer when no number of the main clause names
    it ("After 3 days, she has 42." asked after how many days), or when both do and the asking
    sentence's words are the phrase's ("After paying $5 for lunch, he has $15 left." asked how much
    he paid for lunch)."""
    end = start
    while (m := _LEADING.match(s, end)) is not None and _MAIN_START.match(s, m.end()):
        phrase, words = m.group(0), re.findall(r"[A-Za-z]+", m.group(0))
        if m.group("opener").lower() in _SUBORDINATORS:
            if len(words) > 12:
                break
        elif len(words) > 8 or _CLAUSE_WORDS.search(phrase) or any(w.lower() in _VERBS for w in words):
            break
        end = m.end()
    main = [n for n in region if n.start >= end]
    if not main or asked is None or asked.dimension is None:
        return main or region
    named = [n for n in region if n.start < end and _names_asked(s, n, asked)]
    if len(named) != 1:
        return main
    if not any(_names_asked(s, n, asked) for n in main):
        return named
    phrase_words, main_words = content_words(s[start:end]) & asked.asking, content_words(s[end:]) & asked.asking
    return named if len(phrase_words - main_words) > len(main_words - phrase_words) else main


def _in_circumstance(between: str) -> bool:
    """The text between two numbers of one clause puts the second in a circumstance of the first:
    " after the " ("$70 after the $30 discount"), " stickers left after giving away "."""
    return bool(_CIRCUMSTANCE.search(between)) and not _JOINED.search(between)


def _names_asked(sentence: str, num: _Num, asked: Asked) -> bool:
    """The number is stated in the quantity the question asks for ("20 liters" when it asks how
    many liters, "$30" when it asks how much money)."""
    if asked.dimension == "money" and num.currency:
        return True
    if asked.dimension == "percent":
        return num.percent
    words = _noun_after(sentence, num).split()
    noun = parse_noun(words) if words else None
    if noun is None or not noun.head:
        return False
    if noun.unit is not None:
        return noun.unit[0] == asked.dimension and (asked.unit is None or noun.unit[1] == asked.unit)
    return asked.dimension == "count" and noun.head in asked.nouns


def _asked_beside(s: str, region: list[_Num], asked: Asked | None) -> int | None:
    """When the last number names another quantity than the one asked ("It uses 20 liters for
    250 km" when the question asks liters), the one number that names the asked quantity."""
    if asked is None or asked.dimension is None:
        return None
    last = region[-1]
    words = _noun_after(s, last).split()
    noun = parse_noun(words) if words else None
    # money or a percent is another quantity than the one asked unless that is what it asks
    other = last.currency and asked.dimension != "money" or last.percent and asked.dimension != "percent"
    if not other and (noun is None or conflict(noun, asked) is None):
        return None
    hits = [i for i, n in enumerate(region[:-1]) if _names_asked(s, n, asked)]
    return hits[0] if len(hits) == 1 else None


def _named_clause(s: str, region: list[_Num], asked: Asked | None) -> int | None:
    """Of clauses that each state one number, the one that names best what the question asks."""
    if asked is None or not asked.asking:
        return None
    # the clause of each number: from the previous separator before it to the next one
    cuts = [0] + [m.end() for m in _CLAUSE_SPLIT.finditer(s)] + [len(s) + 1]
    clauses: dict[int, list[int]] = {}
    for i, n in enumerate(region):
        k = max(j for j, c in enumerate(cuts) if c <= n.start)
        clauses.setdefault(k, []).append(i)
    if len(clauses) < 2 or any(len(v) != 1 for v in clauses.values()):
        return None
    scores = []
    for k, (i,) in clauses.items():
        text = s[cuts[k] : cuts[k + 1] if k + 1 < len(cuts) else len(s)]
        scores.append((len(content_words(text) & asked.asking), i))
    scores.sort(reverse=True)
    if scores[0][0] >= 1 and scores[0][0] > scores[1][0]:
        return scores[0][1]
    return None


def looks_like_prose(text: str) -> bool:
    """A sentence of words with a number in it, not an answer written bare: it opens with a word
    and has at least two words outside any math ("Priya pays $42.", "Probably 13 packs."), and is
    not a list of named values ("Minimum: 1, Maximum: 3")."""
    s = text.strip()
    if not s or len(s) > 400 or "\n" in s:
        return False
    if re.match(r"[A-Za-z]+\s*(?::|=|\\colon)", s):
        return False
    plain = re.sub(r"\\[A-Za-z]+(?:\{[^{}]*\})?|\$[^$]*\$", " ", s)
    words = len(re.findall(r"(?<![A-Za-z\\])[A-Za-z][a-z']+", plain))
    if re.match(r"[A-Za-z][a-z']+(?![A-Za-z(])", s):
        return words >= 2
    # opening with a number: a sentence when it has more numbers and words, no LaTeX
    # ("1,250 - 480 = 770 apples remain.", "6 tickets cost $48 (not $46).")
    return "\\" not in s and (words >= 2 or words == 1 and "=" in s) and len(numbers_in(s)) >= 2
