"""Writes the two generated evaluation sets of the answer checker from ../shared/data:

- math500_restated.jsonl: each MATH-500 reference answer restated as a solver would write it (an
  equivalent form: prose, another notation, reordered terms, named components, an inequality for an
  interval) and changed subtly (a wrong number, swapped coordinates, an end point in or out);
- gsm8k_answers.jsonl: GSM8K test answers as solver answer lines with the count noun the question
  asks about, a wrong number, a multiplier word ("dozen"), or a noun that names another quantity.

Each row's label follows from its transformation, which its `reason` names; every transformation
is exact (no rounding), and wrong variants change the value (checked here where it can be). The
question is not copied: `question_ref` names the source row, and bench/checker.py reads it from
../shared/data when present.

    python bench/checker_eval/build_sets.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent.parent / "shared" / "data"

WRAPPERS = [
    ("boxed", lambda a: f"\\boxed{{{a}}}"),
    ("answer phrase", lambda a: f"The answer is ${a}$."),
    ("closing sentence", lambda a: f"Therefore, the final result is ${a}$."),
    ("Minerva line", lambda a: f"Final Answer: The final answer is ${a}$. I hope it is correct."),
    ("inline math", lambda a: f"Thus the answer is \\({a}\\)."),
    ("bold answer line", lambda a: f"**Answer:** ${a}$"),
]


def pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % n


def wrap(row_id: str, salt: str, answer: str) -> tuple[str, str]:
    name, fn = WRAPPERS[pick(row_id + salt, len(WRAPPERS))]
    return fn(answer), name


INT_WRAPPERS = [
    ("boxed", lambda a: f"\\boxed{{{a}}}"),
    ("bold in the closing sentence", lambda a: f"Putting everything together, the result is **{a}**."),
    ("plain closing sentence", lambda a: f"Therefore, the value we want is {a}."),
    ("answer phrase", lambda a: f"So the answer is {a}."),
    ("Minerva line", lambda a: f"Final Answer: The final answer is {a}. I hope it is correct."),
    ("inline math", lambda a: f"Hence the required number is \\({a}\\)."),
]


def wrap_int(row_id: str, salt: str, answer: str) -> tuple[str, str]:
    name, fn = INT_WRAPPERS[pick(row_id + salt, len(INT_WRAPPERS))]
    return fn(answer), name


# ---------------------------------------------------------------------------------------------
# MATH-500
# ---------------------------------------------------------------------------------------------

FRAC = re.compile(r"(-?)\\[dt]?frac\s*(?:\{(\d+)\}|(\d))\s*(?:\{(\d+)\}|(\d))")


def as_fraction(ans: str) -> Fraction | None:
    s = ans.replace(" ", "")
    m = FRAC.fullmatch(s)
    if m:
        num = int(m.group(2) or m.group(3))
        den = int(m.group(4) or m.group(5))
        v = Fraction(num, den)
        return -v if m.group(1) else v
    if re.fullmatch(r"-?\d*\.\d+|-?\d+", s):
        return Fraction(s)
    return None


def terminating_decimal(v: Fraction) -> str | None:
    d = v.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return None
    s = f"{float(v):.10f}".rstrip("0").rstrip(".")
    return s if Fraction(s) == v and len(s) <= 10 else None


def top_level_split(s: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, ""
    i = 0
    while i < len(s):
        c = s[i]
        if s.startswith("\\{", i) or s.startswith("\\left", i) and s[i + 5 : i + 6] in "([":
            pass
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    out.append(cur)
    return [x.strip() for x in out]


def strip_left_right(s: str) -> str:
    return re.sub(r"\\(?:left|right)\s*", "", s)


def tuple_parts(ans: str) -> list[str] | None:
    s = strip_left_right(ans).strip()
    if len(s) >= 2 and s[0] == "(" and s[-1] == ")" and "\\infty" not in s and "\\cup" not in s:
        inner = s[1:-1]
        parts = top_level_split(inner)
        if len(parts) >= 2 and all(parts):
            return parts
    return None


def asked_names(problem: str, k: int) -> list[str] | None:
    """Names of an ordered tuple the question asks for: "(p,q,r)", "$(a,b)$"."""
    for m in re.finditer(r"\$\((\s*[a-zA-Z](?:\s*,\s*[a-zA-Z])+\s*)\)\$", problem):
        names = [x.strip() for x in m.group(1).split(",")]
        if len(names) == k:
            return names
    return None


def interval_to_inequality(ans: str, var: str) -> str | None:
    """"(a,b]" -> "a < x \\le b"; "(-\\infty, a)" -> "x < a"; unions joined by "or"."""
    s = strip_left_right(ans).replace("x \\in", "").strip()
    pieces = [p.strip() for p in s.split("\\cup")]
    out = []
    for p in pieces:
        if len(p) < 5 or p[0] not in "([" or p[-1] not in ")]":
            return None
        parts = top_level_split(p[1:-1])
        if len(parts) != 2:
            return None
        lo, hi = parts
        lo_op = "<" if p[0] == "(" else "\\le"
        hi_op = "<" if p[-1] == ")" else "\\le"
        if lo == "-\\infty" and hi == "\\infty":
            return None
        if lo == "-\\infty":
            out.append(f"{var} {hi_op} {hi}")
        elif hi == "\\infty":
            ge = ">" if lo_op == "<" else "\\ge"
            out.append(f"{var} {ge} {lo}")
        else:
            out.append(f"{lo} {lo_op} {var} {hi_op} {hi}")
    return " \\text{ or } ".join(out)


def flip_one_bracket(ans: str) -> str | None:
    s = ans
    # the first finite end point that has a bracket next to it
    m = re.search(r"([(\[])\s*(?!-\\infty)([^,]+),", s)
    if m and "\\infty" not in m.group(2):
        new = "[" if m.group(1) == "(" else "("
        return s[: m.start(1)] + new + s[m.start(1) + 1 :]
    m = re.search(r",\s*(?!\\infty)([^,()\[\]]+?)\s*(\\right)?\s*([)\]])", s)
    if m:
        new = "]" if m.group(3) == ")" else ")"
        return s[: m.start(3)] + new + s[m.start(3) + 1 :]
    return None


def bump_first_number(s: str) -> str | None:
    """The first integer literal (not an exponent, subscript or \\frac token) plus one."""
    m = re.search(r"(?<![\w^_.{\\])(\d+)(?![\w.])", s)
    if not m:
        return None
    return s[: m.start()] + str(int(m.group(1)) + 1) + s[m.end() :]


def reverse_terms(expr: str) -> str | None:
    """"x^3+3x-6" -> "-6+3x+x^3": top-level terms in reverse order, signs kept."""
    s = expr.strip()
    terms, depth, cur = [], 0, ""
    for i, c in enumerate(s):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c in "+-" and depth == 0 and cur.strip() and not cur.rstrip().endswith(("^", "_", "\\pm")):
            terms.append(cur.strip())
            cur = c
        else:
            cur += c
    terms.append(cur.strip())
    if len(terms) < 2 or "=" in s or "," in s:
        return None
    terms = [t if t[0] in "+-" else "+" + t for t in terms]
    out = "".join(terms[::-1])
    return out[1:] if out.startswith("+") else out


def how_many_noun(problem: str) -> str | None:
    m = re.search(r"[Hh]ow many ((?:[a-z]+ )?[a-z]+)", problem)
    if not m:
        return None
    words = m.group(1).split()
    skip = {"possible", "different", "distinct", "positive", "real", "integer", "more", "such", "whole", "total", "of", "two"}
    words = [w for w in words if w not in skip]
    if not words or not words[0].endswith("s") or words[0] in {"is", "does", "was", "has", "this"}:
        return None
    return words[0]


def math500_rows(data: Path) -> list[dict]:
    rows = [json.loads(x) for x in (data / "math500" / "test.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    out: list[dict] = []

    def add(r, kind, pred, expected, reason):
        out.append(
            {
                "id": f"math500r-{len(out) + 1:04d}",
                "source": f"MATH-500 {r['id']}: reference answer, prediction restated",
                "kind": kind,
                "question_ref": f"math500:{r['id']}",
                "gold": r["answer"],
                "prediction": pred,
                "expected": expected,
                "reason": reason,
            }
        )

    n_int = 0
    for r in rows:
        a, rid, q = r["answer"].strip(), r["id"], r["problem"]
        # integers: prose, count nouns, a wrong neighbour
        if re.fullmatch(r"-?\d+", a):
            n_int += 1
            if n_int % 3:  # two rows in three are enough of these
                continue
            n = int(a)
            noun = how_many_noun(q)
            if noun:
                add(r, "count_noun", f"The answer is: {n} {noun}", True, f"{n} with the question's noun '{noun}'")
                add(r, "count_noun", f"The answer is: {n + 1} {noun}", False, f"{n + 1}, not {n}")
            elif re.search(r"\bdegrees\b|degree measure|measure of", q):
                add(r, "text_around", f"\\boxed{{{n}^\\circ}}", True, "the same number of degrees")
                add(r, "text_around", f"\\boxed{{{n + 1}^\\circ}}", False, f"{n + 1} degrees, not {n}")
            else:
                pred, how = wrap_int(rid, "int", str(n))
                add(r, "prose" if how != "boxed" else "general", pred, True, f"{n} stated ({how})")
                wrong = -n if n not in (0, 1) and pick(rid, 2) else n * 10 if n else 1
                pred, how = wrap_int(rid, "intw", str(wrong))
                add(r, "prose" if how != "boxed" else "general", pred, False, f"{wrong}, not {n} ({how})")
            continue
        v = as_fraction(a)
        if v is not None:
            dec = terminating_decimal(v)
            if dec is not None and "." not in a:
                pred, how = wrap(rid, "dec", dec)
                add(r, "general", pred, True, f"{a} written as the decimal {dec} ({how})")
            elif v.denominator != 1:
                pred, how = wrap(rid, "slash", f"{v.numerator}/{v.denominator}")
                add(r, "general", pred, True, f"{a} written as {v.numerator}/{v.denominator} ({how})")
            else:
                pred, how = wrap(rid, "frac", f"\\frac{{{2 * v.numerator}}}{{2}}")
                add(r, "general", pred, True, f"{a} written as an unreduced fraction ({how})")
            if v.denominator != 1 and abs(v.numerator) != v.denominator and v.numerator != 0:
                w = Fraction(v.denominator, v.numerator)
                text = str(abs(w.numerator)) if w.denominator == 1 else f"\\frac{{{abs(w.numerator)}}}{{{w.denominator}}}"
                pred, how = wrap(rid, "recip", text if w > 0 else "-" + text)
                add(r, "general", pred, False, f"the reciprocal of {a} ({how})")
            else:
                w = v + Fraction(1, 10) if "." in a else v + 1
                s = terminating_decimal(w) or f"{w.numerator}/{w.denominator}"
                pred, how = wrap(rid, "plus", s)
                add(r, "general", pred, False, f"{s} differs from {a} ({how})")
            continue
        parts = None if "interval notation" in q else tuple_parts(a)
        if parts is not None:
            names = asked_names(q, len(parts))
            plain = "(" + ", ".join(parts) + ")"
            if names:
                named = ", ".join(f"{x} = {p}" for x, p in zip(names, parts))
                add(r, "named_components", f"\\boxed{{{named}}}", True, f"the components named as the question names them ({', '.join(names)})")
            else:
                pred, how = wrap(rid, "tuple", plain)
                add(r, "order", pred, True, f"the same tuple without \\left/\\right ({how})")
            i = next((i for i in range(1, len(parts)) if parts[i].replace(" ", "") != parts[0].replace(" ", "")), None)
            if i is not None:
                swapped = list(parts)
                swapped[0], swapped[i] = swapped[i], swapped[0]
                add(r, "order", f"\\boxed{{({', '.join(swapped)})}}", False, "an ordered tuple with two components swapped")
            continue
        if "\\infty" in a or "\\cup" in a or a.startswith(("[", "\\left[", "x \\in")) or "interval notation" in q and a.startswith(("(", "\\left(")):
            var = "x"
            m = re.search(r"all \$([a-z])\$|values of \$([a-z])\$|\$([a-z])\$ (?:which|such)", q)
            if m:
                var = next(g for g in m.groups() if g)
            ineq = interval_to_inequality(a, var)
            if ineq:
                add(r, "inequality_interval", f"\\boxed{{{ineq}}}", True, f"the interval {a} as an inequality in {var}")
            flipped = flip_one_bracket(a)
            if flipped and flipped != a:
                add(r, "inequality_interval", f"\\boxed{{{flipped}}}", False, "one finite end point put in or out")
            continue
        if re.fullmatch(r"-?\d+(?:\.\d+)?\^\\circ", a):
            n = a.split("^")[0]
            add(r, "text_around", f"The angle measures {n} degrees.", True, "degrees as a word in prose")
            add(r, "text_around", f"\\boxed{{{Fraction(n) + 1}^\\circ}}", False, "one degree off")
            continue
        m = re.fullmatch(r"\\text\{\s*\(?([A-E])\)?\s*\}", a)
        if m:
            letter = m.group(1)
            other = "ABCDE"[("ABCDE".index(letter) + 1) % 5]
            add(r, "general", f"The answer is ({letter}).", True, "the same choice letter")
            add(r, "general", f"\\boxed{{\\text{{({other})}}}}", False, "another choice")
            continue
        m = re.fullmatch(r"\\text\{\s*([A-Za-z][A-Za-z ]*)\}", a)
        if m:
            word = m.group(1).strip()
            add(r, "prose", f"So the answer is {word}.", True, "the word answer in prose")
            continue
        if "\\pm" in a and a.count("\\pm") == 1 and "," not in a and "\\{" not in a:
            left, right = [x.strip() for x in a.split("\\pm")]
            add(r, "order", f"\\boxed{{{left} - {right}, {left} + {right}}}", True, "the two values of \\pm spelled out")
            add(r, "order", f"\\boxed{{{left} + {right}}}", False, "only one of the two values")
            continue
        if "," in a and "\\begin" not in a and "\\{" not in a and "(" not in a:
            items = [x.strip() for x in a.split(",")]
            if len(items) >= 2 and all(items) and not re.fullmatch(r"(?:\\\$)?\d{1,3}(?:,(?:\\!)?\d{3})+", a.replace(" ", "")):
                if re.search(r"all|roots|solutions|separated by commas", q):
                    add(r, "order", f"\\boxed{{{', '.join(items[::-1])}}}", True, "the solutions in another order (a set)")
                bad = list(items)
                bad[0] = bad[0][1:] if bad[0].startswith("-") else "-" + bad[0]
                if bad[0].lstrip("-") != "0":
                    add(r, "order", f"\\boxed{{{', '.join(bad)}}}", False, f"{bad[0]} instead of {items[0]}")
                continue
        m = re.fullmatch(r"(\d+)_\{?(\d+)\}?", a)
        if m:
            add(r, "general", f"\\boxed{{{m.group(1)}_{{{m.group(2)}}}}}", True, "the same base-b numeral, braces around the base")
            wrong = bump_first_number(m.group(1))
            add(r, "general", f"\\boxed{{{wrong}_{{{m.group(2)}}}}}", False, "another numeral in the same base")
            continue
        m = re.fullmatch(r"(\d+)\s*\\sqrt\{?(\d+)\}?", a)
        if m:
            k, nn = int(m.group(1)), int(m.group(2))
            add(r, "general", f"\\boxed{{\\sqrt{{{k * k * nn}}}}}", True, f"{a} = sqrt({k * k * nn})")
            add(r, "general", f"\\boxed{{{k}\\sqrt{{{nn + 1}}}}}", False, "another radicand")
            continue
        m = re.fullmatch(r"(-?\d*)\s*([+-])\s*(\d*)i", a.replace(" ", ""))
        if m and m.group(1) not in ("", "-"):
            re_, sign, im = m.groups()
            imag = ("-" if sign == "-" else "") + im + "i"
            real = f"- {re_[1:]}" if re_.startswith("-") else f"+ {re_}"
            add(r, "general", f"\\boxed{{{imag} {real}}}", True, "terms in another order")
            add(r, "general", f"\\boxed{{{re_} {'-' if sign == '+' else '+'} {im}i}}", False, "the conjugate")
            continue
        if "\\begin" not in a and re.search(r"[a-z]", a.replace("\\", " ")) and "=" not in a:
            rev = reverse_terms(a)
            if rev and rev.replace(" ", "") != a.replace(" ", ""):
                pred, how = wrap(rid, "rev", rev)
                add(r, "general", pred, True, f"terms of {a} in reverse order ({how})")
                wrong = bump_first_number(a)
                if wrong and wrong != a:
                    pred, how = wrap(rid, "revw", wrong)
                    add(r, "general", pred, False, f"a coefficient of {a} changed ({how})")
                continue
        m = re.fullmatch(r"y\s*=\s*(.+)", a)
        if m:
            rev = reverse_terms(m.group(1))
            if rev:
                add(r, "function", f"The equation of the line is $y = {rev}$.", True, "the same line, terms reordered")
            wrong = bump_first_number(m.group(1))
            if wrong:
                add(r, "function", f"\\boxed{{y = {wrong}}}", False, "a coefficient changed")
            continue
    return out


# ---------------------------------------------------------------------------------------------
# GSM8K
# ---------------------------------------------------------------------------------------------

MONEY = re.compile(r"\b(?:money|cost|costs|price|pay|paid|spend|spent|earn|earns|earned|profit|salary|owe|save|saved|charge|revenue|dollars)\b", re.I)
NOT_MONEY = re.compile(r"\bin cents\b|\bweigh|\bpounds\b|\bhow (?:far|long|old|many)\b|\bpercent", re.I)
AUXILIARY = {"must", "need", "needs", "does", "do", "did", "is", "are", "was", "were", "will", "would", "can", "could", "should", "has", "have", "had", "in", "on", "at", "for", "per", "if", "than", "that", "to"}


def asked_count_noun(sentence: str) -> str | None:
    """The noun phrase after "how many", up to its verb: "how many cups of feed does ..." -> "cups of feed"."""
    m = re.search(r"\b[Hh]ow many ([a-z ]+)", sentence)
    if not m:
        return None
    words = []
    for w in m.group(1).split():
        if w in AUXILIARY or len(words) >= 3:
            break
        words.append(w)
    while words and words[0] in ("total", "more", "fewer", "different", "extra", "of", "the"):
        words.pop(0)
    if not words or not any(w.endswith("s") for w in words) or words[-1] == "of":
        return None
    return " ".join(words)


TIME_UNITS = ["seconds", "minutes", "hours", "days", "weeks", "months", "years"]


def gsm8k_rows(data: Path) -> list[dict]:
    rows = [json.loads(x) for x in (data / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    out: list[dict] = []

    def add(r, pred, expected, reason, kind="count_noun"):
        out.append(
            {
                "id": f"gsm8ka-{len(out) + 1:04d}",
                "source": f"GSM8K test {r['id']}: reference answer, answer line in GSM8K solver style",
                "kind": kind,
                "question_ref": f"gsm8k:{r['id']}",
                "gold": r["final_answer"],
                "prediction": pred,
                "expected": expected,
                "reason": reason,
            }
        )

    for r in rows[:400]:
        q, ans = r["question"], r["final_answer"]
        if not re.fullmatch(r"\d+", ans):
            continue
        n = int(ans)
        last = re.split(r"(?<=[.!?])\s+", q.strip())[-1]
        noun = asked_count_noun(last)
        steps = f"We work it out step by step.\n{n - 3 if n > 3 else n + 2} + 3 = {n + 0 if n > 3 else n + 5}\n" if n > 3 else "We work it out step by step.\n"
        k = len(out)
        if noun:
            if noun.split()[-1] in TIME_UNITS:
                unit = noun.split()[-1]
                add(r, steps + f"The answer is: {n} {unit}", True, f"{n} {unit}, the unit asked")
                other = TIME_UNITS[(TIME_UNITS.index(unit) + 1) % len(TIME_UNITS)]
                add(r, f"The answer is: {n} {other}", False, f"the question asks for {unit}; {n} {other} is another duration")
                continue
            style = k % 3
            if style == 0:
                add(r, steps + f"The answer is: {n} {noun}", True, f"{n} {noun}, the quantity asked")
            elif style == 1:
                add(r, f"#### {n} {noun}", True, f"{n} {noun} after ####")
            else:
                add(r, steps + f"So the answer is {n:,} {noun}.", True, f"{n:,} {noun} in prose", kind="prose")
            unit_like = noun.split()[-1] in ("dozens", "dollars", "cents", *TIME_UNITS)
            if not unit_like and pick(r["id"], 4) == 0 and n % 12:
                add(r, f"The answer is: {n} dozen {noun}", False, f"{n} dozen is {12 * n}, not {n}")
            else:
                wrong = n + 1 + pick(r["id"], 9)
                add(r, f"The answer is: {wrong} {noun}", False, f"{wrong}, not {n}")
            continue
        if MONEY.search(last) and not NOT_MONEY.search(last):
            style = k % 3
            pred = [f"The answer is: ${n}", f"The answer is: {n} dollars", steps + f"So the total is ${n:,}."][style]
            add(r, pred, True, f"{n} dollars, the money asked")
            counted = [c for c in re.findall(r"\b\d+ ([a-z]{3,}[^s]s)\b", q) if c not in ("dollars", "cents", "hours", "minutes", "days", "weeks", "years", "months", "times")]
            if counted and pick(r["id"], 3) == 0:
                add(r, f"The answer is: {n} {counted[0]}", False, f"the question asks for money; {n} {counted[0]} counts {counted[0]}")
            else:
                wrong = n + 1 + pick(r["id"], 9)
                add(r, f"The answer is: ${wrong}", False, f"{wrong} dollars, not {n}")
            continue
        if re.search(r"\bpercent(age)?\b", last, re.I):
            add(r, f"The answer is: {n}%", True, f"{n} percent, a percentage asked")
            add(r, f"The answer is: {n + 5}%", False, f"{n + 5}%, not {n}%")
    return out


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{path.name}: {len(rows)} rows")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    write(HERE / "math500_restated.jsonl", math500_rows(args.data))
    write(HERE / "gsm8k_answers.jsonl", gsm8k_rows(args.data))


if __name__ == "__main__":
    main()
