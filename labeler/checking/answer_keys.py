"""Answer keys: which final answers count as the same answer in a vote (majority, PRM-weighted).

A key is the checker's normalised text (labeler/checking/normalisation.py: math delimiters, units,
currency, \\dfrac and spacing gone); an equation "x = 3" stands for its right side; an exact
number is written as a reduced fraction, so "0.5", "1/2" and "\\frac{1}{2}" are one key; a
multiple-choice letter "(B)" is "B". A percentage keeps its sign ("50%" is not "0.5"), and answers
that only the symbolic layer would find equal ("\\sqrt{8}" and "2\\sqrt{2}") vote apart.

And which reference answers are no answer at all (`missing_answer`), the one rule of every path that reads
a reference: the label job's input rows and --answers file (labeler/inputs/presets.py: such a row is
rejected, its field and value named) and the reward paths (labeler/rewards/process_reward.py: the answer
part is not measured, the reason given).
"""

from __future__ import annotations

import math
import numbers
import re
import sys

from labeler.checking.normalisation import _equation_rhs, _mc_letter, _normalise, _parse_number


def answer_key(answer: str) -> str:
    norm = _normalise(answer)
    text = norm.text
    rhs = _equation_rhs(norm.spaced)
    if rhs is not None:
        text = re.sub(r"\s+", "", rhs)
    number = _parse_number(text)
    if number is not None:
        text = str(number)  # Fraction: "7", "1/2", "-3/4"
    else:
        text = _mc_letter(text) or text
    return text + ("%" if norm.percent else "")


# A missing value as text: pandas' astype(str) and CSV exports write one as "nan" ("None", "<NA>", "null"). "none"
# could be a real answer ("which of these... none"): it is read as missing all the same, and every path says so;
# an answer that is the word is written \text{none}, which the checker compares with a final answer "none".
MISSING_TEXTS = frozenset({"nan", "none", "null", "<na>"})


def missing_answer(reference) -> str | None:
    """What makes `reference` no reference answer, for a message ("null", "blank", "the text 'None', how a
    missing value is written", ...): None, pandas' NA, NaN or another non-finite number, blank text, or the text
    of a missing value (MISSING_TEXTS, any case, spaces around it ignored). None when it is an answer."""
    pandas = sys.modules.get("pandas")  # pandas' own missing value, where pandas made the column
    if reference is None or pandas is not None and reference is pandas.NA:
        return "null"
    if isinstance(reference, numbers.Real) and not isinstance(reference, bool) and not math.isfinite(reference):
        return f"{reference}, a missing value"
    if isinstance(reference, str) and not reference.strip():
        return "blank"
    if isinstance(reference, str) and reference.strip().lower() in MISSING_TEXTS:
        text = reference.strip()
        hint = " (an answer that is the word is written \\text{none})" if text.lower() == "none" else ""
        return f"the text {text!r}, how a missing value is written{hint}"
    return None
