"""What the labeler adds on top of bare vLLM generation.

For each arm (a model and a workload), one engine is started, an untimed job on a few rows warms it
(and the answer checker) up, and then the whole labeling job (read, plan, generate, check, label,
write, commit) and bare `LLM.generate` over exactly the prompts and sampling parameters the job sent,
call for call, alternate in pairs, in the order L B, B L, L B, ... so that a drift of the machine's
speed falls on both. The engine and the checker's worker pool are started before the clock (a job
starts both before its first unit). The prefix cache is reset before every run so that no run reuses
another's KV cache. The jobs run with --no-stop-after-answer so that each of their generate calls is
one plain LLM.generate, like the replay's (same stop strings).

What it prints, per arm:
- ratio: the median of the pairs' ratios (labeler time over bare generate's, in each pair), with a 90%
  bootstrap interval of that median, and each pair's ratio;
- serial: the labeler's time outside its engine calls (reading, planning, the tokenizer, the last
  unit's checks, the commits that no generation overlaps): what it adds in series to the engine;
- CPU side: the CPU-seconds of the finishing thread (checks, label math, tables, commits) and of the
  checker's processes (its workers, those killed at their deadline included: bench/process_cpu.py),
  which run beside the engine and, on a CPU, take cores from it; the share printed adds them to the
  serial seconds over the bare time, an upper bound (the last unit's checks are in both);
- noise: the ratio of the two bare runs that stand side by side (B B in L B B L), what the machine's
  own jitter gives with no change at all, and the seconds stolen by the hypervisor (/proc/stat) in
  each run (CPU-seconds of all cores). A ratio within that noise measures the machine, not the labeler.
  The bare replay sends the engine calls the labeler made, as it made them (prompts, parameters,
  seeds): a note on stderr says so if their generated tokens differ.
Target (issue 25): ratio <= 1.05 over at least 50k generated tokens, on the tiny random model (about
as fast as one GPU with a small math model) and the embedded SmolLM2. The arm `tiny-checked` labels
with --truncated incorrect, so that every rollout, garbage included, is checked (the tiny model's
rollouts are mostly cut by their budget, and cut ones are not checked by default). On a CPU the engine
and the CPU side share the cores; bench/cpu_side.py --parts gpu measures the GPU case, where they do not.

    .venv/bin/python bench/overhead.py [--models tiny,tiny-checked,embedded] [--pairs 10] [--embedded-pairs 3]
                                       [--rows 40] [--embedded-rows 60]
About 12 minutes for the two tiny arms and 45 for the embedded one on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.process_cpu import checker_processes_cpu  # noqa: E402
from labeler.checking.checker import AnswerChecker  # noqa: E402
from labeler.labeling.config import LabelConfig  # noqa: E402
from labeler.labeling.job import SAMPLE_INPUT, run_job  # noqa: E402
from workers.local_executor import LocalExecutor  # noqa: E402

PROCESSBENCH_GSM8K = ROOT.parent / "shared" / "data" / "processbench" / "gsm8k.jsonl"
WARMUP_ROWS = 4


@dataclass
class Arm:
    name: str
    rows: int
    rollouts: int
    truncated: str = "excluded"


@dataclass
class Run:
    kind: str  # "labeler" or "bare"
    seconds: float
    stolen_s: float  # CPU time the hypervisor gave to others during the run (both cores)
    engine_s: float = 0.0  # labeler: wall seconds inside LLM.generate
    finisher_cpu_s: float = 0.0  # labeler: CPU of the finishing thread
    checker_cpu_s: float = 0.0  # labeler: CPU of the checker's processes (bench/process_cpu.py)
    checker_kills: int = 0  # labeler: checker workers killed at their deadline
    tokens: int = 0
    calls: list = field(default_factory=list, repr=False)

    @property
    def serial_s(self) -> float:
        return self.seconds - self.engine_s


class RecordingGenerator:
    """Passes calls through to the engine, keeps each engine call's prompts and sampling parameters,
    as the generator sent them to LLM.generate (budgets shortened near the context limit, stop
    strings, seeds), for the bare replay, and times the engine's own calls apart from what the
    generator does around them."""

    def __init__(self, engine):
        self.engine = engine
        self.model_name = engine.model_name
        self.calls = []  # (prompts, params) of each LLM.generate call
        self.engine_s = 0.0

    def generate(self, requests, sampling):
        llm_generate = self.engine._generate

        def timed(prompts, params, **options):  # options: the engine's own (`report`: finished requests to on_finished)
            self.calls.append((list(prompts), list(params)))
            started = time.perf_counter()
            try:
                return llm_generate(prompts, params, **options)
            finally:
                self.engine_s += time.perf_counter() - started

        self.engine._generate = timed
        try:
            return self.engine.generate(requests, sampling)
        finally:
            del self.engine._generate  # the class's method again


class TimedExecutor(LocalExecutor):
    """The local executor, with the CPU time of its finishing thread (checks, label math, tables, commits) added up."""

    finisher_cpu_s = 0.0

    def _finish_and_commit(self, *args):
        started = time.thread_time()
        try:
            return super()._finish_and_commit(*args)
        finally:
            TimedExecutor.finisher_cpu_s += time.thread_time() - started


def stolen_seconds() -> float:
    """Seconds of CPU the hypervisor gave to other machines so far, all cores (the 'steal' of /proc/stat)."""
    try:
        fields = open("/proc/stat").readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def bare_replay(engine, calls) -> Run:
    """Time LLM.generate alone over the recorded engine calls, the same prompts and parameters."""
    engine.llm.reset_prefix_cache()
    stolen, started = stolen_seconds(), time.perf_counter()
    tokens = 0
    for prompts, params in calls:
        outputs = engine.llm.generate(prompts, params, use_tqdm=False)
        tokens += sum(len(choice.token_ids) for output in outputs for choice in output.outputs)
    seconds = time.perf_counter() - started
    return Run("bare", seconds, stolen_seconds() - stolen, engine_s=seconds, tokens=tokens)


def run_labeler(engine, config: LabelConfig) -> Run:
    out = Path(tempfile.mkdtemp(prefix="overhead-"))
    try:
        return _run_labeler(engine, dataclasses.replace(config, output=str(out)))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _run_labeler(engine, config: LabelConfig) -> Run:
    recorder = RecordingGenerator(engine)
    engine.llm.reset_prefix_cache()
    with AnswerChecker(timeout_s=5) as checker:
        # started outside the clock, as the engine is: a job starts its checker before it loads the model
        checker.start()
        TimedExecutor.finisher_cpu_s = 0.0
        checker_cpu, stolen, started = checker_processes_cpu(), stolen_seconds(), time.perf_counter()
        executor = TimedExecutor(lambda: recorder, checker)
        summary = run_job(config, executor=executor, model_info={"name": config.model}, progress_enabled=False)
        seconds = time.perf_counter() - started  # closing the pool is outside the clock too, as closing the engine is
        run = Run(
            "labeler",
            seconds,
            stolen_seconds() - stolen,
            engine_s=recorder.engine_s,
            finisher_cpu_s=TimedExecutor.finisher_cpu_s,
            checker_cpu_s=checker_processes_cpu() - checker_cpu,
            checker_kills=checker._pool.kills,
            tokens=summary.generated_tokens,
            calls=recorder.calls,
        )
    return run


def measure(arm: Arm, engine, config: LabelConfig, pairs: int) -> dict:
    run_labeler(engine, dataclasses.replace(config, limit=WARMUP_ROWS))  # warms the engine and the checker up
    runs: list[Run] = []
    calls = None
    for pair in range(pairs):
        for kind in ("labeler", "bare") if pair % 2 == 0 else ("bare", "labeler"):
            if kind == "labeler":
                run = run_labeler(engine, config)
                calls = calls or run.calls  # every job sends the same calls: the first one's are replayed
            else:
                run = bare_replay(engine, calls)
            runs.append(run)
            print(f"  {arm.name} {kind:8} {run.seconds:7.2f} s  (stolen {run.stolen_s:.2f} s)", file=sys.stderr, flush=True)
    labeler = [r for r in runs if r.kind == "labeler"]
    bare = [r for r in runs if r.kind == "bare"]
    bare_median = statistics.median(r.seconds for r in bare)
    if {r.tokens for r in runs} != {labeler[0].tokens}:  # same prompts, parameters and seeds: the same tokens, or a note
        print(f"  {arm.name}: generated tokens differ between runs: {sorted({r.tokens for r in runs})}", file=sys.stderr)
    # each pair's two runs stand side by side, under the same drift of the machine: the median of their ratios
    pair_ratios = [lab.seconds / b.seconds for lab, b in zip(labeler, bare)]
    # the bare runs that stand side by side (L B | B L | L B | B L ...): the machine's own jitter
    neighbours = [runs[i].seconds / runs[i + 1].seconds for i in range(1, len(runs) - 1, 4) if i + 1 < len(runs)]
    return {
        "model": arm.name,
        "generated_tokens": labeler[0].tokens,
        "bare_generated_tokens": sorted({r.tokens for r in bare}),
        "generate_calls": len(calls),
        "labeler_seconds": round(statistics.median(r.seconds for r in labeler), 2),
        "bare_generate_seconds": round(bare_median, 2),
        "ratio": round(statistics.median(pair_ratios), 3),
        "ratio_90ci": [round(x, 3) for x in median_interval(pair_ratios)] if len(pair_ratios) >= 3 else None,
        "ratio_of_medians": round(statistics.median(r.seconds for r in labeler) / bare_median, 3),
        "pair_ratios": [round(x, 3) for x in pair_ratios],
        "serial_seconds": round(statistics.median(r.serial_s for r in labeler), 3),
        "finisher_cpu_seconds": round(statistics.median(r.finisher_cpu_s for r in labeler), 3),
        "checker_processes_cpu_seconds": round(statistics.median(r.checker_cpu_s for r in labeler), 3),
        "cpu_side_share": round(statistics.median(r.serial_s + r.finisher_cpu_s + r.checker_cpu_s for r in labeler) / bare_median, 4),
        "bare_neighbour_ratios": [round(x, 3) for x in neighbours],
        "labeler_runs": [round(r.seconds, 2) for r in labeler],
        "bare_runs": [round(r.seconds, 2) for r in bare],
        "stolen_seconds": [round(r.stolen_s, 2) for r in runs],  # CPU-seconds of both cores
        "checker_kills": [r.checker_kills for r in labeler],
    }


def median_interval(values: list[float], resamples: int = 2000) -> tuple[float, float]:
    """A 90% bootstrap interval of the median of `values` (seeded: the same runs give the same interval)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.05 * resamples)], medians[int(0.95 * resamples) - 1]


