"""Progress of a long job on stderr: one line per committed unit, with rates and an ETA."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class ProgressReporter:
    def __init__(self, units_total: int, units_done: int, solutions_total: int, stream: TextIO | None = None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.units_total = units_total
        self.units_done = units_done
        self.solutions_total = solutions_total
        self.solutions_done = 0
        self.rollouts = 0
        self.tokens = 0
        self.started = time.monotonic()
        self.solutions_this_run = 0

    def start_clock(self) -> None:
        """Rates and ETA count from here (after the model has loaded)."""
        self.started = time.monotonic()

    def log(self, message: str) -> None:
        if self.enabled:
            print(f"[labeler] {message}", file=self.stream, flush=True)

    def warn(self, message: str) -> None:
        """Something the user should know although the job goes on: printed even when progress is off."""
        print(f"[labeler] warning: {message}", file=self.stream, flush=True)

    def unit_committed(self, solutions: int, rollouts: int, tokens: int, resumed_solutions_before: int = 0) -> None:
        self.units_done += 1
        self.solutions_this_run += solutions
        self.rollouts += rollouts
        self.tokens += tokens
        elapsed = max(time.monotonic() - self.started, 1e-9)
        done = resumed_solutions_before + self.solutions_this_run
        remaining = max(self.solutions_total - done, 0)
        eta = remaining * elapsed / self.solutions_this_run if self.solutions_this_run else float("nan")
        self.log(
            f"units {self.units_done}/{self.units_total} | solutions {done}/{self.solutions_total} | "
            f"rollouts {self.rollouts} ({self.rollouts / elapsed:.1f}/s) | tokens {self.tokens} ({self.tokens / elapsed:.0f}/s) | "
            f"elapsed {format_duration(elapsed)} | ETA {format_duration(eta) if eta == eta else '?'}"
        )
