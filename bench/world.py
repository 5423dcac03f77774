"""Label quality and PRMs in a world where the truth is known, on a CPU, with the labeler's own commands.

The world (labeler/world/): arithmetic word problems of 3-10 steps, and one small Llama training run
on right solutions (`make world` trains it once into the cache) that gives two models: the *policy*
(the run part-way: it samples the solutions that are labelled and the best-of-N candidates, right
about half the time) and the *completer* (the run's end: it completes prefixes for the Monte-Carlo
labels and is the base the PRMs are trained from). The world knows its arithmetic, so every
solution's exact first error is computed (labeler/world/truth.py). The figures say what the labels,
strategies and PRMs are worth where the completer is stronger than the policy; they say nothing about a
hard domain or a large model (the GPU recipes in the README are for that).

Each command runs in its own process (its imports and engine start in its wall time):
1. `labeler label` (the completer) on the label split's solutions (half with an injected error) with
   exhaustive at N = 2, 4, 8, 16, first-error, adaptive and posterior; `labeler eval` scores every labels
   output against the known first errors (ProcessBench accuracy on erroneous and on correct
   solutions, F1), beside the tokens each spent. The completer's accuracy from right and from wrong
   prefixes is read off exhaustive's largest N (its rollout counts).
2. The PRMs, with `labeler train`'s defaults (no training flag but the model, device and seed): the
   policy samples --solutions-per-problem solutions of --policy-problems label-split problems
   (`labeler label --strategy final-answer`), the completer labels them three times (exhaustive,
   first-error and posterior at N=8: their Monte-Carlo labels, each scored against their exact first
   errors by `labeler eval`, beside its tokens). A PRM trains on each labelling (first-error's is "the
   Monte-Carlo PRM" of what follows), one on the exact labels, and an ORM (the same base, every step labelled with
   the final answer's correctness, trained on the last step alone: --train-on-last-step-only), and, as
   an ablation, the Monte-Carlo PRM without its step-surprise term (--no-step-surprise). `labeler eval
   --prm` scores the PRMs, and the completer's own lowest token log-probability per step
   (`logprob:MODEL`, no training), on the policy's samples of test-split problems with their exact
   first errors, and on the injected-error test solutions.
3. `labeler bon` has the policy sample --candidates solutions of each of --bon-problems held-out
   problems and ranks them with the PRMs, the ORM and the baseline (selection and weighted vote
   beside majority vote, pass@N, random, each with a 95% bootstrap interval over problems);
   `labeler search` runs the policy's beam search with the Monte-Carlo PRM at its own tokens, beside
   best-of-N at equal tokens.

    flock /tmp/prm-engine.lock .venv/bin/python bench/world.py [--work DIR] [--model DIR] [--policy DIR]

Prints every command with its wall time, then the tables; writes them to WORK/world.json, whose
"summary" object holds the headline figures under fixed keys (SUMMARY_KEYS) for scripts. Every flag a
command is passed with another value than that command's own default (search's --step-max-new-tokens 48,
adaptive's --round-size 4, --device cpu, ...) is listed in the report and in world.json's "departures".
--policy-problems may not reach bench/world_rl.py's RL prompts (the label split's problems from
RL_PROBLEMS_FROM, 1,000, on): the PRM trained on them is that bench's reward.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
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
from labeler.world.accuracy import stated_answer  # noqa: E402
from labeler.world.cache import HELD_OUT_SPLITS, WORLD_VERSION  # noqa: E402
from labeler.world.problems import make_problems, processbench_rows  # noqa: E402
from labeler.world.provenance import differs_from_reference, environment  # noqa: E402
from labeler.world.training import POLICY_FOLDER  # noqa: E402
from labeler.world.truth import exact_first_error  # noqa: E402
from bench.world_rl import RL_PROBLEMS_FROM  # noqa: E402

SUMMARY_KEYS = ("bon_problems", "n", "pass_at_n", "majority", "random", "orm_select", "prm_select", "prm_weighted_vote",
                "prm_weighted_vote_ci95", "prm_mc", "prm_true", "labels", "label_split")  # fmt: skip
SELECTION_AGGREGATES = ("min", "product", "last")  # prm_select is the best of these at the largest N
VOTE_AGGREGATE = "min"  # the weighted vote the summary reports: by the product's default aggregate


# PRM training's intra-op threads, pinned like the world build's (WorldModelSettings.threads): a machine with more
# cores would sum in another order and train another PRM from the same labels and seed.
TRAIN_THREADS = 2


def subprocess_runner(args: list[str]) -> str:
    """One labeler command in its own process (its imports and engine start in its time); its stdout. `train` runs
    with TRAIN_THREADS threads."""
    env = {**os.environ, "OMP_NUM_THREADS": str(TRAIN_THREADS)} if args[:1] == ["train"] else None
    done = subprocess.run([sys.executable, "-m", "labeler.cli", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"labeler {shlex.join(args)} exited {done.returncode}")
    return done.stdout


# Flags that name what a command reads and writes, or how it prints: not a departure from the product's defaults.
NOT_SETTINGS = {"--input", "--output", "--labels", "--reference", "--prm", "--model", "--policy", "--json", "--quiet", "--preset", "--work"}


@functools.lru_cache(maxsize=None)
def _command_flags(command: str) -> dict[str, argparse.Action]:
    """The flags of `labeler COMMAND`, as its own parser declares them (their defaults included)."""
    from labeler.cli import build_parser

    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return {flag: action for action in subcommands[command]._actions for flag in action.option_strings}


def _default_text(action: argparse.Action) -> str:
    """A flag's default as its help states it (a default of None is often the command's own: "(default: 16)")."""
    if action.default is not None and action.default is not argparse.SUPPRESS:
        return str(action.default)
    stated = re.search(r"\(default: ([^)]*)\)", action.help or "")
    return stated.group(1) if stated else "not set"


def _same(value: str, default: str) -> bool:
    try:
        return value == default or float(value) == float(default)
    except ValueError:
        return False


def departures_of(args: list[str]) -> list[tuple[str, str, str]]:
    """(flag, value, the command's default) of each flag in `args` (a labeler command line) whose value is not the
    command's own default: the settings in which the bench departs from what a user gets. Inputs, outputs, the model
    and how the command prints (NOT_SETTINGS) are not settings."""
    flags, out, i = _command_flags(args[0]), [], 1
    while i < len(args):
        flag, has_inline, inline = args[i].partition("=")
        i += 1
        action = flags.get(flag)
        if action is None or flag in NOT_SETTINGS or action.dest == "help":
            continue
        if action.nargs == 0:  # a switch: passing it departs from the default
            out.append((flag, "on", "off"))
            continue
        value = inline if has_inline else args[i]
        i += 0 if has_inline else 1
        default = _default_text(action)
        if not _same(value, default):
            out.append((flag, value, default))
    return out


class Commands:
    """Runs labeler commands through `runner`, timing each and keeping the list (and each one's arguments, for
    `departures`)."""

    def __init__(self, runner: Callable[[list[str]], str] = subprocess_runner):
        self.runner, self.timings, self.commands = runner, [], []

    def departures(self) -> list[dict]:
        """Every flag the commands passed with another value than the command's own default: {command, flag, value,
        default, steps (the bench's steps that passed it)}, in the order first passed."""
        found: dict[tuple[str, str, str], dict] = {}
        for name, args in self.commands:
            for flag, value, default in departures_of(args):
                entry = found.setdefault((args[0], flag, value), {"command": args[0], "flag": flag, "value": value, "default": default, "steps": []})
                entry["steps"].append(name)
        return list(found.values())

    def __call__(self, name: str, args: list[str]) -> str:
        command = "labeler " + shlex.join(args)
        print(f"[world] {name}: {command}", file=sys.stderr, flush=True)
        self.commands.append((name, list(args)))
        started = time.perf_counter()
        stdout = self.runner(args)
        seconds = time.perf_counter() - started
        self.timings.append({"step": name, "command": command, "seconds": round(seconds, 1)})
        print(f"[world] {name}: {seconds:.0f} s", file=sys.stderr, flush=True)
        return stdout


def sampling_flags(model: str, temperature: float, seed: int) -> list[str]:
    """The flags of every sampling command of the bench (label, bon, search): `model` at the run's temperature and seed."""
    return ["--model", model, "--temperature", str(temperature), "--seed", str(seed), "--quiet"]


def train_flags(model: str, seed: int, min_steps: int | None) -> list[str]:
    """The flags the bench trains every PRM with (bench/world_active.py's too); the product's defaults otherwise."""
    return ["--model", model, "--device", "cpu", "--seed", str(seed), "--quiet", *(["--min-steps", str(min_steps)] if min_steps is not None else [])]


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
    if args.policy is not None and not Path(args.policy).is_dir():
        raise SystemExit(f"--policy {args.policy}: not a model folder")
    for flag in ("label_problems", "test_problems", "bon_problems", "candidates", "beams", "proposals", "policy_problems", "solutions_per_problem",
                 "policy_test_problems"):  # fmt: skip
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be at least 1")
    if args.policy_problems > RL_PROBLEMS_FROM:
        raise SystemExit(f"--policy-problems {args.policy_problems}: the PRM trained on them is bench/world_rl.py's reward, whose RL prompts are "
                         f"the label split's problems from {RL_PROBLEMS_FROM} on; at most {RL_PROBLEMS_FROM}, so that none of them is both")  # fmt: skip
    for split, flag in (("label", "label_problems"), ("test", "test_problems"), ("bon", "bon_problems"), ("label", "policy_problems"),
                        ("test", "policy_test_problems")):  # fmt: skip
        if getattr(args, flag) > HELD_OUT_SPLITS[split]:
            raise SystemExit(f"--{flag.replace('_', '-')} {getattr(args, flag)}: the world model was kept from only the first "
                             f"{HELD_OUT_SPLITS[split]} problems of the {split} split")  # fmt: skip
    return rollouts


def strategies(rollouts: list[int]) -> list[tuple[str, list[str]]]:
    """(name, flags) of each labelling run: exhaustive at every N (ascending), first-error, adaptive and posterior at
    the largest."""
    top = max(rollouts)
    runs = [(f"exhaustive-{n}", ["--strategy", "exhaustive", "--rollouts", str(n)]) for n in sorted(rollouts)]
    runs.append((f"first-error-{top}", ["--strategy", "first-error", "--rollouts", str(top)]))
    runs.append((f"adaptive-{top}", ["--strategy", "adaptive", "--rollouts", str(top), "--round-size", "4"]))
    runs.append((f"posterior-{top}", ["--strategy", "posterior", "--rollouts", str(top)]))
    return runs


# How the completer labels the policy's samples, each with a PRM trained on its labels: (name, flags, labels folder, PRM
# folder). first-error-8's are the Monte-Carlo labels the rest of the bench uses (prm-mc: best-of-N, search).
POLICY_LABELLINGS = (
    ("exhaustive-8", ["--strategy", "exhaustive", "--rollouts", "8"], "policy-exhaustive", "prm-exhaustive"),
    ("first-error-8", ["--strategy", "first-error", "--rollouts", "8"], "policy-mc", "prm-mc"),
    ("posterior-8", ["--strategy", "posterior", "--rollouts", "8"], "policy-posterior", "prm-posterior"),
)
PRM_OF_LABELLING = {"exhaustive-8": "exhaustive", "first-error-8": "mc", "posterior-8": "posterior"}  # its name in `labeler eval --prm`


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
    parser.add_argument("--model", default=None, help="the completer's folder, the PRMs' base (default: the cache's world model, trained first if missing)")
    parser.add_argument("--policy", default=None, help="the policy's folder, which samples solutions and candidates (default: MODEL/policy)")
    parser.add_argument("--work", default=None, help="folder for the outputs (default: a new temp folder)")
    parser.add_argument("--label-problems", type=int, default=120, help="solutions labelled (half with an error), the PRMs' training set")
    parser.add_argument("--test-problems", type=int, default=120, help="held-out solutions the PRMs are scored on")
    parser.add_argument("--bon-problems", type=int, default=300, help="held-out problems for best-of-N and search")
    parser.add_argument("--policy-problems", type=int, default=500, help="label-split problems whose sampled solutions train the PRMs")
    parser.add_argument("--solutions-per-problem", type=int, default=4, help="solutions the policy samples per problem for the PRMs")
    parser.add_argument("--policy-test-problems", type=int, default=200, help="test-split problems whose sampled solutions score the PRMs")
    parser.add_argument("--min-steps", type=int, default=None,
                        help="for quick runs of the path (tests) only: `labeler train --min-steps` (default: not passed, the product's default)")
    parser.add_argument("--rollouts", default="2,4,8,16", help="exhaustive's N; first-error and adaptive run at the largest")
    parser.add_argument("--candidates", type=int, default=16)
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
    if args.policy is None:  # an explicit --policy was checked with the flags
        if not (Path(args.model) / POLICY_FOLDER).is_dir():
            raise SystemExit(f"--model {args.model} has no {POLICY_FOLDER}/ (a world model before version 2?): pass --policy, or `make world`")
        args.policy = str(Path(args.model) / POLICY_FOLDER)
    args.policy = str(Path(args.policy).resolve())
    label_rows = list(processbench_rows(make_problems(args.label_problems, "label", args.seed), 0.5, args.seed))
    test_rows = list(processbench_rows(make_problems(args.test_problems, "test", args.seed), 0.5, args.seed + 1))
    bon_rows = [{"id": p.id, "problem": p.text, "answer": str(p.answer)} for p in make_problems(args.bon_problems, "bon", args.seed)]
    label_file = write_jsonl(work / "label.jsonl", label_rows)
    write_jsonl(work / "test.jsonl", test_rows)  # the injected-error test solutions (policy_prms evaluates on them)
    bon_file = write_jsonl(work / "bon.jsonl", bon_rows)
    truth = {row["id"]: row["label"] for row in label_rows}
    print(f"completer {args.model}, policy {args.policy}; outputs in {work}", file=sys.stderr, flush=True)

    common = sampling_flags(args.model, args.temperature, args.seed)  # the completer's rollouts
    policy_common = sampling_flags(args.policy, args.temperature, args.seed)  # the policy's samples
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

    policy = policy_prms(args, work, commands, common, policy_common)
    prm_quality = policy["injected"]

    sampling = ["--candidates", str(args.candidates), *policy_common, "--device", "cpu", "--json"]
    prms = [str(work / "prm-mc"), str(work / "prm-true"), str(work / "orm"), f"logprob:{args.model}"]
    bon = json.loads(commands("bon", ["bon", "--input", str(bon_file), "--output", str(work / "bon"), *(f for p in prms for f in ("--prm", p)),
                                      *sampling]))  # fmt: skip
    search = json.loads(commands("search", ["search", "--input", str(bon_file), "--output", str(work / "bon"), "--prm", str(work / "prm-mc"),
                                            "--beams", str(args.beams), "--proposals", str(args.proposals), "--max-steps", "12",
                                            "--step-max-new-tokens", "48", *sampling]))  # fmt: skip

    marker = Path(args.model) / "world_model.json"  # args.model is resolved above when it is a folder
    built = json.loads(marker.read_text()) if marker.exists() else None
    results = {"model": args.model, "policy_model": args.policy, "model_record": built, "work": str(work), "runs": [name for name, _ in runs], "reference_run": exhaustive, "timings": commands.timings,
               "tokens": tokens, "label_quality": quality, "first_error_agreement": agreement, "errors_found": found, "prefix_accuracy": accuracy,
               "prm_labels": "first-error-8 (the completer) on the policy's samples", "temperature": args.temperature, "seed": args.seed, "min_steps": args.min_steps, "world_version": WORLD_VERSION,
               "prm_quality": prm_quality, "policy": policy, "bon": bon, "search": search,
               "departures": commands.departures(), "environment": environment(TRAIN_THREADS),
               "differs_from_reference": differs_from_reference(Path(args.model), built)}  # fmt: skip
    results["summary"] = summary_of(results)
    (work / "world.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def policy_prms(args: argparse.Namespace, work: Path, commands: Commands, common: list[str], policy_common: list[str]) -> dict:
    """The policy's own samples, the completer's Monte-Carlo labels of them beside their exact labels, the PRMs and
    the ORM trained on them with `labeler train`'s defaults, and `labeler eval --prm` of the PRMs and the logprob
    baseline on held-out samples with exact first errors and on the injected-error test solutions."""
    problems = make_problems(args.policy_problems, "label", args.seed)
    test_problems = make_problems(args.policy_test_problems, "test", args.seed)
    problem_rows = lambda chosen: [{"id": p.id, "problem": p.text, "answer": str(p.answer)} for p in chosen]  # noqa: E731
    sample = ["--preset", "math", "--solutions-per-problem", str(args.solutions_per_problem), "--strategy", "final-answer", *policy_common, "--json"]
    commands("sample the policy's solutions", ["label", "--input", str(write_jsonl(work / "policy-problems.jsonl", problem_rows(problems))),
                                               "--output", str(work / "policy-samples"), *sample])  # fmt: skip
    commands("sample held-out solutions", ["label", "--input", str(write_jsonl(work / "policy-test-problems.jsonl", problem_rows(test_problems))),
                                           "--output", str(work / "policy-test"), *sample])  # fmt: skip
    samples, truth = exact_samples(work / "policy-samples", problems)
    test_samples, test_truth = exact_samples(work / "policy-test", test_problems)
    # ProcessBench rows: the problem's id (samples of one problem stay on one side of the trainer's validation split),
    # its answer (the completer's checker needs it) and the exact first error (the reference `labeler eval` reads)
    with_truth = lambda chosen, first_errors: [{"id": s["problem_id"], "problem": s["problem"], "answer": s["answer"], "steps": s["steps"],  # noqa: E731
                                                "label": first_errors[s["key"]]} for s in chosen]  # fmt: skip
    policy_file = write_jsonl(work / "policy.jsonl", with_truth(samples, truth))
    label_tokens = {}
    for name, flags, folder, _ in POLICY_LABELLINGS:
        summary = json.loads(commands(f"label the policy's samples, {name}", ["label", "--input", str(policy_file), "--preset", "processbench",
                                                                               "--output", str(work / folder), *flags, *common, "--json"]))  # fmt: skip
        label_tokens[name] = summary["generated_tokens"]
    label_quality = json.loads(commands("eval the policy's labels", ["eval", *(f for name, _, folder, _ in POLICY_LABELLINGS
                                                                               for f in ("--labels", f"{name}={work / folder}")),
                                                                     "--reference", str(policy_file), "--json"]))  # fmt: skip
    exact_file = write_jsonl(work / "policy-exact.jsonl", [stepwise_row(s, truth[s["key"]]) for s in samples])
    outcome_file = write_jsonl(work / "policy-outcome.jsonl", [outcome_row(s, truth[s["key"]]) for s in samples])
    reference = write_jsonl(work / "policy-test.jsonl", with_truth(test_samples, test_truth))
    train = train_flags(args.model, args.seed, args.min_steps)
    for name, _, folder, prm in POLICY_LABELLINGS:
        commands(f"train PRM on {name} labels", ["train", "--labels", str(work / folder), "--output", str(work / prm), *train])
    commands("train PRM on exact labels", ["train", "--labels", str(exact_file), "--output", str(work / "prm-true"), *train])
    commands("train ORM", ["train", "--labels", str(outcome_file), "--output", str(work / "orm"), *train, "--train-on-last-step-only"])
    # the ablation: the same PRM without the step-surprise term (a head on the hidden state alone, as before 2026-12-06)
    commands("train PRM on MC labels, no surprise", ["train", "--labels", str(work / "policy-mc"), "--output", str(work / "prm-mc-no-surprise"),
                                                     *train, "--no-step-surprise"])  # fmt: skip
    scored = [*(f for name, _, _, prm in POLICY_LABELLINGS for f in ("--prm", f"{PRM_OF_LABELLING[name]}={work / prm}")),
              "--prm", f"true={work / 'prm-true'}", "--prm", f"mc-no-surprise={work / 'prm-mc-no-surprise'}",
              "--prm", f"base-logprob=logprob:{args.model}"]  # fmt: skip
    on_samples = json.loads(commands("eval PRMs on the policy's samples", ["eval", *scored, "--reference", str(reference), "--device", "cpu", "--json"]))
    injected = json.loads(commands("eval PRMs on injected errors", ["eval", *scored, "--reference", str(work / "test.jsonl"), "--device", "cpu", "--json"]))
    errors = lambda t: sum(v >= 0 for v in t.values())  # noqa: E731
    return {"samples": len(samples), "samples_with_error": errors(truth), "samples_right": sum(s["answer_right"] for s in samples),
            "test_samples": len(test_samples), "test_samples_with_error": errors(test_truth), "label_quality": label_quality,
            "label_tokens": label_tokens,
            "on_samples": on_samples, "injected": injected}  # fmt: skip


def exact_samples(labels_dir: Path, problems) -> tuple[list[dict], dict[str, int]]:
    """The distinct sampled solutions of a labels output (key, problem, steps, whether its final answer is right) and
    each one's exact first error, by key; a problem is found by its text. A solution sampled twice for one problem is
    kept once: `labeler eval` tells a problem's solutions apart by their steps, and would leave twins out as ambiguous."""
    by_text = {p.text: p for p in problems}
    table = read_labels_table(labels_dir, ["problem_id", "solution_id", "problem", "steps"])
    samples, truth, seen = [], {}, set()
    for row in table.to_pylist():
        if (row["problem_id"], tuple(row["steps"])) in seen:
            continue
        seen.add((row["problem_id"], tuple(row["steps"])))
        key = f"{row['problem_id']}/{row['solution_id']}"
        problem = by_text[row["problem"].strip()]
        if not row["steps"]:
            raise SystemExit(f"{labels_dir}: solution {key} has no steps: it has no first error to score a PRM against")
        stated = stated_answer("\n\n".join(row["steps"]))
        samples.append({"key": key, "problem_id": row["problem_id"], "problem": row["problem"], "answer": str(problem.answer),
                        "steps": list(row["steps"]), "answer_right": stated == str(problem.answer)})  # fmt: skip
        truth[key] = exact_first_error(problem, row["steps"])
    return samples, truth


def stepwise_row(sample: dict, first_error: int) -> dict:
    """TRL's stepwise supervision of a sample's exact labels: its steps up to the first error, that one False
    (the steps after it are unknown, as in ProcessBench)."""
    steps = sample["steps"] if first_error < 0 else sample["steps"][: first_error + 1]
    return {"prompt": sample["problem"], "completions": steps, "labels": [k != first_error for k in range(len(steps))]}


def outcome_row(sample: dict, first_error: int) -> dict:
    """An ORM's example: every step labelled with the final answer's correctness; trained with
    --train-on-last-step-only, the ORM learns the outcome at the last step alone, where best-of-N reads it
    (the `last` aggregate), and its validation AUC measures how well each step predicts the outcome."""
    return {"prompt": sample["problem"], "completions": sample["steps"], "labels": [bool(sample["answer_right"])] * len(sample["steps"])}


def scorers_by_name(bon: dict) -> dict[str, dict]:
    """The bon results' PRMs by the name of their folder (prm-mc, prm-true, orm), the baseline as `logprob`."""
    return {"logprob" if prm["spec"].startswith("logprob:") else Path(prm["spec"]).name: prm for prm in bon["prms"]}


def summary_of(results: dict) -> dict:
    """The headline figures under SUMMARY_KEYS, at the largest N; a figure the run could not give is null."""
    bon, n = results["bon"], results["bon"]["n"]
    last = len(n) - 1
    by_spec = scorers_by_name(bon)
    mc, orm = by_spec.get("prm-mc"), by_spec.get("orm")
    select = max((mc["selection"][how][last] for how in SELECTION_AGGREGATES), default=None) if mc else None
    quality = {source["name"]: source for source in results["policy"]["on_samples"]["sources"]}

    def f1_auc(name: str) -> dict:
        source = quality.get(name, {})
        subsets = source.get("subsets") or [{}]
        return {"f1": subsets[0].get("f1"), "auc": subsets[0].get("step_auc")}

    # The labellings of the policy's samples: each one's tokens, F1 against the exact first errors, and the F1 and AUC
    # of the PRM trained on it (held-out samples); the label split's runs under label_split (the completer is all but
    # exact there: their F1 says little, their tokens what each strategy spends).
    labels = {}
    of_samples = {source["name"]: source for source in results["policy"]["label_quality"]["sources"]}
    for name, tokens in results["policy"]["label_tokens"].items():
        subsets = of_samples.get(name, {}).get("subsets") or [{}]
        labels[name] = {"f1": subsets[0].get("f1"), "tokens": tokens, "prm": f1_auc(PRM_OF_LABELLING[name])}
    label_split = {}
    by_name = {source["name"]: source for source in results["label_quality"]["sources"]}
    for name in results["runs"]:
        subsets = by_name.get(name, {}).get("subsets") or [{}]
        label_split[name] = {"f1": subsets[0].get("f1"), "tokens": results["tokens"].get(name)}
    out = {
        "bon_problems": bon["problems"], "n": n[last], "pass_at_n": bon["baselines"]["pass"][last], "majority": bon["baselines"]["majority"][last],
        "random": bon["baselines"]["random"][last], "orm_select": orm["selection"]["last"][last] if orm else None, "prm_select": select,
        "prm_weighted_vote": mc["weighted_vote"][VOTE_AGGREGATE][last] if mc else None,
        "prm_weighted_vote_ci95": mc["weighted_vote_ci95"][VOTE_AGGREGATE][last] if mc else None,
        "prm_mc": f1_auc("mc"), "prm_true": f1_auc("true"), "labels": labels, "label_split": label_split,
    }  # fmt: skip
    return {key: out[key] for key in SUMMARY_KEYS}


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
    from labeler.evaluation.human_agreement import format_table as format_one_source

    lines = []
    accuracy, bon = results["prefix_accuracy"], results["bon"]
    from_problem = bon["candidates_correct"] / bon["candidates"] if bon["candidates"] else None
    lines.append(f"The world's models (sampled at temperature {results['temperature']}):")
    record = results["model_record"]
    if record and record.get("world_version") != results["world_version"]:
        lines.append(f"  WARNING: the model was built for world version {record.get('world_version')}, this code is version "
                     f"{results['world_version']}: it learned other problems or prompts")  # fmt: skip
    if record and record.get("settings", {}).get("seed") != results["seed"]:
        lines.append(f"  WARNING: the model was trained with seed {record['settings']['seed']}, the bench's problems use seed "
                     f"{results['seed']}: they were not kept out of its training")  # fmt: skip
    if record:
        greedy = record.get("held_out_greedy_accuracy") or {"correct": "?", "problems": "?"}
        policy_greedy = record.get("policy_held_out_greedy_accuracy") or {"correct": "?", "problems": "?"}
        own_policy = results.get("policy_model") == str(Path(results["model"]) / POLICY_FOLDER)
        if not own_policy:  # --policy: another model than the build's
            lines.append(f"  the policy is --policy {results.get('policy_model')}, not this build's: its greedy accuracy was not measured")
            policy_greedy = {"correct": "?", "problems": "?"}
        if results.get("differs_from_reference"):
            lines.append(f"  NOTE: {results['differs_from_reference']}")
        machine = record.get("built_on") or {}
        whose = "every figure below is of this build" if own_policy else "the figures below are of this completer and that policy"
        lines.append(f"  from the problem, greedy: completer {greedy['correct']}/{greedy['problems']}, policy {policy_greedy['correct']}/"
                     f"{policy_greedy['problems']} held-out problems right (measured when they were built, on {machine.get('cpu', '?')} "
                     f"{'+'.join(machine.get('vector_units', [])) or '?'}, torch {machine.get('torch', '?')}: {whose})")  # fmt: skip
    lines.append(f"  the policy from the problem, sampled: {_share(from_problem)} of {bon['candidates']} best-of-N candidates right")
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
    policy = results["policy"]
    lines.append(f"The completer's Monte-Carlo labels (exhaustive, first-error and posterior, N=8) of {policy['samples']} distinct samples "
                 f"of the policy ({policy['samples_with_error']} with an error, {policy.get('samples_right', '?')} with the right answer), "
                 "against their exact first errors:")  # fmt: skip
    label_quality = policy["label_quality"]
    lines.append(format_one_source(label_quality) if "subsets" in label_quality else format_comparison(label_quality))
    spent = policy["label_tokens"]
    base_tokens = spent.get("exhaustive-8")
    lines.extend(f"  {name:<16} {tokens:>10,} tokens  {tokens / base_tokens if base_tokens else float('nan'):5.2f}x exhaustive-8"
                 for name, tokens in spent.items())  # fmt: skip
    lines.append("PRMs trained with `labeler train`'s defaults on those samples: on each labelling's labels (exhaustive, mc = first-error, "
                 "posterior) and on their exact labels; base-logprob is the completer's (the PRMs' base's) own lowest token "
                 "log-probability per step, untrained.")  # fmt: skip
    lines.append(f"On {policy['test_samples']} held-out samples ({policy['test_samples_with_error']} with an error), against their exact first errors:")
    lines.append(format_comparison(policy["on_samples"]))
    lines.append("On the injected-error test solutions:")
    lines.append(format_comparison(results["prm_quality"]))
    lines.append("")
    lines.append(format_table(bon))
    lines.append("")
    lines.append("Summary (WORK/world.json \"summary\"; at the largest N, 95% bootstrap interval over problems):")
    lines.extend(_summary_lines(results["summary"], bon))
    lines.append("")
    lines.append(format_summary(results["search"]))
    lines.append("")
    lines.append("Departures from the product's defaults (flags the bench passes with another value than the command's own default):")
    lines.extend(_departure_lines(results.get("departures")))
    lines.append("")
    lines.append("Commands and wall times:")
    lines.extend(f"  {t['seconds']:>7.1f} s  {t['command']}" for t in results["timings"])
    return "\n".join(lines)


def _summary_lines(summary: dict, bon: dict) -> list[str]:
    last = len(bon["n"]) - 1
    by_name = scorers_by_name(bon)

    def interval(values: list) -> str:
        return f" [{values[last][0]:.3f}, {values[last][1]:.3f}]" if values and len(values) > last else ""

    rows = [("pass@N", summary["pass_at_n"], interval(bon["baselines_ci95"]["pass"])),
            ("majority", summary["majority"], interval(bon["baselines_ci95"]["majority"])),
            ("random", summary["random"], interval(bon["baselines_ci95"]["random"]))]  # fmt: skip
    if "orm" in by_name:
        rows.append(("ORM select (last)", summary["orm_select"], interval(by_name["orm"]["selection_ci95"]["last"])))
    if "logprob" in by_name:
        rows.append(("base logprob, select by min", by_name["logprob"]["selection"]["min"][last], interval(by_name["logprob"]["selection_ci95"]["min"])))
    rows.append(("PRM (MC) select, best aggregate", summary["prm_select"], ""))
    rows.append((f"PRM (MC) weighted vote by {VOTE_AGGREGATE}", summary["prm_weighted_vote"], interval([summary["prm_weighted_vote_ci95"]] * (last + 1))
                 if summary["prm_weighted_vote_ci95"] else ""))  # fmt: skip
    lines = [f"  best-of-{summary['n']} on {summary['bon_problems']} problems"]
    lines += [f"  {name:<36} {_figure(value)}{ci}" for name, value, ci in rows]
    for name in ("prm_mc", "prm_true"):
        lines.append(f"  {name:<36} F1 {_figure(summary[name]['f1'])}, step AUC {_figure(summary[name]['auc'])} (held-out samples, exact truth)")
    base = (summary["labels"].get("exhaustive-8") or {}).get("tokens")
    for name, entry in summary["labels"].items():
        share = f"{entry['tokens'] / base:.2f}x exhaustive-8's tokens" if base else "exhaustive-8 not run"
        lines.append(f"  labels {name:<29} {entry['tokens']:,} tokens ({share}), F1 {_figure(entry['f1'])}; its PRM F1 "
                     f"{_figure(entry['prm']['f1'])}, step AUC {_figure(entry['prm']['auc'])} (held-out samples, exact truth)")  # fmt: skip
    return lines


def _departure_lines(departures: list[dict] | None) -> list[str]:
    if departures is None:  # a world.json written before departures were recorded
        return ["  not recorded by this run"]
    if not departures:
        return ["  none"]
    lines = []
    for d in departures:
        steps = ", ".join(d["steps"][:6]) + (f" and {len(d['steps']) - 6} more" if len(d["steps"]) > 6 else "")
        lines.append(f"  labeler {d['command']} {d['flag']} {d['value']} (default {d['default']}): {steps}")
    return lines


def _figure(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and value != value) else f"{value:.3f}"


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
