"""Comparing two normalised answers by their shape, in-process: a decision, or the symbolic task
that decides (run by symbolic.py in the worker pool), with the rule that applied and the normal
forms compared (for ``labeler check --explain``).

The shapes (forms.py), tried in this order:
1. numbers on both sides: exact comparison (normalisation.py);
2. sets of reals: inequalities and intervals, compared as sets ("n \\geq 2" is "[2, \\infty)");
3. families of solutions with an integer parameter, compared as sets of residues (symbolic);
4. functions: "g(t) = 2t" is "g(x) = 2x" (the variable renamed, never captured);
5. named components: by name, or in the order the question names them ("a=3, b=5" is "(3,5)");
6. lists: an ordered tuple component by component; a set of solutions in any order. Which one is
   decided by the reference's form (parentheses: a tuple, braces: a set) and the question
   ("ordered pair", "in increasing order" vs "find all", "separated by commas"); a bare list is a set
   unless the question orders it;
7. single answers: normalised strings, numbers, words, letters, "x = 3" vs 3; else symbolic.

Afterwards, a match whose count noun names another quantity than the question asks for ("56
apples" for how much money) is wrong (quantities.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from labeler.checking import forms, numeric
from labeler.checking.normalisation import _equation_rhs, _Fast, _fast_compare, _mc_letter, _Norm, _normalise, _numbers_equal, _parse_number
from labeler.checking.quantities import _UNITS as UNITS
from labeler.checking.quantities import MULTIPLIERS, UNIT_SIZES, conflict, lemma
from labeler.checking.question import Question
from labeler.checking.verdicts import Verdict

MAX_COMPONENTS = 24
MAX_DEPTH = 3
# Characters without which an answer has no structure worth looking at (a plain number, a word).
_STRUCTURE_HINTS = (",", ";", "=", "<", ">", "\\le", "\\ge", "\\ne", "\\pi", "\\infty", "\\cup", "\\{", " and ", " or ", ":", "\\mathbb", " is ", " has ", "real")


@dataclass
class Decision:
    """A verdict (or None: `task` decides it in the symbolic layer), the rule, the forms compared."""

    verdict: Verdict | None
    rule: str
    task: tuple | None = None
    pred_form: str = ""
    ref_form: str = ""
    notes: list[str] = field(default_factory=list)
    # An incorrect decided in-process by value (numeric.py) where the symbolic layer used to decide: its task, so
    # that a tuple holding it still gets the verdict that task sequence gives (_all_of)
    stands_for: tuple | None = None


def _done(verdict: Verdict, rule: str, pf: str, rf: str) -> Decision:
    return Decision(verdict, rule, None, pf, rf)


def compare(pn: _Norm, rn: _Norm, question: Question | None, depth: int = 0) -> Decision:
    decision = _compare(pn, rn, question, depth)
    if decision.verdict is Verdict.CORRECT and depth == 0:
        why = _noun_mismatch(pn, rn, question)
        if why is not None:
            return _done(Verdict.INCORRECT, f"count noun: {why}", decision.pred_form, decision.ref_form)
    return decision


def _noun_mismatch(pn: _Norm, rn: _Norm, question: Question | None) -> str | None:
    if pn.noun is None:
        return None
    if rn.noun is not None and pn.noun.unit and rn.noun.unit:
        (pd, pu), (rd, ru) = pn.noun.unit, rn.noun.unit
        converted = _conversion(pn, rn)
        if pd == rd and pu != ru and (converted is None or not _numbers_equal(converted[0], _parse_number(rn.text), str(converted[0]), rn.text)):
            return f"'{pn.noun.text}' where the reference is in {ru}s"
    if question is not None:
        return conflict(pn.noun, question.quantity)
    return None


_GLUED = re.compile(r"(-?[\d,]*\.?\d+)([A-Za-z]{1,2})")


def _as_asked(pn: _Norm, question: Question | None) -> tuple[_Norm, str | None]:
    """The prediction's number in the unit the question counts: "7 dozen" stays 7 when it counts
    dozens; "3 pairs of socks" is 6 when it counts socks; "48g" is 48 grams when it asks for a
    mass (without such a question a letter after a number is a variable: "2m")."""
    if question is None:
        return pn, None
    glued = _GLUED.fullmatch(pn.text) if pn.noun is None else None
    if glued is not None:
        unit = UNITS.get(glued.group(2)) or UNITS.get(glued.group(2).lower())
        asked = question.quantity
        if unit is not None and unit[0] != "rate" and (asked.dimension == unit[0] or asked.rate and asked.rate[0] and unit[0] == "length"):
            return _normalise(f"{glued.group(1)} {glued.group(2)}"), f"'{pn.text}': {glued.group(2)} read as a unit, the question asks for {asked.dimension}"
    if pn.noun is None and pn.unscaled is None:
        return pn, None
    asked = question.quantity.nouns
    if pn.unscaled is not None and asked & {lemma(w) for w in MULTIPLIERS}:
        return _normalise(pn.unscaled), f"not scaled: the question counts {' '.join(sorted(asked))}"
    noun = pn.noun
    if noun is not None and noun.head == "pair" and "of" in noun.words[:-1]:
        value = _parse_number(pn.text)
        if value is not None and lemma(noun.words[noun.words.index("of") + 1]) in asked and "pair" not in asked:
            doubled = value * 2
            text = str(doubled.numerator) if doubled.denominator == 1 else f"{doubled.numerator}/{doubled.denominator}"
            return _normalise(text), f"{pn.text} pairs counted as {text}: the question counts {' '.join(sorted(asked))}"
    return pn, None


def _compare(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision:
    pn, note = _as_asked(pn, question)
    decision = _compare_shapes(pn, rn, question, depth)
    if note:
        decision.notes.append(note)
    return decision


def _compare_shapes(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision:
    if pn.domains and rn.domains and pn.domains != rn.domains:
        return _done(Verdict.INCORRECT, "qualifiers name different number sets", pn.qualifier or "", rn.qualifier or "")
    if pn.text == rn.text and pn.percent == rn.percent:
        return _done(Verdict.CORRECT, "same normal form", pn.spaced, rn.spaced)
    ungrouped = _ungrouped(pn, rn)
    if ungrouped is not None:
        decision = _compare_shapes(ungrouped, rn, question, depth)
        decision.notes.append("digit groups read as one number: the reference is one number")
        return decision
    for rule in (_bases, _choices):
        decision = rule(pn, rn, question)
        if decision is not None:
            return decision
    converted = _as_tuples(pn, rn)
    if converted is not None:
        p2, r2, how = converted
        decision = _compare_shapes(p2, r2, question, depth)
        decision.notes.append(how)
        return decision
    structured = depth < MAX_DEPTH and "\\begin" not in pn.text + rn.text and (
        any(h in pn.spaced for h in _STRUCTURE_HINTS) or any(h in rn.spaced for h in _STRUCTURE_HINTS)
        or pn.int_params or rn.int_params or (pn.degrees and rn.degrees)
    )
    if structured and not (_parse_number(pn.text) is not None and _parse_number(rn.text) is not None):
        for rule in (_real_sets, _families, _functions, _named, _lists):
            decision = rule(pn, rn, question, depth)
            if decision is not None:
                return decision
    converted = _conversion(pn, rn)
    if converted is not None:
        value, unit = converted
        same = value is not None and _numbers_equal(value, _parse_number(rn.text), str(value), rn.text)
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, f"units converted: {pn.spaced} {pn.noun.text} in {unit}s", pn.spaced, rn.spaced)
    return _atoms(pn, rn, question)


# A number written with thousands separators: "1,250", "12,500.75" (not "3,5", not "1, 250").
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")


def _ungrouped(pn: _Norm, rn: _Norm) -> _Norm | None:
    """"Total: 1,250" or "x = 1,250" against the one number 1250: the commas group digits, they do
    not separate components (a list never equals one number, so this reading adds no false match).
    Not inside brackets, where "(1,250)" is a pair."""
    if "," not in pn.text or any(c in pn.text for c in "([{") or _parse_number(rn.text) is None:
        return None
    text = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), pn.text)
    if text == pn.text:
        return None
    return replace(pn, text=text, spaced=_GROUPED.sub(lambda m: m.group(0).replace(",", ""), pn.spaced))


def _conversion(pn: _Norm, rn: _Norm):
    """(the prediction's number in the reference's unit, that unit) when both name units of one
    dimension with exact sizes ("2500 m" for "2.5 km"), else None. Only when the reference names
    its unit: a bare reference is in the unit the question asks for (quantities.conflict)."""
    if pn.noun is None or rn.noun is None or not pn.noun.unit or not rn.noun.unit or pn.noun.rate or rn.noun.rate:
        return None
    (pd, pu), (rd, ru) = pn.noun.unit, rn.noun.unit
    if pu == ru or pu not in UNIT_SIZES or ru not in UNIT_SIZES or UNIT_SIZES[pu][0] != UNIT_SIZES[ru][0]:
        return None
    pv, rv = _parse_number(pn.text), _parse_number(rn.text)
    if pv is None or rv is None:
        return None
    return pv * UNIT_SIZES[pu][1] / UNIT_SIZES[ru][1], ru


# ---------------------------------------------------------------------------------------------
# Numerals in a base, multiple choice, points and vectors
# ---------------------------------------------------------------------------------------------


def _bases(pn: _Norm, rn: _Norm, question: Question | None) -> Decision | None:
    """Numerals with a base subscript: the same base and the same digits. A base-10 subscript is
    the plain number; a plain number for a numeral in base b is its digits without the subscript
    ("1011" for 1011_2); a numeral in another base than the reference's is another answer."""
    pb, rb = forms.base_numeral(pn.text), forms.base_numeral(rn.text)
    if pb is None and rb is None:
        return None
    p_plain = re.fullmatch(r"\d+", pn.text) is not None
    r_plain = re.fullmatch(r"\d+", rn.text) is not None
    if pb is not None and rb is not None:
        same = pb[1] == rb[1] and pb[2] == rb[2]
        why = "numerals in a base: the same base and digits" if same else f"numerals in a base: {pn.text} vs {rn.text}"
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, why, pn.spaced, rn.spaced)
    if rb is not None and p_plain:
        same = rb[1] == 10 and int(pn.text) == rb[2] or pn.text.lstrip("0") == rb[0].lstrip("0")
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, f"a plain number for a numeral in base {rb[1]}: its digits", pn.spaced, rn.spaced)
    if pb is not None and r_plain:
        same = pb[1] == 10 and pb[2] == int(rn.text)
        why = "a base-10 subscript is the plain number" if pb[1] == 10 else f"a numeral in base {pb[1]} for a reference in base 10"
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, why, pn.spaced, rn.spaced)
    return None