def start_arm(arm: Arm, source: str, scratch: Path):
    """The engine and the job's settings (output filled in per run) of an arm."""
    from workers.vllm_generator import VLLMGenerator

    if arm.name.startswith("tiny"):
        from tests.tiny_model import build_tiny_llama

        path = build_tiny_llama(scratch / "tiny-llama")
        engine = VLLMGenerator(str(path), model_name="tiny-llama", dtype="float32", max_model_len=2048)
    else:
        from workers.embedded_model import ensure_embedded_model

        engine = VLLMGenerator(str(ensure_embedded_model()), model_name="smollm2", max_model_len=2048)
    config = LabelConfig(
        input=source,
        output="",
        model=engine.model_name,
        limit=arm.rows,
        rollouts=arm.rollouts,
        max_new_tokens=64,
        shard_size=16,
        stop_after_answer=False,
        truncated=arm.truncated,
    )
    return engine, config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,tiny-checked,embedded", help="comma list of tiny, tiny-checked, embedded")
    parser.add_argument("--pairs", type=int, default=10, help="labeler/bare pairs per tiny arm (their order alternates)")
    parser.add_argument("--embedded-pairs", type=int, default=3, help="pairs for the embedded arm (one pair is about 14 min on 2 cores)")
    parser.add_argument("--rows", type=int, default=40, help="ProcessBench gsm8k rows for the tiny model (8 rollouts each)")
    parser.add_argument("--embedded-rows", type=int, default=60, help="ProcessBench gsm8k rows for the embedded model (4 rollouts each)")
    args = parser.parse_args()
    arms = {
        "tiny": Arm("tiny", args.rows, 8),
        "tiny-checked": Arm("tiny-checked", args.rows, 8, truncated="incorrect"),
        "embedded": Arm("embedded", args.embedded_rows, 4),
    }
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    if unknown := [name for name in names if name not in arms]:
        parser.error(f"unknown --models {', '.join(unknown)}; expected {', '.join(arms)}")
    if args.pairs < 1 or args.embedded_pairs < 1:
        parser.error("--pairs and --embedded-pairs must be at least 1")
    from workers.engine_logging import route_vllm_logs

    route_vllm_logs("ERROR")  # stdout is for the figures
    source = str(PROCESSBENCH_GSM8K) if PROCESSBENCH_GSM8K.exists() else SAMPLE_INPUT
    results = []
    with tempfile.TemporaryDirectory(prefix="overhead-models-") as scratch:
        for name in names:
            engine, config = start_arm(arms[name], source, Path(scratch))
            try:
                result = measure(arms[name], engine, config, args.embedded_pairs if name == "embedded" else args.pairs)
            finally:
                engine.close()
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    print(f"{'arm':13} {'tokens':>7} {'labeler s':>9} {'bare s':>7} {'ratio':>6} {'90% interval':>13} {'serial s':>8} {'CPU side':>8}")
    for r in results:
        interval = "-" if r["ratio_90ci"] is None else "{:.3f}-{:.3f}".format(*r["ratio_90ci"])  # fewer than 3 pairs: none
        print(
            f"{r['model']:13} {r['generated_tokens']:>7} {r['labeler_seconds']:>9} {r['bare_generate_seconds']:>7} {r['ratio']:>6} "
            f"{interval:>13} {r['serial_seconds']:>8} {r['cpu_side_share']:>8.1%}"
        )
        noise = ", ".join(f"{x:.3f}" for x in r["bare_neighbour_ratios"]) or "-"
        print(f"{'':13} pairs {', '.join(f'{x:.3f}' for x in r['pair_ratios'])}; bare vs bare {noise}")


if __name__ == "__main__":
    main()
