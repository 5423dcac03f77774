"""Best-of-N and PRM-guided beam search on CPU, end to end, with the labeler's own commands.

1. `labeler label`: Monte-Carlo labels of the given solutions of the shipped sample problems that
   are not evaluated (labeler/data/sample_problems.jsonl, the second half by default);
2. `labeler train`: a small PRM on those labels (the embedded SmolLM2-135M-Instruct as backbone);
3. `labeler bon`: the embedded model samples --candidates solutions for each evaluated problem
   (the first half, as problem-only rows); the PRM scores them; the table of every method at
   N = 1, 2, 4, ...;
4. `labeler search`: beam search guided by the same PRM on the same problems, into the same output
   (its best-of-N comparison reuses bon's candidates and scores: nothing is sampled twice), and
   best-of-N at the same number of generated tokens.

Prints the best-of-N table, the search line and the seconds of each command (each in its own
process: its imports and engine start included). The embedded model is
weak at arithmetic and ten problems are few: the figures show the machinery at work, not what a
PRM is worth (the README gives the GPU recipe for that). On a shared machine run it under the
engine lock:

    flock /tmp/prm-engine.lock .venv/bin/python bench/bon.py [--problems 10] [--candidates 8] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.decoding.reranking import format_table  # noqa: E402
from labeler.decoding.comparison import format_summary  # noqa: E402

SAMPLE = ROOT / "labeler" / "data" / "sample_problems.jsonl"


def run(step: str, args: list[str], timings: dict) -> str:
    """One labeler command in its own process (each engine gone with it); its stdout. Stops the bench if it fails."""
    print(f"[bench] {step}: labeler {' '.join(args)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "labeler.cli", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    timings[step] = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"labeler {args[0]} exited {done.returncode}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=10, help="sample problems evaluated (the first ones); the rest label the PRM")
    parser.add_argument("--candidates", type=int, default=8, help="candidates per problem (N up to this)")
    parser.add_argument("--solution-max-new-tokens", type=int, default=160)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts per step prefix of the PRM's labels")
    parser.add_argument("--epochs", type=int, default=4, help="PRM training epochs")
    parser.add_argument("--beams", type=int, default=2)
    parser.add_argument("--proposals", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--step-max-new-tokens", type=int, default=64)
    parser.add_argument("--work", default=None, help="folder for the outputs (default: a new temp folder); rerun with it to resume")
    args = parser.parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-bon-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    evaluated, training = rows[: args.problems], rows[args.problems :]
    if not training:
        raise SystemExit(f"--problems {args.problems}: no sample problem is left to label for the PRM")
    problems = work / "problems.jsonl"
    problems.write_text("".join(json.dumps({"id": r["id"], "problem": r["problem"], "answer": r["answer"]}) + "\n" for r in evaluated))
    train_rows = work / "train-solutions.jsonl"
    train_rows.write_text("".join(json.dumps(r) + "\n" for r in training))
    print(f"{len(evaluated)} problems evaluated, {len(training)} given solutions labelled for the PRM; outputs in {work}", flush=True)

    timings: dict[str, float] = {}
    run("label", ["label", "--input", str(train_rows), "--output", str(work / "labels"), "--rollouts", str(args.rollouts),
                  "--max-new-tokens", "64", "--temperature", "0.7", "--quiet"], timings)  # fmt: skip
    run("train", ["train", "--labels", str(work / "labels"), "--output", str(work / "prm"), "--epochs", str(args.epochs),
                  "--batch-size", "4", "--learning-rate", "5e-5", "--max-length", "512", "--validation-fraction", "0", "--device", "cpu",
                  "--quiet"], timings)  # fmt: skip
    prm = str(work / "prm")  # its best/ checkpoint
    sampling = ["--candidates", str(args.candidates), "--solution-max-new-tokens", str(args.solution_max_new_tokens),
                "--temperature", str(args.temperature), "--device", "cpu", "--quiet", "--json"]  # fmt: skip
    bon = json.loads(run("bon", ["bon", "--input", str(problems), "--output", str(work / "bon"), "--prm", prm, *sampling], timings))
    search = json.loads(
        run("search", ["search", "--input", str(problems), "--output", str(work / "bon"), "--prm", prm, "--beams", str(args.beams),
                       "--proposals", str(args.proposals), "--max-steps", str(args.max_steps),
                       "--step-max-new-tokens", str(args.step_max_new_tokens), *sampling], timings)  # fmt: skip
    )
    print()
    print(format_table(bon))
    print()
    print(format_summary(search))
    print()
    print("seconds: " + ", ".join(f"{step} {seconds:.0f}" for step, seconds in timings.items()))
    print(f"candidates: {bon['candidates']} ({bon['candidates_correct']} correct), {bon['tokens_per_candidate']:.1f} tokens each; "
          f"plots: {work / 'bon' / 'bon' / 'curves.png'}, {work / 'bon' / 'search' / 'comparison.png'}")  # fmt: skip


if __name__ == "__main__":
    main()