_CHOICE = re.compile(r"^(?:\((?P<p>[A-J])\)|(?P<l>[A-J])(?:\.|:|\)))\s*(?P<text>[A-Za-z][A-Za-z' \-]*)?\.?$")


def _choices(pn: _Norm, rn: _Norm, question: Question | None) -> Decision | None:
    """A multiple-choice letter with its option's text ("(C) Plane", "B. Cone"), or the text of
    one option alone, for a reference that is a letter. The letter decides; a text that names
    another option than the letter's contradicts it."""
    letter = _mc_letter(rn.text)
    if letter is None:
        return None
    options = {k: v.lower() for k, v in question.options} if question is not None else {}
    m = _CHOICE.match(pn.spaced)
    if m is not None:
        chosen = m.group("p") or m.group("l")
        text = (m.group("text") or "").strip().lower()
        if re.search(r"\b(?:and|or)\b", text):
            return None  # "(C) and (D)"
        named = [k for k, v in options.items() if text and (v == text or v.startswith(text) or text.startswith(v))]
        if named and chosen not in named:
            return _done(Verdict.INCORRECT, f"multiple choice: ({chosen}) with the text of option {'/'.join(named)}", pn.spaced, rn.spaced)
        same = chosen == letter
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, "multiple choice: the letter (its option's text after it)", pn.spaced, rn.spaced)
    if options and re.fullmatch(r"[A-Za-z][A-Za-z' \-]*", pn.spaced):
        named = [k for k, v in options.items() if v == pn.spaced.lower()]
        if len(named) == 1:
            return _done(Verdict.CORRECT if named[0] == letter else Verdict.INCORRECT, "multiple choice: the text of one option", pn.spaced, rn.spaced)
    return None


