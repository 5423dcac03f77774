"""Answer checker: extraction, equivalence rules (both directions), safety, pool, CLI."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from labeler.cli import check as check_command
from labeler.checking.checker import AnswerChecker, CheckResult, Verdict, extract_answer
from tests.conftest import shared_data

ROOT = Path(__file__).resolve().parent.parent

C, I, U, T = Verdict.CORRECT, Verdict.INCORRECT, Verdict.UNPARSEABLE, Verdict.TIMEOUT


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5.0, workers=2) as c:
        yield c


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------

EXTRACTION = [
    # last \boxed{} with nested braces
    ("So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("First \\boxed{3}, then corrected: \\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
    ("\\fbox{42}", "42"),
    ("\\boxed 7", "7"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    # an unclosed (truncated) box is skipped in favour of the previous complete one
    ("\\boxed{5} and then \\boxed{6", "5"),
    # adjacent boxes are one answer
    ("The solutions are $\\boxed{2}$ and $\\boxed{3}$.", "2, 3"),
    # answer phrases
    ("The answer is 18.", "18"),
    ("Therefore the answer is: $\\frac{3}{4}$. I hope", "\\frac{3}{4}"),
    ("Final Answer: The final answer is $(2, 3)$. I hope it is correct.", "(2, 3)"),
    ("Final Answer: The final answer is 2.25. I hope it is correct.", "2.25"),
    ("**Answer:** Verna received $7.00 in change.", "7.00"),
    ("The final answer is\n\\[\n\\begin{pmatrix}0&1\\\\1&0\\end{pmatrix}.\n\\]", "\\begin{pmatrix}0&1\\\\1&0\\end{pmatrix}"),
    ("The answer is 18 dollars.", "18 dollars"),
    # the later of box and phrase wins; a box inside the phrase is the answer
    ("The answer is 5.\nWait, recheck: \\boxed{6}", "6"),
    ("\\boxed{6}\n\nFinal answer: 7", "7"),
    ("The answer is $\\boxed{9}$", "9"),
    # a phrase that states nothing is no answer
    ("Therefore $n \\equiv \\boxed{44}$.\n\nWe may check our answer: $17\\cdot 44 = 748$, so our answer is correct.", "44"),
    ("The answer is correct: \\boxed{12}", "12"),
    # GSM8K
    ("She pays 9 * 2 = 18.\n#### 18", "18"),
    ("#### 1,234", "1,234"),
    # bare answer strings
    ("42", "42"),
    ("$\\frac{1}{2}$", "\\frac{1}{2}"),
    ("x = 3", "x = 3"),
    ("\\text{Friday}", "\\text{Friday}"),
    # stated in the closing sentence, no box
    ("We compute.\n\nTherefore, the area is \\(\\frac{8\\pi}{5}\\) square units.", "\\frac{8\\pi}{5}"),
    ("Thus, $\\cos \\angle RPS = -\\frac{24}{25}$.", "\\cos \\angle RPS = -\\frac{24}{25}"),
    ("Thus, the equation of the circle is:\n\\[ x^2 + y^2 = 13 \\]", "x^2 + y^2 = 13"),
    ("Therefore, the least possible sum is **14**.", "14"),
    # last-number fallback (word problems): the number with the words after it, which name its unit
    ("So she has 5 + 3 = 8 apples left.", "8 apples left"),
    ("Adding, 14 + 20 = 34.\n\nSo she spends a total of 34 hours on yoga in 4 weeks.", "34 hours"),
    ("Therefore, Vince stapled a total of 2,280 reports.", "2280 reports"),
    ("The discount is 25% off.", "25%"),
    # nothing stated
    ("", None),
    ("I am not sure how to solve this problem without more information on the topic.", None),
    ("So x = 14 and y = 15 is not a solution.", None),
]


@pytest.mark.parametrize("text,expected", EXTRACTION)
def test_extraction(text, expected):
    assert extract_answer(text) == expected


def test_last_number_fallback_can_be_turned_off():
    text = "So she has 5 + 3 = 8 apples left."
    assert extract_answer(text, last_number=False) is None
    assert extract_answer("The answer is 8.", last_number=False) == "8"


def test_last_number_fallback_is_off_for_latex_references(checker):
    # "...equals 1 when x = 2" has numbers, but a LaTeX reference does not invite the fallback
    res = checker.check("Plugging in, the expression equals 1 when x is 2", "\\frac{1}{2}")
    assert res.verdict is U and res.extracted is None
    # a plain-number reference does
    assert checker.check("so in total she pays 18 dollars", "18").verdict is C


def test_extraction_of_reference_solutions(checker):
    gsm_reference = "Janet sells 16 - 3 - 4 = 9 eggs.\nShe makes 9 * 2 = $18.\n#### 18"
    assert checker.check("The answer is 18", gsm_reference).verdict is C
    math_reference = "Thus the area is $\\boxed{6\\pi}$."
    assert checker.check("\\boxed{6\\pi}", math_reference).verdict is C


# ---------------------------------------------------------------------------------------------
# Equivalence: (prediction, reference, verdict), both directions of every rule
# ---------------------------------------------------------------------------------------------

EQUIVALENCE = [
    # normalised strings
    ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", C),
    ("\\boxed{\\left( 1, 2 \\right)}", "(1,2)", C),
    ("\\boxed{3,\\!110,\\!400}", "3110400", C),
    ("\\boxed{3,110,401}", "3110400", I),
    # numbers: thousands separators, decimals vs fractions, scientific notation, tolerance
    ("\\boxed{1,000}", "1000", C),
    ("\\boxed{1000}", "1,000", C),
    ("\\boxed{1,001}", "1000", I),
    ("\\boxed{0.5}", "\\frac{1}{2}", C),
    ("\\boxed{\\frac12}", "0.5", C),
    ("\\boxed{3/4}", "0.75", C),
    ("\\boxed{0.74}", "\\frac34", I),
    ("\\boxed{-\\frac{1}{2}}", "-0.5", C),
    ("\\boxed{\\frac{1}{2}}", "-0.5", I),
    ("\\boxed{2.0}", "2", C),
    ("\\boxed{2.000001}", "2", I),
    ("\\boxed{1.5 \\times 10^{-7}}", "1.5e-7", C),
    ("\\boxed{1.5e-7}", "1.5\\times10^{-7}", C),
    ("\\boxed{1e-7}", "2e-7", I),
    ("\\boxed{2e-7}", "1e-7", I),
    ("\\boxed{10^{6}}", "1000000", C),
    ("\\boxed{0.30000000000000004}", "0.3", C),
    ("\\boxed{1000000001}", "1000000000", I),  # no tolerance between integers
    ("\\boxed{123456789.1}", "123456789.2", I),  # nor between distinct decimals
    ("\\boxed{0.333}", "\\frac{1}{3}", I),  # rounded to fewer than 6 places: not the exact value (normalisation._numbers_equal)
    ("\\boxed{0.333333}", "\\frac{1}{3}", C),  # rounded to 6 places: math-verify's precision
    ("\\boxed{0.3}", "\\frac{1}{3}", I),  # too few digits
    ("\\boxed{0.3}", "0.25", I),  # 0.25 is exact at 2 digits: rounding is no excuse
    ("\\boxed{\\frac{411}{333}}", "\\frac{137}{111}", C),
    # symbolic: fractions, roots, pi
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}", C),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", C),
    ("\\boxed{\\sqrt{8}}", "3\\sqrt{2}", I),
    ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt2}{2}", C),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{1}{2}\\sqrt{3}", C),
    ("\\boxed{10.5\\pi}", "\\frac{21}{2}\\pi", C),
    ("\\boxed{\\frac{8\\pi}{5}}", "\\tfrac{8\\pi}5", C),
    ("\\boxed{\\frac{8\\pi}{5}}", "\\frac{8}{5}", I),
    ("\\boxed{2\\pi}", "6.283185307", C),
    ("\\boxed{x^2+2x+1}", "(x+1)^2", C),
    ("\\boxed{x^2+2x}", "(x+1)^2", I),
    # a restatement far more complex than the reference is not an answer
    ("\\boxed{\\frac{1}{\\sin x \\cos x} - \\tan x}", "\\cot x", I),
    # intervals and their bracket types
    ("\\boxed{(1,2]}", "(1,2]", C),
    ("\\boxed{[1,2]}", "[1,2)", I),
    ("\\boxed{(1,2)}", "(1,2]", I),
    ("\\boxed{(5, \\infty) \\cup (-\\infty, 3)}", "(-\\infty,3)\\cup(5,\\infty)", C),
    ("\\boxed{(-\\infty, -8) \\cup (4, \\infty)}", "(-\\infty,-8)\\cup (8,\\infty)", I),
    ("\\boxed{x \\in [2,3]}", "[2,3]", C),
    # unordered sets, ordered tuples
    ("\\boxed{\\{3,2,1\\}}", "\\{1,2,3\\}", C),
    ("\\boxed{3, 2, 1}", "1,2,3", C),
    ("\\boxed{\\{1,2\\}}", "\\{1,2,3\\}", I),
    ("\\boxed{(3, -1)}", "(3,-1)", C),
    ("\\boxed{(-1, 3)}", "(3,-1)", I),
    ("\\boxed{1 + \\sqrt{19}, 1 - \\sqrt{19}}", "1 \\pm \\sqrt{19}", C),
    # matrices
    ("\\boxed{\\begin{pmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\end{pmatrix}}", "\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}", C),
    ("\\boxed{\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix}}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", C),
    ("\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 5 \\end{pmatrix}}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", I),
    # equations like x = 3 vs 3
    ("\\boxed{x=3}", "3", C),
    ("\\boxed{3}", "x = 3", C),
    ("\\boxed{x=4}", "3", I),
    ("\\boxed{y=3}", "x=3", I),
    ("\\boxed{f(x) = -x + 1}", "1 - x", C),
    ("\\boxed{y = 3 + 2x}", "y=2x+3", C),
    ("\\boxed{y = 2x - 3}", "y=2x+3", I),
    # units and \text{} stripped
    ("\\boxed{10\\text{ cm}}", "10", C),
    ("\\boxed{10}", "10\\;\\text{edges}", C),
    ("\\boxed{10 \\text{ cm}^2}", "10", C),
    ("\\boxed{11\\text{ cm}}", "10", I),
    ("The answer is 18 dollars.", "18", C),
    ("\\boxed{\\$18}", "18", C),
    ("\\boxed{\\$19}", "18", I),
    ("\\boxed{\\text{Friday}}", "\\text{Friday}", C),
    ("\\boxed{friday}", "\\text{Friday}", C),
    ("\\boxed{\\text{Sunday}}", "\\text{Friday}", I),
    ("\\boxed{\\text{teas}}", "\\text{east}", I),  # not the product t*e*a*s
    # degrees
    ("\\boxed{30^\\circ}", "30", C),
    ("\\boxed{30}", "30^{\\circ}", C),
    ("\\boxed{30°}", "30^\\circ", C),
    ("\\boxed{60^\\circ}", "30", I),
    # percentages: 5% is 0.05 and 5 (a percent question); 500 is never 5
    ("\\boxed{5\\%}", "5", C),
    ("\\boxed{5\\%}", "0.05", C),
    ("\\boxed{0.05}", "5\\%", C),
    ("\\boxed{5}", "5\\%", C),
    ("The answer is 5%.", "5", C),
    ("\\boxed{500}", "5", I),
    ("\\boxed{5}", "500", I),
    ("\\boxed{500\\%}", "5", I),
    ("\\boxed{0.05\\%}", "5\\%", I),
    ("\\boxed{50}", "0.5", I),
    # multiple-choice letters
    ("\\boxed{C}", "C", C),
    ("\\boxed{\\textbf{(C)}}", "\\text{(C)}", C),
    ("The answer is (C) 12", "C", C),
    ("\\boxed{c}", "(C)", C),
    ("\\boxed{B}", "C", I),
    ("\\boxed{(D)}", "\\text{(C)}", I),
    ("\\boxed{12}", "C", I),
    # stated without a box
    ("Therefore, the value is \\(-\\frac{2\\sqrt{3}}{3}\\).", "-\\frac{2 \\sqrt{3}}{3}", C),
    ("Therefore, the value is \\(-\\frac{2\\sqrt{3}}{5}\\).", "-\\frac{2 \\sqrt{3}}{3}", I),
    # nothing to compare
    ("I don't know.", "5", U),
    ("\\boxed{}", "5", U),
]


@pytest.mark.parametrize("pred,ref,verdict", EQUIVALENCE)
def test_equivalence(checker, pred, ref, verdict):
    assert checker.check(pred, ref).verdict is verdict


def test_check_many_keeps_input_order_and_matches_check(checker):
    pairs = [(p, r) for p, r, _ in EQUIVALENCE]
    results = checker.check_many(pairs)
    assert [r.verdict for r in results] == [v for _, _, v in EQUIVALENCE]
    assert all(isinstance(r, CheckResult) for r in results)
    assert checker.check_many([]) == []


def test_check_many_from_another_thread(checker):
    """The labeler checks unit i in a thread while unit i+1 generates: no signals in the caller."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = [("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"), ("The answer is 18.", "18"), ("\\boxed{(1,2)}", "(1,2]")]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(checker.check_many, pairs) for _ in range(4)]
        for f in futures:
            assert [r.verdict for r in f.result(timeout=120)] == [C, C, I]


