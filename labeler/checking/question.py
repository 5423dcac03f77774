"""What the question says about the form of its answer: whether a list is ordered (an ordered pair,
"in increasing order") or a set of solutions ("find all x", "separated by commas"), in which order
it names the components ("Enter (a,b)", "Alice and Bob"), and the quantity it asks for
(quantities.py). Read from the question's wording only; cached, since many answers share a question."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from labeler.checking.forms import canonical_name
from labeler.checking.quantities import Asked, asked_quantity

_ORDERED = re.compile(
    r"\bordered\s+(?:pair|triple|quadruple|tuple|list|n-tuple)s?\b(?!\s+of\s+\w+\s+(?:such|that|for))"
    r"|\bin\s+(?:increasing|decreasing|ascending|descending|numerical|alphabetical|that|this|the\s+same|the\s+following)\s+order\b"
    r"|\bfrom\s+(?:least|smallest|lowest|largest|greatest|highest)\s+to\s+(?:greatest|largest|highest|least|smallest|lowest)\b"
    r"|\bin\s+order\b",
    re.IGNORECASE,
)
_UNORDERED = re.compile(
    r"\b(?:find|enter|list|give|determine|compute|what\s+are)\s+all\b|\ball\s+(?:the\s+)?(?:\w+\s+){0,3}(?:solutions|roots|zeros|zeroes|values|numbers|integers|points|pairs|triples)\b"
    r"|\bseparated\s+by\s+commas\b|\bunordered\b|\bin\s+any\s+order\b|\bset\s+of\s+(?:all\s+)?(?:solutions|roots|values)\b",
    re.IGNORECASE,
)
# The question wants the exact value: a rounded decimal does not answer it.
_EXACT = re.compile(
    r"\bcommon\s+fraction|\bsimplest\s+(?:radical\s+)?form|\blowest\s+terms|\bexact\s+(?:value|form|answer)|\bin\s+terms\s+of\s+\\?\$?\\?pi"
    r"|\b(?:as\s+an?|improper|reduced)\s+fraction|\bmixed\s+number|\bradical\s+form",
    re.IGNORECASE,
)
# The question wants a fraction in lowest terms: 36/99 is not 4/11 as an answer to it.
_REDUCED = re.compile(r"\blowest\s+terms|\bsimplest\s+form|\breduced\s+fraction|\bsimplify\b", re.IGNORECASE)
# Options of a multiple-choice question: "(A) cylinder (B) cone", "$\textbf{(B) }\ 3$".
_OPTION = re.compile(r"\(\s*([A-J])\s*\)\s*\}?\s*(?:\\[,;:!\s]|\\qquad|\\quad)*\s*([^()\n$]*?)(?=\s*(?:\\qquad|\\quad|\$)?\s*(?:\\textbf\{|\\text\{|\\mathrm\{)?\s*\(\s*[A-J]\s*\)|\s*$|\n)")
_TUPLE_OF_NAMES = re.compile(r"\(\s*([A-Za-z](?:_\{?\w+\}?)?(?:\s*,\s*[A-Za-z](?:_\{?\w+\}?)?)+)\s*\)")
_WORD_SYNONYMS = {"min": ("minimum", "smallest", "least", "lowest", "min"), "max": ("maximum", "largest", "greatest", "highest", "max")}


@dataclass(frozen=True)
class Question:
    ordered: bool | None  # True: an ordered tuple/list; False: a set of solutions; None: not said
    quantity: Asked
    text: str
    exact: bool = False  # it asks for a common fraction or an exact form: rounded decimals are wrong
    options: tuple[tuple[str, str], ...] = ()  # multiple-choice options: (letter, its text)
    reduced: bool = False  # it asks for lowest terms / simplest form: an unreduced fraction is wrong

    def describe(self) -> dict:
        q = self.quantity
        out = {"ordered": self.ordered}
        if q.dimension:
            out["asks_for"] = q.dimension + (f" ({q.unit})" if q.unit else "") + (f" of {'/'.join(sorted(q.nouns))}" if q.nouns else "")
        if self.exact:
            out["exact_form"] = True
        if self.options:
            out["options"] = "".join(letter for letter, _ in self.options)
        return out

    def name_order(self, names: list[str]) -> list[int] | None:
        """Positions of `names` in the order the question gives them, or None when it does not say."""
        return _name_order(self.text, tuple(names))


@lru_cache(maxsize=4096)
def read_question(text: str) -> Question:
    ordered: bool | None = None
    if _ORDERED.search(text):
        ordered = True
    elif _UNORDERED.search(text):
        ordered = False
    options = tuple((m.group(1), m.group(2).strip(" .,;")) for m in _OPTION.finditer(text) if m.group(2).strip(" .,;"))
    return Question(ordered, asked_quantity(text), text, bool(_EXACT.search(text)), options if len(options) >= 2 else (), bool(_REDUCED.search(text)))


@lru_cache(maxsize=4096)
def _name_order(text: str, names: tuple[str, ...]) -> list[int] | None:
    canon = [canonical_name(n) for n in names]
    if len(set(canon)) != len(canon):
        return None
    # An explicit tuple of the same names: "Enter the ordered pair (a,b)".
    for m in _TUPLE_OF_NAMES.finditer(text):
        got = [canonical_name(x.strip()) for x in m.group(1).split(",")]
        if sorted(got) == sorted(canon):
            return [canon.index(g) for g in got]
    # Letters without such a tuple: the conventional order (comparison.py), never the order of
    # first mention ("If $y = 3x$ and $x + y = 8$" still asks for (x, y)).
    if any(len(c) == 1 or c.startswith("\\") or "_" in c for c in canon):
        return None
    # Words ("Alice and Bob", "the minimum and the maximum"): the order the question names them.
    positions = []
    for i, c in enumerate(canon):
        options = _WORD_SYNONYMS.get(c, (c,))
        m = re.search(r"\b(?:" + "|".join(re.escape(o) for o in options) + r")\b", text, re.IGNORECASE)
        if m is None:
            return None
        positions.append((m.start(), i))
    positions.sort()
    return [i for _, i in positions]