def _as_tuples(pn: _Norm, rn: _Norm) -> tuple[_Norm, _Norm, str] | None:
    """A named point ("P = (8, -2)") is its tuple; a vector written as a matrix is a tuple when
    the other side is one."""
    p_point, r_point = forms.named_point(pn.spaced), forms.named_point(rn.spaced)
    if p_point is not None or r_point is not None:
        p2 = _normalise(p_point) if p_point is not None else pn
        r2 = _normalise(r_point) if r_point is not None else rn
        if forms.container(p2.spaced) == "paren" or forms.container(r2.spaced) == "paren" or forms.vector_items(p2.spaced) or forms.vector_items(r2.spaced):
            return p2, r2, "a named point is its coordinates"
    pv, rv = forms.vector_items(pn.spaced), forms.vector_items(rn.spaced)
    if pv is not None and rv is None and forms.container(rn.spaced) == "paren":
        return _normalise("(" + ", ".join(pv) + ")"), rn, "a vector is the tuple of its components"
    if rv is not None and pv is None and forms.container(pn.spaced) == "paren":
        return pn, _normalise("(" + ", ".join(rv) + ")"), "a vector is the tuple of its components"
    return None


# ---------------------------------------------------------------------------------------------
# Single answers
# ---------------------------------------------------------------------------------------------

