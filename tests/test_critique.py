"""The judge's words: reading the index a critique names (real critique styles), the prompt template and
its placeholders, and the majority of votes."""

import pytest

from labeler.judging.critique import boxed_contents, parse_critique
from labeler.judging.prompts import DEFAULT_TEMPLATE, TemplateError, check_template, critique_prompt
from schemas.judgments import majority

QWEN_STYLE = """The first paragraph restates the problem correctly.

In paragraph 1 the solution computes 18 / 3 = 6, which is right, but then it says 18 - 6 = 11. \
That subtraction is wrong: 18 - 6 = 12.

So the earliest error occurs in paragraph 1.

\\boxed{1}"""

CHANGES_ITS_MIND = """At first glance paragraph 0 looks wrong: \\boxed{0}? No, rereading it, paragraph 0 is fine.
Paragraph 2 drops a factor of 2.

Final answer: $\\boxed{2}$"""


@pytest.mark.parametrize(
    "critique, index",
    [
        (QWEN_STYLE, 1),
        (CHANGES_ITS_MIND, 2),  # several boxes: the last one
        ("Every paragraph is right.\n\n\\boxed{-1}", -1),
        ("\\boxed{ 3 }", 3),
        ("\\boxed{\\text{Paragraph 3}}", 3),
        ("\\boxed{paragraph_2}", 2),
        ("the answer is \\boxed{none}", -1),
        ("Reviewing each step...\n\nParagraph 3", 3),
        ("Reviewing each step...\n\nThe earliest error is in step 4.", 4),
        ("**Final answer: 2**", 2),
        ("-1", -1),
        ("No error.", -1),
        ("I checked them all.\nAll paragraphs are correct.", -1),
        ("The mistake is at <paragraph_0>.", 0),
        ("Answer: -1", -1),
    ],
)
def test_critique_styles_are_read(critique, index):
    parsed = parse_critique(critique, n_steps=5)
    assert parsed.index == index and parsed.problem is None


@pytest.mark.parametrize(
    "critique, problem",
    [
        ("", "empty"),
        ("   \n  ", "empty"),
        ("The solution has some issues but I am not sure where.", "names no paragraph"),
        ("asdf qwer ;; ::", "names no paragraph"),
        ("\\boxed{x+1}", "holds 'x+1'"),
        ("\\boxed{}", "holds ''"),
        ("The error is in paragraph 1, or maybe paragraph 3.", "several paragraphs (1, 3)"),
        ("There are no errors in paragraph 1.", "several paragraphs (-1, 1)"),  # a contradiction is not read
        ("\\boxed{7}", "paragraphs are 0 to 4"),  # not a step of a 5-step solution
        ("\\boxed{-2}", "paragraphs are 0 to 4"),
        ("Paragraph 5 is wrong", "paragraphs are 0 to 4"),
    ],
)
def test_unreadable_critiques_say_why(critique, problem):
    parsed = parse_critique(critique, n_steps=5)
    assert parsed.index is None and problem in parsed.problem


def test_boxes_keep_nested_braces_and_skip_an_unclosed_one():
    assert boxed_contents("a \\boxed{\\frac{1}{2}} b \\boxed {3} c \\boxed{4") == ["\\frac{1}{2}", "3"]
    assert parse_critique("\\boxed{2} and then \\boxed{3", n_steps=4).index == 2


def test_the_prompt_numbers_paragraphs_from_zero_and_never_fills_a_placeholder_twice():
    problem = "What is {paragraphs} + \\frac{1}{2}?"  # braces and a placeholder's name inside the problem stay as they are
    prompt = critique_prompt(DEFAULT_TEMPLATE, problem, ["First {problem}.", "Then 2."])
    assert "What is {paragraphs} + \\frac{1}{2}?" in prompt
    assert "<paragraph_0>\nFirst {problem}.\n</paragraph_0>\n\n<paragraph_1>\nThen 2.\n</paragraph_1>" in prompt
    assert "numbered from 0 to 1" in prompt and "\\boxed{-1}" in prompt
    assert critique_prompt("P: {problem} S: {paragraphs} last {last_index}", "Q", ["a", "b", "c"]).endswith("last 2")


def test_a_template_without_its_placeholders_is_refused():
    check_template(DEFAULT_TEMPLATE)
    with pytest.raises(TemplateError, match=r"no \{paragraphs\}"):
        check_template("Judge this: {problem}")
    with pytest.raises(TemplateError, match=r"no \{problem\} and no \{paragraphs\}"):
        check_template("Judge this.")
    with pytest.raises(TemplateError, match="empty"):
        check_template("  \n")


def test_majority_and_its_ties():
    assert majority([2, 2, 1]) == (2, 2 / 3)
    assert majority([-1, -1, -1]) == (-1, 1.0)
    assert majority([3, 1]) == (1, 0.5)  # a tie: the earliest error
    assert majority([-1, 4]) == (4, 0.5)  # a tie with "no error": the error
    assert majority([-1, -1, 2, 2, 0]) == (2, 0.4)
    with pytest.raises(ValueError):
        majority([])
