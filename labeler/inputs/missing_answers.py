"""Which reference answers are no answer at all (`missing_answer`): the one rule of every path that reads a
reference, the label job's input rows and --answers file (labeler/inputs/presets.py: such a row is rejected, its
field and value named), the reward paths (labeler/rewards/process_reward.py: the answer part is not measured, the
reason given) and scoring's placeholder answer (labeler/evaluation/solutions.py)."""

from __future__ import annotations

import math
import numbers
import sys

__all__ = ["MISSING_TEXTS", "missing_answer"]

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
