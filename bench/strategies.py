"""Rollouts, tokens and agreement of each labelling strategy on the same inputs, model and seed.

Defaults: the embedded model (SmolLM2-135M-Instruct) on the first 40 rows with 8 or more steps of
../shared/data/processbench/math.jsonl. For each strategy the whole labelling job runs on one
shared engine (prefix cache reset between runs), then the labels are compared with exhaustive's:
hard-label agreement (over steps both label), first_error agreement, the mean absolute error of
the soft labels it writes (over steps where both write one) and the share of exhaustive's soft
labels it writes, the same error for correct/drawn from its counts on every sampled step (what a
naive estimator would write: adaptive's stopping rule biases it), ProcessBench F1 of first_error
against the human labels, and token savings by solution length.

    .venv/bin/python bench/strategies.py [--model M] [--input FILE] [--rows 40] [--min-steps 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from labeler.checking.checker import AnswerChecker  # noqa: E402
from labeler.labeling.config import LabelConfig  # noqa: E402
from labeler.labeling.job import run_job  # noqa: E402
from workers.local_executor import LocalExecutor  # noqa: E402
from labeler.labeling.config import MONTE_CARLO_STRATEGIES  # noqa: E402

DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "processbench" / "math.jsonl"
LENGTH_BUCKETS = ((1, 7), (8, 9), (10, 12), (13, 10_000))


def select_rows(path: Path, rows: int, min_steps: int) -> list[dict]:
    selected = []
    with open(path) as handle:
        for line in handle:
            row = json.loads(line)
            if len(row["steps"]) >= min_steps:
                selected.append(row)
            if len(selected) == rows:
                break
    return selected


def processbench_f1(predicted: dict[str, int], human: dict[str, int]) -> float:
    """ProcessBench: harmonic mean of first-error accuracy on erroneous rows and on correct rows."""
    erroneous = [pid for pid in predicted if human[pid] >= 0]
    correct = [pid for pid in predicted if human[pid] == -1]
    acc_error = sum(predicted[p] == human[p] for p in erroneous) / len(erroneous) if erroneous else 0.0
    acc_correct = sum(predicted[p] == -1 for p in correct) / len(correct) if correct else 0.0
    return 2 * acc_error * acc_correct / (acc_error + acc_correct) if acc_error + acc_correct else 0.0


def soft_label_errors(rows: list[dict], reference: list[dict]) -> tuple[str, str, str]:
    """Mean |soft - exhaustive's soft| over steps where both write one; the share of exhaustive's
    soft labels written; and the mean error of n_correct / n_rollouts on every step with rollouts."""
    written, naive, reference_soft = [], [], 0
    for row, ref in zip(rows, reference):
        for i, ref_soft in enumerate(ref["soft_labels"]):
            if ref_soft is None:
                continue
            reference_soft += 1
            if row["soft_labels"][i] is not None:
                written.append(abs(row["soft_labels"][i] - ref_soft))
            if row["n_rollouts"][i] > 0:
                naive.append(abs(row["n_correct"][i] / row["n_rollouts"][i] - ref_soft))
    mean = lambda values: f"{sum(values) / len(values):.3f}" if values else "-"
    cover = f"{len(written) / reference_soft:.0%}" if reference_soft else "-"
    return mean(written), cover, mean(naive)


def bucket(steps: int) -> str:
    low, high = next(b for b in LENGTH_BUCKETS if b[0] <= steps <= b[1])
    return f"{low}+" if high >= 10_000 else f"{low}-{high}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="hub id or folder; default: the embedded SmolLM2-135M-Instruct")
    parser.add_argument("--input", default=str(DEFAULT_INPUT), help="ProcessBench-format jsonl (problem, steps, answer, label, id)")
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--min-steps", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--strategies", default=",".join(MONTE_CARLO_STRATEGIES))
    parser.add_argument("--max-model-len", type=int, default=4096)
    args = parser.parse_args()

    from workers.model_source import resolve_model
    from workers.engine_logging import route_vllm_logs
    from workers.vllm_generator import VLLMGenerator

    route_vllm_logs("ERROR")  # stdout is for the figures

    rows = select_rows(Path(args.input), args.rows, args.min_steps)
    human = {row["id"]: row["label"] for row in rows}
    work = Path(tempfile.mkdtemp(prefix="bench-strategies-"))
    dataset = work / "input.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} rows with >= {args.min_steps} steps from {args.input}; steps per row: {sorted(len(r['steps']) for r in rows)}", flush=True)

    source = resolve_model(args.model)
    engine = VLLMGenerator(source.path, model_name=source.name, dtype=args.dtype, max_model_len=args.max_model_len)
    results, labels = {}, {}
    with AnswerChecker() as checker:
        for strategy in args.strategies.split(","):
            config = LabelConfig(
                input=str(dataset), output=str(work / strategy), model=source.name, preset="processbench", rollouts=args.rollouts,
                max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed, shard_size=len(rows), strategy=strategy,
            )  # fmt: skip
            engine.llm.reset_prefix_cache()
            started = time.perf_counter()
            summary = run_job(config, executor=LocalExecutor(lambda: engine, checker), model_info={"name": source.name}, progress_enabled=False)
            seconds = time.perf_counter() - started
            table = pq.read_table(work / strategy / "labels").to_pylist()
            labels[strategy] = {row["problem_id"]: row for row in table}
            results[strategy] = {"seconds": seconds, "tokens": summary.generated_tokens, "rollouts": sum(sum(r["n_rollouts"]) + sum(r["n_truncated"]) for r in table)}
            print(f"{strategy}: {results[strategy]}", flush=True)
    engine.close()

    reference = labels.get("exhaustive")
    print()
    header = (
        f"{'strategy':12} {'rollouts':>8} {'tokens':>8} {'x fewer':>7} {'wall s':>7} {'hard agr':>8} {'1st-err agr':>11} "
        f"{'soft MAE':>8} {'soft cov':>8} {'c/n MAE':>7} {'PB F1':>6}"
    )
    print(header)
    for strategy, result in results.items():
        rows_by_id = labels[strategy]
        first_errors = {pid: row["first_error"] for pid, row in rows_by_id.items()}
        hard_agree = first_agree = soft_error = soft_cover = naive_error = "-"
        fewer = "-"
        if reference:
            common = [pid for pid in rows_by_id if pid in reference]  # a row one strategy rejected (too long) is left out
            pairs = [
                (a, b)
                for pid in common
                for a, b in zip(rows_by_id[pid]["hard_labels"], reference[pid]["hard_labels"])
                if a is not None and b is not None
            ]
            hard_agree = f"{sum(a == b for a, b in pairs) / len(pairs):.1%}"
            first_agree = f"{sum(first_errors[pid] == reference[pid]['first_error'] for pid in common) / len(common):.1%}"
            fewer = f"{results['exhaustive']['tokens'] / max(result['tokens'], 1):.2f}"
            soft_error, soft_cover, naive_error = soft_label_errors([rows_by_id[pid] for pid in common], [reference[pid] for pid in common])
        f1 = processbench_f1(first_errors, human)
        print(
            f"{strategy:12} {result['rollouts']:>8} {result['tokens']:>8} {fewer:>7} {result['seconds']:>7.1f} {hard_agree:>8} "
            f"{first_agree:>11} {soft_error:>8} {soft_cover:>8} {naive_error:>7} {f1:>6.3f}"
        )

    if reference:
        print("\ntokens by solution length (steps): exhaustive / strategy")
        by_length: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for strategy in results:
            for pid, row in labels[strategy].items():
                by_length[bucket(len(row["steps"]))][strategy] += row["generated_tokens"]
        for length in sorted(by_length, key=lambda b: int(b.split("-")[0].rstrip("+"))):
            counts = by_length[length]
            savings = ", ".join(f"{s} {counts['exhaustive'] / max(counts[s], 1):.2f}x" for s in results if s != "exhaustive")
            print(f"  {length:>6} steps: {savings}")
        labelled = [h for row in reference.values() for h in row["hard_labels"] if h is not None]
        positives, total = sum(labelled), len(labelled)
        unlabelled = sum(len(row["hard_labels"]) for row in reference.values()) - total
        print(
            f"\nexhaustive: {positives}/{total} labelled steps hard-positive ({positives / max(total, 1):.1%}), {unlabelled} unlabelled "
            "(every rollout cut by --max-new-tokens); a model that rarely reaches the answer makes most labels negative"
        )


if __name__ == "__main__":
    main()
