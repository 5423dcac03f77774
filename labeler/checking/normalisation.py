"""Normalising answer text and the fast in-process comparison (no sympy): normalised string
match, exact numbers (thousands separators, decimals vs fractions, scientific notation,
percentages), units, multiple-choice letters. GSM8K-style answers never leave this layer."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from labeler.checking.extraction import _strip_math_delimiters
from labeler.checking.prose import is_number_words, words_to_digits
from labeler.checking.quantities import _UNITS, MULTIPLIERS, Noun, parse_noun

# Decimal exponents beyond this are not evaluated exactly in-process (10^{10^{10}}).
_MAX_EXACT_EXPONENT = 400
_MAX_NUMBER_DIGITS = 400

_UNIT_WORDS = (
    r"(?:dollars?|cents?|euros?|pounds?|yuan|units?|square\s+(?:units|feet|meters|inches|cm|m|ft)|"
    r"sq\.?\s*(?:units|ft|m|cm|in)|cubic\s+\w+|degrees?|radians?|percent|percentage|points?|"
    r"meters?|metres?|centimeters?|millimeters?|kilometers?|km|cm|mm|m|inches|inch|in|feet|foot|ft|"
    r"yards?|yd|miles?|mi|mph|kph|km/h|m/s|seconds?|secs?|s|minutes?|mins?|hours?|hrs?|h|days?|"
    r"weeks?|months?|years?|grams?|g|kilograms?|kg|mg|pounds?|lbs?|lb|ounces?|oz|liters?|litres?|"
    r"l|ml|gallons?|gal|cups?|quarts?|pints?)"
)
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACES_CMD = re.compile(r"\\(?:[,;:!>\s]|(?:quad|qquad|displaystyle|textstyle|left|right|big|Big|bigg|Bigg)(?![A-Za-z]))")
_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![A-Za-z])")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![A-Za-z])|\^\s*\{\s*\\text\{o\}\s*\}")
_PERCENT = re.compile(r"\\?%|\s*\\text\{\s*percent\s*\}|\s+percent(?:age)?\b|\\percent(?![A-Za-z])")
_CURRENCY = re.compile(r"\\\$|\$|€|£|¥|₹|\\euro(?![A-Za-z])|\\pounds(?![A-Za-z])|\\text\{\s*dollars?\s*\}")


@dataclass(frozen=True)
class _Norm:
    text: str  # normalised LaTeX-ish text, spaces removed
    spaced: str  # normalised, spaces kept (for the symbolic layer)
    percent: bool
    noun: Noun | None = None  # the words stripped after a number ("10 pencils", "3 hours")
    unscaled: str | None = None  # "2 dozen eggs" has text "24"; unscaled "2", when the question counts dozens
    qualifier: str | None = None  # a trailing "for all real x" / "where c is any integer", stripped
    int_params: frozenset[str] = frozenset()  # letters the qualifier declares integers ("n \in \mathbb{Z}")
    domains: frozenset[str] = frozenset()  # number sets the qualifier names (integer, real, ...)
    degrees: bool = False  # it had a degree sign (a family "90^\circ + 180^\circ k" has no \pi)


_TEXT_UNIT = re.compile(
    r"(?:(?<=[\d}])|(?<=[\d}]\s)|(?<=[\d}]\s\s))\s*\\(?:text|mbox|mathrm)\s*\{\s*(" + _UNIT_WORDS + r"(?:\^?\{?\d\}?)?)\s*\.?\s*\}(\s*\^\s*\{?\d\}?)?"
)
_BACKSLASH_DIGIT = re.compile(r"\\(?=\d)")
_TRAILING_UNIT = re.compile(r"(?<=[\d}])\s*" + _UNIT_WORDS + r"(?:\^?\{?[23]\}?)?\s*\.?$", re.IGNORECASE)
_TOKEN = r"(\\[A-Za-z]+|[0-9A-Za-z])"
_FRAC_TT = re.compile(r"\\frac\s*" + _TOKEN + r"\s*" + _TOKEN)  # \frac12 -> \frac{1}{2}, \frac\pi2
_FRAC_T = re.compile(r"\\frac\s*" + _TOKEN + r"\s*\{")  # \frac1{2x} -> \frac{1}{2x}
_FRAC_BT = re.compile(r"\\frac\s*\{([^{}]*)\}\s*" + _TOKEN)  # \frac{3}4 -> \frac{3}{4}
_SQRT_DIGITS = re.compile(r"\\sqrt\s*(\d+)")  # \sqrt2 -> \sqrt{2}
_WHITESPACE = re.compile(r"\s+")
# Ordinal suffixes after a number: 3^{rd}, 21st, 9\text{th} (\text already unwrapped).
_ORDINAL = re.compile(r"(?<=\d)\s*(?:\^\s*\{\s*(?:st|nd|rd|th)\s*\}|\^\s*(?:st|nd|rd|th)|(?:st|nd|rd|th))(?![A-Za-z])")
# A trailing clause that qualifies the answer: "for all real x", ", where c is any integer",
# "\forall x \in \mathbb{R}", ", n \in \mathbb{Z}". Stripped when something stands before it.
_QUALIFIER = re.compile(
    r"(?:\s*,(?!\s*[A-Za-z]\s*\\in))?\s*(?:\bfor\s+(?:all|every|each|any|some|integers?|integral|real|reals|positive|nonnegative|natural|arbitrary)\b"
    r"|\bwhere\s+(?!the\b)|\bwith\s+[A-Za-z]\s*(?:\\in|is|an?\b)|\\forall(?![A-Za-z])"
    r"|(?:,|\()\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*\\in\s*\\mathbb\s*\{?\s*[ZNRQC]\s*\}?(?=\s*\)?\s*$)"
    r"|\bif\s+[A-Za-z]\s+is\s+an?\s+integer)",
    re.IGNORECASE,
)
_INT_DECLARED = re.compile(
    r"([A-Za-z])(?:\s*,\s*([A-Za-z]))?\s*\\in\s*\\mathbb\s*\{?\s*[ZN]|\bintegers?\s+([A-Za-z])\b|\b([A-Za-z])\s+(?:is|are)\s+(?:an?\s+|any\s+)?(?:arbitrary\s+)?(?:integers?|whole\s+numbers?)\b"
    r"|\bany\s+integer\s+([A-Za-z])\b"
)
_DOMAIN_WORDS = (
    ("integer", re.compile(r"integer|\\mathbb\s*\{?\s*Z|whole number", re.I)),
    ("natural", re.compile(r"natural|\\mathbb\s*\{?\s*N", re.I)),
    ("rational", re.compile(r"rational|\\mathbb\s*\{?\s*Q", re.I)),
    ("real", re.compile(r"\breal|\\mathbb\s*\{?\s*R", re.I)),
    ("complex", re.compile(r"complex|\\mathbb\s*\{?\s*C", re.I)),
)
# Thousands separators of LaTeX: "11{,}111", "11,\! 111" (before \! becomes a space).
_LATEX_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|,\s*\\!\s*)(?=\d)")
# A comma and a space between digit groups separate items ("2, 500" is two numbers); a separator
# has no space ("2,500").
_SPACED_COMMA = re.compile(r"(?<![\d.,])(\d{1,3}), (?=\d{3}(?![\d.]))")
# A repeating decimal: 0.\overline{3}, 0.1\overline{6}, 2.\overline{142857}, 0.\dot{3}.
_REPEATING = re.compile(r"(?<![\d.])(-?)(\d*)\.(\d*)\s*\\(?:overline|dot|bar)\s*(?:\{\s*(\d+)\s*\}|(\d))")
# Words after an expression that name its unit: "12\pi inches per second", "9\pi square inches".
_UNIT_PHRASE = re.compile(r"(?P<expr>.*?\S)\s+(?P<words>[A-Za-z]{2,}(?:\s+[A-Za-z]{2,}){0,4})")
_LETTER = re.compile("[A-Za-z]")
_SHORT_GLUED = re.compile(r"[A-Za-z]{1,2}(?:\^?\{?[23]\}?)?\.?")
_GLUED_UNIT = re.compile(r"(?:cm|mm|km|ft|kg|mg|ml|oz|lb|yd|mi)\S*")
_UNIT_MARKS = re.compile(r"[\^{}\d.]")
_EXPRESSION_END = re.compile(r"[\d}]|\\pi")
_PLAIN_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_PER_TIME = re.compile(r"(?<=\d)\s*/\s*(year|yr|month|week|day|hour|hr|minute|min)\s*\.?$", re.IGNORECASE)
# "<number> <noun phrase>": any count noun, "1,200 sheets of paper", "2 dozen eggs".
_COUNTED = re.compile(r"(?P<num>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|[+-]?\.\d+)\s+(?P<words>[A-Za-z][A-Za-z'\- /]{0,60}?)\s*[.!]?")


@lru_cache(maxsize=16384)
def _normalise(s: str) -> _Norm:
    """The normal form of an answer (a pure function of the text, cached: references and common
    answers repeat across rollouts)."""
    s = s.strip()
    if _PLAIN_NUMBER.fullmatch(s):
        return _Norm(s, s, False)  # "42", "-3.5": no rule below changes a plain number
    s = _strip_math_delimiters(s)
    s = s.replace("\\varnothing", "\\emptyset")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\dbinom", "\\binom")
    s = s.replace("\\le ", "\\leq ").replace("\\ge ", "\\geq ").replace("\u2212", "-")
    if "," in s:
        s = _LATEX_THOUSANDS.sub(",", s)
        s = _SPACED_COMMA.sub(r"\1; ", s)
    if "\\overline" in s or "\\dot" in s or "\\bar" in s:
        s = _REPEATING.sub(_repeating_fraction, s)
    s = s.replace("\\\\", "\u27e8NL\u27e9")  # protect row separators of matrices/arrays
    s = s.replace("\\{", "\u27e8LB\u27e9").replace("\\}", "\u27e8RB\u27e9")  # protect set braces
    s = _SPACES_CMD.sub(" ", s)
    if "\\" in s:
        s = _BACKSLASH_DIGIT.sub("", s)  # "\15" (a mangled "\$15") is 15
    s = s.rstrip("\\").rstrip() if s.endswith("\\") else s  # a stray trailing backslash
    s = s.replace("~", " ")
    if _TRIG.search(s):
        # inside trigonometry a degree sign is a unit to convert: \sin 15^\circ = \sin(15 pi/180)
        s = re.sub(r"(\d+(?:\.\d+)?)\s*(?:" + _DEGREE.pattern + ")", r"\\frac{\1\\pi}{180}", s)
    degrees = bool(_DEGREE.search(s))
    s = _DEGREE.sub("", s)
    percent = bool(_PERCENT.search(s))
    if percent:
        s = _PERCENT.sub("", s)
    s = _CURRENCY.sub("", s)
    # \text{...}: a unit after a quantity is dropped, otherwise the text is kept (\text{Friday}).
    # At the end it stays, unwrapped, for the trailing-unit rule below to record ("5 \text{ cm}" vs "5 m").
    s = _TEXT_UNIT.sub(lambda m: " " + m.group(1) + (m.group(2) or "") if not s[m.end() :].strip(" .") else "", s)
    for _ in range(4):
        new = _TEXT_CMD.sub(lambda m: m.group(1), s)
        if new == s:
            break
        s = new
    if "st" in s or "nd" in s or "rd" in s or "th" in s:
        s = _ORDINAL.sub("", s)
    if s[:1].isalpha() and is_number_words(s):
        s = words_to_digits(s)  # "seven", "twenty-eight", "fourteen bags"
    qualifier = None
    int_params: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()
    q = _QUALIFIER.search(s) if (" " in s or "\\in" in s or "\\forall" in s) else None
    if q is not None and s[: q.start()].strip(" ,"):
        qualifier = s[q.start() :].strip(" ,")
        s = s[: q.start()].rstrip(" ,")
        int_params = frozenset(x for m in _INT_DECLARED.finditer(qualifier) for x in m.groups() if x)
        domains = frozenset(name for name, rx in _DOMAIN_WORDS if rx.search(qualifier))
    noun = None
    unscaled = None
    if "/" in s:
        s = _PER_TIME.sub(r" per \1", s)  # "$25,000/year" is 25,000 a year
    # Trailing unit words after a number: "18 dollars", "5 cm^2".
    m = _TRAILING_UNIT.search(s) if _LETTER.search(s) else None
    if m and not m.group(0)[:1].isspace() and _SHORT_GLUED.fullmatch(m.group(0).strip()) and not _GLUED_UNIT.fullmatch(m.group(0).strip()):
        m = None  # "2m", "3h": a variable after a coefficient, not a unit
    if m:
        noun = parse_noun(_UNIT_MARKS.sub(" ", m.group(0)).split())
        s = s[: m.start()]
    else:
        # Any count noun after a plain number: "10 pencils", "2 dozen eggs", "1,200 sheets of paper".
        m = _COUNTED.fullmatch(s.strip())
        if m:
            words = m.group("words").split()
            noun = parse_noun(words)
            if noun is not None:
                s = m.group("num")
                first = words[0].lower()
                if first in MULTIPLIERS:
                    value = _parse_number(s.replace(" ", ""))
                    if value is not None:
                        unscaled = s
                        scaled = value * MULTIPLIERS[first]
                        s = str(scaled.numerator) if scaled.denominator == 1 else f"{scaled.numerator}/{scaled.denominator}"
                        noun = parse_noun(words[1:]) if len(words) > 1 else parse_noun(words)
        elif s.rstrip()[-1:].isalpha() and _EXPRESSION_END.search(s):
            # A unit phrase after an expression: "12\pi inches per second" is 12\pi
            m = _UNIT_PHRASE.fullmatch(s.strip())
            got = parse_noun(m.group("words").split()) if m else None
            if got is not None and (got.unit is not None or got.head == "unit") and _EXPRESSION_END.search(m.group("expr")):
                noun, s = got, m.group("expr")
    # \frac12 -> \frac{1}{2}, \frac\pi2 -> \frac{\pi}{2}, \frac1{2x} -> \frac{1}{2x}, \sqrt2 -> \sqrt{2}
    if "\\frac" in s:
        s = _FRAC_TT.sub(r"\\frac{\1}{\2}", s)
        s = _FRAC_T.sub(r"\\frac{\1}{", s)
        s = _FRAC_BT.sub(r"\\frac{\1}{\2}", s)
    if "\\sqrt" in s:
        s = _SQRT_DIGITS.sub(r"\\sqrt{\1}", s)
    s = s.replace("\u27e8LB\u27e9", "\\{").replace("\u27e8RB\u27e9", "\\}").replace("\u27e8NL\u27e9", "\\\\")
    s = s.strip().rstrip(".").strip()
    spaced = _WHITESPACE.sub(" ", s)
    return _Norm(_WHITESPACE.sub("", s), spaced, percent, noun, unscaled, qualifier, int_params, domains, degrees)


def _repeating_fraction(m: re.Match) -> str:
    """0.1\\overline{6} -> \\frac{1}{6}: the exact value of a repeating decimal."""
    sign, whole, fixed, period = m.group(1), m.group(2) or "0", m.group(3), m.group(4) or m.group(5)
    value = Fraction(int(whole)) + Fraction(int(fixed or "0"), 10 ** len(fixed)) + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    return sign + (str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}")


_NUM_PLAIN = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[+-]?\.\d+")
_NUM_SCI = re.compile(
    r"(?P<m>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE](?P<e>[+-]?\d+)|(?:\\times|\\cdot|\*|x|×)10\^(?:\{(?P<e2>[+-]?\d+)\}|(?P<e3>[+-]?\d)))"
)
_NUM_POW10 = re.compile(r"10\^(?:\{(?P<e>[+-]?\d+)\}|(?P<e2>[+-]?\d))")
_NUM_FRAC = re.compile(r"(?P<sign>[+-]?)\\frac\{(?P<a>[+-]?\d+)\}\{(?P<b>[+-]?\d+)\}")
_NUM_SLASH = re.compile(r"(?P<a>[+-]?\d+)/(?P<b>[+-]?\d+)")


@lru_cache(maxsize=16384)
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


def clear_caches() -> None:
    """Empty the caches of normal forms and parsed numbers (for benchmarks that must not measure them)."""
    _normalise.cache_clear()
    _parse_number.cache_clear()


_DECIMAL = re.compile(r"[+-]?[\d,]*\.(\d+)")


def _decimals(t: str) -> int | None:
    """Digits after the decimal point of a plain decimal literal, else None."""
    m = _DECIMAL.fullmatch(t) if "." in t else None
    return len(m.group(1)) if m else None


def _scientific(t: str) -> bool:
    return "e" in t or "E" in t or "10^" in t


# Decimal places from which a rounded decimal stands for an exact value: math-verify's precision,
# the one the symbolic layer compares pi and roots at (2\pi vs 6.283185).
ROUNDED_PLACES = 6
_FLOAT_NOISE = Fraction(1, 10**9)


def _numbers_equal(a: Fraction, b: Fraction, a_text: str, b_text: str, exact_only: bool = False) -> bool:
    """The one policy for numbers written differently.

    - Two decimals (or numbers in scientific notation) are equal when they are the same number up
      to floating-point noise: relative 1e-9, and below half a unit of the last digit both show
      (0.30000000000000004 is 0.3; 123456789.1 is not 123456789.2).
    - Integers and fractions are exact (1000000001 is not 1000000000).
    - A decimal equals a fraction when it is exactly that number (0.375 is 3/8; 0.\\overline{3}
      is 1/3), or when it shows at least ROUNDED_PLACES decimal places and is that number rounded
      to them (0.142857 is 1/7). A shorter rounded decimal never is (0.333 and 0.33 are not 1/3,
      4.67 is not 14/3).
    - `exact_only` (the question asks for a common fraction or an exact form): only exactly the number.
    """
    if a == b:
        return True
    if a == 0 or b == 0 or "." not in a_text and "." not in b_text and not _scientific(a_text) and not _scientific(b_text):
        return False  # integers and fractions are exact
    a_dec, b_dec = _decimals(a_text), _decimals(b_text)
    a_inexact, b_inexact = a_dec is not None or _scientific(a_text), b_dec is not None or _scientific(b_text)
    if a_inexact and b_inexact:
        if abs(a - b) > _FLOAT_NOISE * max(abs(a), abs(b)):
            return False
        shown = [d for d, t in ((a_dec, a_text), (b_dec, b_text)) if d is not None and not _scientific(t)]
        return not shown or abs(a - b) < Fraction(1, 2 * 10 ** min(shown))
    if exact_only:
        return False
    for exact, rounded, places in ((a, b, b_dec), (b, a, a_dec)):
        if places is not None and places >= ROUNDED_PLACES:
            tolerance = max(Fraction(1, 2 * 10**places), _FLOAT_NOISE * abs(exact))
            if abs(exact - rounded) <= tolerance:
                return True
    return False


_MC = re.compile(r"\(?([A-J])\)?")
_MC_PRED = re.compile(r"\(?([A-Ja-j])\)?(?:$|[\s.:,)]|\\)")


def _mc_letter(ref_norm: str) -> str | None:
    m = _MC.fullmatch(ref_norm)
    return m.group(1) if m else None


# "Total: 1250", "Total cost: $1,250": a label of up to four words, then one value.
_LABELLED = re.compile(r"\s*[A-Za-z]+(?:\s+[A-Za-z]+){0,3}\s*:\s*([^:]+?)\s*")


def _several_values(rhs: str) -> bool:
    return bool(re.search(r"[,;]|\\text|\\mbox|\\quad|\band\b|\bor\b", rhs)) and not _NUM_PLAIN.fullmatch(rhs.replace(" ", ""))


def _equation_rhs(t: str) -> str | None:
    """The value an equation states: "x = 3" -> "3", "AB = 2 \\cdot 5 = 10" -> "10",
    "\\cos\\angle RPS = -\\frac{24}{25}" -> "-\\frac{24}{25}". None for inequalities and for several
    equations at once ("x = 1, y = 2"), which are compared whole. A label before a colon states its
    value the same way: "Total: 1250" -> "1250"."""
    if ":" in t and "=" not in t:
        m = _LABELLED.fullmatch(t)
        return m.group(1).strip() if m and not _several_values(m.group(1)) else None
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


def _is_plain_number_reference(ref: str | _Norm) -> bool:
    n = ref if isinstance(ref, _Norm) else _normalise(ref)
    return _parse_number(n.text) is not None and "\\frac" not in n.text and "^" not in n.text


class _Fast(enum.Enum):
    CORRECT = 1
    INCORRECT = 2
    UNDECIDED = 3


_WORDS = re.compile(r"[A-Za-z]{2,}(?:[A-Za-z' -]*[A-Za-z])?")


def _fast_compare(pred: _Norm, ref: _Norm, exact_only: bool = False) -> _Fast:
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
                if _numbers_equal(pc, rc, p, r, exact_only):
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
