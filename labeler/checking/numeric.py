"""The value of a constant LaTeX expression, in-process and bounded: a cheap test before the symbolic layer.

Most answers that reach the symbolic layer are wrong ones (a rollout's "\\frac{5\\sqrt{2}}{3}" for a
reference "\\frac{7}{3}"), and sympy takes tens to hundreds of milliseconds to fail to prove two numbers
equal. Two constant expressions whose values differ by far more than any rounding are not equal in any
reading: `clearly_different` says so in microseconds, and the comparison answers `incorrect` without the
worker pool. Equal values still go to the symbolic layer, which decides what counts as the same answer.

The grammar is a strict subset of what math-verify's LaTeX grammar reads the same way: decimal numbers
(no digit groups), + - * / \\cdot \\times \\div, ^ with a braced or one-character exponent, \\frac{a}{b},
\\sqrt{a} and \\sqrt[n]{a}, \\pi, parentheses and braces, and a product written by juxtaposition where it
cannot be read otherwise ("2\\sqrt{3}", "3\\pi", but never "2 3", nor "2(3)" or "3\\frac{1}{2}", which math-verify
reads as mixed numbers). Anything else (a letter, a function, a percent or degree sign, a comma) is not
read: `value` is None and the symbolic layer decides, as before. Values are floats; an overflow, a
division by zero, a root of a negative number, or a power too large to compute is not read either.
"""

from __future__ import annotations

import math
import re

# Two values are clearly different when they differ by more than this share of the larger (and than this
# amount): far above float error here and above math-verify's own rounding (6 decimal places).
RELATIVE_MARGIN = 1e-6
_MAX_MAGNITUDE = 1e250  # beyond it a float product or power could overflow before we notice
_MAX_TOKENS = 400

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.\d+|\d+|\.\d+)|(?P<cmd>\\[A-Za-z]+)|(?P<op>[-+*/^(){}\[\]]))", re.ASCII)  # no other digits
_COMMANDS = {"\\frac", "\\sqrt", "\\pi", "\\cdot", "\\times", "\\div"}


class _Unreadable(Exception):
    pass


