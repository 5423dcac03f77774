"""What the review app's tests share: a real labeling output made on the tiny model, and `labeler view`
served over real HTTP (in this process, or as a subprocess as the user runs it)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ServedOnAThread

SAMPLE_PROBLEMS = Path(__file__).resolve().parents[1] / "labeler" / "data" / "sample_problems.jsonl"


def label_sample_problems(model_dir, engine, output: Path, limit: int = 8) -> Path:
    """`labeler label` on the packaged sample problems (each with its solution), with the shared engine."""
    from labeler.api import Labeler

    with Labeler(model=str(model_dir), generator=engine, rollouts=2, max_new_tokens=12, max_model_len=1024, shard_size=3, limit=limit) as labeler:
        labeler.run_job(input=str(SAMPLE_PROBLEMS), output=str(output))
    return output


class ViewServer:
    """`labeler view ARGS --port 0`, over real HTTP: in this process by default (the CLI's own start, its
    uvicorn server on a thread; its log lines in `log`), or, with `process=True`, as the user runs it, a
    subprocess whose address is the first line it prints."""

    def __init__(self, *args: str, log: Path, process: bool = False):
        self.log = log
        self._log_file = open(log, "w")
        self.proc = self.server = None
        if process:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "labeler.cli", "view", "--port", "0", *map(str, args)],
                stdout=subprocess.PIPE, stderr=self._log_file, text=True,
            )  # fmt: skip
            self.url = self.proc.stdout.readline().strip()
        else:
            self._start_here([str(a) for a in args])
        assert self.url.startswith(("http://127.0.0.1:", "http://0.0.0.0:")), log.read_text()
        self.http = httpx.Client(base_url=self.url.replace("//0.0.0.0:", "//127.0.0.1:"), timeout=60)  # every interface: reached here

    def _start_here(self, args: list[str]) -> None:
        from labeler.cli import build_parser
        from labeler.cli.view import start_view

        self._handler = logging.StreamHandler(self._log_file)
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self._loggers = [logging.getLogger(), logging.getLogger("labeler")]  # labeler's may not propagate (log_to_stderr)
        for logger in self._loggers:
            logger.addHandler(self._handler)
        started = start_view(build_parser().parse_args(["view", "--port", "0", *args]))
        if isinstance(started, int):
            self.url = f"exit {started}"
            return
        server, sock, self.url = started
        self.server = ServedOnAThread(server, sock, timeout=30)

    def stop(self) -> int:
        self.http.close()
        if self.proc is not None:
            self.proc.terminate()
            code = self.proc.wait(timeout=30)
        else:
            self.server.stop()
            for logger in self._loggers:
                logger.removeHandler(self._handler)
            code = 0
        self._log_file.close()
        return code

    def __enter__(self) -> "ViewServer":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None or self.proc.poll() is None:
            self.stop()
