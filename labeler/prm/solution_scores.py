"""Solution scores from step scores, and best-of-N selection.

A solution's score aggregates its step probabilities: `min` (the weakest step), `product` (the
chance that no step goes wrong, if steps were independent), `last` (the final step's score) or
`mean` (the average step). A solution with a step the PRM could not score (past its length limit,
its text holding the PRM's own marker, or a value the PRM gave that is not a finite number: a NaN or
inf is no score, min() would skip a NaN, and it leaves the scorer as None: `checked_scores`) has no
score by any aggregate (None): an aggregate of the steps that fit would rank it as if the PRM had
read it all, above a solution whose every step it read and found weaker (a solution cut after a
good first step would win by min). Best-of-N picks, per problem, the solution with the
highest score by one aggregate; solutions without one rank below every scored one.
A PRM with a trajectory head adds the trajectory score and `combined` (labeler/prm/trajectory.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from labeler.records import is_score

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
    unscored_reason: str | None = None  # why a step has no score, when one has none (`unscored_reason`)
    solution_fingerprint: str | None = None  # of the problem and steps scored (labeler/review/joins.py): what a join checks

    def to_dict(self) -> dict:
        return {
            "problem_id": self.problem_id,
            "solution_id": self.solution_id,
            "row_index": self.row_index,
            "step_scores": [score if is_score(score) else None for score in self.step_scores],  # a NaN is no score
            "steps_scored": sum(is_score(score) for score in self.step_scores),
            **{f"score_{name}": value for name, value in self.aggregates.items() if name != COMBINED},
            "trajectory_score": self.trajectory_score,
            "score_combined": self.aggregates.get(COMBINED),
            "selected": self.selected,
            "unscored_reason": self.unscored_reason,
            "solution_fingerprint": self.solution_fingerprint,
        }


def aggregate(step_scores: Sequence[float | None], how: str) -> float | None:
    """None when a step has no score (None, or not a finite number: NaN), or there are no steps (module docstring)."""
    if how not in AGGREGATES:
        raise ValueError(f"unknown aggregate {how!r}; expected one of {', '.join(AGGREGATES)}")
    if not step_scores or not all(is_score(score) for score in step_scores):
        return None
    scored: list[float] = list(step_scores)  # type: ignore[arg-type]
    if how == "last":
        return scored[-1]
    if how == "min":
        return min(scored)
    if how == "product":
        return math.prod(scored)
    return sum(scored) / len(scored)  # mean


PAST_LENGTH_LIMIT = "past the PRM's length limit"


def checked_scores(
    step_scores: Sequence, steps: int, trajectory=None, scorer=None, solution=None
) -> tuple[list[float | None], float | None, str | None]:
    """A scorer's scores of a solution of `steps` steps as they leave the scorer, for every caller: one
    per step (None past those it scored), every score that is not a finite number as None (a NaN or inf
    is no score, and JSON has none), the trajectory score likewise, and why a score is missing
    (`unscored_reason`, naming the value the PRM gave; None: none is)."""
    raw = list(step_scores) + [None] * (steps - len(step_scores))
    why = unscored_reason(raw, scorer, solution)
    if why is None and trajectory is not None and not is_score(trajectory):
        why = f"the PRM's trajectory head gave {trajectory}, not a finite score"
    return [score if is_score(score) else None for score in raw], trajectory if is_score(trajectory) else None, why


def unscored_reason(step_scores: Sequence[float | None], scorer=None, solution=None) -> str | None:
    """Why a solution has no aggregate (None: it has one): its text could not be shown to the PRM with one
    score position per step (the scorer's render check says why: its own marker in the text), a value the PRM
    gave that is not a finite score (NaN, inf), or steps past its length limit. `scorer` and `solution` are
    needed for the first."""
    if step_scores and all(is_score(score) for score in step_scores):
        return None
    if not step_scores:
        return "no step to score"
    if scorer is not None and solution is not None and all(score is None for score in step_scores):
        from labeler.prm.scorers import render_problem

        if (problem := render_problem(scorer, solution)) is not None:
            return problem
    given = [(i, score) for i, score in enumerate(step_scores) if score is not None and not is_score(score)]
    if given:
        return f"the PRM gave step {given[0][0]} {given[0][1]}, not a finite score"
    return PAST_LENGTH_LIMIT


def mark_best_of_n(scored: Sequence[ScoredSolution], select_by: str) -> None:
    """Per problem, mark the solution with the highest `select_by` score (the first one on ties);
    solutions without a score are never picked: a problem none of whose solutions has one has none selected."""
    best: dict[str, ScoredSolution] = {}
    for solution in scored:
        solution.selected = False
        value = solution.aggregates.get(select_by)
        current = best.get(solution.problem_id)
        if is_score(value) and (current is None or value > current.aggregates[select_by]):
            best[solution.problem_id] = solution
    for solution in best.values():
        solution.selected = True


def score_line_problem(record) -> str | None:
    """What makes `record` not a line of `labeler score` (its solution_id and step scores; None: it is one)."""
    if not isinstance(record, dict) or not isinstance(record.get("solution_id"), str):
        return "solution_id: missing or not a string"
    scores = record.get("step_scores")
    if not isinstance(scores, list) or not all(s is None or is_score(s) for s in scores):
        return f"step_scores {str(scores)[:60]} is not a list of numbers (null: a step past the PRM's length)"
    if not isinstance(record.get("solution_fingerprint"), (str, type(None))):
        return f"solution_fingerprint {str(record['solution_fingerprint'])[:60]} is not a string"
    return None
