"""Benchmark of the answer checker: ProcessBench agreement, the evaluation sets beside naive
Math-Verify, and fast-path throughput.

1. ProcessBench: for every row, the verdict on its steps (joined with blank lines) against its
   `answer`, compared with the row's `final_answer_correct`: agreement raw and after the reviewed
   errata (bench/checker_errata.jsonl), false positives and false negatives apart (every remaining
   disagreement is a checker limitation); with the problem passed as the question too.
2. Evaluation sets (bench/checker_eval/*.jsonl, sets.py): this checker (given the question where
   the row has one) and naive Math-Verify, `verify(parse(gold), parse(prediction))`, side by side,
   false positives (a wrong answer called correct) and false negatives apart; the held-out sets
   (heldout, heldout2: each written before the checker was changed for its kinds) first, the
   red-team sets (redteam_*, written without reading the checker or the other sets; the rules of
   CHECKER_VERSION 3 were written after reading their misses; not in the tests) last.
   `--record-naive` stores naive Math-Verify's verdicts in bench/checker_eval/naive_math_verify.json
   for the tests.
3. Throughput of the fast path (in-process), one core, whole GSM8K-style solutions: verdicts per
   CPU-second of this process (what a core gives, whatever else runs) and per wall-second, with
   the load average, its caches emptied before each pass over the rows.

    PYTHONPATH=. python bench/checker.py [--data ../shared/data] [--workers N] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.checker_eval import sets as eval_sets  # noqa: E402
from labeler.checking import normalisation  # noqa: E402
from labeler.checking.checker import AnswerChecker, Verdict  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data"
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


def naive_verdict(gold: str, prediction: str) -> bool:
    """Naive Math-Verify: its default parse of both strings, then verify (in this process, with its
    own signal-based timeouts)."""
    from math_verify import parse, verify

    try:
        return bool(verify(parse(gold), parse(prediction)))
    except Exception:
        return False


def bench_split(name: str, rows: list[dict], checker: AnswerChecker, errata: dict[str, dict], verbose: bool, questions: bool = False) -> dict:
    pairs = [("\n\n".join(r["steps"]), r["answer"]) for r in rows]
    t0 = time.perf_counter()
    results = checker.check_many(pairs, [r["problem"] for r in rows] if questions else None)
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
    how = "with the problem as the question" if questions else "without the question"
    print(f"== ProcessBench {name} ({how}): {n} rows, verdicts {verdict_counts}, {elapsed:.2f}s ({n / elapsed:.0f} rows/s)")
    print(f"   agreement raw          {raw_agree}/{n} = {100 * raw_agree / n:.2f}%  (FP {raw_fp}, FN {raw_fn} against the raw labels)")
    print(f"   agreement after errata {fixed_agree}/{n} = {100 * fixed_agree / n:.2f}%  ({errata_used} errata rows)")
    for r, e in corrected if verbose else []:
        print(f"     errata {r['id']}: label {r['final_answer_correct']} -> {e['final_answer_correct']}: {e['reason']}")
    print("   after errata, every disagreement below is a checker limitation")
    print(f"   false positives (checker says correct, label says incorrect): {len(fps)}")
    for r, res in fps:
        print(f"     FP {r['id']}: gold={short(r['answer'])!s} extracted={short(res.extracted)!s}")
    print(f"   false negatives (checker says not correct, label says correct): {len(fns)}")
    for r, res in fns:
        print(f"     FN {r['id']}: gold={short(r['answer'])!s} extracted={short(res.extracted)!s} verdict={res.verdict.value} ({res.rule})")
    return {
        "raw": raw_agree / n,
        "after_errata": fixed_agree / n,
        "raw_fp": raw_fp,
        "raw_fn": raw_fn,
        "fp": len(fps),
        "fn": len(fns),
    }


def bench_naive_processbench(name: str, rows: list[dict], errata: dict[str, dict]) -> dict:
    agree = fp = fn = 0
    for r in rows:
        predicted = naive_verdict(r["answer"], "\n\n".join(r["steps"]))
        label = bool(errata[r["id"]]["final_answer_correct"]) if r["id"] in errata else bool(r["final_answer_correct"])
        agree += predicted == label
        fp += predicted and not label
        fn += label and not predicted
    n = len(rows)
    print(f"   naive Math-Verify after errata {agree}/{n} = {100 * agree / n:.2f}%  (FP {fp}, FN {fn})")
    return {"after_errata": agree / n, "fp": fp, "fn": fn}


def score(verdicts: list[bool], rows: list[dict]) -> dict:
    ok = sum(v == r["expected"] for v, r in zip(verdicts, rows))
    fp = sum(v and not r["expected"] for v, r in zip(verdicts, rows))
    fn = sum(r["expected"] and not v for v, r in zip(verdicts, rows))
    return {"n": len(rows), "correct": ok, "accuracy": ok / len(rows), "fp": fp, "fn": fn}


def bench_eval_sets(checker: AnswerChecker, data: Path, verbose: bool, record_naive: bool) -> dict:
    """This checker and naive Math-Verify on every evaluation set, side by side."""
    stored = eval_sets.load_naive()
    recorded: dict[str, bool] = {}
    summary = {}
    lines = []
    red_team = eval_sets.red_team_names()
    for name in eval_sets.set_names() + red_team:
        rows = eval_sets.load_set(name)
        questions, missing = eval_sets.questions_for(rows, data)
        results = checker.check_many([(r["prediction"], r["gold"]) for r in rows], questions)
        ours = [res.verdict is Verdict.CORRECT for res in results]
        naive = [naive_verdict(r["gold"], r["prediction"]) for r in rows]
        if name not in red_team:  # the stored verdicts serve the tests, which leave the red-team sets out
            recorded.update({r["id"]: v for r, v in zip(rows, naive)})
        changed = [r["id"] for r, v in zip(rows, naive) if r["id"] in stored and stored[r["id"]] != v]
        a, b = score(ours, rows), score(naive, rows)
        summary[name] = {"ours": a, "naive_math_verify": b, "questions_missing": missing}
        label = f"{name} (held out)" if name in eval_sets.HELD_OUT_SETS else f"{name} (red team, seen since v3)" if name in red_team else name
        lines.append(
            f"| {label} | {a['n']} | {100 * a['accuracy']:.1f}% | {a['fp']} | {a['fn']} | {100 * b['accuracy']:.1f}% | {b['fp']} | {b['fn']} |"
        )
        if missing:
            print(f"   {name}: {missing} referred questions could not be read from {data}; those rows are checked without them", file=sys.stderr)
        if changed:
            print(f"   {name}: naive Math-Verify now differs from the recorded verdicts on {len(changed)} rows: {changed[:5]}", file=sys.stderr)
        if verbose:
            for r, res, v in zip(rows, results, ours):
                if v != r["expected"]:
                    kind = "FP" if v else "FN"
                    print(f"     {kind} {r['id']} [{r['kind']}]: gold={short(r['gold'])} pred={short(r['prediction'])} -> {short(res.extracted)} {res.verdict.value} ({res.rule})")
    print("== evaluation sets (bench/checker_eval): this checker vs naive Math-Verify, verify(parse(gold), parse(prediction))")
    print("| set | rows | ours | ours FP | ours FN | naive MV | naive FP | naive FN |")
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(line)
    if record_naive:
        import math_verify

        version = getattr(math_verify, "__version__", None)
        if version is None:
            from importlib.metadata import version as dist_version

            version = dist_version("math-verify")
        payload = {"math_verify": version, "how": "verify(parse(gold), parse(prediction))", "verdicts": dict(sorted(recorded.items()))}
        eval_sets.NAIVE_FILE.write_text(json.dumps(payload, indent=0) + "\n", encoding="utf-8")
        print(f"   recorded {len(recorded)} naive Math-Verify verdicts in {eval_sets.NAIVE_FILE.relative_to(ROOT)}")
    return summary


def bench_throughput(rows: list[dict], seconds: float = 3.0) -> dict:
    """Verdicts per second on one core for GSM8K-style answers (fast path, in-process): per
    CPU-second of this process and per wall-second. The caches of normal forms and numbers are
    emptied before each pass, so repeated passes do not measure them."""
    checker = AnswerChecker(workers=1)
    pairs = [("\n\n".join(r["steps"]), r["answer"]) for r in rows]
    for p, g in pairs:  # warm up (regex compilation)
        checker._fast(p, g)  # noqa: SLF001 - measure the in-process layer alone
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    n = 0
    c0, w0 = time.process_time(), time.perf_counter()
    while time.process_time() - c0 < seconds:
        normalisation.clear_caches()
        for p, g in pairs:
            checker._fast(p, g)  # noqa: SLF001
            n += 1
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    checker.close()
    return {"per_cpu_second": n / cpu, "per_wall_second": n / wall, "load_average_1min": load, "cores": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder (processbench/, math500/, gsm8k/)")
    ap.add_argument("--errata", type=Path, default=ERRATA)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--verbose", action="store_true", help="list every disagreement and the errata")
    ap.add_argument("--record-naive", action="store_true", help="store naive Math-Verify's verdicts on the evaluation sets (for the tests)")
    ap.add_argument("--skip", choices=["processbench", "eval", "throughput"], action="append", default=[], help="leave a part out")
    args = ap.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    errata = load_errata(args.errata)
    summary: dict = {}
    pb = args.data / "processbench"
    with AnswerChecker(timeout_s=args.timeout, workers=args.workers) as checker:
        if "eval" not in args.skip:
            summary["eval_sets"] = bench_eval_sets(checker, args.data, args.verbose, args.record_naive)
        if "processbench" not in args.skip:
            if not pb.exists():
                print(f"skip ProcessBench: {pb} missing", file=sys.stderr)
            for name in ("gsm8k", "math"):
                path = pb / f"{name}.jsonl"
                if not path.exists():
                    continue
                rows = load_rows(path)
                summary[name] = bench_split(name, rows, checker, errata, args.verbose)
                summary[name + "_with_question"] = bench_split(name, rows, checker, errata, args.verbose, questions=True)
                summary[name + "_naive_math_verify"] = bench_naive_processbench(name, rows, errata)
            # Sanity: reference solutions must reach their own answers.
            m500 = args.data / "math500" / "test.jsonl"
            g_test = args.data / "gsm8k" / "test.jsonl"
            if m500.exists() and g_test.exists():
                pairs = [(r["solution"], r["answer"]) for r in load_rows(m500)]
                pairs += [(r["answer"], r["final_answer"]) for r in load_rows(g_test)]
                ok = sum(res.verdict is Verdict.CORRECT for res in checker.check_many(pairs))
                print(f"== reference solutions vs their answers (MATH-500 + GSM8K test): {ok}/{len(pairs)} correct")
                summary["reference_self_check"] = f"{ok}/{len(pairs)}"
    gsm = pb / "gsm8k.jsonl"
    if "throughput" not in args.skip and gsm.exists():
        t = bench_throughput(load_rows(gsm))
        print(
            f"== throughput, fast path, one core, whole GSM8K-style solutions: {t['per_cpu_second']:.0f} verdicts per CPU-second "
            f"({t['per_wall_second']:.0f} per wall-second; 1-min load average {t['load_average_1min']:.2f} on {t['cores']} cores)"
        )
        summary["fast_path"] = t
    print(json.dumps(summary, default=lambda v: round(v, 4) if isinstance(v, float) else str(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
