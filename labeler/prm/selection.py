"""Offline data selection (`labeler select`): keep the best trajectories by a PRM's score and write
them as a fine-tuning dataset, the use ReasonFlux-PRM makes of trajectory-response pairs.

The solutions are ranked by one score (by default `combined`, the mean step score and the
trajectory score weighted as labeler/prm/trajectory.py says); the best `top` share of all scored
solutions is kept (ceil(top x solutions scored); ties keep input order). A solution without that
score (a PRM without a trajectory head, for `combined`) is never kept. Each kept solution becomes
one record:

    {"prompt": problem, "response": the trajectory as one text, "problem_id", "solution_id",
     "row_index", "score", "step_score" (the mean step score), "trajectory_score"}

where a trace's response is `<think>\\nthinking\\n</think>\\n\\nresponse` (labeler/inputs/traces.py)
and a plain solution's its steps joined by blank lines. Written as .jsonl or .parquet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from labeler.evaluation.solutions import SolutionToScore
from labeler.inputs.traces import render_trace
from labeler.labeling.config import check_choices, check_numbers, setting
from labeler.prm.export import OUTPUT_SUFFIXES, write_records
from labeler.prm.solution_scores import COMBINED, SELECT_BY, ScoredSolution

SELECTION = "selection"


class SelectionError(ValueError):
    """Nothing can be selected as asked; the message is for the user."""


@dataclass(frozen=True)
class SelectConfig:
    top: float = setting(
        help="keep the best P share of the scored solutions (0.1: the best 10%)",
        metavar="P",
        above=0,
        at_most=1,
        cli_default=None,  # the flag is one of --top and --queue (labeler/review/queue.py)
        default_text="none: pass --top or --queue",
        group=SELECTION,
    )
    by: str = setting(
        COMBINED,
        choices=SELECT_BY,
        help="the score that ranks them: combined (step and trajectory), or a step aggregate",
        cli_default=None,  # not given: this default for --top, the queue's own for --queue
        default_text=f"{COMBINED}; min with --queue",
        group=SELECTION,
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)


@dataclass
class SelectionSummary:
    path: str
    scored: int  # solutions with a score to rank by
    unscored: int  # without one: never kept
    kept: int
    by: str
    lowest_kept: float | None  # the threshold the selection ended up at


def select(solutions: Sequence[SolutionToScore], scored: Sequence[ScoredSolution], config: SelectConfig) -> list[dict]:
    """The records of the best `config.top` share of `solutions` by `config.by` (in rank order)."""
    ranked = [(s, sc) for s, sc in zip(solutions, scored, strict=True) if sc.aggregates.get(config.by) is not None]
    if not ranked:
        hint = " (a PRM without a trajectory head has no combined score: train it on labels with trajectory labels, or pass --by mean)"
        raise SelectionError(f"no solution has a {config.by} score to select by{hint if config.by == COMBINED else ''}")
    keep = math.ceil(config.top * len(ranked))
    ranked.sort(key=lambda pair: -pair[1].aggregates[config.by])  # sort is stable: ties keep input order
    return [_record(solution, score, config.by) for solution, score in ranked[:keep]]


def write_selection(records: list[dict], output: str, scored: int, unscored: int, by: str) -> SelectionSummary:
    path = Path(output)
    if path.suffix not in OUTPUT_SUFFIXES:
        raise SelectionError(f"{output}: the output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    write_records(records, path)
    lowest = records[-1]["score"] if records else None
    return SelectionSummary(str(path), scored, unscored, len(records), by, lowest)


def _record(solution: SolutionToScore, scored: ScoredSolution, by: str) -> dict:
    return {
        "prompt": solution.problem,
        "response": render_trace(solution.steps, solution.thinking_steps),
        "problem_id": solution.problem_id,
        "solution_id": solution.solution_id,
        "row_index": solution.row_index,
        "score": scored.aggregates[by],
        "step_score": scored.aggregates.get("mean"),
        "trajectory_score": scored.trajectory_score,
    }
