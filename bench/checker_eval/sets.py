"""The answer checker's evaluation sets (bench/checker_eval/*.jsonl): loading, and the questions
their rows refer to.

A row: id, source, kind, gold, prediction, expected (is the prediction's final answer correct?),
reason, and optionally `question` (written out) or `question_ref` ("math500:<id>", "gsm8k:<id>": a
row of ../shared/data, read from there so that the data is not copied into the repository).
`heldout.jsonl` was written before the checker was changed for its kinds (CHECKER_VERSION 2),
`heldout2.jsonl` before the changes of CHECKER_VERSION 3 (the red team's kinds of word problems and
near misses, other problems and phrasings); the others are the sets the rules were developed on. naive_math_verify.json holds naive Math-Verify's verdict on
every row (`verify(parse(gold), parse(prediction))`, math-verify 0.9.0), recorded by
`bench/checker.py --record-naive` so that tests compare against it without running it.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent.parent / "shared" / "data"
NAIVE_FILE = HERE / "naive_math_verify.json"
HELD_OUT = "heldout"
HELD_OUT_SETS = ("heldout", "heldout2")  # each written before the checker changed for its kinds
RED_TEAM_PREFIX = "redteam_"
FIELDS = ("id", "source", "kind", "gold", "prediction", "expected", "reason")


def set_names() -> list[str]:
    """The sets, held-out ones first (the red-team sets apart: see red_team_names)."""
    names = sorted(p.stem for p in HERE.glob("*.jsonl") if not p.stem.startswith(RED_TEAM_PREFIX))
    return sorted(names, key=lambda n: n not in HELD_OUT_SETS)


def red_team_names() -> list[str]:
    """The red-team sets (redteam_*.jsonl, redteam_build.py): written by someone who had not read
    the checker's rules or the other sets, as an unseen test; seen since CHECKER_VERSION 3, whose
    rules fix the general causes of their misses. bench/checker.py reports them; the
    tests leave them out, so that they stay a measurement rather than a target."""
    return sorted(p.stem for p in HERE.glob(f"{RED_TEAM_PREFIX}*.jsonl"))


def load_set(name: str) -> list[dict]:
    rows = []
    path = HERE / f"{name}.jsonl"
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [f for f in FIELDS if f not in row]
        if missing or not isinstance(row["expected"], bool):
            raise ValueError(f"{path.name}:{lineno}: row {row.get('id')!r} lacks {missing or 'a boolean expected'}")
        rows.append(row)
    return rows


def questions_for(rows: list[dict], data: Path = DEFAULT_DATA) -> tuple[list[str | None], int]:
    """The question of each row (None when it has none), and how many referred questions could not
    be read (../shared/data absent)."""
    wanted = {r["question_ref"].split(":", 1)[0] for r in rows if r.get("question_ref")}
    refs: dict[str, str] = {}
    for name, path, field in (("math500", "math500/test.jsonl", "problem"), ("gsm8k", "gsm8k/test.jsonl", "question")):
        f = data / path
        if name in wanted and f.exists():
            for line in f.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    refs[f"{name}:{r['id']}"] = r[field]
    out, missing = [], 0
    for r in rows:
        if r.get("question"):
            out.append(r["question"])
        elif r.get("question_ref"):
            q = refs.get(r["question_ref"])
            missing += q is None
            out.append(q)
        else:
            out.append(None)
    return out, missing


def load_naive() -> dict[str, bool]:
    if not NAIVE_FILE.exists():
        return {}
    return json.loads(NAIVE_FILE.read_text(encoding="utf-8"))["verdicts"]
