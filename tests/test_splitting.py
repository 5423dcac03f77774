import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# -- Math-Shepherd's tag is a tag only where it stands alone: "ки" inside a word (Russian) is text ----------------

RUSSIAN = "У Ники 3 яблока, у Маши на 2 больше: 3 + 2 = 5.\nВместе у девочек 3 + 5 = 8 яблок.\nОтвет: $\\boxed{8}$."


def test_a_russian_solution_splits_by_its_lines_and_keeps_every_word():
    assert split_steps(RUSSIAN) == RUSSIAN.split("\n")  # auto: three steps, "Ники" and "яблока" whole
    paragraphs = RUSSIAN.replace("\n", "\n\n")
    assert split_steps(paragraphs) == RUSSIAN.split("\n")


def test_the_ki_rule_cuts_at_tags_only_never_inside_a_word():
    text = "Шаг 1: У Ники 3 яблока. ки\nШаг 2: Ответ: 3 ки"
    expected = ["Шаг 1: У Ники 3 яблока.", "Шаг 2: Ответ: 3"]
    assert split_steps(text, "ki") == split_steps(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Ру\u0301ки поднимите.\n\nОтвет: 2.", ["Ру\u0301ки поднимите.", "Ответ: 2."]),  # a stress mark before it
        ("Один ки\u0301ллограмм.\nОтвет: 1.", ["Один ки\u0301ллограмм.", "Ответ: 1."]),  # a stress mark after it
        ("Ответ 3ки 5", ["Ответ 3ки 5"]),  # a digit before it
        ("Ответ ки5\nдва", ["Ответ ки5", "два"]),  # a digit after it
        ("Шаг 1: $x = 2$ ки\nШаг 2: (x) ки", ["Шаг 1: $x = 2$", "Шаг 2: (x)"]),
        ("Шаг 1: $x = 2$ки\nШаг 2: x = 2.ки", ["Шаг 1: $x = 2$ки", "Шаг 2: x = 2.ки"]),  # touching a formula: no tag
        ("Получаем 3 10-ки\n\nОтвет: 30", ["Получаем 3 10-ки", "Ответ: 30"]),  # after a hyphen
        ("Возьмём две ру-\nки и сложим.\n\nОтвет: 4", ["Возьмём две ру-\nки и сложим.", "Ответ: 4"]),  # a word wrapped
        ("Он поднял ру\u00adки\n\nОтвет: 4", ["Он поднял ру\u00adки", "Ответ: 4"]),  # a soft hyphen
        ("Шаг 1: x ки\r\nШаг 2: y ки\r\n", ["Шаг 1: x", "Шаг 2: y"]),  # Windows line ends
    ],
)
def test_ki_is_a_tag_only_standing_alone_after_a_space(text, expected):
    assert split_steps(text) == expected


_CYRILLIC = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИКЛМНОПРСТУФХЦЧШЩЭЮЯ"
_TOUCHING = _CYRILLIC + "0123456789\u0301\u0300\u0308\u0306"  # letters, digits and combining marks (stress, diaeresis, breve)
_WORD_WITH_KI = st.tuples(st.text(_TOUCHING, max_size=4), st.text(_TOUCHING, max_size=4)).filter(lambda a: a[0] or a[1])
_WORDS = st.lists(_WORD_WITH_KI.map(lambda a: a[0] + "ки" + a[1]), min_size=1, max_size=5)
_LINES = st.lists(_WORDS.map(" ".join), min_size=1, max_size=5)


@given(lines=_LINES)
def test_words_containing_ki_are_never_cut(lines):
    assert split_steps("\n".join(lines)) == lines  # no tag: the newline rule
    tagged = "\n".join(f"Шаг {i}: {line} ки" for i, line in enumerate(lines, 1))
    assert split_steps(tagged) == split_steps(tagged, "ki") == [f"Шаг {i}: {line}" for i, line in enumerate(lines, 1)]


# -- linear in the text: a degenerate completion (an unclosed block, many blocks) splits at once ------------------


def _lines(line: str, size: int = 160_000) -> str:
    return line * (size // len(line))


def _unclosed(line: str) -> tuple[str, list[str]]:
    lines = [line] * (160_000 // (len(line) + 1))
    return "\n".join(lines), lines  # no block: every line a step


@pytest.mark.parametrize(
    "text, expected, rule",
    [
        (*_unclosed("\\begin{align} x = 1"), "auto"),
        (*_unclosed("\\[ x = 1"), "auto"),
        (*_unclosed("[asy] draw(x);"), "auto"),
        (*_unclosed("x = 1 \\begin{x} \\begin{yy} \\begin{zzz}"), "newline"),
        ("\\[x\\]\n\n" * 20_000, ["\\[x\\]"] * 20_000, "auto"),  # many closed blocks, a paragraph each
        ("Step 1" + " " * 30_000 + "x\nStep 2: y", ["Step 1" + " " * 30_000 + "x", "Step 2: y"], "auto"),
    ],
)
def test_degenerate_text_splits_right_in_time_linear_in_its_length(text, expected, rule):
    started = time.perf_counter()
    assert split_steps(text, rule) == expected
    elapsed = time.perf_counter() - started
    assert elapsed < 5, f"{elapsed:.1f} s to split {len(text)} characters: quadratic? (bench/splitting.py times it)"


def test_blocks_are_found_as_the_first_closer_after_each_opener():
    text = "a\n\\[ open\nb\n\\begin{align}x\n\n\\end{align}\nc\n$$y$$\n[asy]\n[/asy]\nd"
    assert split_steps(text, "newline") == ["a", "\\[ open", "b\n\\begin{align}x\n\n\\end{align}\nc\n$$y$$\n[asy]\n[/asy]\nd"]
