"""What the review app's tests share: a real labeling output made on the tiny model, and `labeler view`
run as the user runs it (a subprocess, over real HTTP)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

SAMPLE_PROBLEMS = Path(__file__).resolve().parents[1] / "labeler" / "data" / "sample_problems.jsonl"


def label_sample_problems(model_dir, engine, output: Path, limit: int = 8) -> Path:
    """`labeler label` on the packaged sample problems (each with its solution), with the shared engine."""
    from labeler.api import Labeler

    with Labeler(model=str(model_dir), generator=engine, rollouts=2, max_new_tokens=12, max_model_len=1024, shard_size=3, limit=limit) as labeler:
        labeler.run_job(input=str(SAMPLE_PROBLEMS), output=str(output))
    return output


class ViewServer:
    """`labeler view ARGS --port 0`; its address is the first line it prints."""

    def __init__(self, *args: str, log: Path):
        self.log = log
        self._log_file = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labeler.cli", "view", "--port", "0", *map(str, args)],
            stdout=subprocess.PIPE, stderr=self._log_file, text=True,
        )  # fmt: skip
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), log.read_text()
        self.http = httpx.Client(base_url=self.url, timeout=60)

    def stop(self) -> int:
        self.http.close()
        self.proc.terminate()
        code = self.proc.wait(timeout=30)
        self._log_file.close()
        return code

    def __enter__(self) -> "ViewServer":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.stop()
