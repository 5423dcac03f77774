"""What the labeler adds on top of bare vLLM generation.

For each model (the tiny random Llama and the embedded SmolLM2-135M-Instruct), one engine is
started; then, alternating, (a) the whole labeling job (read, plan, generate, check, label,
write, commit) and (b) bare `LLM.generate` over exactly the prompts and sampling parameters the
job sent, call for call. The engine and the checker's worker pool are started before the clock (a
job starts both before its first unit). The prefix cache is reset before every run so neither reuses the other's
KV cache, and an untimed first job warms the engine up. The jobs run with --no-stop-after-answer so
that each of their generate calls is one plain LLM.generate, like the replay's (same stop strings). Prints the median times and their ratio.
Target (issue 25): ratio <= 1.05 on both models, over at least 50k generated tokens each: the
defaults label ProcessBench gsm8k rows (tiny: 40 rows, 8 rollouts, about 76k tokens; embedded: 60
rows, 4 rollouts, about 50k tokens). On a CPU the engine and the CPU side share the cores, so the
ratio also counts the checker's CPU time; bench/cpu_side.py --parts gpu measures the GPU case.

    .venv/bin/python bench/overhead.py [--models tiny,embedded] [--repeats 2] [--rows 40] [--embedded-rows 60]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.checking.checker import AnswerChecker  # noqa: E402
from labeler.labeling.config import LabelConfig  # noqa: E402
from labeler.labeling.job import SAMPLE_INPUT, run_job  # noqa: E402
from workers.local_executor import LocalExecutor  # noqa: E402

PROCESSBENCH_GSM8K = ROOT.parent / "shared" / "data" / "processbench" / "gsm8k.jsonl"


class RecordingGenerator:
    """Passes calls through to the engine and keeps each call's requests for the bare replay."""

    def __init__(self, engine):
        self.engine = engine
        self.model_name = engine.model_name
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append((list(requests), sampling))
        return self.engine.generate(requests, sampling)


def bare_replay(engine, calls) -> float:
    """Time LLM.generate alone over the recorded calls (prompts tokenized beforehand, untimed)."""
    from vllm.inputs import TokensPrompt

    prepared = []
    for requests, sampling in calls:
        ids = engine._token_ids([engine.render(r) for r in requests])
        prompts = [TokensPrompt(prompt_token_ids=i) for i in ids]
        params = [
            engine._params(sampling, n=r.n, seed=r.seed, max_tokens=sampling.max_new_tokens, stop=list(sampling.stop)) for r in requests
        ]
        prepared.append((prompts, params))
    started = time.perf_counter()
    for prompts, params in prepared:
        engine.llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - started


def run_labeler(name: str, engine, config_for) -> tuple[float, RecordingGenerator, object]:
    out = Path(tempfile.mkdtemp(prefix="overhead-"))
    recorder = RecordingGenerator(engine)
    engine.llm.reset_prefix_cache()
    with AnswerChecker(timeout_s=5) as checker:
        # started outside the clock, as the engine is: a job starts its checker before it loads the model
        checker.start()
        started = time.perf_counter()
        summary = run_job(
            config_for(out), executor=LocalExecutor(lambda: recorder, checker), model_info={"name": name}, progress_enabled=False
        )
        seconds = time.perf_counter() - started  # closing the pool is outside the clock too, as closing the engine is
    shutil.rmtree(out)
    return seconds, recorder, summary


def measure(name: str, engine, config_for, repeats: int) -> dict:
    # An untimed first job warms the engine up and records the calls the bare replay repeats.
    _, recorder, summary = run_labeler(name, engine, config_for)
    job_times, bare_times = [], []
    for _ in range(repeats):
        engine.llm.reset_prefix_cache()
        bare_times.append(bare_replay(engine, recorder.calls))
        seconds, recorder, summary = run_labeler(name, engine, config_for)
        job_times.append(seconds)
    job, bare = statistics.median(job_times), statistics.median(bare_times)
    return {
        "model": name,
        "solutions": summary.solutions,
        "generate_calls": len(recorder.calls),
        "generated_tokens": summary.generated_tokens,
        "labeler_seconds": round(job, 2),
        "bare_generate_seconds": round(bare, 2),
        "ratio": round(job / bare, 3),
        "labeler_runs": [round(t, 2) for t in job_times],
        "bare_runs": [round(t, 2) for t in bare_times],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,embedded", help="comma list of tiny, embedded")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rows", type=int, default=40, help="ProcessBench gsm8k rows for the tiny model")
    parser.add_argument("--embedded-rows", type=int, default=60, help="ProcessBench gsm8k rows for the embedded model")
    args = parser.parse_args()
    from workers.engine_logging import route_vllm_logs
    from workers.vllm_generator import VLLMGenerator

    route_vllm_logs("ERROR")  # stdout is for the figures

    source = str(PROCESSBENCH_GSM8K) if PROCESSBENCH_GSM8K.exists() else SAMPLE_INPUT
    results = []
    for model in args.models.split(","):
        if model == "tiny":
            from tests.tiny_model import build_tiny_llama

            path = build_tiny_llama(Path(tempfile.mkdtemp(prefix="tiny-llama-")))
            engine = VLLMGenerator(str(path), model_name="tiny-llama", dtype="float32", max_model_len=2048)

            def config_for(out, source=source):
                return LabelConfig(
                    input=source,
                    output=str(out),
                    model="tiny",
                    limit=args.rows,
                    rollouts=8,
                    max_new_tokens=64,
                    shard_size=16,
                    stop_after_answer=False,
                )
        else:
            from workers.embedded_model import ensure_embedded_model

            engine = VLLMGenerator(str(ensure_embedded_model()), model_name="smollm2", max_model_len=2048)

            def config_for(out, source=source):
                return LabelConfig(
                    input=source,
                    output=str(out),
                    model="smollm2",
                    limit=args.embedded_rows,
                    rollouts=4,
                    max_new_tokens=64,
                    shard_size=16,
                    stop_after_answer=False,
                )

        result = measure(model, engine, config_for, args.repeats)
        results.append(result)
        print(json.dumps(result), flush=True)
        engine.close()
    print()
    print(f"{'model':10} {'solutions':>9} {'tokens':>8} {'labeler s':>10} {'bare s':>8} {'ratio':>6}")
    for r in results:
        print(
            f"{r['model']:10} {r['solutions']:>9} {r['generated_tokens']:>8} {r['labeler_seconds']:>10} {r['bare_generate_seconds']:>8} {r['ratio']:>6}"
        )


if __name__ == "__main__":
    main()
