"""Quantities in words: the noun after a number ("10 pencils", "3 hours", "2 dozen eggs"), and
whether it names what the question asks for.

A number followed by a short noun phrase is that number: any count noun, not a fixed list of
units. Multiplier words scale it ("2 dozen eggs" is 24, "3 thousand" is 3000). With the question
at hand, a noun that names another quantity turns a matching number into a wrong answer: "56
apples" when the question asks how much money, "3 minutes" when it asks how many hours, "30 boxes"
when it asks how many pencils and the boxes are another thing the question counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Units by dimension, each spelling -> its canonical unit. Anything else after a number is a count noun.
_UNITS: dict[str, tuple[str, str]] = {}


def _units(dimension: str, canonical: str, *spellings: str) -> None:
    for s in (canonical, *spellings):
        _UNITS[s] = (dimension, canonical)


_units("money", "dollar", "dollars", "usd", "bucks", "buck")
_units("money", "cent", "cents")
_units("money", "euro", "euros")
_units("money", "yuan")
_units("time", "second", "seconds", "sec", "secs", "s")
_units("time", "minute", "minutes", "min", "mins")
_units("time", "hour", "hours", "hr", "hrs", "h")
_units("time", "day", "days")
_units("time", "week", "weeks")
_units("time", "month", "months")
_units("time", "year", "years", "yr", "yrs")
_units("length", "millimeter", "millimeters", "millimetre", "millimetres", "mm")
_units("length", "centimeter", "centimeters", "centimetre", "centimetres", "cm")
_units("length", "meter", "meters", "metre", "metres", "m")
_units("length", "kilometer", "kilometers", "kilometre", "kilometres", "km")
_units("length", "inch", "inches", "in")
_units("length", "foot", "feet", "ft")
_units("length", "yard", "yards", "yd", "yds")
_units("length", "mile", "miles", "mi")
_units("mass", "milligram", "milligrams", "mg")
_units("mass", "gram", "grams", "g")
_units("mass", "kilogram", "kilograms", "kg", "kgs")
_units("mass", "pound", "pounds", "lb", "lbs")
_units("mass", "ounce", "ounces", "oz")
_units("mass", "ton", "tons", "tonne", "tonnes")
_units("volume", "milliliter", "milliliters", "millilitre", "millilitres", "ml")
_units("volume", "liter", "liters", "litre", "litres", "l")
_units("volume", "gallon", "gallons", "gal")
_units("volume", "quart", "quarts", "qt")
_units("volume", "pint", "pints", "pt")
_units("volume", "cup", "cups")
_units("angle", "degree", "degrees")
_units("angle", "radian", "radians", "rad")
_units("rate", "mph", "kph", "km/h", "m/s")

MULTIPLIERS = {"dozen": 12, "dozens": 12, "hundred": 100, "hundreds": 100, "thousand": 1000, "thousands": 1000, "million": 10**6, "millions": 10**6, "billion": 10**9, "billions": 10**9}

# Words that make "<number> <words>" something other than a quantity: an operation, a bound, a
# fraction word, a second quantity. Such a tail is never stripped.
_NOT_A_NOUN = frozenset(
    "and or than plus minus divided over squared cubed point half halves third thirds quarter quarters fifth fifths "
    "sixth sixths eighth eighths tenth tenths percent percentage pi sqrt root is are was were if when where but not "
    "no none so because since which then to by out mod modulo sin cos tan cot sec csc log ln exp arcsin arccos arctan lim "
    "i e x y z".split()
)
# Words allowed inside a noun phrase that are not its head.
_LINKING = frozenset({"of", "per", "a", "each", "in", "total", "more", "fewer", "left", "over", "square", "cubic", "sq"})
_ADJECTIVES_AFTER = frozenset({"left", "total", "more", "fewer", "altogether", "remaining", "each", "old", "long", "tall", "wide", "away", "apart", "shorter", "longer", "taller", "older", "younger", "less"})

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_IRREGULAR = {"people": "person", "children": "child", "men": "man", "women": "woman", "feet": "foot", "teeth": "tooth", "mice": "mouse", "geese": "goose", "dice": "die", "sheep": "sheep", "fish": "fish", "deer": "deer"}


def lemma(word: str) -> str:
    w = word.lower().strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith(("ches", "shes", "sses", "xes", "zes")):
        return w[:-2]
    if len(w) > 2 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


@dataclass(frozen=True)
class Noun:
    """The words after a number: "bags of flour" -> head "bag"; its unit when it is one."""

    words: tuple[str, ...]  # lower-case, as written
    head: str  # lemma of the noun the number counts
    unit: tuple[str, str] | None  # (dimension, canonical unit) when the head is a unit (of a rate: its numerator)
    rate: bool  # "miles per hour", "mph"

    @property
    def text(self) -> str:
        return " ".join(self.words)


def parse_noun(words: list[str]) -> Noun | None:
    """A short noun phrase (1 to 5 words, letters only), or None when the words are not one."""
    if not 1 <= len(words) <= 5:
        return None
    low = [w.lower() for w in words]
    if any(w in _NOT_A_NOUN for w in low) or not any(len(w) >= 2 or w in _UNITS for w in low):
        return None
    rate = any("/" in w for w in low)
    # the head: the word before "of"/"per"/"a" ("dollars a day"), else the last word that is not a trailing adjective
    core = low
    for i, w in enumerate(low):
        if i > 0 and w in ("per", "a", "an", "every") and i < len(low) - 1:
            rate, core = True, low[:i]
            break
        if i > 0 and w == "of":
            core = low[:i]
            break
    while len(core) > 1 and core[-1] in _ADJECTIVES_AFTER:
        core = core[:-1]
    core = [w for w in core if w not in ("square", "cubic", "sq")] or core
    head = core[-1]
    unit = _UNITS.get(head) or _UNITS.get(lemma(head))
    return Noun(tuple(low), lemma(head), unit, rate or unit is not None and unit[0] == "rate")


# ---------------------------------------------------------------------------------------------
# What the question asks for
# ---------------------------------------------------------------------------------------------

_MONEY_WORDS = re.compile(
    r"\bhow\s+much\b[^.?!]{0,80}?\b(?:money|cost|costs|pay|paid|pays|spend|spent|spends|earn|earns|earned|make|makes|made|"
    r"profit|save|saved|saves|charge|charges|charged|owe|owes|worth|price|revenue|salary|income|sell|sold|raise|raised|donate|donated|change)\b"
    r"|\bhow\s+many\s+dollars\b|\bin\s+dollars\b|\bwhat\b[^.?!]{0,80}?\b(?:cost|costs|price|profit|revenue|salary|income|earnings|paid|pay)\b",
    re.IGNORECASE,
)
_HOW_MANY = re.compile(r"\bhow\s+many\s+([A-Za-z][A-Za-z\s'\-]{0,60})", re.IGNORECASE)
_IN_UNIT = re.compile(r"\bin\s+([A-Za-z]+(?:\s+per\s+[A-Za-z]+)?)\s*[?,.)]", re.IGNORECASE)
_STOP_AFTER_HOW_MANY = frozenset(
    "does do did is are was were will would can could should has have had in on at for if than that to be it he she they we you "
    "there this these those his her their its".split()
)


@dataclass(frozen=True)
class Asked:
    """The quantity a question asks for, as far as its wording says."""

    dimension: str | None = None  # money, time, length, ..., percent, count
    unit: str | None = None  # canonical unit when the question names one ("how many minutes")
    nouns: frozenset[str] = frozenset()  # lemmas of the noun phrase after "how many"
    words: frozenset[str] = frozenset()  # lemmas of every word in the question


def _asking_sentence(question: str) -> str:
    """The sentence with the question mark (the last one), else the last sentence."""
    q = question.strip()
    end = q.rfind("?")
    if end >= 0:
        start = max(q.rfind(". ", 0, end), q.rfind("! ", 0, end), q.rfind("\n", 0, end))
        return q[start + 1 : end + 1]
    parts = re.split(r"(?<=[.!])\s+", q)
    return parts[-1] if parts else q


@lru_cache(maxsize=4096)
def asked_quantity(question: str) -> Asked:
    sentence = _asking_sentence(question)
    words = frozenset(lemma(w) for w in _WORD.findall(question))
    m = _IN_UNIT.search(sentence)
    if m:
        noun = parse_noun(m.group(1).split())
        if noun is not None and noun.rate:
            return Asked("rate", None, frozenset({noun.head}), words)
        if noun is not None and noun.unit is not None:
            return Asked(noun.unit[0], noun.unit[1], frozenset({noun.head}), words)
    if re.search(r"\bwhat\s+percent(?:age)?\b|\bhow\s+many\s+percent\b|\bpercent(?:age)?\s+of\b", sentence, re.IGNORECASE):
        return Asked("percent", None, frozenset(), words)
    m = _HOW_MANY.search(sentence)
    if m:
        phrase = []
        for w in m.group(1).split():
            if w.lower() in _STOP_AFTER_HOW_MANY or len(phrase) >= 4:
                break
            phrase.append(w)
        noun = parse_noun(phrase) if phrase else None
        if noun is not None:
            if noun.head in ("dollar", "cent") or noun.unit is not None and noun.unit[0] == "money":
                return Asked("money", noun.unit[1] if noun.unit else "dollar", frozenset({noun.head}), words)
            if noun.unit is not None:
                return Asked(noun.unit[0], noun.unit[1], frozenset({noun.head}), words)
            nouns = frozenset(lemma(w) for w in noun.words if w not in _LINKING)
            return Asked("count", None, nouns, words)
    if _MONEY_WORDS.search(sentence):
        return Asked("money", None, frozenset(), words)
    if re.search(r"\bhow\s+old\b", sentence, re.IGNORECASE):
        return Asked("time", "year", frozenset(), words)
    if re.search(r"\bhow\s+fast\b|\bspeed\b", sentence, re.IGNORECASE):
        return Asked("rate", None, frozenset(), words)
    if re.search(r"\bhow\s+far\b", sentence, re.IGNORECASE):
        return Asked("length", None, frozenset(), words)
    return Asked(None, None, frozenset(), words)


def conflict(noun: Noun, asked: Asked) -> str | None:
    """Why `noun` names another quantity than the one asked, or None when it may be that one."""
    if asked.dimension is None:
        return None
    if noun.unit is not None:
        dim, unit = noun.unit
        if asked.dimension == "count":
            if dim == "money" or asked.nouns & {noun.head, unit}:
                return None if dim != "money" else f"'{noun.text}' is money; the question counts {'/'.join(sorted(asked.nouns))}"
            return None  # a unit word used as a count ("3 cups") when the question counts something else: no evidence
        if asked.dimension == "rate":
            return None if noun.rate else f"'{noun.text}' is not a rate; the question asks how fast"
        if dim != asked.dimension:
            return f"'{noun.text}' is {dim}; the question asks for {asked.dimension}"
        if asked.unit is not None and unit != asked.unit and dim == asked.dimension:
            return f"'{noun.text}' where the question asks for {asked.unit}s"
        return None
    # a count noun
    if asked.dimension == "count":
        if noun.head in asked.nouns or any(lemma(w) in asked.nouns for w in noun.words):
            return None
        if noun.head in asked.words:
            return f"'{noun.text}' counts another thing the question names; it asks how many {'/'.join(sorted(asked.nouns))}"
        return None
    if asked.dimension in ("money", "time", "length", "mass", "volume", "rate", "percent") and noun.head in asked.words:
        return f"'{noun.text}' counts {noun.head}s; the question asks for {asked.dimension}"
    return None
