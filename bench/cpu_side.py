"""The labeler's CPU side at GPU rates: completions replayed through the whole labeling path, no engine.

On a GPU the completer is fast and what is left is CPU work in Python: extracting and checking each
rollout's answer, the label math, the tables, the commits. This bench replays completions
(bench/completions.py: realistic ones from ProcessBench solutions, the recorded rollouts of a real
model, degenerate ones) in place of the engine and measures that work alone, on this machine's cores.

1. checker -- AnswerChecker.check_many alone, a fresh checker for each family (its caches cold), its
   symbolic pool started beforehand: verdicts per CPU-second (this process and its checker processes),
   that is per core; workers killed at their deadline are counted (bench/process_cpu.py).
2. label   -- the whole labeling job (plan, rounds, checks, label math, tables, commits) on the
   replayed completions, as fast as the CPU side goes: verdicts and labelled steps per CPU-second, and
   each stage's wall seconds (on all threads) as a share of the job's CPU-seconds.
3. gpu     -- the same job with the replay waiting as long as an engine of --gpu-rate tokens/s would
   (sleeping: the CPU is free, as it is while a GPU works), in this process and on 1 and 2 Ray
   workers: the share of the labeling time the engine was busy (100%: it never waited for the CPU side).
--profile: cProfile of one job of part 2 (its finishing run inline); the top functions by own time.

    .venv/bin/python bench/cpu_side.py [--parts checker,label,gpu] [--families processbench,degenerate,tiny]
        [--rows 60] [--rollouts 8] [--gpu-rate 8000,40000] [--profile]

`tiny` and `embedded` are the rollouts of those models (tests/tiny_model.py, the embedded SmolLM2), recorded
once by a `labeler label` run into ~/.cache/prm-labeler/bench/ (tiny: about a minute; embedded: a few).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import completions  # noqa: E402
from bench.process_cpu import checker_processes_cpu  # noqa: E402
from labeler.checking.checker import AnswerChecker  # noqa: E402
from labeler.labeling.config import LabelConfig  # noqa: E402

RECORDINGS = Path.home() / ".cache" / "prm-labeler" / "bench"


# -- the completions ---------------------------------------------------------------------------------------


def record(model: str, rows: list[dict], rollouts: int) -> Path:
    """A labeling output with the rollouts of `model` (tiny, embedded) on `rows`, recorded once."""
    out = RECORDINGS / f"recorded-{model}-{len(rows)}-{rollouts}"
    if (out / "labels").exists():
        return out
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="record-", dir=RECORDINGS))
    source = work / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    command = [str(Path(sys.executable).parent / "labeler"), "label", "--input", str(source), "--output", str(work / "out"),
               "--rollouts", str(rollouts), "--quiet"]  # fmt: skip
    if model == "tiny":
        from tests.tiny_model import build_tiny_llama

        command += ["--model", str(build_tiny_llama(work / "tiny")), "--dtype", "float32", "--max-new-tokens", "128"]
    else:
        command += ["--max-new-tokens", "96"]
    print(f"recording the {model} model's rollouts on {len(rows)} rows: {' '.join(command)}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    (work / "out").rename(out)
    shutil.rmtree(work, ignore_errors=True)
    return out


def family_pool(family: str, rows: list[dict], rollouts: int) -> dict:
    if family == "processbench":
        return completions.processbench_pool(rows)
    if family == "degenerate":
        return completions.degenerate_pool(rows)
    if family in ("tiny", "embedded"):
        return completions.recorded_pool(record(family, rows, rollouts))
    raise SystemExit(f"cpu_side: unknown family {family!r}")


def family_rows(family: str, args) -> list[dict]:
    # the embedded model is slow to record: fewer rows, gsm8k only (it rarely finishes a MATH solution)
    if family == "embedded":
        return completions.processbench_rows(splits=("gsm8k",), limit=max(1, args.rows // 6))
    return completions.processbench_rows(limit=max(1, args.rows // 2))


# -- CPU time of this process and its checker processes ---------------------------------------------------


class CpuClock:
    """CPU seconds of this process (all threads) and of the answer checker's processes, those killed
    at their deadline included (bench/process_cpu.py)."""

    def __init__(self):
        import psutil

        self.me = psutil.Process()
        self.start = self._read()

    def _read(self) -> float:
        return sum(self.me.cpu_times()[:2]) + checker_processes_cpu()

    def seconds(self) -> float:
        return self._read() - self.start


# -- stages -----------------------------------------------------------------------------------------------


class StageClock:
    """Wall seconds spent in each stage on every thread, exclusive of the stages called inside it."""

    STAGES = {
        "extraction": [("labeler.checking.checker", "read_answers")],
        "comparison (fast path, numeric)": [("labeler.checking.checker", "compare")],
        "symbolic pool": [("labeler.checking.checker:AnswerChecker", "_run_symbolic")],
        "checker front (validation, cache)": [("labeler.checking.checker:AnswerChecker", "check_many")],
        "label math": [("labeler.labeling.tables", name) for name in ("soft_label", "hard_label", "first_error", "trajectory_label")],
        "tables": [("labeler.labeling.unit", name) for name in ("labels_table", "rollouts_table", "rejected_table")],
        "strategy and ledger": [("labeler.labeling.rollouts:StepLedger", "record"), ("labeler.labeling.rollouts:PrefixSampler", "send")],
        "commit": [("labeler.store.shard_store:ShardStore", "commit_unit")],
        "planning": [("labeler.labeling.job", "plan_job")],
        "replay (the engine's stand-in)": [("bench.completions:ReplayGenerator", "generate")],
    }

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.local = threading.local()
        self.patched = []

    def install(self) -> None:
        import importlib

        for stage, targets in self.STAGES.items():
            for where, name in targets:
                module_name, _, class_name = where.partition(":")
                owner = importlib.import_module(module_name)
                owner = getattr(owner, class_name) if class_name else owner
                original = getattr(owner, name)
                self.patched.append((owner, name, original))
                setattr(owner, name, self._timed(stage, original))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self.patched):
            setattr(owner, name, original)
        self.patched.clear()

    def _timed(self, stage: str, fn):
        clock = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            stack = clock.local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time of the stages inside this one
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                inner = stack.pop()
                clock.seconds[stage] += elapsed - inner
                if stack:
                    stack[-1] += elapsed

        return timed


# -- the parts --------------------------------------------------------------------------------------------


def checker_pairs(pool: dict, rows: list[dict]) -> tuple[list, list]:
    answers = {r["problem"]: r["answer"] for r in rows}
    pairs, questions = [], []
    for problem, texts in pool.items():
        for text, *_ in texts:
            pairs.append((text, answers[problem]))
            questions.append(problem)
    return pairs, questions


def part_checker(args, families) -> None:
    print("== 1. checker alone: AnswerChecker.check_many, a fresh checker per family, one symbolic process")
    print("   (CPU-seconds: this process and the checker's processes, workers killed at their deadline included)")
    print(f"{'family':34} {'pairs':>7} {'verdicts/CPU-s':>15} {'verdicts/wall-s':>16} {'symbolic':>9}")
    cases = [(family, *checker_pairs(pool, rows)) for family, (rows, pool) in families.items()]
    final_rows = completions.processbench_rows(limit=max(1, args.rows // 2))
    cases.append(("processbench final steps (distinct)", [(r["steps"][-1], r["answer"]) for r in final_rows], [r["problem"] for r in final_rows]))
    for name, pairs, questions in cases:
        with AnswerChecker(timeout_s=5.0, workers=1) as checker:
            checker.check("$\\boxed{\\frac{1}{\\sqrt{2}}}$", "\\frac{\\sqrt{2}}{2}")  # start the pool, untimed
            symbolic_before = len(checker._cache._entries)  # noqa: SLF001 - bench instrumentation
            clock, started = CpuClock(), time.perf_counter()
            checker.check_many(pairs, questions)
            cpu, wall = clock.seconds(), time.perf_counter() - started
            symbolic = len(checker._cache._entries) - symbolic_before  # noqa: SLF001
        print(f"{name:34} {len(pairs):7} {len(pairs) / cpu:15.0f} {len(pairs) / wall:16.0f} {symbolic:9}", flush=True)


def write_rows(rows: list[dict], work: Path) -> Path:
    path = work / f"rows-{len(rows)}.jsonl"
    if not path.exists():
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def job_config(rows_file: Path, out: Path, args, model: str = "replay") -> LabelConfig:
    return LabelConfig(input=str(rows_file), output=str(out), model=model, rollouts=args.rollouts, max_new_tokens=4096, shard_size=args.unit)


def run_replayed(config: LabelConfig, pool: dict, rate: float | None = None, stats_file: Path | None = None, workers: int = 0,
                 checker: AnswerChecker | None = None):  # fmt: skip
    """The job on the replayed completions: in this process (with `checker`, else a new one) or on `workers` Ray workers."""
    from labeler.labeling.job import run_job
    from workers.local_executor import LocalExecutor

    def generator():
        return completions.ReplayGenerator(pool, tokens_per_second=rate, stats_file=stats_file)

    if workers:
        from functools import partial

        import cloudpickle

        from workers.ray_executor import ClusterSettings, RayExecutor

        cloudpickle.register_pickle_by_value(completions)  # the Ray workers need not import bench/
        executor = RayExecutor(ClusterSettings(workers=workers), generator, partial(AnswerChecker, timeout_s=5.0))
        return run_job(config, executor=executor, model_info={"name": "replay"}, progress_enabled=False)
    if checker is not None:
        return run_job(config, executor=LocalExecutor(generator, checker), model_info={"name": "replay"}, progress_enabled=False)
    with AnswerChecker(timeout_s=5.0) as checker:
        return run_job(config, executor=LocalExecutor(generator, checker), model_info={"name": "replay"}, progress_enabled=False)


def part_label(args, families, work: Path) -> None:
    print(f"\n== 2. the whole labeling path on replayed completions ({args.rollouts} rollouts per prefix, exhaustive, units of {args.unit})")
    for family, (rows, pool) in families.items():
        rows_file = write_rows(rows, work)
        run_replayed(job_config(rows_file, work / f"warm-{family}", args), pool)  # warms the imports, untimed
        stages = StageClock()
        # a fresh checker (cold caches), its pool started before the clock and closed after it: the CPU
        # time of its processes is counted (but not that of a process killed at a deadline)
        with AnswerChecker(timeout_s=5.0) as checker:
            checker.check("$\\boxed{\\frac{1}{\\sqrt{2}}}$", "\\frac{\\sqrt{2}}{2}")
            checker._cache._entries.clear()  # noqa: SLF001 - bench instrumentation
            stages.install()
            try:
                clock, started = CpuClock(), time.perf_counter()
                summary = run_replayed(job_config(rows_file, work / f"label-{family}", args), pool, checker=checker)
                cpu, wall = clock.seconds(), time.perf_counter() - started
            finally:
                stages.uninstall()
        verdicts = _verdicts(work / f"label-{family}")
        print(
            f"-- {family}: {summary.solutions} solutions, {summary.steps} steps ({summary.steps_labelled} labelled), {verdicts} verdicts, "
            f"{summary.generated_tokens} tokens replayed; {cpu:.2f} CPU-s, {wall:.2f} wall-s"
        )
        print(f"   {verdicts / cpu:.0f} verdicts and {summary.steps_labelled / cpu:.0f} labelled steps per CPU-second; "
              f"keeps up with {summary.generated_tokens / cpu:.0f} generated tokens/s per core")  # fmt: skip
        timed = sum(stages.seconds.values())
        print("   stage (wall seconds on all threads, the symbolic pool's the front end's wait on it)  as a share of the job's CPU-seconds")
        for stage, seconds in sorted(stages.seconds.items(), key=lambda kv: -kv[1]):
            print(f"   {stage:36} {seconds:7.3f} s  {100 * seconds / cpu:5.1f}%")
        print(f"   {'other (threads, GC)':36} {max(0.0, cpu - timed):7.3f} s  {100 * max(0.0, cpu - timed) / cpu:5.1f}%", flush=True)
        if args.profile:
            profile_job(rows_file, pool, work / f"profile-{family}", args)


def profile_job(rows_file: Path, pool: dict, out: Path, args) -> None:
    """cProfile of a job whose units are generated and finished one after the other on this thread."""
    from labeler.labeling.job import run_job
    from workers.local_executor import LocalExecutor

    class InlineExecutor(LocalExecutor):
        def run(self, units, task, progress, commit, check_engine=None):
            generator = self.generator_factory()
            for unit in units:
                commit(task.finish(task.generate(unit, generator, self.checker), self.checker, None))

    with AnswerChecker(timeout_s=5.0) as checker:
        checker.check("$\\boxed{\\frac{1}{\\sqrt{2}}}$", "\\frac{\\sqrt{2}}{2}")
        profiler = cProfile.Profile()
        profiler.enable()
        run_job(job_config(rows_file, out, args), executor=InlineExecutor(lambda: completions.ReplayGenerator(pool), checker),
                model_info={"name": "replay"}, progress_enabled=False)  # fmt: skip
        profiler.disable()
    print("   profile (cProfile, own time), top 15:")
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:15]
    total = sum(v[2] for v in stats.stats.values())
    for (file, line, name), (_, calls, own, cumulative, _) in rows:
        where = f"{Path(file).relative_to(ROOT) if file.startswith(str(ROOT)) else Path(file).name}:{line}({name})"
        print(f"     {100 * own / total:5.1f}%  own {own:6.3f} s  cum {cumulative:6.3f} s  {calls:8} calls  {where}")


def _verdicts(out: Path) -> int:
    import pyarrow.dataset as ds

    table = ds.dataset(out / "rollouts", format="parquet").to_table(columns=["verdict"])
    return sum(1 for v in table.column("verdict").to_pylist() if v != "truncated")


def part_gpu(args, families, work: Path) -> None:
    rates = [float(r) for r in args.gpu_rate.split(",")]
    print(f"\n== 3. the replay standing in for an engine of {args.gpu_rate} tokens/s (it sleeps: the CPU is free)")
    print(f"{'family':14} {'tokens/s':>9} {'executor':>18} {'tokens':>8} {'engine busy':>12} {'labeling s':>11}")
    for family, (rows, pool) in families.items():
        rows_file = write_rows(rows, work)
        for rate in rates:
            for workers in [0] + [w for w in (1, 2) if w <= args.max_workers]:
                name = f"gpu-{family}-{int(rate)}-{workers}"
                stats_dir = work / f"{name}-stats"
                stats_dir.mkdir()
                started = time.perf_counter()
                summary = run_replayed(job_config(rows_file, work / name, args), pool, rate, stats_dir, workers)
                wall = time.perf_counter() - started
                busy = engine_busy(stats_dir)
                executor = "this process" if not workers else f"{workers} Ray worker{'s' * (workers > 1)}"
                print(f"{family:14} {rate:9.0f} {executor:>18} {summary.generated_tokens:8} {100 * busy:11.1f}% {wall:11.1f}", flush=True)


def engine_busy(stats_dir: Path) -> float:
    """Over every replayed engine: the share of the time from its first generate call to the end of its last
    that it spent generating."""
    busy = span = 0.0
    for file in stats_dir.glob("*.json"):
        s = json.loads(file.read_text(encoding="utf-8"))
        busy, span = busy + s["busy"], span + (s["last_end"] - s["first_start"])
    return busy / span if span else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="checker,label,gpu")
    parser.add_argument("--families", default="processbench,degenerate,tiny", help="processbench, degenerate, tiny, embedded")
    parser.add_argument("--rows", type=int, default=60, help="ProcessBench rows, half gsm8k and half math")
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--unit", type=int, default=8, help="solutions per unit")
    parser.add_argument("--gpu-rate", default="8000,40000", help="tokens/s of the engine the replay stands in for")
    parser.add_argument("--max-workers", type=int, default=2, help="Ray workers in part 3 (0: none)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    from workers.engine_logging import route_vllm_logs

    route_vllm_logs("ERROR")
    print(f"cpu_side: {os.cpu_count()} cores; families {args.families}; {args.rows} rows", flush=True)
    families = {}
    for family in args.families.split(","):
        rows = family_rows(family, args)
        families[family] = (rows, family_pool(family, rows, args.rollouts))
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory(prefix="cpu-side-") as directory:
        work = Path(directory)
        if "checker" in parts:
            part_checker(args, families)
        if "label" in parts:
            part_label(args, families, work)
        if "gpu" in parts:
            part_gpu(args, families, work)


if __name__ == "__main__":
    main()
