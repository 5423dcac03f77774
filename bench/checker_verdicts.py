"""Every verdict the answer checker gives on the evaluation sets and on ProcessBench, against another
version of the code: did a change (a faster path, a cache) turn any verdict?

The pairs: every row of bench/checker_eval/*.jsonl (with its question, as bench/checker.py checks it);
ProcessBench gsm8k and math, the whole solution and the final step alone, each without and with the
problem as the question; the MATH-500 and GSM8K reference solutions against their answers; and the
degenerate completions of bench/completions.py (repeated tokens, very long texts, no answer, huge numbers,
LaTeX soup) for the first 100 problems of each split. For each: the verdict and the extracted answer (the rule that
decided may be renamed: rule changes are counted apart, not as differences).

    .venv/bin/python bench/checker_verdicts.py --against REV   # check out REV into a temporary folder, compare
    .venv/bin/python bench/checker_verdicts.py --write FILE [--code DIR]

`--code DIR` imports the checker from DIR (a checkout of another version) instead of this tree; `--against`
does that for a git revision. Exit code 0 only when no verdict and no extracted answer differs.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEGENERATE_ROWS = 100  # of each ProcessBench split: one degenerate completion of each kind for each


def load_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def labelled_pairs(data: Path) -> dict[str, list[tuple[str, str, str, str | None]]]:
    """Named groups of (key, prediction, reference, question)."""
    sys.path.insert(0, str(ROOT))  # bench.* from this tree, whichever checker is imported
    from bench import completions
    from bench.checker_eval import sets as eval_sets

    groups: dict[str, list] = {}
    for name in eval_sets.set_names() + eval_sets.red_team_names():
        rows = eval_sets.load_set(name)
        questions, _ = eval_sets.questions_for(rows, data)
        groups[f"eval/{name}"] = [(r["id"], r["prediction"], r["gold"], q) for r, q in zip(rows, questions)]
    for split in ("gsm8k", "math"):
        path = data / "processbench" / f"{split}.jsonl"
        if not path.exists():
            raise SystemExit(f"checker_verdicts: {path} is missing (the shared data folder: --data)")
        rows = load_jsonl(path)
        for part, text in (("whole", lambda r: "\n\n".join(r["steps"])), ("final_step", lambda r: r["steps"][-1])):
            for with_question in (False, True):
                name = f"processbench/{split}/{part}" + ("/question" if with_question else "")
                groups[name] = [(r["id"], text(r), r["answer"], r["problem"] if with_question else None) for r in rows]
        degenerate = completions.degenerate_pairs(rows[:DEGENERATE_ROWS])
        groups[f"degenerate/{split}"] = [(f"{i}", p, ref, q) for i, (p, ref, q) in enumerate(degenerate)]
    refs = [(f"math500:{i}", r["solution"], r["answer"], None) for i, r in enumerate(load_jsonl(data / "math500" / "test.jsonl"))]
    refs += [(f"gsm8k:{i}", r["answer"], r["final_answer"], None) for i, r in enumerate(load_jsonl(data / "gsm8k" / "test.jsonl"))]
    groups["references"] = refs
    return groups


def snapshot(data: Path) -> dict:
    """{group: {key: [verdict, extracted answer, rule]}} from the checker on sys.path."""
    from labeler.checking.checker import AnswerChecker

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    out: dict[str, dict] = {}
    started = time.perf_counter()
    with AnswerChecker(timeout_s=5.0) as checker:
        for name, pairs in labelled_pairs(data).items():
            results = checker.check_many([(p, r) for _, p, r, _ in pairs], [q for *_, q in pairs])
            out[name] = {key: [res.verdict.value, res.extracted, res.rule] for (key, *_), res in zip(pairs, results)}
    print(f"checked {sum(map(len, out.values()))} pairs in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return out


def compare(old: dict, new: dict) -> int:
    """Print the differences; the number of pairs whose verdict or extracted answer differ."""
    differing = 0
    transitions: Counter = Counter()
    for group in sorted(set(old) | set(new)):
        a, b = old.get(group, {}), new.get(group, {})
        keys = sorted(set(a) | set(b))
        changed = [k for k in keys if (a.get(k) or [None, None])[:2] != (b.get(k) or [None, None])[:2]]
        renamed = sum(1 for k in keys if k in a and k in b and a[k][:2] == b[k][:2] and a[k][2] != b[k][2])
        print(f"{group:42} {len(keys):5} pairs  {len(changed):3} differ  {renamed:4} decided by another rule")
        for k in changed[:10]:
            print(f"    {k}: {_short(a.get(k))} -> {_short(b.get(k))}")
        differing += len(changed)
        transitions.update((group.split("/")[0], (a.get(k) or [None])[0], (b.get(k) or [None])[0]) for k in changed)
    print("SAME VERDICTS" if not differing else f"DIFFERENT: {differing} pairs")
    for (family, was, now), count in sorted(transitions.items()):
        print(f"    {family}: {was} -> {now}: {count} pairs" + ("" if was != now else " (the same verdict, another extracted answer)"))
    return differing


def _short(entry: list | None) -> list | None:
    return None if entry is None else [v if not isinstance(v, str) or len(v) <= 80 else v[:60] + f"... ({len(v)} chars)" for v in entry]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REV", help="a git revision to compare this tree's checker with")
    parser.add_argument("--write", metavar="FILE", help="write this checker's verdicts to FILE (JSON)")
    parser.add_argument("--code", metavar="DIR", help="import the checker from DIR instead of this tree")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    args = parser.parse_args()
    if bool(args.against) == bool(args.write):
        parser.error("give one of --against REV and --write FILE")
    if args.write:
        sys.path.insert(0, str(Path(args.code).resolve() if args.code else ROOT))
        Path(args.write).write_text(json.dumps(snapshot(args.data.resolve())), encoding="utf-8")
        return 0
    with tempfile.TemporaryDirectory(prefix="checker-verdicts-") as tmp:
        old_tree = Path(tmp) / "tree"
        old_tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.against, "labeler"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        old_file, new_file = Path(tmp) / "old.json", Path(tmp) / "new.json"
        for code, file in ((old_tree, old_file), (ROOT, new_file)):
            command = [sys.executable, __file__, "--write", str(file), "--code", str(code), "--data", str(args.data)]
            subprocess.run(command, check=True)
        old, new = (json.loads(f.read_text(encoding="utf-8")) for f in (old_file, new_file))
    print(f"verdicts of {args.against} (left) against this tree (right):")
    return 1 if compare(old, new) else 0


if __name__ == "__main__":
    sys.exit(main())