_CONSTANTS = frozenset({"e", "i"})
_FAST_RULES = {
    _Fast.CORRECT: Verdict.CORRECT,
    _Fast.INCORRECT: Verdict.INCORRECT,
}


_FRACTION = re.compile(r"(-?)\\frac\{(\d+)\}\{(\d+)\}|(-?)(\d+)/(\d+)")


def _unreduced(text: str) -> bool:
    m = _FRACTION.fullmatch(text)
    if m is None:
        return False
    a, b = (int(m.group(2)), int(m.group(3))) if m.group(2) else (int(m.group(5)), int(m.group(6)))
    return b != 0 and math.gcd(a, b) > 1


def _atoms(pn: _Norm, rn: _Norm, question: Question | None = None) -> Decision:
    exact = question is not None and question.exact
    if question is not None and question.reduced and _unreduced(pn.text) and not _unreduced(rn.text):
        return _done(Verdict.INCORRECT, "a fraction not in lowest terms where the question asks for them", pn.spaced, rn.spaced)
    fast = _fast_compare(pn, rn, exact)
    if fast in _FAST_RULES:
        return _done(_FAST_RULES[fast], "fast path: " + _fast_rule_name(pn, rn, fast), pn.spaced, rn.spaced)
    if not pn.text:
        return _done(Verdict.UNPARSEABLE, "empty answer", pn.spaced, rn.spaced)
    if exact and "." in pn.text and _parse_number(pn.text) is not None and _parse_number(rn.text) is None:
        # a decimal for an exact value the question asks for (in terms of pi, in radical form)
        return _done(Verdict.INCORRECT, "a decimal where the question asks for an exact form", pn.spaced, rn.spaced)
    if "=" not in pn.spaced + rn.spaced and "\\begin" not in pn.spaced + rn.spaced:
        p_vars, r_vars = forms.letters(pn.spaced) - _CONSTANTS, forms.letters(rn.spaced) - _CONSTANTS
        if p_vars != r_vars:
            # "2m" is not 2 (math-verify would read m as metres), "2w" is not "2x"
            return _done(Verdict.INCORRECT, f"different variables ({', '.join(sorted(p_vars)) or 'none'} vs {', '.join(sorted(r_vars)) or 'none'})", pn.spaced, rn.spaced)
    pred_variants, ref_variants = tuple(symbolic_variants(pn, rn)), tuple(symbolic_variants(rn, pn))
    differ = _values_differ(pred_variants, ref_variants)
    if differ is not None:
        shown = ["a number too large to compute" if math.isinf(v) else f"{v:.6g}" for v in differ]
        rule = f"constant values differ ({shown[0]} vs {shown[1]})"
        return Decision(Verdict.INCORRECT, rule, None, pn.spaced, rn.spaced, stands_for=("plain", pred_variants, ref_variants))
    return Decision(None, "symbolic: math-verify equivalence", ("plain", pred_variants, ref_variants), pn.spaced, rn.spaced)