def test_fast_path_does_not_touch_the_pool():
    with AnswerChecker(workers=1) as c:
        results = c.check_many([("The answer is 18.", "18"), ("#### 1,000", "1000"), ("\\boxed{B}", "(C)")] * 100)
        assert [r.verdict for r in results[:3]] == [C, C, I]
        assert c._pool is None  # no worker process was started


def test_fast_path_throughput():
    rows = [
        (f"Step one.\n\nShe buys {n} apples and {n + 3} pears, so {n} + {n + 3} = {2 * n + 3}.\n\nThe answer is \\boxed{{{2 * n + 3}}}.", str(2 * n + 3 + n % 2))
        for n in range(500)
    ]
    with AnswerChecker(workers=1) as c:
        t0 = time.perf_counter()
        results = c.check_many(rows)
        rate = len(rows) / (time.perf_counter() - t0)
        assert c._pool is None
    assert sum(r.verdict is C for r in results) == 250
    assert rate >= 500, f"{rate:.0f} verdicts/s"


# ---------------------------------------------------------------------------------------------
# Safety: malformed and odd inputs, pathological inputs, timeouts, no evaluation of text
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", [("\x00", "\x00\x01"), ("", ""), ("5", ""), ("}{", "{"), ("\\", "\\boxed{"), ("\\boxed{", "\\")])
def test_never_raises_on_odd_strings(checker, pair):
    (res,) = checker.check_many([pair])
    assert res.verdict in (U, I, C)


@pytest.mark.parametrize("pair", [(None, "5"), ("5", None), (5, "5"), (b"5", "5"), ("5",), ("5", "5", "5")])
def test_a_malformed_pair_raises_instead_of_getting_a_verdict(checker, pair):
    # a verdict would be a label for an input nobody meant; the error names the pair's position
    with pytest.raises((TypeError, ValueError), match="pair 0"):
        checker.check_many([pair])


PATHOLOGICAL = {
    "power tower": "\\boxed{2^{2^{2^{100}}}}",
    "factorial of a tower": "\\boxed{10^{10^{10}}!}",
    "nested power": "\\boxed{9^{9^{9^{9}}}}",
    "1 MB of text": "x" * 1_000_000,
    "1 MB of digits": "1" * 1_000_000,
    "1 MB of unclosed boxes": "\\boxed{" * 150_000,
    "1 MB inside a box": "\\boxed{" + "1+" * 500_000 + "1}",
    "1 MB of dollars": "$" * 1_000_000,
    "boxes then 1 MB": "\\boxed{" * 40 + "{" * 1_000_000,
    "1 MB answer phrases": "The answer is " * 75_000,
    "500 nested braces": "\\boxed{" + "{" * 500 + "1" + "}" * 500 + "}",
    "500 nested fractions": "\\boxed{" + "\\frac{" * 500 + "1" + "}{2}" * 500 + "}",
    "500 nested parentheses": "\\boxed{" + "(" * 500 + "1" + ")" * 500 + "}",
    "500 nested roots": "\\boxed{" + "\\sqrt{" * 500 + "2" + "}" * 500 + "}",
}


PATHOLOGICAL_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def one_worker_checker():
    """One pool for all pathological inputs (a worker killed by one is replaced for the next)."""
    with AnswerChecker(timeout_s=PATHOLOGICAL_TIMEOUT, workers=1) as c:
        yield c


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_inputs_return_within_the_timeout(name, one_worker_checker):
    c = one_worker_checker
    c.check("\\boxed{\\sqrt{2}}", "\\frac{2}{\\sqrt{2}}")  # a live worker, started outside the clock
    t0 = time.perf_counter()
    res = c.check(PATHOLOGICAL[name], "\\pi")
    elapsed = time.perf_counter() - t0
    assert res.verdict in (I, U, T)
    assert elapsed < PATHOLOGICAL_TIMEOUT + 1.5, f"{name}: {elapsed:.1f}s"


def test_pathological_reference_and_prediction_alike(checker):
    tower = "2^{2^{2^{100}}}"
    assert checker.check(f"\\boxed{{{tower}}}", tower).verdict is C  # same string: decided without computing


def test_timeout_kills_the_worker_and_replaces_it():
    # With the in-worker alarm off, an overrun can only end by a kill at the hard deadline.
    with AnswerChecker(timeout_s=1.0, workers=1, soft_timeout=False) as c:
        assert c.check("\\boxed{\\sqrt{2}}", "\\frac{2}{\\sqrt{2}}").verdict is C
        first_pid = c._pool.workers[0].proc.pid
        t0 = time.perf_counter()
        res = c.check("\\boxed{10^{10^{10}}!}", "3")
        assert res.verdict is T and res.extracted == "10^{10^{10}}!"
        assert time.perf_counter() - t0 < 3.0
        assert c._pool.kills == 1
        # the replacement serves the next calls
        assert c.check("\\boxed{\\sqrt{8}}", "2\\sqrt{2}").verdict is C
        assert c._pool.workers[0].proc.pid != first_pid
        # a batch mixing stuck and ordinary checks: every stuck one times out, the rest are exact (a tower against a
        # plain number is decided in-process, labeler/checking/numeric.py: against a cosine, or its factorial, it reaches the pool)
        mixed = [("\\boxed{9^{9^{9^{9}}}}", "\\cos(3)"), ("\\boxed{\\sqrt{8}}", "2\\sqrt{3}"), ("\\boxed{3^{3^{3^{100}}}!}", "5"), ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2")]
        assert [r.verdict for r in c.check_many(mixed)] == [T, I, T, C]


def test_soft_timeout_answers_without_a_kill():
    with AnswerChecker(timeout_s=1.0, workers=1) as c:
        assert c.check("\\boxed{2^{2^{2^{100}}}!}", "5").verdict is T
        assert c._pool.kills == 0
        assert c.check("\\boxed{\\sqrt{8}}", "2\\sqrt{2}").verdict is C


def test_a_crashed_worker_is_replaced():
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        assert c.check("\\boxed{\\sqrt{8}}", "2\\sqrt{2}").verdict is C
        worker = c._pool.workers[0]
        worker.proc.kill()
        worker.proc.join()
        assert c.check("\\boxed{\\sqrt{18}}", "3\\sqrt{2}").verdict is C


INJECTIONS = [
    "__import__('os').system('touch PWNED')",
    "\\boxed{__import__('os').system('touch PWNED')}",
    "The answer is __import__('os').system('touch PWNED')",
    "$__import__('os').system('touch PWNED')$",
    "\\boxed{\\text{__import__('os').system('touch PWNED')}}",
    "\\boxed{(lambda: __import__('os').system('touch PWNED'))()}",
    "\\boxed{1+__import__('os').system('touch PWNED')}",
    "1 + 2*(__import__('os').system('touch PWNED'))",
    "\\boxed{x=__import__('os').system('touch PWNED')}",
]


def test_injected_code_never_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # workers start here, so a relative PWNED would land here
    with AnswerChecker(timeout_s=5.0, workers=2) as c:
        pairs = [(s, "5") for s in INJECTIONS] + [("\\boxed{5}", s) for s in INJECTIONS] + [(s, s + " ") for s in INJECTIONS]
        pairs += [(s, "x") for s in INJECTIONS] + [(s, "\\frac{1}{2}") for s in INJECTIONS]
        results = c.check_many(pairs)
    assert all(r.verdict in (C, I, U, T) for r in results)
    assert not (tmp_path / "PWNED").exists()
    assert not (ROOT / "PWNED").exists()


def test_worker_guard_refuses_sympify_of_code(tmp_path):
    """Inside a worker, sympy's string parser only accepts numbers and bare names."""
    script = textwrap.dedent(
        """
        import sympy
        from labeler.checking.symbolic import _install_no_eval_guard, UnsafeParseError
        _install_no_eval_guard()
        assert sympy.sympify("12.5") == sympy.Float("12.5")
        assert sympy.sympify("yotta") == sympy.Symbol("yotta")
        for s in ["__import__('os').system('touch PWNED')", "x + 1", "(lambda: 1)()"]:
            try:
                sympy.sympify(s)
            except (UnsafeParseError, sympy.SympifyError):
                pass
            else:
                raise SystemExit("sympify evaluated " + s)
        from sympy.parsing.sympy_parser import parse_expr
        try:
            parse_expr("__import__('os').system('touch PWNED')")
        except UnsafeParseError:
            pass
        else:
            raise SystemExit("parse_expr evaluated code")
        print("guarded")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "guarded" in out.stdout
    assert not (tmp_path / "PWNED").exists()


# ---------------------------------------------------------------------------------------------
# CLI: `labeler check`
# ---------------------------------------------------------------------------------------------


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="labeler")
    sub = parser.add_subparsers(dest="command", required=True)
    check_command.register(sub)
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_single_pair(capsys):
    assert _run_cli(["check", "--gold", "\\frac{1}{2}", "--pred", "The answer is $0.5$."]) == 0
    assert capsys.readouterr().out.strip() == "correct"
    assert _run_cli(["check", "--gold", "5", "--pred", "\\boxed{500}", "--timeout", "2"]) == 0
    assert capsys.readouterr().out.strip() == "incorrect"


def test_cli_pairs_file(tmp_path, capsys):
    lines = [
        {"gold": "18", "pred": "She makes 9 * 2 = 18 dollars.\n#### 18"},
        {"id": "b", "gold": "\\frac{\\sqrt{2}}{2}", "pred": "so \\boxed{\\frac{1}{\\sqrt{2}}}"},
        {"gold": "(1,2]", "pred": "\\boxed{(1,2)}"},
        {"gold": "5", "pred": "I could not work this one out."},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    assert _run_cli(["check", "--pairs", str(path), "--timeout", "5"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o["verdict"] for o in out] == ["correct", "correct", "incorrect", "unparseable"]
    assert [o["extracted"] for o in out] == ["18", "\\frac{1}{\\sqrt{2}}", "(1,2)", None]
    assert out[1]["id"] == "b"


def test_cli_malformed_lines_are_reported_in_place(tmp_path, capsys):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"gold": "1", "pred": "1"}\nnot json\n{"gold": 2}\n{"gold": 3, "pred": 3}\n', encoding="utf-8")
    assert _run_cli(["check", "--pairs", str(path)]) == 1
    captured = capsys.readouterr()
    out = [json.loads(x) for x in captured.out.splitlines()]
    assert [o["verdict"] for o in out] == ["correct", "unparseable", "unparseable", "correct"]
    assert "error" in out[1] and "error" in out[2]
    assert "line 2:" in captured.err and "line 3:" in captured.err  # a file's lines, from 1


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["check", "--gold", "1"],
        ["check", "--pred", "1"],
        ["check", "--gold", "1", "--pred", "1", "--pairs", "x.jsonl"],
        ["check", "--gold", "1", "--pred", "1", "--timeout", "0"],
        ["check", "--pairs", "/nonexistent/pairs.jsonl"],
    ],
)
def test_cli_bad_usage_exits_2(argv, capsys):
    assert _run_cli(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "labeler check:" in captured.err


# ---------------------------------------------------------------------------------------------
# ProcessBench agreement (the benchmark's numbers, as a regression floor)
# ---------------------------------------------------------------------------------------------


def test_reference_solutions_reach_their_own_answers(checker):
    """Each MATH-500 reference solution against its answer, each GSM8K solution against its number."""
    math500 = [json.loads(x) for x in shared_data("math500/test.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    gsm8k = [json.loads(x) for x in shared_data("gsm8k/test.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    pairs = [(r["solution"], r["answer"]) for r in math500] + [(r["answer"], r["final_answer"]) for r in gsm8k]
    pairs += [(r["final_answer"], r["answer"]) for r in gsm8k]  # a whole reference solution as the reference
    failures = [p for p, res in zip(pairs, checker.check_many(pairs)) if res.verdict is not C]
    assert failures == []


@pytest.mark.parametrize("split", ["gsm8k", "math"])
def test_processbench_agreement(checker, split):
    rows = [json.loads(x) for x in shared_data(f"processbench/{split}.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    results = checker.check_many([("\n\n".join(r["steps"]), r["answer"]) for r in rows])
    agree = sum((res.verdict is C) == bool(r["final_answer_correct"]) for r, res in zip(rows, results))
    assert agree / len(rows) >= 0.99
