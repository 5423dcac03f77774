"""Best-of-N and PRM-guided beam search on CPU, end to end, with the labeler's own commands.

The problems are one-operation word problems written here (a seeded mix of sums, differences and
products of small numbers): the embedded model solves few two-step ones (none of 80 samples of the
first 10 shipped sample problems, labeler/data/sample_problems.jsonl, were right), so on those every
method scores 0 and the table shows nothing.

1. `labeler label`: Monte-Carlo labels of a right and a wrong solution of each training problem;
2. `labeler train`: a small PRM on those labels (the embedded SmolLM2-135M-Instruct as backbone);
3. `labeler bon`: the embedded model samples --candidates solutions for each evaluated problem
   (other problems, problem-only rows); the PRM scores them; the table of every method at
   N = 1, 2, 4, ...;
4. `labeler search`: beam search guided by the same PRM on the same problems, into the same output
   (its best-of-N comparison reuses bon's candidates and scores: nothing is sampled twice), and
   best-of-N at the same number of generated tokens.

Prints the best-of-N table, the search line and the seconds of each command (each in its own
process: its imports and engine start included). The embedded model is
weak at arithmetic and ten problems are few: the figures show the machinery at work, not what a
PRM is worth (the README gives the GPU recipe for that). On a shared machine run it under the
engine lock:

    flock /tmp/prm-engine.lock .venv/bin/python bench/bon.py [--problems 12] [--candidates 8] [--epochs 2] [--work DIR]

`labeler train` gets --epochs with --min-steps 0 (the bench's --min-steps): the product's default, at least 300
optimizer steps, would train 12 solutions for over 25 minutes on 2 cores; the bench prints this departure.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.decoding.reranking import format_table  # noqa: E402
from labeler.decoding.comparison import format_summary  # noqa: E402

NAMES = ("Tom", "Ana", "Liam", "Mia", "Sara", "Ben")


def word_problem(rng: random.Random) -> tuple[str, int, str, int]:
    """(problem, answer, the solution's step, the value it computes): one operation on small numbers."""
    name, a, b = rng.choice(NAMES), rng.randint(2, 9), rng.randint(2, 9)
    kind = rng.randrange(3)
    if kind == 0:
        return f"{name} has {a} apples and buys {b} more. How many apples does {name} have now?", a + b, f"{name} has {a} + {b}", a + b
    if kind == 1:
        a += b
        return f"{name} has {a} marbles and gives away {b}. How many marbles are left?", a - b, f"{name} has {a} - {b}", a - b
    return f"A box holds {a} pencils. How many pencils are in {b} boxes?", a * b, f"The boxes hold {a} * {b}", a * b


def problems_and_solutions(count: int, train: int, seed: int) -> tuple[list[dict], list[dict]]:
    """`count` problem-only rows to evaluate; for `train` other problems, a right and a wrong solution."""
    rng, seen, evaluated, solutions = random.Random(seed), set(), [], []
    while len(evaluated) < count or len(solutions) < 2 * train:
        problem, answer, step, value = word_problem(rng)
        if problem in seen:
            continue
        seen.add(problem)
        if len(evaluated) < count:
            evaluated.append({"id": f"eval-{len(evaluated)}", "problem": problem, "answer": str(answer)})
            continue
        wrong = value + rng.choice((-2, -1, 1, 2))
        for result in (value, wrong):
            solutions.append({"problem": problem, "answer": str(answer), "steps": [f"{step} = {result}.", f"The answer is: {result}"]})
    return evaluated, solutions


def run(step: str, args: list[str], timings: dict) -> str:
    """One labeler command in its own process (each engine gone with it); its stdout. Stops the bench if it fails."""
    print(f"[bench] {step}: labeler {' '.join(args)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "labeler.cli", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    timings[step] = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"labeler {args[0]} exited {done.returncode}")
    return done.stdout


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=12, help="problems evaluated")
    parser.add_argument("--train-problems", type=int, default=12, help="other problems whose right and wrong solutions label the PRM")
    parser.add_argument("--candidates", type=int, default=8, help="candidates per problem (N up to this)")
    parser.add_argument("--solution-max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts per step prefix of the PRM's labels")
    parser.add_argument("--epochs", type=int, default=2, help="PRM training epochs (passed with --min-steps: they are the epochs trained)")
    parser.add_argument("--min-steps", type=int, default=0,
                        help="labeler train's --min-steps (default 0 here: the product's default, 300 optimizer steps at least, "
                             "turns --epochs 1 on 12 solutions into 25 minutes on 2 cores)")
    parser.add_argument("--beams", type=int, default=2)
    parser.add_argument("--proposals", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--step-max-new-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0, help="of the problems, and of every labeler command")
    parser.add_argument("--work", default=None, help="folder for the outputs (default: a new temp folder); rerun with it to resume")
    return parser


def train_command(args: argparse.Namespace, work: Path, seed: list[str]) -> tuple[list[str], str]:
    """`labeler train`'s arguments, and the line that says where they depart from the product's defaults."""
    from labeler.prm.config import TrainConfig

    MIN_STEPS_DEFAULT = TrainConfig.__dataclass_fields__["min_steps"].default  # labeler train's own

    command = ["train", "--labels", str(work / "labels"), "--output", str(work / "prm"), "--epochs", str(args.epochs),
               "--min-steps", str(args.min_steps), "--batch-size", "8", "--learning-rate", "1e-4", "--max-length", "160",
               "--validation-fraction", "0", "--device", "cpu", *seed, "--quiet"]  # fmt: skip
    said = (f"train: --epochs {args.epochs} --min-steps {args.min_steps}, a departure from labeler train's default --min-steps "
            f"{MIN_STEPS_DEFAULT} (at least {MIN_STEPS_DEFAULT} optimizer steps, whatever --epochs says)"
            if args.min_steps != MIN_STEPS_DEFAULT else f"train: --epochs {args.epochs} and labeler train's default --min-steps "
            f"{MIN_STEPS_DEFAULT}: at least {MIN_STEPS_DEFAULT} optimizer steps, more epochs than --epochs on a small set")  # fmt: skip
    return command, said


def main() -> None:
    args = parser().parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-bon-"))
    work.mkdir(parents=True, exist_ok=True)
    evaluated, training = problems_and_solutions(args.problems, args.train_problems, args.seed)
    problems = work / "problems.jsonl"
    problems.write_text("".join(json.dumps(row) + "\n" for row in evaluated))
    train_rows = work / "train-solutions.jsonl"
    train_rows.write_text("".join(json.dumps(row) + "\n" for row in training))
    print(f"{len(evaluated)} problems evaluated, {len(training)} given solutions labelled for the PRM; outputs in {work}", flush=True)

    timings: dict[str, float] = {}
    seed = ["--seed", str(args.seed)]
    run("label", ["label", "--input", str(train_rows), "--preset", "processbench", "--output", str(work / "labels"),
                  "--rollouts", str(args.rollouts), "--max-new-tokens", "48", "--temperature", "0.7", *seed, "--quiet"], timings)  # fmt: skip
    train, said = train_command(args, work, seed)
    print(said, flush=True)
    run("train", train, timings)
    prm = str(work / "prm")  # its best/ checkpoint
    sampling = ["--candidates", str(args.candidates), "--solution-max-new-tokens", str(args.solution_max_new_tokens),
                "--temperature", str(args.temperature), *seed, "--device", "cpu", "--quiet", "--json"]  # fmt: skip
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
