"""The symbolic layer, run inside worker processes: LaTeX parsed by math-verify's grammar
(latex2sympy2_extended, an ANTLR parser) and compared by math-verify/sympy. Nothing is ever
``eval``-ed: math-verify's plain-expression extractor (it runs ``parse_expr``) is never called, and
a guard keeps sympy's string parser to numeric literals and bare names."""

from __future__ import annotations

import re

from labeler.checking.verdicts import Verdict

# What sympy's string parser may still see in a worker: a numeric literal (the number tokens of the
# LaTeX grammar) or a bare name (sympy's own internals, e.g. unit prefixes: sympify("yotta")).
# Evaluating a lone name or number calls nothing; anything with an operator, call or attribute is refused.
_SAFE_SYMPY_STRING = re.compile(r"\s*(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[A-Za-z][A-Za-z0-9]*)\s*")


class UnsafeParseError(ValueError):
    """Raised instead of evaluating a non-numeric string with sympy's parse_expr."""


def _install_no_eval_guard() -> None:
    """Make sympy's string parser refuse anything but numeric literals, in this process.

    ``sympify(str)`` and ``parse_expr`` end in ``eval``. latex2sympy2_extended only passes number
    tokens (``sympy.Number("12.5")``); math-verify's plain-expression extractor would pass text, but
    we never use it. Every string parse goes through ``sympy_parser.stringify_expr`` (looked up at
    call time), so guarding it covers all import paths of ``parse_expr``.
    """
    from sympy.parsing import sympy_parser

    if getattr(sympy_parser, "_prm_guarded", False):
        return
    # sympy imports some modules lazily and they sympify constant strings at import time; load
    # them now, before the guard, by running the comparisons once on trusted input.
    try:
        import sympy
        import sympy.physics.units  # noqa: F401

        x = sympy.Symbol("x")
        sympy.simplify((x + 1) ** 2 - x**2 - 2 * x - 1)
        _symbolic_check(["\\frac{\\sqrt{2}}{2}", "x^2+2x+1", "(1,2]", "\\{1,2\\}", "x=3"], ["\\frac{1}{\\sqrt{2}}", "(x+1)^2"])
    except Exception:  # pragma: no cover
        pass
    original = sympy_parser.stringify_expr

    def guarded(s, local_dict, global_dict, transformations):
        if not isinstance(s, str) or not _SAFE_SYMPY_STRING.fullmatch(s):
            raise UnsafeParseError("refusing to evaluate a string that is not a number or a name")
        return original(s, local_dict, global_dict, transformations)

    sympy_parser.stringify_expr = guarded
    sympy_parser._prm_guarded = True

    # Belt and braces: the module-level aliases that math-verify and latex2sympy imported.
    def refuse(*_a, **_k):
        raise UnsafeParseError("parse_expr is disabled in checker workers")

    import latex2sympy2_extended.latex2sympy2 as l2s
    import math_verify.parser as mvp

    mvp.parse_expr = refuse
    mvp.parse_expr_cached = refuse
    l2s.parse_expr = refuse


def _check_no_eval_guard() -> None:
    """Raise unless sympy's string parser refuses an expression in this process (the guard is in
    place, whoever claimed to install it)."""
    from sympy.parsing.sympy_parser import parse_expr

    try:
        parse_expr("1+1")
    except UnsafeParseError:
        return
    raise RuntimeError("the no-eval guard is not in place: sympy's parse_expr evaluated '1+1'")


def _symbolic_parse(latex: str):
    """LaTeX -> sympy through math-verify's LaTeX grammar only; None when it does not parse."""
    from math_verify import LatexExtractionConfig, parse

    got = parse(
        "\\boxed{" + latex + "}",
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0)],
        fallback_mode="no_fallback",
        parsing_timeout=None,
    )
    return got or None


def _symbolic_check(pred_variants: list[str], ref_variants: list[str]) -> str:
    """Runs in a worker. Returns a Verdict value."""
    from math_verify import verify

    refs = []
    for r in ref_variants:
        g = _symbolic_parse(r)
        if g:
            refs.append(g)
    preds = []
    for p in pred_variants:
        t = _symbolic_parse(p)
        if t:
            preds.append(t)
    if not preds:
        return Verdict.UNPARSEABLE.value
    if not refs:
        # Reference does not parse: only an exact normalised-string match could have counted,
        # and that was tried in the fast path.
        return Verdict.INCORRECT.value
    for g in refs:
        for t in preds:
            if verify(g, t, timeout_seconds=None, strict=True, allow_set_relation_comp=True) and not _much_more_complex(t, g):
                return Verdict.CORRECT.value
    return Verdict.INCORRECT.value


def _much_more_complex(pred_list, gold_list) -> bool:
    """An expression in variables that only equals the reference after simplification, while being
    far more complex, restates the question rather than answering it ("Simplify sec x/sin x -
    sin x/cos x": 1/(sin x cos x) - tan x is not an answer for cot x)."""
    import sympy

    try:
        pred, gold = pred_list[0], gold_list[0]
        if not (isinstance(pred, sympy.Expr) and isinstance(gold, sympy.Expr)) or not pred.free_symbols:
            return False
        return sympy.count_ops(pred) > 2 * sympy.count_ops(gold) + 3
    except Exception:
        return False
