"""`labeler serve` under a bounded load on 127.0.0.1: latency (p50, p99), errors and completions/s.

A tiny random Qwen2.5-Math-PRM (tests/public_prms.py) is served in a subprocess, or --prm SPEC (a GPU
run: --prm qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --device cuda). C client threads each send R OpenRLHF
requests (/get_reward, one sample each, as OpenRLHF's client sends them), each with a deadline;
every answer other than 200 in time is an error.

    .venv/bin/python bench/reward_server.py [--clients 16] [--requests 25] [--deadline-s 30] [--prm SPEC] [--device cpu] [--prm-backend vllm|torch]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "<|im_start|>user\nTom has {a} apples and buys {b} more. How many apples does he have?<|im_end|>\n<|im_start|>assistant\n"
RESPONSE = "Tom starts with {a} apples.\n\nHe buys {b} more, so {a} + {b} = {c}.\n\nThe answer is $\\boxed{{{c}}}$."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=25, help="requests per client")
    parser.add_argument("--deadline-s", type=float, default=30.0, help="a request's deadline")
    parser.add_argument("--prm", default=None, help="a PRM spec (default: a tiny random Qwen PRM built here)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prm-backend", default="vllm", choices=("vllm", "torch"))
    args = parser.parse_args()
    import httpx

    with tempfile.TemporaryDirectory(prefix="reward-server-") as scratch:
        prm = args.prm
        if prm is None:
            from tests.public_prms import build_qwen_prm

            prm = f"qwen-prm:{build_qwen_prm(Path(scratch) / 'qwen-prm')[0]}"
        server = subprocess.Popen(
            [sys.executable, "-m", "labeler.cli", "serve", "--prm", prm, "--port", "0", "--device", args.device, "--answer-weight", "1",
             "--prm-backend", args.prm_backend],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = server.stdout.readline().strip()
        if not url:
            sys.exit("the server did not start")

        def client(k: int) -> list[tuple[bool, float]]:
            out = []
            with httpx.Client(timeout=args.deadline_s) as http:
                for i in range(args.requests):
                    a, b = k + 2, i + 3
                    prompt = PROMPT.format(a=a, b=b)
                    body = {"query": [prompt + RESPONSE.format(a=a, b=b, c=a + b if i % 3 else a + b + 1)], "prompts": [prompt],
                            "labels": [str(a + b)]}  # fmt: skip
                    started = time.perf_counter()
                    try:
                        ok = http.post(f"{url}/get_reward", json=body).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    out.append((ok, time.perf_counter() - started))
            return out

        httpx.post(f"{url}/get_reward", json={"query": [PROMPT + "1"], "prompts": [PROMPT], "labels": ["1"]}, timeout=60)  # warm-up
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            results = [r for rs in pool.map(client, range(args.clients)) for r in rs]
        wall = time.perf_counter() - started
        health = httpx.get(f"{url}/health", timeout=10).json()
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    latencies = sorted(seconds for _, seconds in results)
    errors = sum(not ok for ok, _ in results)
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    print(f"PRM {prm if args.prm else 'tiny random Qwen PRM'} on {args.device}, {args.prm_backend} backend; {args.clients} clients x {args.requests} requests")
    print(f"requests {len(results)}  errors {errors}  p50 {statistics.median(latencies) * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms")
    print(f"completions/s {len(results) / wall:.1f}  batches {health['batches']} for {health['scored']} completions "
          f"(mean batch {health['scored'] / max(1, health['batches']):.1f}); server exit code {code}")  # fmt: skip


if __name__ == "__main__":
    main()
