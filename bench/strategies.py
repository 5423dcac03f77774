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

Long traces (--trace-steps 30-200): each row is first lengthened into a reasoning trace of between
30 and 200 steps, spread evenly over the rows (bench/long_traces.py says how), and labelled with
the trace preset; the human first error moves with it. --simulate P_GOOD[,P_BAD] replaces the model
by a simulated completer whose rollouts succeed with probability P_GOOD before the human first error
and P_BAD after it (default 0.02), to show the search at a chosen success rate in seconds.

    .venv/bin/python bench/strategies.py --trace-steps 30-200 --rows 8 --rollouts 4 --max-new-tokens 64 --max-model-len 8192
    .venv/bin/python bench/strategies.py --trace-steps 30-200 --rows 200 --simulate 0.5
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
LENGTH_BUCKETS = ((1, 7), (8, 9), (10, 12), (13, 29), (30, 59), (60, 99), (100, 149), (150, 10_000))


def select_rows(path: Path, rows: int, min_steps: int, mixed: bool = False) -> list[dict]:
    """The first `rows` rows with `min_steps` steps or more; `mixed`: alternately one with a human
    first error and one without (ProcessBench's files hold the erroneous rows first)."""
    with open(path) as handle:
        candidates = [row for row in map(json.loads, handle) if len(row["steps"]) >= min_steps]
    if not mixed:
        return candidates[:rows]
    wrong = [row for row in candidates if row.get("label", -1) >= 0]
    right = [row for row in candidates if row.get("label", -1) < 0]
    alternating = [row for pair in zip(wrong, right) for row in pair]
    return alternating[:rows]


def processbench_f1(predicted: dict[str, int], human: dict[str, int]) -> float:
    """ProcessBench: harmonic mean of first-error accuracy on erroneous rows and on correct rows. A prediction
    that is not known (a null first_error: an unlabelled step before it) is left out, as `labeler eval` leaves it."""
    erroneous = [pid for pid in predicted if predicted[pid] is not None and human[pid] >= 0]
    correct = [pid for pid in predicted if predicted[pid] is not None and human[pid] == -1]
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


def first_error_agreement(rows: dict[str, dict], reference: dict[str, dict], pids=None) -> tuple[int, int]:
    """(equal, compared): how many of the solutions (`pids`, default all of `rows`) have the same first_error as the
    reference run's, over those both determine: a null first_error (unknown: an unlabelled step before any error) in
    either run, or a solution the reference did not label, is left out. The table and the by-length rows both read it."""
    pids = [pid for pid in (rows if pids is None else pids) if pid in reference]
    known = [pid for pid in pids if rows[pid]["first_error"] is not None and reference[pid]["first_error"] is not None]
    return sum(rows[pid]["first_error"] == reference[pid]["first_error"] for pid in known), len(known)


def agreement_text(equal: int, compared: int, digits: int = 1) -> str:
    """An agreement as a percentage; n/a over no solution (not 0%, not 100%)."""
    return "n/a" if compared == 0 else f"{equal / compared:.{digits}%}"


