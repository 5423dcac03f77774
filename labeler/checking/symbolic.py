"""The symbolic layer, run inside worker processes: LaTeX parsed by math-verify's grammar
(latex2sympy2_extended, an ANTLR parser) and compared by math-verify/sympy. Nothing is ever
``eval``-ed: math-verify's plain-expression extractor (it runs ``parse_expr``) is never called, and
a guard keeps sympy's string parser to numeric literals and bare names."""

from __future__ import annotations

import logging
import re

from labeler.checking.verdicts import Verdict

# What sympy's string parser may still see in a worker: a numeric literal (the number tokens of the
# LaTeX grammar) or a bare name (sympy's own internals, e.g. unit prefixes: sympify("yotta")).
# Evaluating a lone name or number calls nothing; anything with an operator, call or attribute is refused.
_SAFE_SYMPY_STRING = re.compile(r"\s*(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[A-Za-z][A-Za-z0-9]*)\s*")


class UnsafeParseError(ValueError):
    """Raised instead of evaluating a non-numeric string with sympy's parse_expr."""


_warmed_up = False
_warm_up_error = ""  # why the last warm-up failed


def quiet_library_loggers() -> None:
    """math-verify and latex2sympy2_extended log a warning on every call made without a timeout (ours
    are enforced by the pool's deadline, not by them) and on every unparsable answer: in a checker
    process those lines would reach the user's stderr, so only their critical messages pass."""
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)


def warm_up() -> None:
    """Load what sympy imports lazily, by running the comparisons once on trusted input: those modules
    sympify constant strings at import time, which the no-eval guard would refuse. About a second of
    CPU, once per process: the checker's forkserver runs it as it starts (labeler/checking/
    warm_forkserver.py), so that the workers forked from it start warm instead of paying it each."""
    global _warmed_up, _warm_up_error
    if _warmed_up:
        return
    quiet_library_loggers()
    try:
        import sympy
        import sympy.physics.units  # noqa: F401

        x = sympy.Symbol("x")
        sympy.simplify((x + 1) ** 2 - x**2 - 2 * x - 1)
        verdicts = [
            _symbolic_check(["\\frac{\\sqrt{2}}{2}", "x^2+2x+1", "(1,2]", "\\{1,2\\}", "x=3"], ["\\frac{1}{\\sqrt{2}}", "(x+1)^2"]),
            run_task(("periodic", ("\\frac{\\pi}{4} + k\\pi",), "k", ("\\frac{5\\pi}{4} + 2n\\pi", "\\frac{\\pi}{4} + 2n\\pi"), "n")),
            run_task(("match", (("\\sqrt{2}",), ("1",)), (("1",), ("\\frac{2}{\\sqrt{2}}",)))),
        ]
        # math-verify catches its parser's errors: a failed warm-up can look like a wrong verdict, not an exception
        if verdicts != [Verdict.CORRECT.value] * 3:
            raise RuntimeError(f"its comparisons of equal values gave {verdicts}")
        _warmed_up = True  # else a worker forked from here tries again
    except Exception as exc:  # a worker that cannot warm up refuses to serve (_install_no_eval_guard)
        _warm_up_error = repr(exc)


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
    warm_up()
    if not _warmed_up:  # the guard would refuse what sympy loads lazily: periodic and set checks would fail unseen
        raise RuntimeError(f"sympy's warm-up failed: {_warm_up_error}")
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


def run_task(task: tuple) -> str:
    """Runs in a worker: one task of comparison.py. Returns a Verdict value.

    ("plain", pred variants, ref variants): equivalent under math-verify;
    ("all", tasks): every sub-task correct (components of a tuple);
    ("match", pred items, ref items): a one-to-one matching of equivalent items (a set);
    ("periodic", pred items, param, ref items, param): the same families of solutions."""
    kind = task[0]
    if kind == "plain":
        return _symbolic_check(list(task[1]), list(task[2]))
    if kind == "all":
        verdicts = []
        for sub in task[1]:
            v = run_task(sub)
            if v != Verdict.CORRECT.value:
                return Verdict.INCORRECT.value if v == Verdict.UNPARSEABLE.value and verdicts else v
            verdicts.append(v)
        return Verdict.CORRECT.value
    if kind == "match":
        return _match(task[1], task[2])
    if kind == "periodic":
        return _same_families(task[1], task[2], task[3], task[4])
    raise ValueError(f"unknown symbolic task {kind!r}")


