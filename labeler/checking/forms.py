"""The shape of a normalised answer: a list of components (a tuple, a set, a bare list), named
components ("a = 3, b = 5", "Alice: 4"), a function definition ("g(t) = 2t"), a set of reals as
inequalities or intervals, a family of solutions with an integer parameter ("\\frac{\\pi}{4} + k\\pi").

Pure string functions, in linear time, no sympy: the comparison (comparison.py) decides what to
compare from these shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from labeler.checking.normalisation import _parse_number

_OPEN, _CLOSE = "([{", ")]}"


def split_top(s: str, words: bool = True) -> list[str]:
    """Components separated by top-level commas or semicolons (and, with `words`, the words "and"/"or"):
    "(1,2), (3,4)" -> ["(1,2)", "(3,4)"]. Brackets of any kind nest ("[2, 3)" is one component)."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            if c in ",;":
                parts.append(s[start:i])
                start = i + 1
            elif words and c == " " and (s.startswith(" and ", i) or s.startswith(" or ", i)):
                parts.append(s[start:i])
                i += 4 if s.startswith(" or ", i) else 5
                start = i
                continue
        i += 1
    parts.append(s[start:])
    parts = [p.strip() for p in parts]
    # "1, and 2" / "x = 1, or x = 2": a separator word after a comma leaves an empty part
    return [p for p in parts if p] if len(parts) > 1 else parts


def container(s: str) -> str:
    """How a whole answer is bracketed: "paren" (a), "bracket" [a], "brace" \\{a\\}, or "bare"."""
    t = s.strip()
    if t.startswith("\\{") and t.endswith("\\}") and _encloses(t, 1, len(t) - 1):
        return "brace"
    if len(t) >= 2 and t[0] in "([" and t[-1] in ")]" and _encloses(t, 0, len(t) - 1):
        return "paren" if t[0] == "(" and t[-1] == ")" else "bracket"
    return "bare"