def agreement_by_length(labels: dict[str, dict[str, dict]], reference: dict[str, dict]) -> dict[str, dict[str, tuple[int, int]]]:
    """length bucket -> strategy -> first_error_agreement over that strategy's solutions of that length."""
    out: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for strategy, rows in labels.items():
        by_bucket: dict[str, list[str]] = defaultdict(list)
        for pid, row in rows.items():
            by_bucket[bucket(len(row["steps"]))].append(pid)
        for length, pids in by_bucket.items():
            out[length][strategy] = first_error_agreement(rows, reference, pids)
    return dict(out)


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
    parser.add_argument("--trace-steps", default=None, metavar="MIN-MAX", help="lengthen each row into a trace of MIN to MAX steps")
    parser.add_argument("--simulate", default=None, metavar="P_GOOD[,P_BAD]", help="a simulated completer instead of a model (traces only)")
    args = parser.parse_args()

    from workers.engine_logging import route_vllm_logs

    route_vllm_logs("ERROR")  # stdout is for the figures

    rows = select_rows(Path(args.input), args.rows, args.min_steps, mixed=bool(args.trace_steps))
    work = Path(tempfile.mkdtemp(prefix="bench-strategies-"))
    dataset = work / "input.jsonl"
    preset, max_steps, traces = "processbench", None, None
    if args.trace_steps:
        from long_traces import lengthen

        low, high = (int(x) for x in args.trace_steps.split("-"))
        targets = [low + (high - low) * n // max(1, len(rows) - 1) for n in range(len(rows))]
        preset, max_steps = "trace", high - 1
        traces = [lengthen(row, target, max_steps) for row, target in zip(rows, targets)]
        human = {trace.row["id"]: trace.first_error for trace in traces}
        dataset.write_text("".join(json.dumps(trace.row) + "\n" for trace in traces))
        print(f"{len(rows)} rows from {args.input} lengthened into traces of {low} to {high} steps: {[t.steps for t in traces]}", flush=True)
    else:
        human = {row["id"]: row["label"] for row in rows}
        dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
        print(f"{len(rows)} rows with >= {args.min_steps} steps from {args.input}; steps per row: {sorted(len(r['steps']) for r in rows)}", flush=True)

    if args.simulate:
        from long_traces import SimulatedCompleter

        if traces is None:
            parser.error("--simulate needs --trace-steps")
        p_good, p_bad = ([float(x) for x in args.simulate.split(",")] + [0.02])[:2]
        engine, model_name = SimulatedCompleter(traces, p_good, p_bad), f"simulated(p_good={p_good}, p_bad={p_bad})"
        print(f"completer: {model_name}, not a model", flush=True)
    else:
        from workers.model_source import resolve_model
        from workers.vllm_generator import VLLMGenerator

        source = resolve_model(args.model)
        engine = VLLMGenerator(source.path, model_name=source.name, dtype=args.dtype, max_model_len=args.max_model_len)
        model_name = source.name
    results, labels = {}, {}
    with AnswerChecker() as checker:
        for strategy in args.strategies.split(","):
            config = LabelConfig(
                input=str(dataset), output=str(work / strategy), model=model_name, preset=preset, rollouts=args.rollouts,
                max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed, shard_size=len(rows), strategy=strategy,
                **({"max_steps": max_steps, "max_row_chars": 10**7} if max_steps else {}),
            )  # fmt: skip
            if hasattr(engine, "llm"):
                engine.llm.reset_prefix_cache()
            started = time.perf_counter()
            summary = run_job(config, executor=LocalExecutor(lambda: engine, checker), model_info={"name": model_name}, progress_enabled=False)
            seconds = time.perf_counter() - started
            table = pq.read_table(work / strategy / "labels").to_pylist()
            labels[strategy] = {row["problem_id"]: row for row in table}
            # every rollout sampled, cut and timed-out ones too, as the manifest and `labeler status` count them
            rollouts = sum(sum(r["n_rollouts"]) + sum(r["n_truncated"]) + sum(r["n_timeouts"]) for r in table)
            results[strategy] = {"seconds": seconds, "tokens": summary.generated_tokens, "rollouts": rollouts,
                                 "prefix_cache_hit_rate": summary.prefix_cache_hit_rate}  # of its prompts' tokens; None simulated
            print(f"{strategy}: {results[strategy]}", flush=True)
    engine.close()

    reference = labels.get("exhaustive")
    print()
    header = (
        f"{'strategy':12} {'rollouts':>8} {'tokens':>8} {'x fewer':>7} {'wall s':>7} {'hard agr':>8} {'1st-err agr':>11} "
        f"{'soft MAE':>8} {'soft cov':>8} {'c/n MAE':>7} {'human agr':>9} {'PB F1':>6}"
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
            first_agree = agreement_text(*first_error_agreement(rows_by_id, reference, common))
            fewer = f"{results['exhaustive']['tokens'] / max(result['tokens'], 1):.2f}"
            soft_error, soft_cover, naive_error = soft_label_errors([rows_by_id[pid] for pid in common], [reference[pid] for pid in common])
        f1 = processbench_f1(first_errors, human)
        human_agree = f"{sum(first_errors[pid] == human[pid] for pid in first_errors) / max(1, len(first_errors)):.1%}"
        print(
            f"{strategy:12} {result['rollouts']:>8} {result['tokens']:>8} {fewer:>7} {result['seconds']:>7.1f} {hard_agree:>8} "
            f"{first_agree:>11} {soft_error:>8} {soft_cover:>8} {naive_error:>7} {human_agree:>9} {f1:>6.3f}"
        )

    if reference:
        print("\nby solution length (steps): exhaustive's tokens / the strategy's, first_error agreement with exhaustive "
              "(over the solutions both determine, as in the table; n/a where there are none)")
        by_length: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        solutions: dict[str, int] = defaultdict(int)
        for strategy in results:
            for pid, row in labels[strategy].items():
                by_length[bucket(len(row["steps"]))][strategy] += row["generated_tokens"]
                solutions[bucket(len(row["steps"]))] += strategy == "exhaustive"
        agree_by_length = agreement_by_length({s: labels[s] for s in results}, reference)
        for length in sorted(by_length, key=lambda b: int(b.split("-")[0].rstrip("+"))):
            counts, agree = by_length[length], agree_by_length.get(length, {})
            savings = ", ".join(
                f"{s} {counts['exhaustive'] / max(counts[s], 1):.2f}x {agreement_text(*agree.get(s, (0, 0)), digits=0)} of {agree.get(s, (0, 0))[1]}"
                for s in results if s != "exhaustive"
            )  # fmt: skip
            print(f"  {length:>7} steps ({solutions[length]} solutions): {savings}")
        for strategy in results:
            differ = [
                f"{pid} ({len(row['steps'])} steps): {reference[pid]['first_error']} vs {row['first_error']}, human {human[pid]}"
                for pid, row in labels[strategy].items()
                if pid in reference and row["first_error"] != reference[pid]["first_error"]
            ]
            if differ and strategy != "exhaustive":
                print(f"  {strategy} first_error differs from exhaustive's on: {'; '.join(differ[:10])}")
        first_errors = [row["first_error"] for row in reference.values()]
        errs = [f for f in first_errors if f is not None and f >= 0]
        print(
            f"\nexhaustive's first errors: {len(errs)} of {len(first_errors)} solutions "
            f"({sum(f is None for f in first_errors)} not known: an unlabelled step before any error), at step "
            f"{sorted(errs)}; human (moved into the traces): {sorted(h for h in human.values() if h >= 0)}"
        )
        labelled = [h for row in reference.values() for h in row["hard_labels"] if h is not None]
        positives, total = sum(labelled), len(labelled)
        unlabelled = sum(len(row["hard_labels"]) for row in reference.values()) - total
        print(
            f"\nexhaustive: {positives}/{total} labelled steps hard-positive ({positives / max(total, 1):.1%}), {unlabelled} unlabelled "
            "(every rollout cut by --max-new-tokens); a model that rarely reaches the answer makes most labels negative"
        )


if __name__ == "__main__":
    main()
