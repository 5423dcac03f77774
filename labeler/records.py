"""The records that flow through a labeling job, from input row to labelled solution."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceRow:
    """One input row after a preset has read it, before any model work.

    `steps` is None when the row carries only a problem: the job samples
    solutions for it first (Math-Shepherd's generator stage).
    """

    row_index: int  # 0-based position in the input
    problem_id: str
    problem: str
    reference_answer: str
    steps: tuple[str, ...] | None
    source: str  # preset name, e.g. "gsm8k"
    # False when the input says its solution stops before the final answer (a PRM800K trajectory
    # that ends at an error or gives up, a trace whose thinking was cut off): its last step is then
    # labelled by rollouts, not by a check.
    complete: bool = True
    # A reasoning model's trace (the trace preset): steps[:thinking_steps] are its thinking, the rest
    # its response (one step). 0: an ordinary step-by-step solution.
    thinking_steps: int = 0


@dataclass(frozen=True)
class Solution:
    """A step-by-step solution to label: every prefix s1..si gets rollouts."""

    problem_id: str
    solution_id: str
    problem: str
    reference_answer: str
    steps: tuple[str, ...]
    source: str
    row_index: int
    complete: bool = True  # False: it stops before its final answer (see SourceRow.complete; a sampled solution cut by its budget)
    # A solution the job sampled (problem-only rows): its tokens, and whether its budget cut it.
    sampling_tokens: int = 0
    sampling_truncated: bool = False
    thinking_steps: int = 0  # steps[:thinking_steps] are a trace's thinking (see SourceRow.thinking_steps)

    def thinks_at(self, step_index: int) -> bool:
        """Whether the prefix s1..s(step_index+1) ends inside a trace's thinking: its rollouts think on
        before they respond."""
        return step_index < self.thinking_steps


@dataclass(frozen=True)
class RejectedRow:
    """An input row (or a solution) the job refused, with the reason, never dropped silently."""

    row_index: int
    field: str
    reason: str
    problem_id: str | None = None
    raw: str = ""  # the row as JSON text, truncated, so users can find and fix it


class RowError(ValueError):
    """A problem with one row: names the field so the message can point at it."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass
class StepCounts:
    """What is known of one step: its prefix's rollout outcomes, or a label inferred from others."""

    n_correct: int = 0
    n_rollouts: int = 0  # rollouts the label counts (under --truncated excluded, the finished ones)
    # rollouts cut by the token budget, or ended inside a trace's thinking before its response (outside
    # n_rollouts unless --truncated incorrect)
    n_truncated: int = 0
    n_timeouts: int = 0  # rollouts whose answer check timed out, even after a retry: never in n_rollouts
    tokens: int = 0  # tokens generated for this prefix (shared prefixes: charged once)
    # "rollouts": sampled from the prefix; "final_answer": the step states the answer, checked as
    # one rollout; "early_stop": sampled, but stopped before N rollouts (hard label only);
    # "inferred": not sampled, label deduced from other steps; "retraced" (posterior): not sampled, hard label
    # positive from rollouts of a shorter prefix that wrote the step word for word (no counts of its own);
    # "unlabelled" (with its reason).
    measured_by: str = "rollouts"
    inferred_hard: bool | None = None
    unlabelled_reason: str | None = None
    truncated_counted: bool = False  # --truncated incorrect: cut rollouts are checked and inside n_rollouts

    @property
    def measured(self) -> bool:
        return self.measured_by in MEASURED_BY

    @property
    def n_sampled(self) -> int:
        """Rollouts drawn from this prefix so far, counted or not."""
        return self.n_rollouts + self.n_timeouts + (0 if self.truncated_counted else self.n_truncated)


MEASURED_BY = ("rollouts", "final_answer", "early_stop")


def is_score(value) -> bool:
    """A finite number (not a bool): what a PRM's score can be."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past a float's range (a JSON number of 400 digits): no score
        return False