def _values_differ(pred_variants: tuple[str, ...], ref_variants: tuple[str, ...]) -> tuple[float, float] | None:
    """The values of the first pair when every reading of the prediction is a constant whose value clearly
    differs from every reading of the reference (numeric.py): the symbolic layer could only say incorrect."""
    first = None
    for p in pred_variants:
        for r in ref_variants:
            differ = numeric.clearly_different(p, r)
            if differ is None:
                return None
            first = first or differ
    return first


def _unmatched_by_value(p_variants, r_variants, p_open, r_open) -> tuple[str, int] | None:
    """("prediction" or "reference", index) of an open element whose value clearly differs from every element of
    the other side (numeric.py), when every predicted element is a constant numeric reads: math-verify parses them
    all then, so its matching could only say incorrect (a power tower among "3, 110, 400" was a timeout there)."""
    if not all(any(numeric.readable(v) for v in item) for item in p_variants):
        return None
    for side, items, others, open_ in (("prediction", p_variants, r_variants, p_open), ("reference", r_variants, p_variants, r_open)):
        for i in sorted(open_):
            if all(_values_differ(items[i], other) is not None for other in others):
                return side, i
    return None


def _fast_rule_name(pn: _Norm, rn: _Norm, fast: _Fast) -> str:
    if _parse_number(pn.text) is not None and _parse_number(rn.text) is not None:
        return "numbers" + (" (percent)" if pn.percent != rn.percent else "")
    if pn.text.isalpha() and rn.text.isalpha():
        return "words"
    if _equation_rhs(pn.text) is not None or _equation_rhs(rn.text) is not None:
        return "value of an equation"
    return "normal forms"


def symbolic_variants(n: _Norm, other: _Norm) -> list[str]:
    """The strings the symbolic layer parses for one side: the answer; the right side of a simple
    "x = value" when the other side is no such equation; with a percent sign the other side lacks,
    both value and value/100."""
    out = [n.spaced]
    rhs = _equation_rhs(n.spaced)
    if rhs is not None and _equation_rhs(other.spaced) is None:
        out.append(rhs)
    if n.percent and not other.percent:
        out = out + [f"\\frac{{{v}}}{{100}}" for v in out]
    return out


def _component(p: str, r: str, depth: int) -> Decision:
    return compare(_normalise(p), _normalise(r), None, depth + 1)


