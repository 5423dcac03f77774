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
from fractions import Fraction
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
_units("money", "peso", "pesos")
_units("money", "rupee", "rupees")
_units("money", "yen")
_units("money", "franc", "francs")
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
_units("volume", "tablespoon", "tablespoons", "tbsp")
_units("volume", "teaspoon", "teaspoons", "tsp")
_units("angle", "degree", "degrees")
_units("angle", "radian", "radians", "rad")
_units("rate", "mph", "kph", "km/h", "m/s")

# Exact sizes of units, in the base unit of their dimension: 2500 m is 2.5 km. Units of vaguer
# size (months, years, cups) are left out.
UNIT_SIZES: dict[str, tuple[str, Fraction]] = {
    "millimeter": ("length", Fraction(1, 1000)), "centimeter": ("length", Fraction(1, 100)), "meter": ("length", Fraction(1)),
    "kilometer": ("length", Fraction(1000)), "inch": ("length", Fraction(254, 10000)), "foot": ("length", Fraction(3048, 10000)),
    "yard": ("length", Fraction(9144, 10000)), "mile": ("length", Fraction(1609344, 1000)),
    "milligram": ("mass", Fraction(1, 1000)), "gram": ("mass", Fraction(1)), "kilogram": ("mass", Fraction(1000)),
    "ounce": ("mass", Fraction(45359237, 16 * 10**5)), "pound": ("mass", Fraction(45359237, 10**5)),
    "second": ("time", Fraction(1)), "minute": ("time", Fraction(60)), "hour": ("time", Fraction(3600)),
    "day": ("time", Fraction(86400)), "week": ("time", Fraction(604800)),
    "milliliter": ("volume", Fraction(1, 1000)), "liter": ("volume", Fraction(1)),
}

MULTIPLIERS = {"dozen": 12, "dozens": 12, "hundred": 100, "hundreds": 100, "thousand": 1000, "thousands": 1000, "million": 10**6, "millions": 10**6, "billion": 10**9, "billions": 10**9}

# Words that make "<number> <words>" something other than a quantity: an operation, a bound, a
# fraction word, a second quantity, a function. Such a tail is never stripped.
_NOT_A_NOUN = frozenset(
    "and or than plus minus divided over squared cubed point half halves third thirds fifth fifths "
    "sixth sixths eighth eighths tenth tenths percent percentage pi sqrt root if when where but not "
    "no none so because since which then out mod modulo sin cos tan cot sec csc log ln exp arcsin arccos arctan lim "
    "i e x y z".split()
)
# A verb ends the noun phrase ("10 pizzas are needed"): what follows comments on it.
_VERBS = frozenset("is are was were be been will would can could should must have has had do does did get gets got remain remains".split())
# A tail that opens with these says where or when, not what is counted ("18 every day", "243 on clothing", "8 more").
_ADJUNCT_START = frozenset("on in for from at with of per every each a an more left altogether extra total overall all to by during after before until over".split())
# Prepositions after the head end the noun phrase ("25 miles between the stops").
_PREPOSITIONS = frozenset("between for on in at from with during after before into onto across along around about through to by".split())
# Nouns that count anything: never evidence of another quantity.
_GENERIC = frozenset("time way item thing piece unit object total number amount result answer value one".split())
_ADJECTIVES_AFTER = frozenset({"left", "total", "more", "fewer", "altogether", "remaining", "each", "old", "long", "tall", "wide", "away", "apart", "shorter", "longer", "taller", "older", "younger", "less", "faster", "slower", "later", "earlier"})

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
    """The words after a number: "bags of flour" -> head "bag"; its unit when it is one. A tail
    that only says where or when ("every day", "on clothing") has no head ("")."""

    words: tuple[str, ...]  # lower-case, as written
    head: str  # lemma of the noun the number counts; "" when the words name none
    unit: tuple[str, str] | None  # (dimension, canonical unit) when the head is a unit (of a rate: its numerator)
    rate: bool  # "miles per hour", "mph", "dollars a day"

    @property
    def text(self) -> str:
        return " ".join(self.words)


