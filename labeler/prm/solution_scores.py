"""Solution scores from step scores, and best-of-N selection.

A solution's score aggregates its step probabilities: `min` (the weakest step), `product` (the
chance that no step goes wrong, if steps were independent), `last` (the final step's score) or
`mean` (the average step). Steps without a score (past the PRM's length limit) are left out of
min, product and mean; `last` is then None. Best-of-N picks, per problem, the solution with the highest score by one aggregate.
A PRM with a trajectory head adds the trajectory score and `combined` (labeler/prm/trajectory.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

AGGREGATES = ("min", "product", "last", "mean")
COMBINED = "combined"  # mean step score and trajectory score, weighted (labeler/prm/trajectory.py)
SELECT_BY = (*AGGREGATES, COMBINED)  # what best-of-N and `labeler select` can rank by


@dataclass
class ScoredSolution:
    problem_id: str
    solution_id: str
    row_index: int | None
    step_scores: list[float | None]
    selected: bool = False  # best of N for its problem
    aggregates: dict[str, float | None] = field(default_factory=dict)
    trajectory_score: float | None = None  # the trajectory head's probability; None without one

    def to_dict(self) -> dict:
        return {
            "problem_id": self.problem_id,
            "solution_id": self.solution_id,
            "row_index": self.row_index,
            "step_scores": self.step_scores,
            "steps_scored": sum(score is not None for score in self.step_scores),
            **{f"score_{name}": value for name, value in self.aggregates.items() if name != COMBINED},
            "trajectory_score": self.trajectory_score,
            "score_combined": self.aggregates.get(COMBINED),
            "selected": self.selected,
        }


def aggregate(step_scores: Sequence[float | None], how: str) -> float | None:
    scored = [score for score in step_scores if score is not None]
    if how == "last":
        return step_scores[-1] if step_scores else None
    if not scored:
        return None
    if how == "min":
        return min(scored)
    if how == "product":
        return math.prod(scored)
    if how == "mean":
        return sum(scored) / len(scored)
    raise ValueError(f"unknown aggregate {how!r}; expected one of {', '.join(AGGREGATES)}")


def mark_best_of_n(scored: Sequence[ScoredSolution], select_by: str) -> None:
    """Per problem, mark the solution with the highest `select_by` score (the first one on ties;
    solutions without a score are never picked over one that has a score)."""
    best: dict[str, ScoredSolution] = {}
    for solution in scored:
        solution.selected = False
        value = solution.aggregates.get(select_by)
        current = best.get(solution.problem_id)
        if current is None or _rank(value) > _rank(current.aggregates.get(select_by)):
            best[solution.problem_id] = solution
    for solution in best.values():
        solution.selected = True


def _rank(value: float | None) -> float:
    return -math.inf if value is None else value
