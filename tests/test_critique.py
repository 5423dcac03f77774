"""The judge's words: reading the index a critique names (real critique styles, and a property: a critique
read as an index states that index as its verdict), the prompt template and its placeholders, and the
majority of votes."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.judging.critique import boxed_contents, parse_critique
from labeler.judging.prompts import DEFAULT_TEMPLATE, TemplateError, check_template, critique_prompt
from schemas.judgments import majority

PER_PARAGRAPH = """Paragraph 0: Tom starts with 5 apples. This paragraph is correct.

Paragraph 1: 5 + 3 = 9 is wrong; 5 + 3 = 8. This paragraph is incorrect.

Paragraph 2: it builds on paragraph 1, so paragraph 2 is incorrect too.

\\boxed{1}"""

REASONING_JUDGE = """<think>
The earliest error seems to be in paragraph 1. Wait: 18 / 3 = 6 is right, paragraph 1 is correct.
Paragraph 2 says 6 x 4 = 20, which is wrong.
</think>

The earliest error is in paragraph 2, where 6 x 4 is computed as 20.

\\boxed{2}"""

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
        (PER_PARAGRAPH, 1),  # "paragraph 2 is incorrect too" is not the earliest error
        (REASONING_JUDGE, 2),  # the thinking's first guess is not the closing
        ("The correct total is 12, not 11.\nThe earliest error is in paragraph 1: \\boxed{1}. I hope it is correct.", 1),
        ("Paragraphs 0 and 1 are correct, but the earliest error is in paragraph 2.", 2),
        ("The correct total is \\boxed{12}.\n\nTherefore, the earliest error occurs in paragraph 3.\n\n**Final Answer**\n\n"
         "\\[ \\boxed{3} \\]", 3),
        ("Paragraph 4 is the first incorrect one.", 4),
        ("The index of the earliest paragraph containing an error is 2.", 2),
        ("There are no errors in the solution.", -1),
        ("So the earliest error is in paragraph \\boxed{0}.", 0),
        # review 2: another paragraph named outside the verdict clause is no second verdict
        ("The earliest error occurs in paragraph 2, where it incorrectly uses the result of paragraph 1. \\boxed{2}", 2),
        ("The first error is in paragraph 1, which affects paragraphs 2 and 3. \\boxed{1}", 1),
        ("The earliest error is in paragraph 2 (step 3 of the solution). \\boxed{2}", 2),
        ("Paragraph 0 and paragraph 1 are correct, so the earliest error is in paragraph 2.\n\n\\boxed{2}", 2),
        ("Paragraphs 0 through 2 are correct, and the earliest error is in paragraph 3.\n\n\\boxed{3}", 3),
        # review 2: a correction read, though it has a "not" in it
        ("The earliest error is in paragraph 2. However, paragraph 1 already contains an error: 5 + 3 is not 9, so the earliest "
         "error is in paragraph 1.", 1),
        ("Wait, the earliest error is in paragraph 1. Actually, no: the earliest error is in paragraph 2 because paragraph 1 "
         "isn't used.", 2),
        ("I initially thought the earliest error is in paragraph 1. On rechecking, the earliest error is actually in paragraph 2, since "
         "paragraph 1 doesn't matter.", 2),
        ("The earliest error is in paragraph 2, since 6 x 4 is not 20.", 2),
        ("The earliest error is in paragraph 2, not paragraph 1.", 2),
        # review 2: well-formed critiques
        ("The earliest error is in paragraph 1.\n\n\\boxed{1}\n\n</answer>", 1),
        ("<answer>\\boxed{2}</answer>", 2),
        ("Therefore, the answer is $\\boxed{-1}$ since no paragraph contains an error.", -1),
        ("Since all paragraphs are correct, \\boxed{-1}", -1),
        ("\\boxed{2} (paragraph 2)", 2),
        ("There are no errors in any of the paragraphs.", -1),
        ("The solution contains no errors.", -1),
        ("None of the paragraphs contain errors.", -1),
        ("I did not find any error.", -1),
        ("After checking each paragraph, I did not find any error.", -1),
        ("Paragraph 1 is the first one that is incorrect.", 1),
        ("First error at paragraph 1.", 1),
        ("The first error is at index 2.", 2),
        ("The error first appears in paragraph 2.", 2),
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
        ("The solution has some issues but I am not sure where.", "states no verdict"),
        ("asdf qwer ;; ::", "states no verdict"),
        ("\\boxed{x+1}", "holds 'x+1'"),
        ("\\boxed{}", "holds ''"),
        ("The error is in paragraph 1, or maybe paragraph 3.", "states no verdict"),  # hedged
        ("The earliest error is in paragraph 1 and paragraph 3.", "several paragraphs (1, 3)"),
        ("There are no errors in paragraph 1.", "states no verdict"),  # about paragraph 1 alone
        ("\\boxed{7}", "paragraphs are 0 to 4"),  # not a step of a 5-step solution
        ("\\boxed{-2}", "paragraphs are 0 to 4"),
        ("The earliest error is in paragraph 5.", "paragraphs are 0 to 4"),
        # issue 23: a stray number is not a verdict
        ("The correct total is \\boxed{3}. The earliest error is in paragraph 2.",
         "it contradicts itself: its last \\boxed{} holds 3 and its closing verdict names paragraph 2"),
        ("The earliest error is in paragraph 2.\n\n\\boxed{3}", "holds 3 and its closing verdict names paragraph 2"),
        ("All paragraphs are correct.\n\\boxed{2}", "holds 2 and its closing verdict names no error"),
        ("The earliest error is in paragraph 1.\nAnswer: 3", "its answer line names paragraph 3 and its closing verdict names paragraph 1"),
        ("Paragraph 1 is correct.", "states no verdict"),
        ("The error is by doing -1.", "states no verdict"),
        ("Paragraph 3 is wrong.", "states no verdict"),  # a paragraph found wrong, not said to be the earliest
        ("The earliest error seems to be in paragraph 2.", "states no verdict"),  # hedged
        ("The first mistake is that 18 - 6 = 11.", "states no verdict"),
        ("The first incorrect value is 8.", "states no verdict"),  # a value, not a paragraph
        ("Not all paragraphs are correct.", "states no verdict"),
        ("No mistakes in the calculation; the setup is wrong.", "states no verdict"),  # "no mistakes" about one part
        ("The final answer of the solution is correct, but paragraph 2 is wrong.", "states no verdict"),
        ("Paragraph 0 computes the total: the correct total is \\boxed{4}.", "not on the answer line"),
        ("\\boxed{1}\n\nParagraph 2 also uses 11, and paragraph 3 is correct.", "not on the answer line"),
        ("The earliest error is in paragraph 2.\n\nThe value is \\boxed{\\frac{3}{4}}.", "holds '\\\\frac{3}{4}', not a paragraph index"),
        # review 2: the problem's answer on the last line is no index
        ("Paragraph 1 is wrong: 194 = 11*17 + 7, not 9.\n\nThe correct answer is \\boxed{7}.", "not on the answer line"),
        ("Paragraph 3 miscounts the marbles. So the correct result is \\boxed{8}.", "not on the answer line"),
        ("Paragraph 3 miscounts the marbles; the correct total should be 8.\n\nFinal answer: \\boxed{8}", "computes 8 as a value"),
        ("The total is 6.\nAnswer: 6", "computes 6 as a value"),
        ("The correct answer is 8, so paragraph 3 is wrong.\n\\boxed{8}", "computes 8 as a value"),
        ("Paragraph 2 computes 2 + 2 = 4. \\boxed{4}", "computes 4 as a value"),
        ("The earliest error is in paragraph 2 or paragraph 3.", "several paragraphs (2, 3)"),
        # review 2: a paragraph said correct and wrong, a later hedged or negated verdict
        ("Paragraphs 0 through 2 are correct, and the earliest error is in paragraph 2.", "several paragraphs"),
        ("Paragraph 0 and paragraph 1 are correct, so the earliest error is in paragraph 1.", "several paragraphs"),
        ("The earliest error is in paragraph 3, and paragraph 1 is wrong too.", "several paragraphs (1, 3)"),
        ("The earliest error is in paragraph 2. Wait, maybe the earliest error is in paragraph 1.", "hedges, negates or questions"),
        ("The earliest error is in paragraph 2. Actually, the earliest error isn't in paragraph 2.", "hedges, negates or questions"),
        ("I don't think the earliest error is in paragraph 2.\n\\boxed{2}", "hedges, negates or questions"),
        ("All paragraphs are not correct.", "states no verdict"),
        ("I did not find any error in paragraph 2.", "states no verdict"),
        # review 2: text after the box that names another verdict
        ("\\boxed{2} (paragraph 3)", "not on the answer line"),
        ("Therefore, the answer is \\boxed{-1} since paragraph 2 contains an error.", "not on the answer line"),
    ],
)
def test_unreadable_critiques_say_why(critique, problem):
    parsed = parse_critique(critique, n_steps=5)
    assert parsed.index is None and problem in parsed.problem


# The property: critiques built from templates, a verdict (or none) among distractors: numbers that are valid
# indices, boxes of computed values, "paragraph K is correct", hedged guesses, a paragraph found wrong.
DISTRACTORS = (
    lambda j, m: f"Paragraph {j} is correct.",
    lambda j, m: f"In paragraph {j}, {m} + 3 = {m + 3}, which is right.",
    lambda j, m: f"Step {j} uses {m} apples.",
    lambda j, m: f"The correct total is \\boxed{{{m}}}.",
    lambda j, m: f"So the value is \\boxed{{\\frac{{{m}}}{{4}}}}.",
    lambda j, m: f"The earliest error seems to be in paragraph {j}.",
    lambda j, m: f"Paragraph {j} is wrong as well.",
    lambda j, m: "The error is by doing -1.",
    lambda j, m: f"The first mistake is that {m} - 6 = {m - 7}.",
    lambda j, m: "The first paragraph restates the problem.",
    lambda j, m: f"The first incorrect value is {m}.",
    lambda j, m: "Not all paragraphs are correct.",
    lambda j, m: f"There are no mistakes in the arithmetic of paragraph {j}.",
    lambda j, m: "No mistakes in the calculation; the setup is wrong.",
)
STATEMENTS = (  # k: the verdict, j: another paragraph the sentence mentions outside its verdict
    lambda k, j: f"The earliest error is in paragraph {k}.",
    lambda k, j: f"Therefore, the earliest error occurs in paragraph_{k}.",
    lambda k, j: f"Paragraph {k} is the first incorrect one.",
    lambda k, j: f"The first mistake appears in <paragraph_{k}>.",
    lambda k, j: f"The index of the earliest paragraph containing an error is {k}.",
    lambda k, j: f"The earliest error occurs in paragraph {k}, where it incorrectly uses the result of paragraph {j}.",
    lambda k, j: f"The first error is in paragraph {k}, which affects paragraphs {j} and {j + 1}.",
    lambda k, j: f"The earliest error is in paragraph {k} (step {j} of the solution).",
    lambda k, j: f"The earliest error is in paragraph {k}, since 6 x {j} is not 20.",
    lambda k, j: f"The earliest error is in paragraph {j}. However, paragraph {k} already contains an error: 5 + 3 is not 9, so the "
    f"earliest error is in paragraph {k}.",
)
COMPUTED_ANSWERS = (  # the problem's answer where the index is asked for: never an index
    lambda m: f"The correct answer is \\boxed{{{m}}}.",
    lambda m: f"So the correct result is \\boxed{{{m}}}.",
    lambda m: f"The correct total should be {m}.\n\nFinal answer: \\boxed{{{m}}}",
)
RETRACTED = (  # a verdict, then a later hedged or negated one: neither may be read
    lambda k, j: f"The earliest error is in paragraph {k}. Wait, maybe the earliest error is in paragraph {j}.",
    lambda k, j: f"The earliest error is in paragraph {k}. Actually, the earliest error isn't in paragraph {k}.",
)
NO_ERROR_STATEMENTS = ("All paragraphs are correct.", "There are no errors in the solution.", "No paragraph contains an error.")
ANSWER_LINES = (
    lambda k: f"\\boxed{{{k}}}",
    lambda k: f"Final answer: $\\boxed{{{k}}}$",
    lambda k: f"So the answer is \\boxed{{{k}}}.",
    lambda k: f"\\[ \\boxed{{{k}}} \\]",
    lambda k: f"\\boxed{{\\text{{paragraph {k}}}}}" if k >= 0 else "\\boxed{none}",
)


@st.composite
def critiques(draw):
    """(critique, n_steps, the index it states as its verdict or None, whether it must be read)."""
    n_steps = draw(st.integers(1, 64))
    index = st.integers(0, n_steps - 1)
    distractor = st.builds(lambda make, j, m: make(j, m), st.sampled_from(DISTRACTORS), index, st.integers(0, 99))
    parts = draw(st.lists(distractor, max_size=5))
    verdict = draw(st.integers(-1, n_steps - 1))
    other = draw(index)
    statement = draw(st.sampled_from(NO_ERROR_STATEMENTS)) if verdict < 0 else draw(st.sampled_from(STATEMENTS))(verdict, other)
    shape = draw(st.sampled_from(["answer line", "stated", "contradicted", "stray", "computed", "retracted"]))
    stated, must_read = verdict, True
    if shape == "answer line":
        if draw(st.booleans()):
            parts.append(statement)
        elif any(re.search(rf"(?:[-=+*/]|\bis)\s*(?:\\boxed\{{)?{verdict}(?!\d)", part) for part in parts):
            must_read = False  # its box holds a value the critique computes: refusing it is right
        parts.append(draw(st.sampled_from(ANSWER_LINES))(verdict))
    elif shape == "computed":
        parts += [f"Paragraph {other} miscounts the marbles.", draw(st.sampled_from(COMPUTED_ANSWERS))(draw(st.integers(0, 99)))]
        stated = None
    elif shape == "retracted" and n_steps > 1:
        parts.append(draw(st.sampled_from(RETRACTED))(max(verdict, 0), draw(index.filter(lambda j: j != max(verdict, 0)))))
        stated = None
    elif shape == "stated":
        must_read = not any("boxed" in part for part in parts)  # a box elsewhere is what ProcessBench reads
        parts.append(statement)
    elif shape == "contradicted":
        other = draw(st.integers(-1, n_steps - 1).filter(lambda k: k != verdict))
        parts += [statement, draw(st.sampled_from(ANSWER_LINES))(other)]
        stated = None  # it states two verdicts: neither may be read
    else:
        stated = None
    separator = draw(st.sampled_from(["\n\n", "\n", " "]))
    return separator.join(parts), n_steps, stated, must_read and stated is not None


@settings(max_examples=300, deadline=None)
@given(critiques())
def test_a_critique_read_as_an_index_states_that_index_as_its_verdict(case):
    critique, n_steps, stated, must_read = case
    parsed = parse_critique(critique, n_steps)
    if parsed.index is not None:
        assert parsed.index == stated, f"read as {parsed.index}: {critique!r}"
    else:
        assert parsed.problem and not must_read, f"not read ({parsed.problem}): {critique!r}"


def test_boxes_keep_nested_braces_and_skip_an_unclosed_one():
    assert boxed_contents("a \\boxed{\\frac{1}{2}} b \\boxed {3} c \\boxed{4") == ["\\frac{1}{2}", "3"]
    assert parse_critique("Paragraph 1 has \\boxed{3 unclosed.\n\n\\boxed{2}", n_steps=4).index == 2
    assert "not on the answer line" in parse_critique("\\boxed{2} and then \\boxed{3", n_steps=4).problem  # text after the box


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


def test_step_n_is_refused_where_the_solutions_own_steps_are_headed_step_k():
    """"Step 2" names index 2 in the prompt's numbering, but a solution whose steps start "Step 1:", "Step 2:" has its own
    numbers (from 1): there "step N" may mean either, so it is refused; "paragraph N" is still read."""
    headed = ["Step 1: Tom has 5 apples.", "Step 2: 5 + 3 = 9.", "**Step 3:** So 9."]
    for critique in ("The earliest error is in step 2.", "The first mistake is in step 1.\n\\boxed{1}", "\\boxed{\\text{step 1}}"):
        parsed = parse_critique(critique, n_steps=3, steps=headed)
        assert parsed.index is None and "headed 'Step k:'" in parsed.problem, critique
        assert parse_critique(critique, n_steps=3, steps=["Tom has 5 apples.", "5 + 3 = 9.", "So 9."]).index in (1, 2)
    assert parse_critique("The earliest error is in paragraph 1.\n\\boxed{1}", n_steps=3, steps=headed).index == 1


@pytest.mark.parametrize(
    "critique",
    [
        "Check.\n\\boxed{2}\n\n(the earliest error is in\nparagraph 2)",
        "Paragraph 2 is wrong.\nFinal answer: \\boxed{2}\n(paragraph\n2)",
    ],
)
def test_a_reason_after_the_box_that_spans_lines_is_read_or_refused_never_a_crash(critique):
    """The text after the box is read across lines, the closing only from the last two: a box outside the closing
    raised IndexError, which failed the whole judge unit instead of refusing (or reading) one critique."""
    parsed = parse_critique(critique, 5)
    assert parsed.index in (2, None)
    assert parsed.index is not None or parsed.reason
