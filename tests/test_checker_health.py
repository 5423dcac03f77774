"""Answer checker health: an over-long box is unparseable."""

from __future__ import annotations

import pytest

from labeler.checking import AnswerChecker, Verdict, extract_answer
from labeler.checking.extraction import MAX_ANSWER_CHARS

U = Verdict.UNPARSEABLE


# ---------------------------------------------------------------------------------------------
# 4. An over-long box is unparseable, never a number from elsewhere
# ---------------------------------------------------------------------------------------------

LONG = "1+" * (3 * MAX_ANSWER_CHARS) + "1"  # a box of ~12,000 characters


@pytest.mark.parametrize(
    "text",
    [
        "So she pays 18 dollars.\n\nTherefore \\boxed{" + LONG + "}",
        "The answer is 18.\n\n\\boxed{" + LONG + "}",
        "\\boxed{18}\n\nOn second thought, \\boxed{" + LONG + "}",
        "#### 18\n\\boxed{" + LONG + "}",
        "\\boxed{" + LONG[:5000] + " the answer is 18 " + LONG[:5000] + "}",
        "\\boxed{" + LONG[:5000] + " \\boxed{18} " + LONG[:5000] + "}",
    ],
)
def test_an_over_long_box_is_unparseable(text):
    assert extract_answer(text) is None
    with AnswerChecker(workers=1) as c:
        res = c.check(text, "18")
        assert res.verdict is U and res.extracted is None
        assert c._pool is None


def test_a_box_within_the_limit_is_still_an_answer():
    inside = "1+" * (MAX_ANSWER_CHARS // 2) + "1"  # ~2,000 characters
    assert extract_answer("So \\boxed{" + inside + "}") == inside
    # an answer after an over-long box still counts
    assert extract_answer("\\boxed{" + LONG + "}\n\n" + "x" * 100 + "\n\nThe answer is 18.") == "18"


def test_a_truncated_box_still_falls_back_to_the_previous_box():
    assert extract_answer("\\boxed{5} and then \\boxed{6") == "5"
