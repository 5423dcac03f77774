"""The in-process value test before the symbolic layer (labeler/checking/numeric.py): what it reads, what it
refuses, and, as a property, that every expression it reads has the value math-verify's LaTeX grammar gives it."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labeler.checking import numeric
from labeler.checking.checker import AnswerChecker


@pytest.mark.parametrize(
    "text, expected",
    [
        ("42", 42.0),
        ("-3.5", -3.5),
        ("\\frac{1}{2}", 0.5),
        ("\\frac{5\\sqrt{2}}{3}", 5 * math.sqrt(2) / 3),
        ("2\\sqrt{3}", 2 * math.sqrt(3)),
        ("3\\pi", 3 * math.pi),
        ("\\sqrt[3]{27}", 3.0),
        ("2^{10}", 1024.0),
        ("2^3", 8.0),
        ("(1+2) \\cdot (3+4)", 21.0),
        ("1 - 2 \\cdot 3", -5.0),
        ("\\frac{\\pi}{4} + 1", math.pi / 4 + 1),
        ("-\\frac{1}{3}", -1 / 3),
    ],
)
def test_reads_constant_expressions(text, expected):
    assert numeric.value(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        "x + 1",  # a variable
        "2e",  # a letter that may be a constant
        "\\sin 30",  # a function
        "1,000",  # a digit group or a list
        "2 3",  # one number or a product
        "2(3)",  # math-verify: a mixed number, 5
        "(2)(3)",
        "(2)\\frac{1}{3}",  # math-verify: 7/3
        "\\frac{0}{1}\\frac{1}{1}",  # math-verify: 1
        "3\\frac{1}{2}",  # a mixed number in some readings
        "2^10",  # LaTeX reads 2^1 then 0
        "2^3^2",  # no agreed grouping
        "\\sqrt{-4}",  # complex
        "(-8)^{\\frac{1}{3}}",  # complex in sympy's reading
        "10^{10^{10}}",  # too large to compute
        "\\frac{1}{0}",
        "1/0",
        "(1+2",
        "",
        "\\boxed{3}",
        "50\\%",
    ],
)
def test_refuses_what_it_cannot_read_the_same_way(text):
    assert numeric.value(text) is None


def test_clearly_different_only_beyond_rounding():
    assert numeric.clearly_different("\\frac{1}{3}", "0.5") == pytest.approx((1 / 3, 0.5))
    assert numeric.clearly_different("\\frac{1}{3}", "0.3333333") is None  # within math-verify's 6 decimal places
    assert numeric.clearly_different("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}") is None  # equal: the symbolic layer decides
    assert numeric.clearly_different("x", "2") is None


def test_the_checker_answers_different_constants_without_the_pool():
    with AnswerChecker(workers=1) as checker:
        result = checker.check("The answer is $\\boxed{\\frac{5\\sqrt{2}}{3}}$.", "\\frac{7}{3}")
        assert result.verdict.value == "incorrect"
        assert result.rule.startswith("constant values differ")
        assert checker._pool is None  # noqa: SLF001 - decided in-process
        # equal values are still the symbolic layer's to decide
        assert checker.check("$\\boxed{\\frac{\\sqrt{2}}{2}}$", "\\frac{1}{\\sqrt{2}}").verdict.value == "correct"


# -- property: where numeric reads an expression, math-verify reads the same value -------------------------

_leaf = st.one_of(
    st.integers(0, 99).map(str),
    st.sampled_from(["0.5", "2.25", "\\pi", "\\sqrt{2}", "\\sqrt{3}", "\\sqrt[3]{5}"]),
)


def _combine(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "\\cdot", "\\times", "/", "\\div"]), children).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(children, children).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
        children.map(lambda c: f"\\sqrt{{{c}}}"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"-{c}"),
        st.tuples(children, st.integers(0, 4)).map(lambda t: f"({t[0]})^{{{t[1]}}}"),
        st.tuples(st.integers(1, 9), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, children).map(lambda t: f"{t[0]}{t[1]}"),
        st.tuples(st.integers(1, 9), st.sampled_from(["\\pi", "\\sqrt{2}", "\\sqrt{7}"])).map(lambda t: f"{t[0]}{t[1]}"),
    )


_expressions = st.recursive(_leaf, _combine, max_leaves=6)


def _math_verify_value(text: str) -> complex | None:
    from math_verify import LatexExtractionConfig, parse

    parsed = parse("\\boxed{" + text + "}", extraction_config=[LatexExtractionConfig(boxed_match_priority=0)], fallback_mode="no_fallback")
    if not parsed:
        return None
    try:
        return complex(parsed[0].evalf(30))
    except (TypeError, ValueError, AttributeError):
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions)
def test_every_value_read_is_math_verifys(text):
    ours = numeric.value(text)
    if ours is None:
        return
    theirs = _math_verify_value(text)
    assert theirs is not None, f"math-verify does not read {text!r}, which numeric reads as {ours}"
    assert abs(theirs.imag) <= 1e-9 * max(1.0, abs(theirs)), text
    assert theirs.real == pytest.approx(ours, rel=1e-9, abs=1e-12), text


@pytest.mark.parametrize("huge", ["10^{10^{10^{10}}}", "2^{3^{4^{5^{6}}}}", "99999!", "9" * 5000 + "!", "10^{400}", "-10^{400}"])
def test_numbers_too_large_to_compute_differ_from_any_readable_value(huge):
    assert numeric.value(huge) is None
    differ = numeric.clearly_different(huge, "23")
    assert differ is not None and math.isinf(differ[0]) and differ[1] == 23.0
    assert numeric.clearly_different(huge, "x") is None  # nothing read on the other side: the symbolic layer's
    assert numeric.clearly_different(huge, huge) is None


@pytest.mark.parametrize("not_huge", ["10^{200}", "2^{10}", "170!", "10^{x}", "10^{400} - 10^{400}", "(10)^{400}"])
def test_only_a_bare_power_or_factorial_is_known_to_be_huge(not_huge):
    assert numeric._huge(not_huge) is None  # noqa: SLF001


def test_a_power_tower_is_incorrect_at_once_not_a_timeout():
    with AnswerChecker(workers=1, timeout_s=1.0) as checker:
        result = checker.check("So the answer is $\\boxed{10^{10^{10^{10}}}}$.", "7425")
        assert (result.verdict.value, result.rule) == ("incorrect", "constant values differ (a number too large to compute vs 7425)")
        assert checker._pool is None  # noqa: SLF001


def test_an_answer_of_hundreds_of_digits_is_decided_at_once():
    with AnswerChecker(workers=1) as checker:
        long_integer = checker.check("The answer is " + "9" * 3000 + ".", "23")
        assert (long_integer.verdict.value, long_integer.rule) == ("incorrect", "an integer of 3000 digits: far from the reference's value")
        assert checker.check("The answer is " + "7" * 500, "7" * 500).verdict.value == "correct"
        assert checker._pool is None  # noqa: SLF001


@pytest.mark.parametrize(
    "prediction, reference, verdict",
    [
        # as checker v5 (314e099) read them: a long decimal or zeros before an integer are numbers, not a model looping
        ("The answer is 0." + "3" * 500, "\\frac{1}{3}", "correct"),
        ("The answer is \\boxed{" + "0" * 450 + "5}", "5", "correct"),
        ("The answer is 5." + "0" * 450 + ".", "5", "correct"),
        ("The answer is 0." + "0" * 450 + "5.", "0", "incorrect"),
    ],
)
def test_long_runs_of_digits_outside_a_huge_integer_are_numbers(prediction, reference, verdict):
    with AnswerChecker(workers=1) as checker:
        assert checker.check(prediction, reference).verdict.value == verdict


# Review of issue 25: inputs whose verdicts an in-process shortcut changed; each is checker v5's (314e099) verdict.
_HUGE = "1" + "0" * 401
_LONG_FRACTION = "\\frac{" + "1" * 240 + "}{" + "3" * 240 + "}"


def _boxed(s: str) -> str:
    return "The answer is $\\boxed{" + s + "}$."


@pytest.mark.parametrize(
    "prediction, reference, verdict",
    [
        (_boxed(_HUGE), "10^{401}", "correct"),  # an integer of 402 digits is a number, not a model looping
        (_boxed(_HUGE), "{:,}".format(int(_HUGE)), "correct"),
        (_boxed(_HUGE), "0" + _HUGE, "correct"),
        (_boxed(_HUGE), _HUGE + " \\text{ ways}", "correct"),
        (_boxed("-" + _HUGE), "-10^{401}", "correct"),
        (_boxed(_HUGE), "2^{1333}", "incorrect"),
        # a tuple: the symbolic layer's verdict is its first component's that is not correct
        (_boxed("(\\ldots, \\sqrt{2})"), "(\\cos(1), \\sqrt{3})", "unparseable"),
        (_boxed("(\\#, \\sqrt{2})"), "(\\cos(1), \\sqrt{3})", "unparseable"),
        (_boxed("a=\\ldots, b=\\sqrt{2}"), "a=\\cos(1), b=\\sqrt{3}", "unparseable"),
        (_boxed("[\\ldots, \\sqrt{2}]"), "[\\cos(1), \\sqrt{3}]", "unparseable"),
        (_boxed("(\\sqrt{2}, \\ldots)"), "(\\sqrt{3}, \\cos(1))", "incorrect"),
        (_boxed("((1, \\sqrt{2}), \\ldots)"), "((\\cos(1), \\sqrt{3}), 4)", "incorrect"),
        # digits of other scripts are not math-verify's
        (_boxed("\u0663\\sqrt{2}"), "\\sqrt{2}", "unparseable"),
        # zeros of other scripts are not lstrip-ed as "0": no integer of hundreds of digits (second review of issue 25)
        (_boxed("\u0660" * 300 + "5"), "5", "correct"),
        # a value does not decide what the symbolic layer was never given: an answer too long for it
        (_boxed("(" + ", ".join([_LONG_FRACTION] * 5) + ", x)"), "(1, 1, 1, 1, 1, x)", "unparseable"),
        (_boxed("\\sqrt{2}+" + "+".join([_LONG_FRACTION] * 5)), "1", "unparseable"),
        # "5 hours and 30 minutes" after a dot is still read as checker v5 read it
        ("The trip takes .5 hours and 30 minutes.", "330", "correct"),
    ],
)
def test_shortcuts_keep_the_symbolic_layers_verdict(prediction, reference, verdict):
    with AnswerChecker(workers=1) as checker:
        assert checker.check(prediction, reference, "Find the ordered pair.").verdict.value == verdict


def test_a_set_element_unequal_in_value_to_every_reference_element_is_decided_in_process():
    with AnswerChecker(workers=1) as checker:
        tower = checker.check("Thus $\\boxed{2^{3^{4^{5^{6}}}}}$.", "3,\\!110,\\!400", "Find all solutions.")
        assert tower.verdict.value == "incorrect" and "differs in value from every element" in tower.rule  # a timeout before
        assert checker.check("$\\boxed{1+\\sqrt{19}, 2}$", "1 \\pm \\sqrt{19}", "Find all solutions.").verdict.value == "incorrect"
        assert checker._pool is None  # noqa: SLF001
        # an element the grammar cannot read leaves the matching to math-verify
        assert checker.check("$\\boxed{3, x}$", "3, 5", "Find all solutions.").rule.endswith("elements matched by math-verify")


def test_a_value_does_not_decide_a_set_too_long_for_the_symbolic_layer():
    with AnswerChecker(workers=1) as checker:
        long_set = _boxed(", ".join([_LONG_FRACTION] * 5) + ", \\sqrt{2}")
        assert checker.check(long_set, "1, \\sqrt{2}").verdict.value == "unparseable"  # no question: a set
