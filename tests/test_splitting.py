import pytest

from labeler.inputs.splitting import SPLIT_RULES, split_steps


def test_blank_line_splits_on_one_or_more_blank_lines():
    text = "First step.\nstill first.\n\nSecond.\n \n\t\n\nThird.\n"
    assert split_steps(text, "blank-line") == ["First step.\nstill first.", "Second.", "Third."]


def test_newline_splits_every_line_and_drops_empty_ones():
    assert split_steps("a = 1\n\n  b = 2  \r\nc = 3", "newline") == ["a = 1", "b = 2", "c = 3"]


def test_step_prefix_keeps_markers_and_the_preamble():
    text = "Let's go.\nStep 1: add 2.\nmore on step one\nStep 2. multiply\n## Step 3: done"
    assert split_steps(text, "step-prefix") == [
        "Let's go.",
        "Step 1: add 2.\nmore on step one",
        "Step 2. multiply",
        "## Step 3: done",
    ]


def test_step_prefix_ignores_step_mentions_inside_a_line():
    assert split_steps("Step 1: as in Step 2: no.\nStep 2: yes", "step-prefix") == [
        "Step 1: as in Step 2: no.",
        "Step 2: yes",
    ]


def test_ki_splits_on_the_math_shepherd_tag_and_removes_it():
    text = "Step 1: 2+2=4 ки\nStep 2: The answer is: 4 ки"
    assert split_steps(text, "ki") == ["Step 1: 2+2=4", "Step 2: The answer is: 4"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Step 1: a ки Step 2: b ки", ["Step 1: a", "Step 2: b"]),
        ("Step 1: a\n\nmore\nStep 2: b", ["Step 1: a\n\nmore", "Step 2: b"]),
        ("Step 1: only one\n\nsecond paragraph", ["Step 1: only one", "second paragraph"]),
        ("para one\nline two\n\npara two", ["para one\nline two", "para two"]),
        ("line one\nline two", ["line one", "line two"]),
        ("one line only", ["one line only"]),
    ],
)
def test_auto_prefers_ki_then_step_prefix_then_blank_line_then_newline(text, expected):
    assert split_steps(text) == expected


def test_display_math_and_asy_blocks_are_never_cut():
    text = (
        "We have\n\\begin{align*}\na &= 1 \\\\\n\nb &= 2\n\\end{align*}so it holds.\n\n"
        "[asy]\ndraw((0,0)--(1,1));\n\ndot((0,0));\n[/asy]\n\nDone."
    )
    assert split_steps(text, "blank-line") == [
        "We have\n\\begin{align*}\na &= 1 \\\\\n\nb &= 2\n\\end{align*}so it holds.",
        "[asy]\ndraw((0,0)--(1,1));\n\ndot((0,0));\n[/asy]",
        "Done.",
    ]


def test_newline_keeps_display_math_with_its_sentence():
    text = "The sum is\n\\[1 + 2 = 3,\\]so we get 3.\nNext line."
    assert split_steps(text, "newline") == [
        "The sum is\n\\[1 + 2 = 3,\\]so we get 3.",
        "Next line.",
    ]


@pytest.mark.parametrize("rule", SPLIT_RULES)
def test_blank_text_gives_no_steps(rule):
    assert split_steps(" \n\n ", rule) == []


def test_unknown_rule_raises():
    with pytest.raises(ValueError, match="unknown split rule"):
        split_steps("a\nb", "sentences")