def parse_noun(words: list[str]) -> Noun | None:
    """A short noun phrase after a number (1 to 6 words, letters only), or None when the words are
    not one ("and 5", "cos x", "over 4")."""
    if not 1 <= len(words) <= 6:
        return None
    low = [w.lower() for w in words]
    if len(low) >= 2 and low[-2:] == ["left", "over"]:
        low = low[:-1]  # "crayons left over"
    for i, w in enumerate(low):  # "pizzas are needed": the verb ends the phrase
        if w in _VERBS or w.endswith("n't"):
            low_core = low[:i]
            break
    else:
        low_core = low
    if any(w in _NOT_A_NOUN for w in low_core) or not all(_WORD.fullmatch(w) or "/" in w for w in low):
        return None
    if not low_core or low_core[0] in _ADJUNCT_START:
        if len(low_core) > 1 and low_core[0] in ("per", "a", "an", "every", "each"):
            return Noun(tuple(low), "", None, True)  # "2 per hour", "34 a month": a rate of what the question asks
        return Noun(tuple(low), "", None, False)
    rate = any("/" in w for w in low_core)
    core = low_core
    for i, w in enumerate(low_core):
        if i > 0 and w in ("per", "a", "an", "every", "each") and i < len(low_core) - 1:
            rate, core = True, low_core[:i]  # "dollars a day"
            break
        if i > 0 and (w == "of" or w in _PREPOSITIONS):
            core = low_core[:i]  # "bags of flour", "miles between the stops"
            break
    if core[0] in _UNITS and core[0] not in ("s", "h", "g", "l", "m", "in", "min") or core[0] in _UNITS and len(core) == 1:
        head = core[0]  # "272 hours attending classes", "10 pound weight"
    else:
        while len(core) > 1 and core[-1] in _ADJECTIVES_AFTER:
            core = core[:-1]
        core = [w for w in core if w not in ("square", "cubic", "sq")] or core
        head = core[-1]
    unit = _UNITS.get(head) or _UNITS.get(lemma(head))
    if head in ("s", "h", "g", "l", "m", "min", "in") and len(low_core) > 1:
        unit = None  # a one-letter unit word inside a phrase is a letter, not a unit
    return Noun(tuple(low), lemma(head), unit, rate or unit is not None and unit[0] == "rate")


# Words that say nothing about which quantity a clause states.
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being has have had do does did will would can could should may might must "
    "he she it they we you i his her its their our your my him them us me this that these those there here "
    "of to in on at for from by with and or but so as if than then also just now still only each every all "
    "how many much what which who whom whose when where why total altogether left per".split()
)
# Past forms of common verbs, so that "won" names the "win" a question asks about.
_VERB_FORMS = {
    "won": "win", "lost": "lose", "sold": "sell", "bought": "buy", "paid": "pay", "spent": "spend", "made": "make",
    "gave": "give", "given": "give", "took": "take", "taken": "take", "ate": "eat", "eaten": "eat", "ran": "run",
    "got": "get", "kept": "keep", "found": "find", "read": "read", "wrote": "write", "written": "write", "drove": "drive",
    "driven": "drive", "flew": "fly", "grew": "grow", "grown": "grow", "saw": "see", "seen": "see", "sent": "send",
    "caught": "catch", "brought": "bring", "thought": "think", "told": "tell", "met": "meet", "fed": "feed",
    "held": "hold", "drew": "draw", "drawn": "draw", "threw": "throw", "baked": "bake", "earned": "earn",
    "saved": "save", "scored": "score", "picked": "pick", "collected": "collect", "used": "use", "needed": "need",
}


def _content_lemma(word: str) -> str:
    w = word.lower().strip("'")
    if w in _VERB_FORMS:
        return _VERB_FORMS[w]
    base = lemma(w)
    if len(base) > 5 and base.endswith("ed") and not base.endswith("eed"):
        base = base[:-2] if not base.endswith("ied") else base[:-3] + "y"
    return base


def content_words(text: str) -> frozenset[str]:
    """Lemmas of the words that say what a sentence is about (not function words)."""
    return frozenset(_content_lemma(w) for w in re.findall(r"[A-Za-z][A-Za-z'\-]*", text) if w.lower() not in _FUNCTION_WORDS and len(w) > 1)


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
_IN_UNIT = re.compile(r"\bin\s+((?:(?:square|cubic|sq\.?)\s+)?[A-Za-z/]+(?:\s+per\s+[A-Za-z]+)?)\s*[?,.)]", re.IGNORECASE)
_STOP_AFTER_HOW_MANY = frozenset(
    "does do did is are was were will would can could should has have had in on at for if than that to be it he she they we you "
    "there this these those his her their its".split()
)


_HOW_MUCH_THEN = frozenset(
    "does do did is are was were will would can could should has have had more less in on for per of total money "
    "extra altogether each".split()
)
_MONEY_NOUNS = frozenset("money cash profit change revenue income salary tip rent cost price fee charge dollar cent saving earning".split())


