"""Step scores per second of the two PRM backends (vllm, torch) on the same best-of-N candidates, as a
ratio in one run.

Candidates: P problems of ProcessBench-gsm8k (../shared/data), N candidates each (a best-of-N pool:
every candidate of a pool starts with its problem): the problem's solutions and their prefixes of
steps. The PRM (default): one of ours on the embedded SmolLM2-135M backbone with a random head,
saved in a temporary folder; or --prm SPEC. Each backend is loaded once (load time printed apart),
scores a warm-up pool, then the runs alternate (vllm torch, torch vllm, ...); a run scores every
candidate. The ratio is the median over pairs of vllm's steps/s over torch's; the largest
difference between the two backends' step scores is printed too (the tests hold it under 1e-3).

    .venv/bin/python bench/prm_backends.py [--problems 16] [--n 8] [--pairs 3] [--prm SPEC] [--device cpu] [--precision auto]

On a GPU (a recipe: not run here; both backends on the card at once, vLLM taking 45% of it, both with
bfloat16 backbone weights: torch keeps the step head in float32, vLLM runs it in bfloat16, so the
difference printed includes that):
    python bench/prm_backends.py --prm qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --device cuda --precision bf16 --problems 128 --n 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "processbench" / "gsm8k.jsonl"


def pools(problems: int, n: int):
    from labeler.evaluation.solutions import SolutionToScore

    by_problem: dict[str, list[list[str]]] = defaultdict(list)
    for line in DATA.read_text().splitlines():
        row = json.loads(line)
        by_problem[row["problem"]].append(row["steps"])
    out = []
    for p, (problem, solutions) in enumerate(sorted(by_problem.items())[:problems]):
        variants = [steps[:k] for steps in solutions for k in range(len(steps), 0, -1)]
        out += [SolutionToScore(f"p{p}", f"p{p}-{j}", problem, tuple(variants[j % len(variants)])) for j in range(n)]
    return out


def default_prm(folder: Path) -> str:
    from labeler.prm.model import ProcessRewardModel
    from workers.model_source import resolve_model

    ProcessRewardModel.from_backbone(resolve_model(None).path, max_length=1024, target="soft").save(folder)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--n", type=int, default=8, help="candidates per problem")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--prm", default=None, help="a PRM spec (default: ours on the embedded SmolLM2-135M, random head)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (with a vLLM built for the GPU)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--batch-size", type=int, default=8, help="the torch backend's solutions per forward pass")
    parser.add_argument("--prm-gpu-memory-utilization", type=float, default=0.45,
                        help="on a GPU: the vLLM engine's share, the rest left to the torch scorer loaded beside it")  # fmt: skip
    args = parser.parse_args()

    from labeler.cli.common import quiet_transformers
    from workers.engine_logging import quiet_libraries, route_vllm_logs

    route_vllm_logs("ERROR")
    quiet_transformers()
    with quiet_libraries():
        run(args)


def run(args) -> None:
    from labeler.prm.backends import BackendConfig
    from labeler.prm.devices import place
    from labeler.prm.scorers import backend_of
    from workers.vllm_scorer import load_step_scorer

    candidates = pools(args.problems, args.n)
    steps = sum(len(c.steps) for c in candidates)
    placement = place(args.device, args.precision)
    with tempfile.TemporaryDirectory(prefix="prm-backends-") as scratch:
        spec = args.prm or default_prm(Path(scratch) / "prm")
        scorers, load_s = {}, {}
        for backend in ("vllm", "torch"):
            start = time.perf_counter()
            backend_config = BackendConfig(prm_backend=backend, prm_gpu_memory_utilization=args.prm_gpu_memory_utilization)
            scorers[backend] = load_step_scorer(spec, backend_config, placement=placement, batch_size=args.batch_size)
            load_s[backend] = time.perf_counter() - start
            if backend_of(scorers[backend]) != backend:
                sys.exit(f"{spec}: the {backend} backend could not load it (see the line above)")
            scorers[backend].step_scores(candidates[: args.n])  # warm-up: one pool
        rates: dict[str, list[float]] = {"vllm": [], "torch": []}
        scores = {}
        for pair in range(args.pairs):
            for backend in ("vllm", "torch") if pair % 2 == 0 else ("torch", "vllm"):
                start = time.perf_counter()
                scores[backend] = scorers[backend].step_scores(candidates)
                rates[backend].append(steps / (time.perf_counter() - start))
        scorers["vllm"].close()
    difference = max(
        (abs(a - b) for v, t in zip(scores["vllm"], scores["torch"]) for a, b in zip(v, t) if a is not None and b is not None), default=0.0
    )
    unscored = {backend: sum(s is None for row in scores[backend] for s in row) for backend in scores}
    ratios = [v / t for v, t in zip(rates["vllm"], rates["torch"])]
    print(f"PRM {spec} on {placement.describe()}: {len(candidates)} candidates ({args.problems} problems x {args.n}), {steps} steps")
    for backend in ("vllm", "torch"):
        shown = ", ".join(f"{r:,.0f}" for r in rates[backend])
        print(f"{backend:>5}: load {load_s[backend]:.1f} s; step scores/s {shown} (median {statistics.median(rates[backend]):,.0f}); unscored steps {unscored[backend]}")
    print(f"ratio vllm/torch (median of {len(ratios)} pairs): {statistics.median(ratios):.2f} (pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"largest step-score difference between the backends: {difference:.2e}")


if __name__ == "__main__":
    main()
