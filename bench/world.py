"""Label quality in a world where the truth is known, on a CPU, with the labeler's own commands.

The world (labeler/world/): arithmetic word problems of 3-10 steps whose solutions are right, or
wrong from a known step on (an error injected there and carried through), and a small Llama trained
on right solutions until it solves most held-out problems (`make world` trains it once into the
cache). Math-Shepherd's premise holds in it by construction, so the figures say what the labels,
strategies and PRMs are worth where the completer is competent; they say nothing about a hard
domain or a large model (the GPU recipes in the README are for that).

Each command runs in its own process (its imports and engine start in its wall time):
1. `labeler label` on the label split (half of its solutions with an injected error) with
   exhaustive at N = 2, 4, 8, 16, first-error and adaptive; `labeler eval` scores every labels
   output against the known first errors (ProcessBench accuracy on erroneous and on correct
   solutions, F1), beside the tokens each spent. The completer's accuracy from right and from wrong
   prefixes is read off exhaustive's largest N (its rollout counts), from the problem off best-of-N.
2. `labeler import` writes the true labels; `labeler train` trains a PRM (the world model as its
   backbone) on the Monte-Carlo labels and one on the true labels; `labeler eval --prm` scores both on
   the held-out test split.
3. `labeler bon` samples --candidates solutions of each held-out problem with the world model and
   ranks them with both PRMs (selection and weighted vote beside majority vote, pass@N, random);
   `labeler search` runs beam search with the Monte-Carlo PRM at its own tokens, beside best-of-N
   at equal tokens.

    flock /tmp/prm-engine.lock .venv/bin/python bench/world.py [--work DIR] [--model DIR]

Prints every command with its wall time, then the tables; writes them to WORK/world.json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.decoding.comparison import format_summary  # noqa: E402
from labeler.decoding.reranking import format_table  # noqa: E402
from labeler.store.reader import read_labels_table  # noqa: E402
from labeler.world.cache import HELD_OUT_SPLITS, WORLD_VERSION  # noqa: E402
from labeler.world.problems import make_problems, processbench_rows  # noqa: E402


def subprocess_runner(args: list[str]) -> str:
    """One labeler command in its own process (its imports and engine start in its time); its stdout."""
    done = subprocess.run([sys.executable, "-m", "labeler.cli", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"labeler {shlex.join(args)} exited {done.returncode}")
    return done.stdout


class Commands:
    """Runs labeler commands through `runner`, timing each and keeping the list."""

    def __init__(self, runner: Callable[[list[str]], str] = subprocess_runner):
        self.runner, self.timings = runner, []

    def __call__(self, name: str, args: list[str]) -> str:
        command = "labeler " + shlex.join(args)
        print(f"[world] {name}: {command}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        stdout = self.runner(args)
        seconds = time.perf_counter() - started
        self.timings.append({"step": name, "command": command, "seconds": round(seconds, 1)})
        print(f"[world] {name}: {seconds:.0f} s", file=sys.stderr, flush=True)
        return stdout


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def checked(args: argparse.Namespace) -> list[int]:
    """The exhaustive runs' N, after every flag is checked (SystemExit naming the flag)."""
    try:
        rollouts = [int(n) for n in args.rollouts.split(",")]
    except ValueError:
        raise SystemExit(f"--rollouts {args.rollouts!r}: give N as positive integers separated by commas, e.g. 2,4,8,16") from None
    if min(rollouts) < 1 or len(set(rollouts)) < len(rollouts):
        raise SystemExit(f"--rollouts {args.rollouts!r}: every N must be at least 1, and none twice")
    for flag in ("label_problems", "test_problems", "bon_problems", "candidates", "epochs", "beams", "proposals"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be at least 1")
    for split, flag in (("label", "label_problems"), ("test", "test_problems"), ("bon", "bon_problems")):
        if getattr(args, flag) > HELD_OUT_SPLITS[split]:
            raise SystemExit(f"--{flag.replace('_', '-')} {getattr(args, flag)}: the world model was kept from only the first "
                             f"{HELD_OUT_SPLITS[split]} problems of the {split} split")  # fmt: skip
    names = [name for name, _ in strategies(rollouts)]
    if args.prm_labels is not None and args.prm_labels not in names:
        raise SystemExit(f"--prm-labels {args.prm_labels!r}: one of the bench's labelling runs, {', '.join(names)}")
    return rollouts


def strategies(rollouts: list[int]) -> list[tuple[str, list[str]]]:
    """(name, flags) of each labelling run: exhaustive at every N (ascending), first-error and adaptive at the largest."""
    top = max(rollouts)
    runs = [(f"exhaustive-{n}", ["--strategy", "exhaustive", "--rollouts", str(n)]) for n in sorted(rollouts)]
    runs.append((f"first-error-{top}", ["--strategy", "first-error", "--rollouts", str(top)]))
    runs.append((f"adaptive-{top}", ["--strategy", "adaptive", "--rollouts", str(top), "--round-size", "4"]))
    return runs


def prefix_accuracy(labels_dir: Path, truth: dict[str, int]) -> dict:
    """The completer's success rate from right prefixes (steps before the known first error) and from
    wrong ones (at or after it): correct rollouts over counted rollouts, from each step's counts."""
    table = read_labels_table(labels_dir, ["problem_id", "label_method", "n_correct", "n_rollouts"])
    sums = {"right": [0, 0], "wrong": [0, 0]}
    for row in table.to_pylist():
        first_error = truth[row["problem_id"]]
        for i, method in enumerate(row["label_method"]):
            if method != "rollouts":
                continue
            counted = row["n_rollouts"][i]  # cut and timed-out rollouts are not among them
            side = "wrong" if 0 <= first_error <= i else "right"
            sums[side][0] += row["n_correct"][i]
            sums[side][1] += counted
    return {side: {"correct": c, "counted": n, "rate": c / n if n else None} for side, (c, n) in sums.items()}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="the world model's folder (default: the cache's, trained first if missing)")
    parser.add_argument("--work", default=None, help="folder for the outputs (default: a new temp folder)")
    parser.add_argument("--label-problems", type=int, default=120, help="solutions labelled (half with an error), the PRMs' training set")
    parser.add_argument("--test-problems", type=int, default=120, help="held-out solutions the PRMs are scored on")
    parser.add_argument("--bon-problems", type=int, default=60, help="held-out problems for best-of-N and search")
    parser.add_argument("--rollouts", default="2,4,8,16", help="exhaustive's N; first-error and adaptive run at the largest")
    parser.add_argument("--prm-labels", default=None, help="the labelling run the Monte-Carlo PRM trains on (default: exhaustive at the largest N)")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3, help="PRM training epochs")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--proposals", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def run_world(args: argparse.Namespace, commands: Commands) -> dict:
    """Every command of the bench through `commands`; the figures (also written to WORK/world.json).
    Bad flags, and a --work folder that holds an earlier run, stop it (SystemExit) before anything runs."""
    rollouts = checked(args)
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="bench-world-"))
    if work.exists() and not work.is_dir():
        raise SystemExit(f"--work {work} is not a folder")
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"--work {work} holds an earlier run (its commands would resume, not run): pass a new or empty folder")
    work.mkdir(parents=True, exist_ok=True)
    if args.model is None:
        from labeler.world import cache

        args.model = str(cache.ensure_world_model())
    args.model = str(Path(args.model).resolve()) if Path(args.model).exists() else args.model  # the commands run in ROOT
    label_rows = list(processbench_rows(make_problems(args.label_problems, "label", args.seed), 0.5, args.seed))
    test_rows = list(processbench_rows(make_problems(args.test_problems, "test", args.seed), 0.5, args.seed + 1))
    bon_rows = [{"id": p.id, "problem": p.text, "answer": str(p.answer)} for p in make_problems(args.bon_problems, "bon", args.seed)]
    label_file, test_file = write_jsonl(work / "label.jsonl", label_rows), write_jsonl(work / "test.jsonl", test_rows)
    bon_file = write_jsonl(work / "bon.jsonl", bon_rows)
    truth = {row["id"]: row["label"] for row in label_rows}
    print(f"world model {args.model}; outputs in {work}", file=sys.stderr, flush=True)

    common = ["--model", args.model, "--temperature", str(args.temperature), "--seed", str(args.seed), "--quiet"]
    runs = strategies(rollouts)
    tokens = {}
    for name, flags in runs:
        summary = json.loads(commands(name, ["label", "--input", str(label_file), "--preset", "processbench", "--output", str(work / name),
                                             *flags, *common, "--json"]))  # fmt: skip
        tokens[name] = summary["generated_tokens"]
    quality = json.loads(commands("eval labels", ["eval", *(f for name, _ in runs for f in ("--labels", f"{name}={work / name}")),
                                                  "--reference", str(label_file), "--json"]))  # fmt: skip
    exhaustive = f"exhaustive-{max(rollouts)}"
    accuracy = prefix_accuracy(work / exhaustive, truth)
    agreement = {name: first_error_agreement(work / name, work / exhaustive) for name, _ in runs if name != exhaustive}
    found = {name: errors_found(work / name, label_rows) for name, _ in runs}

    commands("import true labels", ["import", "--input", str(label_file), "--preset", "processbench", "--output", str(work / "true"), "--quiet"])
    prm_labels = args.prm_labels or exhaustive
    train = ["--model", args.model, "--epochs", str(args.epochs), "--batch-size", "16", "--learning-rate", "1e-3",
             "--validation-fraction", "0", "--device", "cpu", "--seed", str(args.seed), "--quiet"]  # fmt: skip
    commands("train PRM on MC labels", ["train", "--labels", str(work / prm_labels), "--output", str(work / "prm-mc"), *train])
    commands("train PRM on true labels", ["train", "--labels", str(work / "true"), "--output", str(work / "prm-true"), *train])
    prm_quality = json.loads(commands("eval PRMs", ["eval", "--prm", f"mc={work / 'prm-mc'}", "--prm", f"true={work / 'prm-true'}",
                                                    "--reference", str(test_file), "--device", "cpu", "--json"]))  # fmt: skip

    sampling = ["--candidates", str(args.candidates), *common, "--device", "cpu", "--json"]
    bon = json.loads(commands("bon", ["bon", "--input", str(bon_file), "--output", str(work / "bon"), "--prm", str(work / "prm-mc"),
                                      "--prm", str(work / "prm-true"), *sampling]))  # fmt: skip
    search = json.loads(commands("search", ["search", "--input", str(bon_file), "--output", str(work / "bon"), "--prm", str(work / "prm-mc"),
                                            "--beams", str(args.beams), "--proposals", str(args.proposals), "--max-steps", "12",
                                            "--step-max-new-tokens", "48", *sampling]))  # fmt: skip

    marker = Path(args.model) / "world_model.json"  # args.model is resolved above when it is a folder
    built = json.loads(marker.read_text()) if marker.exists() else None
    results = {"model": args.model, "model_record": built, "work": str(work), "runs": [name for name, _ in runs], "reference_run": exhaustive, "timings": commands.timings,
               "tokens": tokens, "label_quality": quality, "first_error_agreement": agreement, "errors_found": found, "prefix_accuracy": accuracy,
               "prm_labels": prm_labels, "temperature": args.temperature, "seed": args.seed, "world_version": WORLD_VERSION, "prm_quality": prm_quality, "bon": bon, "search": search}  # fmt: skip
    (work / "world.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def errors_found(labels_dir: Path, rows: list[dict]) -> dict:
    """Of the solutions with an injected error, how many have it as their first_error, apart for errors
    in the last step (found by checking the stated answer, `--final-step check`: no rollouts) and
    errors in an earlier step (found by the rollouts). `errors` counts the solutions `labeler eval`'s
    F1 table counts as erroneous: those whose first error the labels determine. One whose first_error
    is null (an unlabelled step comes before its first hard 0) is `undetermined`, one the run did not label
    (rejected) `not_labelled`: both counted apart, as eval counts them apart ("no prediction", unmatched)."""
    table = read_labels_table(labels_dir, ["problem_id", "first_error"])
    predicted = {row["problem_id"]: row["first_error"] for row in table.to_pylist()}
    out = {side: {"found": 0, "errors": 0, "undetermined": 0, "not_labelled": 0} for side in ("last_step", "earlier")}
    for row in rows:
        if row["label"] < 0:
            continue
        side = out["last_step" if row["label"] == len(row["steps"]) - 1 else "earlier"]
        if row["id"] not in predicted:
            side["not_labelled"] += 1
        elif predicted[row["id"]] is None:
            side["undetermined"] += 1
        else:
            side["errors"] += 1
            side["found"] += predicted[row["id"]] == row["label"]
    return out


def first_error_agreement(labels_dir: Path, reference_dir: Path) -> dict:
    """How often a run's first_error equals the reference run's, over the solutions both determine (a
    null first_error, an unlabelled step before it, is undetermined, in either run: counted apart)."""
    def first_errors(path: Path) -> dict:
        table = read_labels_table(path, ["problem_id", "solution_id", "first_error"])
        return {(row["problem_id"], row["solution_id"]): row["first_error"] for row in table.to_pylist()}

    ours, reference = first_errors(labels_dir), first_errors(reference_dir)
    both = [key for key in reference if ours.get(key) is not None and reference[key] is not None]
    return {"compared": len(both), "equal": sum(ours[k] == reference[k] for k in both), "undetermined": len(reference) - len(both)}


def main() -> None:
    results = run_world(parser().parse_args(), Commands())
    print(report(results))


def report(results: dict) -> str:
    """The figures as text: the completer, the labels, the PRMs, best-of-N and search, the commands."""
    from labeler.evaluation.human_agreement import format_comparison

    lines = []
    accuracy, bon = results["prefix_accuracy"], results["bon"]
    from_problem = bon["candidates_correct"] / bon["candidates"] if bon["candidates"] else None
    lines.append(f"Completer (the world model; sampled at temperature {results['temperature']}):")
    record = results["model_record"]
    if record and record.get("world_version") != results["world_version"]:
        lines.append(f"  WARNING: the model was built for world version {record.get('world_version')}, this code is version "
                     f"{results['world_version']}: it learned other problems or prompts")  # fmt: skip
    if record and record.get("settings", {}).get("seed") != results["seed"]:
        lines.append(f"  WARNING: the model was trained with seed {record['settings']['seed']}, the bench's problems use seed "
                     f"{results['seed']}: they were not kept out of its training")  # fmt: skip
    if record:
        greedy = record.get("held_out_greedy_accuracy") or {"correct": "?", "problems": "?"}
        lines.append(f"  from the problem, greedy: {greedy['correct']}/{greedy['problems']} held-out problems right (measured when it was built)")
    lines.append(f"  from the problem, sampled: {_share(from_problem)} of {bon['candidates']} best-of-N candidates right")
    for side in ("right", "wrong"):
        a = accuracy[side]
        lines.append(f"  from {side} prefixes: {_share(a['rate'])} of {a['counted']} counted rollouts reach the reference answer")
    lines.append("")
    lines.append("Monte-Carlo labels against the known first errors (label split):")
    lines.append(format_comparison(results["label_quality"]))
    lines.append("Injected errors found (first_error = the known one), by where the error is (a last-step error is read off its "
                 "stated answer, but missed when rollouts call an earlier right step wrong), of those whose first error the labels "
                 "determine, as the table above counts them:")  # fmt: skip
    lines.extend(_errors_found_line(name, found) for name, found in results["errors_found"].items())
    lines.append("")
    runs, exhaustive = results["runs"], results["reference_run"]
    base = results["tokens"][exhaustive]
    lines.append(f"Generated tokens per labelling run, and first errors equal to {exhaustive}'s (of the solutions both determine):")
    for name in runs:
        spent, agree = results["tokens"][name], results["first_error_agreement"].get(name)
        share = f"  {agree['equal']}/{agree['compared']} first errors equal" if agree else ""
        undetermined = f", {agree['undetermined']} undetermined" if agree and agree["undetermined"] else ""
        lines.append(f"  {name:<16} {spent:>10,} tokens  {spent / base if base else float('nan'):5.2f}x {exhaustive}{share}{undetermined}")
    lines.append("")
    lines.append(f"PRMs on the held-out test split (trained on {results['prm_labels']}'s labels, and on the true labels):")
    lines.append(format_comparison(results["prm_quality"]))
    lines.append("")
    lines.append(format_table(bon))
    lines.append("")
    lines.append(format_summary(results["search"]))
    lines.append("")
    lines.append("Commands and wall times:")
    lines.extend(f"  {t['seconds']:>7.1f} s  {t['command']}" for t in results["timings"])
    return "\n".join(lines)


def _errors_found_line(name: str, found: dict) -> str:
    """Found of the errors the F1 table counts (first error determined), and what was left out of both."""
    last, earlier = found["last_step"], found["earlier"]
    kinds = (("undetermined", "undetermined"), ("not_labelled", "not labelled"))
    counts = {what: sum(side.get(key, 0) for side in (last, earlier)) for key, what in kinds}
    apart = [f"{count} {what}" for what, count in counts.items() if count]
    return (f"  {name:<16} earlier steps (by rollouts) {earlier['found']}/{earlier['errors']}, "
            f"last step (answer checked) {last['found']}/{last['errors']}" + (f"; left out: {', '.join(apart)}" if apart else ""))  # fmt: skip


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


if __name__ == "__main__":
    main()