@dataclass(frozen=True)
class Asked:
    """The quantity a question asks for, as far as its wording says."""

    dimension: str | None = None  # money, time, length, ..., percent, count
    unit: str | None = None  # canonical unit when the question names one ("how many minutes")
    nouns: frozenset[str] = frozenset()  # lemmas of the noun phrase after "how many"
    words: frozenset[str] = frozenset()  # lemmas of every word in the question
    body: frozenset[str] = frozenset()  # lemmas of the words before the asking sentence
    counted: frozenset[str] = frozenset()  # lemmas of the nouns the question counts with a number ("3 boxes")
    asking: frozenset[str] = frozenset()  # content words of the asking sentence ("gold", "coin", "sell", "harald")
    rate: tuple[str | None, str | None] | None = None  # a rate's units when it asks for one in them: ("mile", "hour")


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
    return _asked(question, _asking_sentence(question))


_COUNTED_IN_QUESTION = re.compile(r"(?<![\w.])\$?\d[\d,]*(?:\.\d+)?\s+(?:[a-z]+\s+){0,2}?([a-z]{3,})\b", re.IGNORECASE)
_PRONOUNS = frozenset("them it they those these this that he she we you of the his her their its my our your each all".split())


def _asked(question: str, sentence: str) -> Asked:
    words = frozenset(lemma(w) for w in _WORD.findall(question))
    body = frozenset(lemma(w) for w in _WORD.findall(question.replace(sentence, " ")))
    counted = frozenset(lemma(m.group(1)) for m in _COUNTED_IN_QUESTION.finditer(question))
    asking = content_words(sentence)
    got = _asked_kind(sentence)
    if got is None:
        return Asked(None, None, frozenset(), words, body, counted, asking)
    return Asked(got.dimension, got.unit, got.nouns, words, body, counted, asking, got.rate)


def _asked_kind(sentence: str) -> Asked | None:
    """The dimension, unit and nouns the asking sentence names (words filled in by _asked)."""
    m = _IN_UNIT.search(sentence)
    if m:
        noun = parse_noun(m.group(1).split())
        if noun is not None and noun.rate:
            return Asked("rate", None, frozenset({noun.head}), rate=rate_units(noun))
        if noun is not None and noun.unit is not None:
            return Asked(noun.unit[0], noun.unit[1], frozenset({noun.head}))
    if re.search(r"\bwhat\s+percent(?:age)?\b|\bhow\s+many\s+percent\b|\bpercent(?:age)?\s+of\b", sentence, re.IGNORECASE):
        return Asked("percent", None, frozenset())
    m = _HOW_MANY.search(sentence)
    if m:
        phrase = []
        for w in m.group(1).split():
            if w.lower() in _STOP_AFTER_HOW_MANY or w.lower().endswith("n't") or len(phrase) >= 4:
                break
            phrase.append(w)
        while phrase and phrase[0].lower() in ("more", "fewer", "less", "total", "extra", "additional", "different", "whole"):
            phrase = phrase[1:]  # "how many more hours"
        if phrase and phrase[0].lower() in _PRONOUNS:
            phrase = []  # "how many of them", "how many did he keep"
        noun = parse_noun(phrase) if phrase else None
        if noun is not None:
            if noun.rate and noun.unit is not None and noun.unit[0] == "length" and rate_units(noun) is not None:
                return Asked("rate", None, frozenset({noun.head}), rate=rate_units(noun))  # "how many miles per hour"
            if noun.head in ("dollar", "cent") or noun.unit is not None and noun.unit[0] == "money":
                return Asked("money", noun.unit[1] if noun.unit else "dollar", frozenset({noun.head}))
            if noun.unit is not None:
                return Asked(noun.unit[0], noun.unit[1], frozenset({noun.head}))
            nouns = frozenset(lemma(w) for w in noun.words if w not in _ADJUNCT_START and w not in _PREPOSITIONS)
            return Asked("count", None, nouns)
    m = re.search(r"\bhow\s+much\s+([A-Za-z]+)", sentence, re.IGNORECASE)
    after = m.group(1).lower() if m else ""
    if after == "time" or re.search(r"\bhow\s+long\b[^.?!]*\btakes?\b", sentence, re.IGNORECASE) and not _MONEY_WORDS.search(sentence):
        return Asked("time", None, frozenset())
    if re.search(r"\bhow\s+long\b", sentence, re.IGNORECASE):
        return None  # a duration or a length
    if m and after not in _HOW_MUCH_THEN and lemma(after) not in _MONEY_NOUNS:
        return None  # "how much water": a quantity of something, unit unknown
    if _MONEY_WORDS.search(sentence):
        return Asked("money", None, frozenset())
    if re.search(r"\bhow\s+old\b", sentence, re.IGNORECASE):
        return Asked("time", "year", frozenset())
    if re.search(r"\bhow\s+fast\b|\bspeed\b", sentence, re.IGNORECASE):
        return Asked("rate", None, frozenset())
    if re.search(r"\bhow\s+far\b", sentence, re.IGNORECASE):
        return Asked("length", None, frozenset())
    return None