def _encloses(t: str, open_idx: int, close_idx: int) -> bool:
    """The bracket at open_idx closes at close_idx (not earlier: "(1,2),(3,4)" is not enclosed)."""
    depth = 0
    for i in range(open_idx, close_idx + 1):
        c = t[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0 and i < close_idx:
                return False
    return depth == 0


def inner(s: str) -> str:
    t = s.strip()
    kind = container(t)
    if kind == "brace":
        return t[2:-2].strip()
    if kind in ("paren", "bracket"):
        return t[1:-1].strip()
    return t


def expand_pm(s: str) -> list[str] | None:
    """"1 \\pm \\sqrt{19}" -> ["1 + \\sqrt{19}", "1 - \\sqrt{19}"] (one \\pm or \\mp); None without one."""
    for sym, (first, second) in (("\\pm", ("+", "-")), ("\\mp", ("-", "+"))):
        if s.count(sym) == 1 and "\\pm" not in s.replace(sym, "", 1) and "\\mp" not in s.replace(sym, "", 1):
            return [s.replace(sym, first), s.replace(sym, second)]
    return None


# ---------------------------------------------------------------------------------------------
# Named components
# ---------------------------------------------------------------------------------------------

_NAME = r"(?:the\s+)?(\\?[A-Za-z][A-Za-z]*(?:_\{?[A-Za-z0-9]+\}?)?'?)"
_NAMED_ITEM = re.compile(r"^\s*" + _NAME + r"\s*(?:=|:|\\colon|\bis\b|\bhas\b|\bgets\b|\bequals\b)\s*(?!=)(.+?)\s*$")
_NOT_NAMES = frozenset({"\\sin", "\\cos", "\\tan", "\\log", "\\ln", "\\exp", "\\sqrt", "\\frac", "\\text", "so", "then", "thus", "hence", "answer", "and", "or"})
_SYNONYMS = {
    "minimum": "min", "smallest": "min", "least": "min", "lowest": "min", "\\min": "min", "min": "min",
    "maximum": "max", "largest": "max", "greatest": "max", "highest": "max", "\\max": "max", "max": "max",
}


def canonical_name(name: str) -> str:
    n = name.strip().rstrip("'")
    low = n.lower()
    if low in _SYNONYMS:
        return _SYNONYMS[low]
    return n if len(n) == 1 or n.startswith("\\") or "_" in n else low


@dataclass(frozen=True)
class Named:
    names: tuple[str, ...]  # as written (canonical via canonical_name)
    values: tuple[str, ...]


def named(s: str) -> Named | None:
    """"a = 3, b = 5" / "Alice: 4, Bob: 9" / "(a, b) = (3, 5)" / "x = 5 or x = -2"; None unless
    every component (at least two) is one name with one value."""
    t = s.strip()
    m = re.match(r"^\(\s*([A-Za-z](?:\s*,\s*[A-Za-z])+)\s*\)\s*=\s*(\(.*\))\s*$", t)
    if m:
        names = [x.strip() for x in m.group(1).split(",")]
        values = split_top(inner(m.group(2)), words=False)
        if len(names) == len(values):
            return Named(tuple(names), tuple(values))
        return None
    parts = split_top(t)
    if len(parts) < 2:
        return None
    names, values = [], []
    for p in parts:
        m = _NAMED_ITEM.match(p)
        if m is None or m.group(1) in _NOT_NAMES or "=" in m.group(2) or _parse_number(m.group(1)) is not None:
            return None
        names.append(m.group(1))
        values.append(m.group(2).strip())
    return Named(tuple(names), tuple(values))


# ---------------------------------------------------------------------------------------------
# Function definitions
# ---------------------------------------------------------------------------------------------

_FUNCTION = re.compile(r"^\s*([A-Za-z](?:_\{?\w+\}?)?)\s*\(\s*([A-Za-z])\s*\)\s*=\s*(.+?)\s*$")


@dataclass(frozen=True)
class Function:
    name: str
    var: str
    expr: str


def function(s: str) -> Function | None:
    m = _FUNCTION.match(s)
    if m is None or "=" in m.group(3):
        return None
    return Function(m.group(1), m.group(2), m.group(3))


_LETTER = r"(?<![A-Za-z\\]){}(?![A-Za-z])"


def letters(expr: str) -> set[str]:
    """The one-letter variables of an expression (not letters of LaTeX commands or words)."""
    plain = re.sub(r"\\[A-Za-z]+", " ", expr)
    return {m.group(0) for m in re.finditer(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])", plain)}


def rename(expr: str, old: str, new: str) -> str:
    """expr with the variable `old` called `new`; a `new` already there becomes a fresh letter, so
    that "2x" in the variable t never turns into "2x" in x."""
    used = letters(expr) | {old, new}
    # no e, i (constants) nor letters math-verify reads as units (m, s, g, h, l, t)
    fresh = next(c for c in "wvuqrzyxabcdjnp" if c not in used)
    out = re.sub(_LETTER.format(re.escape(new)), fresh, expr) if new in letters(expr) else expr
    return re.sub(_LETTER.format(re.escape(old)), new, out)


# ---------------------------------------------------------------------------------------------
# Sets of reals: inequalities and intervals
# ---------------------------------------------------------------------------------------------

INF, NEG_INF = "\\infty", "-\\infty"


@dataclass(frozen=True)
class Interval:
    lo: str
    lo_closed: bool
    hi: str
    hi_closed: bool

    def latex(self) -> str:
        return ("[" if self.lo_closed else "(") + f"{self.lo}, {self.hi}" + ("]" if self.hi_closed else ")")


_OPERATOR = re.compile(r"((?:\\leqslant|\\geqslant|\\leq|\\geq|\\le|\\ge|\\neq|\\ne)(?![A-Za-z])|<=|>=|<|>|≤|≥|≠)")
_OPS = {"\\leqslant": "<=", "\\leq": "<=", "\\le": "<=", "<=": "<=", "≤": "<=", "<": "<",
        "\\geqslant": ">=", "\\geq": ">=", "\\ge": ">=", ">=": ">=", "≥": ">=", ">": ">",
        "\\neq": "!=", "\\ne": "!=", "≠": "!="}
_VARIABLE = re.compile(r"^(?:[A-Za-z]|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega|sigma|tau|rho)|[A-Za-z]_\{?\w+\}?)$")
_ABSOLUTE = re.compile(r"^\|\s*(?:[A-Za-z]|\\[a-z]+)\s*\|$")
_SET_BUILDER = re.compile(r"^([A-Za-z])\s*(?:\\in\s*\\mathbb\{R\}\s*)?(?:\\mid|\||:|\\colon)\s*(.+)$")
_ALL_REALS = re.compile(r"^(?:\\mathbb\{R\}|\\R|\(-\\infty,\s*\\infty\)|(?:all|any)\s+reals?(?:\s+numbers?)?(?:\s+[a-z])?|all\s+real\s+values(?:\s+of\s+[a-z])?|[a-z]\s*\\in\s*\\mathbb\{R\})$", re.IGNORECASE)


def _inequality(s: str) -> list[Interval] | None:
    """One inequality in one variable: "n \\geq 2", "-1 < x \\le 4", "6 > x > 1", "x \\neq 0"."""
    pieces = _OPERATOR.split(s)
    if len(pieces) not in (3, 5):
        return None
    exprs = [p.strip() for p in pieces[0::2]]
    ops = [_OPS[o] for o in pieces[1::2]]
    if not all(exprs):
        return None
    var_at = [i for i, e in enumerate(exprs) if _VARIABLE.match(e)]
    if len(exprs) == 2 and not var_at:
        absolute = [i for i, e in enumerate(exprs) if _ABSOLUTE.match(e)]
        if absolute in ([0], [1]):
            op = ops[0] if absolute == [0] else {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(ops[0], "!=")
            a = exprs[1 - absolute[0]]
            if op == "!=" or _parse_number(a.replace(" ", "")) is None or _parse_number(a.replace(" ", "")) < 0:
                return None
            neg = a[1:] if a.startswith("-") else "-" + a
            if op[0] == "<":  # |x| < a: (-a, a)
                return [Interval(neg, op == "<=", a, op == "<=")]
            return [Interval(NEG_INF, False, neg, op == ">="), Interval(a, op == ">=", INF, False)]
    if len(exprs) == 3:
        if var_at != [1] or "!=" in ops:
            return None
        lo_op, hi_op = ops
        lo, hi = exprs[0], exprs[2]
        if lo_op[0] == ">" and hi_op[0] == ">":
            lo, hi, lo_op, hi_op = hi, lo, hi_op.replace(">", "<"), lo_op.replace(">", "<")
        if lo_op[0] != "<" or hi_op[0] != "<":
            return None
        return [Interval(lo, lo_op == "<=", hi, hi_op == "<=")]
    if var_at == [0]:
        op, value = ops[0], exprs[1]
    elif var_at == [1]:
        op, value = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}[ops[0]], exprs[0]
    else:
        return None
    if op == "!=":
        return [Interval(NEG_INF, False, value, False), Interval(value, False, INF, False)]
    if op[0] == "<":
        return [Interval(NEG_INF, False, value, op == "<=")]
    return [Interval(value, op == ">=", INF, False)]


def _interval_notation(s: str) -> list[Interval] | None:
    out = []
    for piece in re.split(r"\\cup|\s+U\s+|∪", s):
        p = piece.strip()
        if container(p) not in ("paren", "bracket"):
            return None
        ends = split_top(p[1:-1], words=False)
        if len(ends) != 2 or not all(ends):
            return None
        lo, hi = ends
        lo = NEG_INF if lo.replace(" ", "") in ("-\\infty", "-\\inf") else lo
        hi = INF if hi.replace(" ", "") in ("\\infty", "+\\infty", "\\inf") else hi
        out.append(Interval(lo, p[0] == "[" and lo != NEG_INF, hi, p[-1] == "]" and hi != INF))
    return out


def real_set(s: str, *, tuples_are_intervals: bool) -> list[Interval] | None:
    """A set of reals written as inequalities ("x < 2 or x > 3"), intervals ("(-\\infty, 2) \\cup
    (3, \\infty)", "x \\in [2, 3]") or "all real numbers"; None for anything else. A parenthesised
    pair "(a, b)" counts as an interval only when `tuples_are_intervals` (it is also an ordered pair)."""
    t = re.sub(r"^\s*[A-Za-z]\s*\\in\s*", "", s.strip())
    if container(t) == "brace":  # set-builder: \\{x \\mid 2 < x \\le 5\\}
        m = _SET_BUILDER.match(inner(t))
        if m is None:
            return None
        t = m.group(2).strip()
    if _ALL_REALS.match(t) or _ALL_REALS.match(s.strip()):
        return [Interval(NEG_INF, False, INF, False)]
    if _OPERATOR.search(t):
        pieces = split_top(t)
        out: list[Interval] = []
        for p in pieces:
            got = _inequality(p)
            if got is None:
                return None
            out.extend(got)
        if len(pieces) > 1 and re.search(r"\band\b", t):
            return None  # "x > 1 and x < 2" is an intersection: not decided here
        return out
    if "\\cup" in t or "∪" in t or "\\infty" in t or container(t) == "bracket" or t.startswith("[") or t.endswith("]"):
        return _interval_notation(t)
    if tuples_are_intervals and container(t) == "paren":
        return _interval_notation(t)
    return None


def looks_like_real_set(s: str) -> bool:
    t = s.strip()
    return bool(_OPERATOR.search(t)) or "\\infty" in t or "\\cup" in t or bool(_ALL_REALS.match(t)) or container(t) == "bracket" or t.startswith("[") or t.endswith("]") or "\\in" in t


def _end_value(e: str) -> Fraction | float | None:
    if e == INF:
        return float("inf")
    if e == NEG_INF:
        return float("-inf")
    return _parse_number(e.replace(" ", ""))


def numeric_intervals(intervals: list[Interval]) -> list[tuple] | None:
    """Sorted, merged numeric intervals, or None when an end point is not a plain number."""
    vals = []
    for iv in intervals:
        lo, hi = _end_value(iv.lo), _end_value(iv.hi)
        if lo is None or hi is None:
            return None
        if lo > hi or lo == hi and not (iv.lo_closed and iv.hi_closed):
            continue  # empty
        vals.append((lo, not iv.lo_closed, hi, iv.hi_closed))  # sort key: closed low end first
    vals.sort()
    merged: list[list] = []
    for lo, lo_open, hi, hi_closed in vals:
        if merged and (lo < merged[-1][2] or lo == merged[-1][2] and (merged[-1][3] or not lo_open)):
            if hi > merged[-1][2] or hi == merged[-1][2] and hi_closed:
                merged[-1][2], merged[-1][3] = hi, hi_closed
            continue
        merged.append([lo, lo_open, hi, hi_closed])
    return [tuple(m) for m in merged]


def intervals_latex(intervals: list[Interval]) -> str:
    return " \\cup ".join(iv.latex() for iv in intervals)


# ---------------------------------------------------------------------------------------------
# Families of solutions with an integer parameter
# ---------------------------------------------------------------------------------------------

_IMPLICIT_PARAMS = "knmjl"


def family_param(s: str, declared: frozenset[str], degrees: bool = False) -> str | None:
    """The integer parameter of a family of solutions: a letter the answer declares an integer
    ("n \\in \\mathbb{Z}", "for integers j"), or k/n/m/j/l beside \\pi or in degrees; None when
    there is none."""
    found = letters(s)
    for name in sorted(declared):
        if name in found:
            return name
    if "\\pi" in s or "π" in s or degrees:
        for name in _IMPLICIT_PARAMS:
            if name in found:
                return name
    return None


def family_items(s: str, param: str) -> list[str]:
    """The expressions of a family: components, "x =" dropped, \\pm expanded, the parameter
    called k (math-verify reads a lone m or s as a unit)."""
    out = []
    for part in split_top(inner(s) if container(s) == "brace" else s):
        m = re.match(r"^\s*[A-Za-z]\s*=\s*(.+)$", part)
        expr = m.group(1) if m else part
        expr = rename(expr, param, "k") if param != "k" else expr
        expanded = expand_pm(expr)
        out.extend(expanded if expanded else [expr])
    return out


# ---------------------------------------------------------------------------------------------
# Numerals in a base, points, vectors
# ---------------------------------------------------------------------------------------------

_BASE_NUMERAL = re.compile(r"^\(?([0-9A-Za-z]+)\)?_\{?\(?(\d{1,2})\)?\}?$")


def base_numeral(text: str) -> tuple[str, int, int] | None:
    """"52_8" / "52_{8}" / "(52)_8" -> (digits, base, value); None unless every digit is one of the
    base ("a_2" is a subscripted letter, not a numeral)."""
    m = _BASE_NUMERAL.match(text)
    if m is None:
        return None
    digits, base = m.group(1), int(m.group(2))
    if not 2 <= base <= 36 or not re.fullmatch(r"[0-9A-Z]+", digits):
        return None
    try:
        value = int(digits, base)
    except ValueError:
        return None
    return digits.lstrip("0") or "0", base, value


_POINT_NAME = re.compile(r"^(?:[A-Za-z](?:_\{?\w+\}?)?'?|\\mathbf\{[A-Za-z]\}|\\vec\{[A-Za-z]\}|\\overrightarrow\{[A-Z]+\}|\\bf\s*[a-z])\s*=\s*(?P<tuple>\(.*\))$")


_POINT_CALL = re.compile(r"^[A-Z](?:_\{?\w+\}?)?'?\s*(?P<tuple>\(\s*[-\d.\\{}a-z ]+(?:,\s*[-\d.\\{}a-z ]+)+\))$")


def named_point(s: str) -> str | None:
    """"P = (8, -2)" or "V(3, 2)" -> the tuple: a point or vector named by a letter (or a bold or
    arrow name); None for anything else ("f(3, 2)" is a function's value)."""
    m = _POINT_NAME.match(s.strip()) or _POINT_CALL.match(s.strip())
    if m is None or container(m.group("tuple")) != "paren":
        return None
    return m.group("tuple")


_VECTOR = re.compile(r"^\\begin\{([pbvB]?matrix)\}(?P<body>.*)\\end\{\1\}$", re.DOTALL)


def vector_items(s: str) -> list[str] | None:
    """The components of a column or row vector written as a matrix; None for a matrix with
    several rows and columns, or anything else."""
    m = _VECTOR.match(s.strip())
    if m is None:
        return None
    body = m.group("body")
    rows = [r.strip() for r in body.split("\\\\") if r.strip()]
    if len(rows) > 1:
        return rows if all("&" not in r for r in rows) else None
    cols = [c.strip() for c in body.split("&")]
    return cols if len(cols) > 1 and all(cols) else None
