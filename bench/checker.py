"""Benchmark of the answer checker on ProcessBench.

For every row: the verdict on its steps (joined with blank lines) against its `answer`, compared
with the row's `final_answer_correct`. Prints agreement raw and after the reviewed errata file
(bench/checker_errata.jsonl), false positives and false negatives separately (every remaining
disagreement is a checker limitation), and throughput (fast path on GSM8K-style answers, and the
whole benchmark).

    PYTHONPATH=. python bench/checker.py [--data ../shared/data/processbench] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labeler.checking.checker import AnswerChecker, Verdict  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "processbench"
ERRATA = Path(__file__).resolve().parent / "checker_errata.jsonl"


def load_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_errata(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    out = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                out[e["id"]] = e
    return out


def short(s: str | None, n: int = 60) -> str:
    if s is None:
        return "None"
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 3] + "..."


def bench_split(name: str, rows: list[dict], checker: AnswerChecker, errata: dict[str, dict], verbose: bool) -> dict:
    pairs = [("\n\n".join(r["steps"]), r["answer"]) for r in rows]
    t0 = time.perf_counter()
    results = checker.check_many(pairs)
    elapsed = time.perf_counter() - t0
    raw_agree = 0
    fixed_agree = 0
    raw_fp = raw_fn = 0
    fps, fns = [], []
    corrected = []
    errata_used = 0
    verdict_counts: dict[str, int] = {}
    for r, res in zip(rows, results):
        verdict_counts[res.verdict.value] = verdict_counts.get(res.verdict.value, 0) + 1
        predicted = res.verdict is Verdict.CORRECT
        label = bool(r["final_answer_correct"])
        if predicted == label:
            raw_agree += 1
        elif predicted:
            raw_fp += 1
        else:
            raw_fn += 1
        e = errata.get(r["id"])
        if e is not None:
            errata_used += 1
            label = bool(e["final_answer_correct"])
            corrected.append((r, e))
        if predicted == label:
            fixed_agree += 1
        elif predicted:
            fps.append((r, res))
        else:
            fns.append((r, res))
    n = len(rows)
    print(f"== {name}: {n} rows, verdicts {verdict_counts}, {elapsed:.2f}s ({n / elapsed:.0f} rows/s)")
    print(f"   agreement raw          {raw_agree}/{n} = {100 * raw_agree / n:.2f}%  (FP {raw_fp}, FN {raw_fn} against the raw labels)")
    print(f"   agreement after errata {fixed_agree}/{n} = {100 * fixed_agree / n:.2f}%  ({errata_used} errata rows)")
    for r, e in corrected:
        print(f"     errata {r['id']}: label {r['final_answer_correct']} -> {e['final_answer_correct']}: {e['reason']}")
    print("   after errata, every disagreement below is a checker limitation")
    print(f"   false positives (checker says correct, label says incorrect): {len(fps)}")
    for r, res in fps:
        print(f"     FP {r['id']}: gold={short(r['answer'])!s} extracted={short(res.extracted)!s}")
    print(f"   false negatives (checker says not correct, label says correct): {len(fns)}")
    for r, res in fns:
        print(f"     FN {r['id']}: gold={short(r['answer'])!s} extracted={short(res.extracted)!s} verdict={res.verdict.value}")
    return {
        "raw": raw_agree / n,
        "after_errata": fixed_agree / n,
        "raw_fp": raw_fp,
        "raw_fn": raw_fn,
        "fp": len(fps),
        "fn": len(fns),
    }


def bench_throughput(rows: list[dict], seconds: float = 2.0) -> float:
    """Verdicts per second on one core for GSM8K-style answers (fast path, in-process)."""
    checker = AnswerChecker(workers=1)
    pairs = [("\n\n".join(r["steps"]), r["answer"]) for r in rows]
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for p, g in pairs:
            res, task = checker._fast(p, g)  # noqa: SLF001 - measure the in-process layer alone
            n += 1
    rate = n / (time.perf_counter() - t0)
    checker.close()
    return rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--errata", type=Path, default=ERRATA)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"data not found: {args.data}", file=sys.stderr)
        return 2
    errata = load_errata(args.errata)
    summary = {}
    with AnswerChecker(timeout_s=args.timeout, workers=args.workers) as checker:
        for name in ("gsm8k", "math"):
            path = args.data / f"{name}.jsonl"
            if not path.exists():
                print(f"skip {name}: {path} missing", file=sys.stderr)
                continue
            summary[name] = bench_split(name, load_rows(path), checker, errata, args.verbose)
        # Sanity: reference solutions must reach their own answers.
        m500 = args.data.parent / "math500" / "test.jsonl"
        g_test = args.data.parent / "gsm8k" / "test.jsonl"
        if m500.exists() and g_test.exists():
            pairs = [(r["solution"], r["answer"]) for r in load_rows(m500)]
            pairs += [(r["answer"], r["final_answer"]) for r in load_rows(g_test)]
            ok = sum(res.verdict is Verdict.CORRECT for res in checker.check_many(pairs))
            print(f"== reference solutions vs their answers (MATH-500 + GSM8K test): {ok}/{len(pairs)} correct")
            summary["reference_self_check"] = f"{ok}/{len(pairs)}"
    gsm = args.data / "gsm8k.jsonl"
    if gsm.exists():
        rate = bench_throughput(load_rows(gsm))
        print(f"== throughput, fast path, one core, GSM8K-style (whole solutions): {rate:.0f} verdicts/s")
        summary["fast_path_verdicts_per_s"] = rate
        rows = load_rows(gsm)
        bare = [(r["answer"], r["answer"]) for r in rows]
        checker = AnswerChecker(workers=1)
        t0 = time.perf_counter()
        k = 0
        while time.perf_counter() - t0 < 1.0:
            checker.check_many(bare)
            k += len(bare)
        print(f"== throughput, check_many on bare GSM8K answers, one core: {k / (time.perf_counter() - t0):.0f} verdicts/s")
        checker.close()
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