def _all_of(decisions: list[Decision], rule: str, pf: str, rf: str) -> Decision:
    """Every component must match: one wrong component decides; pending ones go to the symbolic layer together."""
    for d in decisions:
        if d.verdict in (Verdict.INCORRECT, Verdict.UNPARSEABLE) and d.stands_for is None:
            return _done(Verdict.INCORRECT, f"{rule}: a component differs ({d.pred_form} vs {d.ref_form}: {d.rule})", pf, rf)
    # The symbolic layer runs the pending components in order, and the first that is not correct gives the verdict
    # (symbolic.run_task "all"); a component known wrong by value decides only when no pending one comes before it.
    symbolic = [d for d in decisions if d.verdict is None or d.stands_for is not None]
    if not symbolic:
        return _done(Verdict.CORRECT, rule, pf, rf)
    tasks = ("all", tuple(d.task if d.verdict is None else d.stands_for for d in symbolic))
    first = symbolic[0]
    if first.verdict is Verdict.INCORRECT:
        why = f"{rule}: a component differs ({first.pred_form} vs {first.ref_form}: {first.rule})"
        return Decision(Verdict.INCORRECT, why, None, pf, rf, stands_for=tasks)
    return Decision(None, rule + " (symbolic for some components)", tasks, pf, rf)


# ---------------------------------------------------------------------------------------------
# Sets of reals
# ---------------------------------------------------------------------------------------------


