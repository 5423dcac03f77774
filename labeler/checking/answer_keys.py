"""Answer keys: which final answers count as the same answer in a vote (majority, PRM-weighted).

A key is the checker's normalised text (labeler/checking/normalisation.py: math delimiters, units,
currency, \\dfrac and spacing gone); an equation "x = 3" stands for its right side; an exact
number is written as a reduced fraction, so "0.5", "1/2" and "\\frac{1}{2}" are one key; a
multiple-choice letter "(B)" is "B". A percentage keeps its sign ("50%" is not "0.5"), and answers
that only the symbolic layer would find equal ("\\sqrt{8}" and "2\\sqrt{2}") vote apart.
"""

from __future__ import annotations

import re

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
