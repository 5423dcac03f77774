"""A judge as a critic on ProcessBench: `labeler judge` then `labeler eval --judgments` on a balanced sample.

Takes the first ROWS/2 erroneous and the first ROWS/2 correct rows of a ProcessBench file (so F1 is
defined), judges them with --model (default: the embedded SmolLM2-135M-Instruct), and prints how many
critiques could be read, how the verdicts spread, ProcessBench's accuracies and F1, and the cost.
Run engine benchmarks under the shared lock on a shared machine:

    flock /tmp/prm-engine.lock .venv/bin/python bench/judge.py --rows 20
    .venv/bin/python bench/judge.py --model Qwen/Qwen2.5-72B-Instruct --rows 400 --votes 8   # on GPUs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT.parent / "shared" / "data" / "processbench" / "gsm8k.jsonl"


def balanced_rows(path: Path, rows: int) -> list[dict]:
    every = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    erroneous = [row for row in every if row["label"] >= 0][: rows - rows // 2]
    correct = [row for row in every if row["label"] < 0][: rows // 2]
    return erroneous + correct


def labeler(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "labeler.cli", *args], capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"labeler {args[0]} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="a ProcessBench file (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=20, help="rows judged, half erroneous and half correct (default: 20)")
    parser.add_argument("--model", default=None, help="judge model (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--votes", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--critique-retries", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--output", type=Path, default=None, help="keep the judge's output here (default: a temporary folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        rows = balanced_rows(args.reference, args.rows)
        subset = Path(folder) / args.reference.name  # the subset keeps the file's name, so eval names it alike
        subset.write_text("".join(json.dumps(row) + "\n" for row in rows))
        out = args.output or Path(folder) / "judged"
        command = ["judge", "--input", str(subset), "--output", str(out), "--votes", str(args.votes), "--overwrite",
                   "--max-new-tokens", str(args.max_new_tokens), "--critique-retries", str(args.critique_retries),
                   "--temperature", str(args.temperature), "--json", "--quiet"]  # fmt: skip
        if args.model:
            command += ["--model", args.model]
        started = time.monotonic()
        summary = json.loads(labeler(*command).stdout)
        seconds = time.monotonic() - started
        report = json.loads(labeler("eval", "--judgments", str(out), "--reference", str(subset), "--json").stdout)["subsets"][0]
        judged = pq.read_table(out / "judgments").to_pylist() if summary["solutions"] else []
        rejected = [row for path in sorted((out / "rejected").glob("part-*.parquet")) for row in pq.read_table(path).to_pylist()]

    human = {row["id"]: row["label"] for row in rows}
    verdicts = Counter("none (-1)" if row["first_error"] < 0 else "a step" for row in judged)
    reasons = Counter(row["reason"].split("; the last: ", 1)[-1].split(":")[0] for row in rejected)
    exact = sum(row["first_error"] == human.get(row["problem_id"]) for row in judged)
    rate = lambda value: "n/a" if value is None else f"{value:.1%}"  # noqa: E731
    print(f"judge              : {summary.get('model') or args.model or 'embedded SmolLM2-135M-Instruct'}")
    print(f"rows               : {len(rows)} ({sum(1 for r in rows if r['label'] >= 0)} erroneous, {sum(1 for r in rows if r['label'] < 0)} correct) from {args.reference}")
    print(f"judged             : {summary['solutions']} (votes {args.votes}); rejected, critique unreadable after {args.critique_retries} resamples: {len(rejected)}")
    print(f"critiques drawn    : {summary['critiques']} ({summary['critique_resamples']} resamples)")
    print(f"verdicts           : {dict(verdicts)}; equal to the human label: {exact} of {len(judged)}")
    if reasons:
        print(f"why unreadable     : {dict(reasons.most_common(3))}")
    print(f"ProcessBench       : matched {report['matched']}, acc erroneous {rate(report['erroneous_accuracy'])}, "
          f"acc correct {rate(report['correct_accuracy'])}, F1 {rate(report['f1'])} (rejected rows are not matched)")  # fmt: skip
    print(f"cost               : {summary['generated_tokens']} tokens in {seconds:.0f} s with the engine start ({summary['generated_tokens'] / seconds:.0f} tokens/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
