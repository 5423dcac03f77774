"""Progress of a long job on stderr: one line per committed unit, with rates and an ETA, and between commits a line
when a generation batch is done (at most one every BATCH_LINE_EVERY_S seconds), so that a unit of many solutions
on a slow machine does not leave the job silent for minutes."""

from __future__ import annotations

import sys
import threading
import time
from typing import Sequence, TextIO

BATCH_LINE_EVERY_S = 5.0  # the least time between two lines of generation progress


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
        rollouts_planned: int | None = None,
    ):
        """`rollouts_planned`: about how many samples this run is to generate, where the job knows it up front
        (an ETA from the generation rate before any unit commits); None: the ETA comes from committed solutions."""
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.units_total, self.units_done = units_total, units_done
        self.solutions_total, self.solutions_done = solutions_total, solutions_done
        self.rollouts, self.tokens = rollouts_done, tokens_done
        self.samples_name = samples_name  # what the job samples: "rollouts" (labeling), "critiques" (a judge)
        self.solutions_this_run = self.rollouts_this_run = self.tokens_this_run = 0
        self.rollouts_planned = rollouts_planned
        self.generated_rollouts = self.generated_tokens = 0  # this run, as generation batches end (failed units' too)
        self.started = self.last_batch_line = time.monotonic()
        self.last_commit = None  # when this run last committed a unit (None: none yet)
        self.lock = threading.Lock()  # batches may end on another thread than commits

    def start_clock(self) -> None:
        """Rates and ETA count from here (after the model has loaded)."""
        self.started = self.last_batch_line = time.monotonic()

    def log(self, message: str) -> None:
        if self.enabled:
            print(f"[labeler] {message}", file=self.stream, flush=True)

    def warn(self, message: str) -> None:
        """Something the user should know although the job goes on: printed even when progress is off."""
        print(f"[labeler] warning: {message}", file=self.stream, flush=True)

    def unit_committed(self, solutions: int, rollouts: int, tokens: int) -> None:
        """After a unit's commit: `solutions` is what the unit was planned to label (its share of the
        total), rollouts (the samples it drew: critiques, for a judge) and tokens what it spent."""
        with self.lock:
            self._count_unit(solutions, rollouts, tokens)

    def _count_unit(self, solutions: int, rollouts: int, tokens: int) -> None:
        self.units_done += 1
        self.solutions_done += solutions
        self.rollouts += rollouts
        self.tokens += tokens
        self.solutions_this_run += solutions
        self.rollouts_this_run += rollouts
        self.tokens_this_run += tokens
        self.last_commit = now = time.monotonic()
        elapsed = max(now - self.started, 1e-9)
        self.log(
            f"units {self.units_done}/{self.units_total} | solutions {self.solutions_done}/{self.solutions_total} | "
            f"{self.samples_name} {self.rollouts} ({self.rollouts_this_run / elapsed:.1f}/s) | "
            f"tokens {self.tokens} ({self.tokens_this_run / elapsed:.0f}/s) | "
            f"elapsed {format_duration(elapsed)} | ETA {self._committed_eta(now)}"
        )

    def _committed_eta(self, now: float) -> str:
        """The time left at the rate of the solutions this run has committed (their count over the time it took to
        commit them, up to the last commit), counted down since the last commit: it never grows while the job waits
        for its next commit. Past that rate's due time it says so rather than show a time it cannot know."""
        if not self.solutions_this_run or self.last_commit is None:
            return "?"
        seconds_per_solution = max(self.last_commit - self.started, 1e-9) / self.solutions_this_run
        left = max(self.solutions_total - self.solutions_done, 0) * seconds_per_solution - (now - self.last_commit)
        if left >= 0 or self.solutions_done >= self.solutions_total:
            return format_duration(max(left, 0))
        return "? (the next commit is later than the committed units' rate; it updates the estimate)"

    def generated(self, rollouts: int, tokens: int) -> None:
        """After a generation batch (a generate call of a unit): what it sampled. Logs the samples generated this
        run, their rate and an ETA, at most once every BATCH_LINE_EVERY_S seconds."""
        with self.lock:
            self.generated_rollouts += rollouts
            self.generated_tokens += tokens
            now = time.monotonic()
            if not self.enabled or now - self.last_batch_line < BATCH_LINE_EVERY_S:
                return
            self.last_batch_line = now
            elapsed = max(now - self.started, 1e-9)
            rate = self.generated_rollouts / elapsed
            planned = f" of about {self.rollouts_planned}" if self.rollouts_planned else ""
            if self.rollouts_planned and rate > 0:
                eta = format_duration(max(self.rollouts_planned - self.generated_rollouts, 0) / rate)
            elif self.solutions_this_run:
                eta = self._committed_eta(now)
            else:
                eta = "? (until a unit is committed)"
            self.log(
                f"{self.samples_name} generated {self.generated_rollouts} ({rate:.1f}/s){planned} | "
                f"tokens {self.generated_tokens} ({self.generated_tokens / elapsed:.0f}/s) | units {self.units_done}/{self.units_total} "
                f"committed | elapsed {format_duration(elapsed)} | ETA {eta}"
            )


class GenerationTally:
    """What generation batches sampled since it was last taken: where a job's generator runs away from its
    ProgressReporter (on a Ray worker), it counts there (CountedGenerator takes it as its `progress`), and the
    driver takes the counts now and then and hands them to its reporter (ProgressReporter.generated)."""

    def __init__(self):
        self.lock = threading.Lock()  # a worker's units generate on one thread and finish on another
        self.rollouts = self.tokens = 0

    def generated(self, rollouts: int, tokens: int) -> None:
        with self.lock:
            self.rollouts += rollouts
            self.tokens += tokens

    def take(self) -> tuple[int, int]:
        """The rollouts and tokens counted since the last take."""
        with self.lock:
            counted, (self.rollouts, self.tokens) = (self.rollouts, self.tokens), (0, 0)
        return counted


class CountedGenerator:
    """A generator whose every generate call reports what it sampled to `progress` (ProgressReporter.generated, or
    a GenerationTally):
    as each request finishes, where the generator says so (`on_finished`: the vLLM engine), else when the call ends."""

    def __init__(self, generator, progress: ProgressReporter | GenerationTally):
        self.generator, self.progress = generator, progress

    def __getattr__(self, name):
        return getattr(self.generator, name)

    def generate(self, requests: Sequence, sampling) -> list:
        streams = hasattr(self.generator, "on_finished")
        if streams:
            self.generator.on_finished = lambda completions: self.progress.generated(completions, 0)
        try:
            results = self.generator.generate(requests, sampling)
        finally:
            if streams:
                self.generator.on_finished = None
        completions = [completion for result in results if result is not None for completion in result.completions]
        self.progress.generated(0 if streams else len(completions), sum(completion.tokens for completion in completions))
        return results