def value(text: str) -> float | None:
    """The value of `text` when it is a constant expression of the grammar above, else None."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    try:
        parser = _Parser(tokens)
        v = parser.expression()
        if parser.i != len(tokens):
            return None
    except (_Unreadable, OverflowError, ZeroDivisionError, ValueError, RecursionError):
        return None
    return v if math.isfinite(v) and abs(v) < _MAX_MAGNITUDE else None


def readable(text: str) -> bool:
    """Whether `text` is a constant expression of the grammar above, or a number too large to compute."""
    return value(text) is not None or _huge(text) is not None


def clearly_different(a: str, b: str) -> tuple[float, float] | None:
    """(value of a, value of b) when both are constant expressions whose values clearly differ, else None.
    A power tower or factorial too large to compute ("10^{10^{10}}", "99999!") has the value +-inf here: it
    differs from every value that can be read."""
    va = value(a)
    vb = value(b)
    if va is None and vb is not None:
        va = _huge(a)
    elif vb is None and va is not None:
        vb = _huge(b)
    if va is None or vb is None:
        return None
    if math.isinf(va) or math.isinf(vb):
        return va, vb
    scale = max(1.0, abs(va), abs(vb))
    return (va, vb) if abs(va - vb) > RELATIVE_MARGIN * scale else None


_FACTORIAL = re.compile(r"\s*(-?)\s*(\d+)\s*!\s*", re.ASCII)


def _huge(text: str) -> float | None:
    """+-inf when `text` is certainly larger in size than any value `value` reads: a factorial of 171 or
    more, or a power a^{e} (a >= 2, nothing else around it) whose exponent is readable and too large, or
    is itself such a power; else None."""
    m = _FACTORIAL.fullmatch(text)
    if m is not None:
        digits = m.group(2).lstrip("0")
        # compared by length first: int() of thousands of digits raises (Python's digit limit)
        return (-math.inf if m.group(1) else math.inf) if len(digits) > 3 or int(digits or "0") > 170 else None
    tokens = _tokens(text)
    if tokens is None:
        return None
    sign = 1.0
    if tokens[0][1] == "-":
        sign, tokens = -1.0, tokens[1:]
    if len(tokens) < 3 or tokens[0][0] != "num" or tokens[1][1] != "^" or float(tokens[0][1]) < 2:
        return None
    base = float(tokens[0][1])
    exponent = tokens[2:]
    if exponent[0][1] == "{" and exponent[-1][1] == "}" and _balanced(exponent[1:-1]):
        exponent = exponent[1:-1]
    elif len(exponent) != 1:
        return None
    inner = " ".join(token for _, token in exponent)
    e = value(inner)
    if e is None:
        return sign * math.inf if _huge(inner) == math.inf else None
    return sign * math.inf if e * math.log10(base) > 300 else None


def _balanced(tokens: list[tuple[str, str]]) -> bool:
    depth = 0
    for _, token in tokens:
        depth += {"{": 1, "}": -1}.get(token, 0)
        if depth < 0:
            return False
    return depth == 0


def _tokens(text: str) -> list[tuple[str, str]] | None:
    out, i, text = [], 0, text.strip()
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            return None
        kind = m.lastgroup
        token = m.group(kind)
        if kind == "cmd" and token not in _COMMANDS:
            return None
        if kind == "num" and out and out[-1][0] == "num":
            return None  # "2 3": one number or a product, by reading
        out.append((kind, token))
        if len(out) > _MAX_TOKENS:
            return None
        i = m.end()
    return out or None


class _Parser:
    """Recursive descent: expression = term (('+'|'-') term)*; term = product (('*'|'/') product)*;
    product = factor (juxtaposed power)*; factor = ('-'|'+') factor | power; power = atom ('^' exponent)?"""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, token: str) -> None:
        if self.peek() is None or self.peek()[1] != token:
            raise _Unreadable()
        self.i += 1

    def expression(self) -> float:
        v = self.term()
        while (t := self.peek()) is not None and t[1] in ("+", "-"):
            self.i += 1
            right = self.term()
            v = v + right if t[1] == "+" else v - right
            _bounded(v)
        return v

    def term(self) -> float:
        v = self.product()
        while (t := self.peek()) is not None and t[1] in ("*", "/", "\\cdot", "\\times", "\\div"):
            self.i += 1
            right = self.product()
            v = _bounded(v / right if t[1] in ("/", "\\div") else v * right)
        return v

    def product(self) -> float:
        """Factors written side by side: they bind tighter than an operator ("1/2\\pi" is 1/(2 pi), as math-verify reads it)."""
        v = self.factor()
        while (t := self.peek()) is not None and self._juxtaposed(t):
            v = _bounded(v * self.power())
        return v

    def _juxtaposed(self, t: tuple[str, str]) -> bool:
        """A factor that follows another without an operator, read as a product: a root, pi or a bracket
        (never a number after a number, a bracket or a fraction after anything)."""
        # math-verify reads "2(3)", "(2)\\frac{1}{3}" and "\\frac{0}{1}\\frac{1}{1}" as mixed numbers (5, 7/3, 1)
        return t[1] in ("\\sqrt", "\\pi")

    def factor(self) -> float:
        t = self.peek()
        if t is not None and t[1] in ("-", "+"):
            self.i += 1
            v = self.factor()
            return -v if t[1] == "-" else v
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if (t := self.peek()) is not None and t[1] == "^":
            self.i += 1
            exponent = self._exponent()
            if base < 0 and exponent != int(exponent):
                raise _Unreadable()  # a complex value
            if base != 0 and abs(exponent) * math.log10(abs(base)) > 250:
                raise _Unreadable()
            return _bounded(base**exponent)
        return base

    def _exponent(self) -> float:
        t = self.peek()
        if t is None:
            raise _Unreadable()
        if t[1] == "{":
            return self._group()
        if t[0] == "num" and len(t[1]) == 1:  # "2^3"; "2^10" is read as 2^1 then 0 by LaTeX
            self.i += 1
            return float(t[1])
        if t[1] == "\\pi":
            self.i += 1
            return math.pi
        raise _Unreadable()

    def _group(self) -> float:
        self.take("{")
        v = self.expression()
        self.take("}")
        return v

    def atom(self) -> float:
        t = self.peek()
        if t is None:
            raise _Unreadable()
        kind, token = t
        if kind == "num":
            self.i += 1
            if (nxt := self.peek()) is not None and nxt[1] in ("{", "["):
                raise _Unreadable()
            return _bounded(float(token))
        if token == "(":
            self.i += 1
            v = self.expression()
            self.take(")")
            return v
        if token == "{":
            return self._group()
        if token == "\\pi":
            self.i += 1
            return math.pi
        if token == "\\frac":
            self.i += 1
            numerator = self._group()
            denominator = self._group()
            return _bounded(numerator / denominator)
        if token == "\\sqrt":
            self.i += 1
            degree = 2.0
            if (nxt := self.peek()) is not None and nxt[1] == "[":
                self.i += 1
                degree = self.expression()
                self.take("]")
                if degree != int(degree) or degree < 2:
                    raise _Unreadable()
            radicand = self._group()
            if radicand < 0:
                raise _Unreadable()  # complex, or an odd root whose reading varies
            return _bounded(radicand ** (1.0 / degree))
        raise _Unreadable()


def _bounded(v: float) -> float:
    if not math.isfinite(v) or abs(v) > _MAX_MAGNITUDE:
        raise _Unreadable()
    return v