def _real_sets(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision | None:
    evidence = forms.looks_like_real_set(pn.spaced) or forms.looks_like_real_set(rn.spaced) or (question is not None and "interval" in question.text.lower())
    if not evidence:
        return None
    ps = forms.real_set(pn.spaced, tuples_are_intervals=True)
    rs = forms.real_set(rn.spaced, tuples_are_intervals=True)
    if ps is None or rs is None:
        return None
    pf, rf = forms.intervals_latex(ps), forms.intervals_latex(rs)
    pnum, rnum = forms.numeric_intervals(ps), forms.numeric_intervals(rs)
    if pnum is not None and rnum is not None:
        same = len(pnum) == len(rnum) and all(
            _same_end(a[0], b[0]) and a[1] == b[1] and _same_end(a[2], b[2]) and a[3] == b[3] for a, b in zip(pnum, rnum)
        )
        return _done(Verdict.CORRECT if same else Verdict.INCORRECT, "sets of reals (inequalities/intervals), exact end points", pf, rf)
    if len(ps) == len(rs) == 1:
        (p,), (r,) = ps, rs
        if p.lo_closed != r.lo_closed or p.hi_closed != r.hi_closed:
            return _done(Verdict.INCORRECT, "sets of reals: an end point is in one and out of the other", pf, rf)
        ends = [_component(p.lo, r.lo, depth), _component(p.hi, r.hi, depth)]
        return _all_of(ends, "sets of reals (inequalities/intervals), end points", pf, rf)
    return Decision(None, "sets of reals: unions compared by math-verify", ("plain", (pf,), (rf,)), pf, rf)


def _same_end(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a == b
    return _numbers_equal(a, b, str(a), str(b))


# ---------------------------------------------------------------------------------------------
# Families of solutions
# ---------------------------------------------------------------------------------------------


def _families(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision | None:
    pk = forms.family_param(pn.spaced, pn.int_params, pn.degrees)
    rk = forms.family_param(rn.spaced, rn.int_params, rn.degrees)
    if pk is None or rk is None:
        return None
    pi, ri = forms.family_items(pn.spaced, pk), forms.family_items(rn.spaced, rk)
    if len(pi) > MAX_COMPONENTS or len(ri) > MAX_COMPONENTS:
        return None
    pf, rf = f"{{{', '.join(pi)} : k integer}}", f"{{{', '.join(ri)} : k integer}}"
    return Decision(None, "families of solutions: residues modulo the common period (symbolic)", ("periodic", tuple(pi), "k", tuple(ri), "k"), pf, rf)


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


def _functions(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision | None:
    pfun, rfun = forms.function(pn.spaced), forms.function(rn.spaced)
    if pfun is None and rfun is None:
        return None
    if pfun is not None and rfun is not None:
        p_expr, r_expr, target = pfun.expr, rfun.expr, rfun.var
        p_expr = forms.rename(p_expr, pfun.var, target) if pfun.var != target else p_expr
    elif pfun is not None:
        if "=" in rn.spaced:
            return None
        r_expr = rn.spaced
        found = forms.letters(r_expr)
        target = next(iter(found)) if len(found) == 1 else pfun.var
        p_expr = forms.rename(pfun.expr, pfun.var, target) if pfun.var != target else pfun.expr
    else:
        if "=" in pn.spaced:
            return None
        p_expr = pn.spaced
        found = forms.letters(p_expr)
        source = next(iter(found)) if len(found) == 1 else rfun.var
        p_expr = forms.rename(p_expr, source, rfun.var) if source != rfun.var else p_expr
        r_expr, target = rfun.expr, rfun.var
    d = _component(p_expr, r_expr, depth)
    rule = f"functions of {target} (variable renamed), then {d.rule}"
    return Decision(d.verdict, rule, d.task, p_expr, r_expr, stands_for=d.stands_for)


# ---------------------------------------------------------------------------------------------
# Named components and lists
# ---------------------------------------------------------------------------------------------


def _letter_key(name: str) -> tuple:
    """The conventional order of variable names: Latin letters alphabetically (x, y, z; a, b, c;
    a_1, a_2), then Greek ones (r before \\theta)."""
    return (name.startswith("\\"), name.lower(), name)


def _ordered_values(nm: forms.Named, question: Question | None) -> tuple[list[str], str]:
    """The values of named components in the order the question states them (a tuple of the names,
    "Enter (a, b)"; words in the order it names them), else in the conventional order of letters,
    else as written."""
    names = list(nm.names)
    order = question.name_order(names) if question is not None else None
    if order is not None:
        return [nm.values[i] for i in order], "in the question's order of the names"
    canon = [forms.canonical_name(n) for n in names]
    if all(len(c) == 1 or c.startswith("\\") or "_" in c for c in canon):
        order = sorted(range(len(names)), key=lambda i: _letter_key(canon[i]))
        return [nm.values[i] for i in order], "in the conventional order of the names"
    return list(nm.values), "in the order written"


def _named(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision | None:
    pnm, rnm = forms.named(pn.spaced), forms.named(rn.spaced)
    if pnm is None and rnm is None:
        return None
    if pnm is not None and rnm is not None:
        pc = [forms.canonical_name(n) for n in pnm.names]
        rc = [forms.canonical_name(n) for n in rnm.names]
        if len(set(pc)) == len(pc) and sorted(pc) == sorted(rc):
            by_name = dict(zip(rc, rnm.values))
            ds = [_component(v, by_name[n], depth) for n, v in zip(pc, pnm.values)]
            return _all_of(ds, "named components, by name", _show_named(pnm), _show_named(rnm))
        return None
    nm, other, pred_named = (pnm, rn, True) if pnm is not None else (rnm, pn, False)
    items = forms.split_top(forms.inner(other.spaced))
    if len(items) != len(nm.values) or len(items) < 2:
        return None
    canon = [forms.canonical_name(n) for n in nm.names]
    if len(set(canon)) == 1:  # "x = 5 or x = -2": a set of solutions
        values, how = list(nm.values), "one name: a set of solutions"
        p_items, r_items = (values, items) if pred_named else (items, values)
        return _as_set(p_items, r_items, f"named components ({how})", depth)
    if len(set(canon)) != len(canon):
        return None
    values, how = _ordered_values(nm, question)
    p_items, r_items = (values, items) if pred_named else (items, values)
    ds = [_component(p, r, depth) for p, r in zip(p_items, r_items)]
    return _all_of(ds, f"named components, {how}", "(" + ", ".join(p_items) + ")", "(" + ", ".join(r_items) + ")")


def _show_named(nm: forms.Named) -> str:
    return ", ".join(f"{n} = {v}" for n, v in zip(nm.names, nm.values))


def _lists(pn: _Norm, rn: _Norm, question: Question | None, depth: int) -> Decision | None:
    rkind, pkind = forms.container(rn.spaced), forms.container(pn.spaced)
    r_items = forms.split_top(forms.inner(rn.spaced))
    p_items = forms.split_top(forms.inner(pn.spaced))
    if max(len(r_items), len(p_items)) > MAX_COMPONENTS:
        return None
    if len(r_items) < 2 and len(p_items) < 2:
        return None
    tuples = all(forms.container(r) == "paren" for r in r_items)
    ordered = rkind == "paren" or (rkind == "bare" and not tuples and question is not None and question.ordered is True)
    if rkind == "brace" or (rkind == "bare" and pkind == "brace" and not ordered):
        ordered = False
    if ordered:
        if len(p_items) != len(r_items):
            return _done(Verdict.INCORRECT, f"ordered tuple: {len(p_items)} components vs {len(r_items)}", _tuple(p_items), _tuple(r_items))
        why = "the reference is a tuple" if rkind == "paren" else "the question asks for an ordered list"
        ds = [_component(p, r, depth) for p, r in zip(p_items, r_items)]
        return _all_of(ds, f"ordered tuple ({why}), component by component", _tuple(p_items), _tuple(r_items))
    return _as_set(p_items, r_items, "set of solutions (order free)", depth)


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ")"


def _expand(items: list[str]) -> list[str]:
    out = []
    for it in items:
        expanded = forms.expand_pm(it)
        out.extend(expanded if expanded else [it])
    return out


def _as_set(p_items: list[str], r_items: list[str], rule: str, depth: int) -> Decision:
    """Sets compare as sets: each element of one side equals an element of the other ("\\boxed{a} or
    \\boxed{b}" with a = b is the one answer a)."""
    p_items, r_items = _expand(p_items), _expand(r_items)
    pf, rf = "{" + ", ".join(p_items) + "}", "{" + ", ".join(r_items) + "}"
    pns = [_normalise(p) for p in p_items]
    rns = [_normalise(r) for r in r_items]
    pv = [_parse_number(n.text) for n in pns]
    rv = [_parse_number(n.text) for n in rns]
    if all(v is not None for v in pv + rv):
        for a, an, b, bn, side in ((pv, pns, rv, rns, p_items), (rv, rns, pv, pns, r_items)):
            for i, v in enumerate(a):
                if not any(_numbers_equal(v, w, an[i].text, bn[j].text) for j, w in enumerate(b)):
                    return _done(Verdict.INCORRECT, f"{rule}: numbers, {side[i]} has no match", pf, rf)
        return _done(Verdict.CORRECT, f"{rule}: numbers", pf, rf)
    # What the fast path decides pairs off; the rest is matched in the symbolic layer.
    p_open = set(range(len(pns)))
    r_open = set(range(len(rns)))
    for i in range(len(pns)):
        for j in range(len(rns)):
            if (i in p_open or j in r_open) and pns[i].text == rns[j].text:
                p_open.discard(i)
                r_open.discard(j)
    for i in sorted(p_open):
        for j in range(len(rns)):
            if compare(pns[i], rns[j], None, depth + 1).verdict is Verdict.CORRECT:
                p_open.discard(i)
                r_open.discard(j)
                break
    for j in sorted(r_open):
        for i in range(len(pns)):
            if compare(pns[i], rns[j], None, depth + 1).verdict is Verdict.CORRECT:
                r_open.discard(j)
                break
    if not p_open and not r_open:
        return _done(Verdict.CORRECT, f"{rule}: every element matched", pf, rf)
    p_variants = tuple(tuple(symbolic_variants(n, n)) for n in pns)
    r_variants = tuple(tuple(symbolic_variants(n, n)) for n in rns)
    unmatched = _unmatched_by_value(p_variants, r_variants, p_open, r_open)
    if unmatched is not None:
        side, i = unmatched
        item = p_items[i] if side == "prediction" else r_items[i]
        why = f"{rule}: {item} of the {side} differs in value from every element of the other side"
        return Decision(Verdict.INCORRECT, why, None, pf, rf, stands_for=("match", p_variants, r_variants))
    task = ("match", p_variants, r_variants)
    return Decision(None, f"{rule}: elements matched by math-verify", task, pf, rf)
