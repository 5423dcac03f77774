"""The review app (`labeler view`) on a large output: time to the first page, to a filtered and sorted page,
to a text search, to open a solution and its rollouts, and the server's memory.

The output is a real labeling job's (the job path, the store, the checker), made by the bench with the
test-double generator of bench/scale.py (no model): --solutions problems with 4 steps of about 70
characters each, 4 rollouts per prefix. Then `labeler view OUT --port 0` runs as a user runs it and is
asked over HTTP; each request is timed from the client, 5 times (the median is printed), and the
server's resident memory (its process and children) is read after the last.

    .venv/bin/python bench/review_app.py [--solutions 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psutil  # noqa: E402

from bench.scale import InstantGenerator  # noqa: E402
from labeler.checking.checker import AnswerChecker  # noqa: E402
from labeler.labeling.config import LabelConfig  # noqa: E402
from labeler.labeling.job import run_job  # noqa: E402
from workers.local_executor import LocalExecutor  # noqa: E402

STEP_TEXTS = (
    "First we write down the two numbers that the problem gives us, {a} and {b}.",
    "Adding them means counting on from {a} by {b} more, one at a time.",
    "Counting on from {a} by {b} gives {s}, which we check by counting back.",
    "The answer is: {s}",
)


def write_problems(path: Path, count: int) -> Path:
    with path.open("w") as handle:
        for i in range(count):
            a, b = i % 997, i // 997
            steps = [text.format(a=a, b=b, s=a + b) for text in STEP_TEXTS]
            handle.write(json.dumps({"id": f"r{i}", "problem": f"What is {a} plus {b}?", "answer": str(a + b), "steps": steps}) + "\n")
    return path


def make_output(work: Path, solutions: int) -> Path:
    out = work / "out"
    if (out / "manifest.json").exists():
        return out
    dataset = write_problems(work / "problems.jsonl", solutions)
    config = LabelConfig(input=str(dataset), output=str(out), model="instant", rollouts=4, shard_size=256, seed=0)
    started = time.perf_counter()
    with AnswerChecker(timeout_s=5) as checker:
        run_job(config, executor=LocalExecutor(InstantGenerator, checker), model_info={"name": "instant"}, progress_enabled=False)
    print(json.dumps({"part": "output", "solutions": solutions, "seconds_to_label": round(time.perf_counter() - started, 1)}), flush=True)
    return out


def timed(client: httpx.Client, path: str, params: dict | None = None, repeat: int = 5) -> tuple[float, float, httpx.Response]:
    """(first, median of `repeat`) milliseconds of GET `path`; the last response."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path, params=params)
        times.append(1000 * (time.perf_counter() - started))
        response.raise_for_status()
    return round(times[0], 1), round(statistics.median(times), 1), response


def rss_mb(pid: int) -> float:
    process = psutil.Process(pid)
    return round(sum(p.memory_info().rss for p in (process, *process.children(recursive=True))) / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, default=None, help="make (or reuse) the output in this folder")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="review-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out = make_output(work, args.solutions)

    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "labeler.cli", "view", str(out), "--port", "0", "--quiet"], stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    ready = time.perf_counter() - started  # the command started, the shards read, the address printed
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            figures = {"part": "view", "solutions": args.solutions, "start_to_ready_s": round(ready, 2)}
            figures["first_page_ms"], figures["page_ms_median"], _ = timed(client, "/")
            figures["start_to_first_page_s"] = round(time.perf_counter() - started, 2)
            filtered = {"first_error": "some", "sort": "mean_soft", "order": "desc", "page": "40"}
            figures["filtered_sorted_page_ms"], figures["filtered_sorted_page_ms_median"], _ = timed(client, "/", filtered)
            figures["text_search_ms"], figures["text_search_ms_median"], page = timed(client, "/", {"text": "counting back from 512"})
            middle = client.get("/", params={"page": str(args.solutions // 100)}).text
            solution_id = middle.split('href="/solution/0/')[1].split('"')[0]
            figures["open_solution_ms"], figures["open_solution_ms_median"], _ = timed(client, f"/solution/0/{solution_id}")
            figures["step_rollouts_ms"], figures["step_rollouts_ms_median"], _ = timed(client, f"/solution/0/{solution_id}/step/1", {"fragment": "1"})
            figures["explain_ms"], figures["explain_ms_median"], _ = timed(client, f"/explain/0/{solution_id}/1/0", {"fragment": "1"})
            figures["server_rss_mb"] = rss_mb(server.pid)
            print(json.dumps(figures), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
