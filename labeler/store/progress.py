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
    """Counts the whole job (a resumed one starts from what its manifest records as committed);
    rates and the ETA count only this run, from `start_clock` (after the model has loaded)."""

    def __init__(
        self,
        units_total: int,
        solutions_total: int,
        *,
        units_done: int = 0,
        solutions_done: int = 0,
        rollouts_done: int = 0,
        tokens_done: int = 0,
        stream: TextIO | None = None,
        enabled: bool = True,
        samples_name: str = "rollouts",
    ):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.units_total, self.units_done = units_total, units_done
        self.solutions_total, self.solutions_done = solutions_total, solutions_done
        self.rollouts, self.tokens = rollouts_done, tokens_done
        self.samples_name = samples_name  # what the job samples: "rollouts" (labeling), "critiques" (a judge)
        self.solutions_this_run = self.rollouts_this_run = self.tokens_this_run = 0
        self.started = time.monotonic()

    def start_clock(self) -> None:
        """Rates and ETA count from here (after the model has loaded)."""
        self.started = time.monotonic()

    def log(self, message: str) -> None:
        if self.enabled:
            print(f"[labeler] {message}", file=self.stream, flush=True)

    def warn(self, message: str) -> None:
        """Something the user should know although the job goes on: printed even when progress is off."""
        print(f"[labeler] warning: {message}", file=self.stream, flush=True)

    def unit_committed(self, solutions: int, rollouts: int, tokens: int) -> None:
        """After a unit's commit: `solutions` is what the unit was planned to label (its share of the
        total), rollouts (the samples it drew: critiques, for a judge) and tokens what it spent."""
        self.units_done += 1
        self.solutions_done += solutions
        self.rollouts += rollouts
        self.tokens += tokens
        self.solutions_this_run += solutions
        self.rollouts_this_run += rollouts
        self.tokens_this_run += tokens
        elapsed = max(time.monotonic() - self.started, 1e-9)
        remaining = max(self.solutions_total - self.solutions_done, 0)
        eta = remaining * elapsed / self.solutions_this_run if self.solutions_this_run else float("nan")
        self.log(
            f"units {self.units_done}/{self.units_total} | solutions {self.solutions_done}/{self.solutions_total} | "
            f"{self.samples_name} {self.rollouts} ({self.rollouts_this_run / elapsed:.1f}/s) | "
            f"tokens {self.tokens} ({self.tokens_this_run / elapsed:.0f}/s) | "
            f"elapsed {format_duration(elapsed)} | ETA {format_duration(eta) if eta == eta else '?'}"
        )