def _match(pred_items, ref_items) -> str:
    """The same set: every predicted item equals a reference item and every reference item a
    predicted one (cells computed lazily)."""
    from math_verify import verify

    preds = [[t for v in item if (t := _symbolic_parse(v))] for item in pred_items]
    refs = [[g for v in item if (g := _symbolic_parse(v))] for item in ref_items]
    if not all(preds):
        return Verdict.UNPARSEABLE.value
    if not all(refs):
        return Verdict.INCORRECT.value
    cache: dict[tuple[int, int], bool] = {}

    def equal(i: int, j: int) -> bool:
        if (i, j) not in cache:
            cache[i, j] = any(
                verify(g, t, timeout_seconds=None, strict=True, allow_set_relation_comp=True) and not _much_more_complex(t, g)
                for g in refs[j]
                for t in preds[i]
            )
        return cache[i, j]

    if all(any(equal(i, j) for j in range(len(refs))) for i in range(len(preds))) and all(
        any(equal(i, j) for i in range(len(preds))) for j in range(len(refs))
    ):
        return Verdict.CORRECT.value
    return Verdict.INCORRECT.value


MAX_RESIDUES = 240


def _family(items, param: str):
    """[(offset, period)] of each item, linear in the integer `param`; None when an item is not."""
    import sympy

    out = []
    for item in items:
        parsed = _symbolic_parse(item)
        exprs = [e for e in (parsed or []) if isinstance(e, sympy.Expr)]
        if not exprs:
            return None
        e = exprs[0]
        k = next((s for s in e.free_symbols if s.name == param), None)
        if k is None:
            if e.free_symbols:
                return None
            out.append((sympy.nsimplify(e), None))
            continue
        if e.free_symbols - {k}:
            return None
        progression = _progression(e, k)
        if progression is None:
            # "(-1)^k a + k b": linear on the even and on the odd k, each a progression of its own
            j = sympy.Symbol("j", integer=True)
            halves = [_progression(e.subs(k, 2 * j + r), j) for r in (0, 1)]
            if None in halves:
                return None
            out.extend(halves)
            continue
        out.append(progression)
    return out


def _progression(e, k):
    """(offset, period) when e is linear in k, else None."""
    import sympy

    f0, f1, f2 = (sympy.simplify(e.subs(k, v)) for v in (0, 1, 2))
    if sympy.simplify(f2 - 2 * f1 + f0) != 0:
        return None
    period = sympy.Abs(sympy.simplify(f1 - f0))
    if period == 0 or not period.is_number:
        return None
    return (f0, period)


def _same_families(pred_items, pred_param: str, ref_items, ref_param: str) -> str:
    """Two unions of arithmetic progressions a + k p (k integer) are the same set: with L the least
    common multiple of all periods, both give the same residues modulo L."""
    import math

    import sympy

    pred = _family(pred_items, pred_param)
    ref = _family(ref_items, ref_param)
    if pred is None:
        return Verdict.UNPARSEABLE.value
    if ref is None:
        return Verdict.INCORRECT.value
    periods = [p for _, p in pred + ref if p is not None]
    if not periods:
        return Verdict.INCORRECT.value
    base = periods[0]
    ratios = []
    for p in periods:
        r = sympy.nsimplify(sympy.simplify(p / base))
        if not r.is_Rational:
            return Verdict.INCORRECT.value
        ratios.append(r)
    denominator = math.lcm(*(int(r.q) for r in ratios))
    unit = base / denominator
    common = math.lcm(*(int(r * denominator) for r in ratios))
    modulus = unit * common

    def residues(families):
        out = []
        for offset, period in families:
            if period is None:
                return None  # a single solution never equals a family's infinitely many
            steps = int(sympy.nsimplify(modulus / period))
            if len(out) + steps > MAX_RESIDUES:
                return None
            for j in range(steps):
                v = offset + j * period
                out.append(sympy.nsimplify(v - modulus * sympy.floor(v / modulus)))
        return out

    a, b = residues(pred), residues(ref)
    if a is None or b is None:
        return Verdict.INCORRECT.value

    def same(x, y) -> bool:
        d = sympy.N(x - y, 30)
        # residues near 0 and near the modulus are the same point
        return abs(d) < 1e-20 or abs(abs(d) - sympy.N(modulus, 30)) < 1e-20

    left = list(b)
    for x in a:
        j = next((j for j, y in enumerate(left) if same(x, y)), None)
        if j is None:
            return Verdict.INCORRECT.value
        left.pop(j)
    if left:
        # duplicates on one side ("pi/4 + k pi, 5pi/4 + k pi") are one set: compare without multiplicity
        if all(any(same(y, x) for x in a) for y in left):
            return Verdict.CORRECT.value
        return Verdict.INCORRECT.value
    return Verdict.CORRECT.value


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