_RATE_ABBREVIATIONS = {"mph": ("mile", "hour"), "kph": ("kilometer", "hour"), "km/h": ("kilometer", "hour"), "m/s": ("meter", "second")}


def _unit_of(word: str) -> str | None:
    got = _UNITS.get(word) or _UNITS.get(lemma(word))
    return got[1] if got is not None and got[0] != "rate" else None


def rate_units(noun: Noun) -> tuple[str | None, str | None] | None:
    """The units of a rate: "mph" -> ("mile", "hour"), "kilometers per hour" -> ("kilometer", "hour"),
    "dollars a day" -> ("dollar", "day"); None when the words are no rate."""
    words = list(noun.words)
    if len(words) == 1 and words[0] in _RATE_ABBREVIATIONS:
        return _RATE_ABBREVIATIONS[words[0]]
    if len(words) == 1 and "/" in words[0]:
        a, _, b = words[0].partition("/")
        return (_unit_of(a), _unit_of(b)) if _unit_of(a) or _unit_of(b) else None
    for i, w in enumerate(words):
        if i > 0 and w in ("per", "a", "an", "every", "each") and i + 1 < len(words):
            return (_unit_of(words[i - 1]), _unit_of(words[i + 1]))
    return None


def _rate_conflict(noun: Noun, asked: Asked) -> str | None:
    """A rate in other units than the rate asked ("6 kilometers per hour" for miles per hour), or
    no rate: "60 minutes" for how fast. "60 miles" for miles per hour names the rate's numerator:
    no evidence."""
    num, den = asked.rate or (None, None)
    if noun.rate:
        got = rate_units(noun)
        if got is not None and (num and got[0] and got[0] != num or den and got[1] and got[1] != den):
            return f"'{noun.text}' where the question asks for {num or '?'}s per {den or '?'}"
        return None
    if noun.unit is not None and noun.unit[0] == "length":
        return f"'{noun.text}' where the question asks for {num}s per {den or '?'}" if num and noun.unit[1] != num else None
    return f"'{noun.text}' is not a rate; the question asks how fast"


# Dimensions of units that never count things (a count asked in cups, "3 cups", may be fine).
_MEASURES = frozenset({"money", "length", "mass", "time"})


def conflict(noun: Noun, asked: Asked) -> str | None:
    """Why `noun` names another quantity than the one asked, or None when it may be that one."""
    if asked.dimension is None or not noun.head:
        return None
    if noun.unit is not None:
        dim, unit = noun.unit
        if asked.dimension == "count":
            if dim in _MEASURES and asked.nouns and not asked.nouns & {noun.head, unit}:
                return f"'{noun.text}' is {dim}; the question counts {' '.join(sorted(asked.nouns))}"
            return None  # a unit word used as a count ("3 cups") when the question counts something else: no evidence
        if asked.dimension == "rate":
            return _rate_conflict(noun, asked)
        if dim != asked.dimension:
            return f"'{noun.text}' is {dim}; the question asks for {asked.dimension}"
        if asked.unit is not None and unit != asked.unit:
            return f"'{noun.text}' where the question asks for {asked.unit}s"
        return None
    # A count noun names another quantity only when the question counts that thing with a number
    # ("Tom buys 3 boxes", "sells 8 apples"); a noun it merely names may be what it asks about in
    # other words ("how many treats" for 10 cookies).
    if noun.head in _GENERIC or noun.head not in asked.counted:
        return None
    if asked.dimension == "count":
        if noun.head in asked.nouns or any(lemma(w) in asked.nouns for w in noun.words):
            return None
        if asked.nouns & asked.body:
            return f"'{noun.text}' counts another thing the question counts; it asks how many {' '.join(sorted(asked.nouns))}"
        return None
    return f"'{noun.text}' counts {noun.text.split()[0]}; the question asks for {asked.dimension}"
