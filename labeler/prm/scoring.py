"""Scoring solutions: a step scorer's probabilities (`labeler.prm.scorers`), then the solution
scores and best-of-N of `labeler.prm.solution_scores`.

Steps cut off by the PRM's length limit get no score (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from labeler.prm.devices import Placement
from labeler.prm.data import pad
from labeler.prm.rendering import render_solution
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scorers import StepScorer
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.solution_scores import AGGREGATES, ScoredSolution, aggregate, mark_best_of_n


@torch.no_grad()
def step_logits(
    prm: ProcessRewardModel, sequences: Sequence[tuple[list[int], list[int]]], batch_size: int, placement: Placement
) -> list[list[float]]:
    """The head's logit at each score position of each (input_ids, score_positions) sequence.
    Sequences are batched by length to limit padding; results come back in input order."""
    was_training = prm.training
    prm.eval()
    results: list[list[float]] = [[] for _ in sequences]
    order = sorted((i for i in range(len(sequences)) if sequences[i][1]), key=lambda i: len(sequences[i][0]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        input_ids, attention_mask = pad([sequences[i][0] for i in chunk], prm.pad_token_id)
        with placement.autocast():
            logits = prm(input_ids.to(placement.device), attention_mask.to(placement.device))
        for row, index in enumerate(chunk):
            results[index] = logits[row, sequences[index][1]].float().cpu().tolist()
    prm.train(was_training)
    return results


def checkpoint_step_scores(
    prm: ProcessRewardModel, solutions: Sequence[SolutionToScore], placement: Placement, batch_size: int = 8
) -> list[list[float | None]]:
    """Step probabilities of one of our checkpoints: sigmoid of the head's logit after each step."""
    rendered = [render_solution(prm.tokenizer, s.problem, s.steps, prm.settings.max_length) for s in solutions]
    logits = step_logits(prm, [(r.input_ids, r.score_positions) for r in rendered], batch_size, placement)
    return [[_sigmoid(x) for x in step_logit] for step_logit in logits]


def score_solutions(scorer: StepScorer, solutions: Sequence[SolutionToScore], select_by: str = "min") -> list[ScoredSolution]:
    scored = []
    for solution, step_scores in zip(solutions, scorer.step_scores(solutions), strict=True):
        scores: list[float | None] = list(step_scores)
        scores += [None] * (len(solution.steps) - len(scores))
        aggregates = {how: aggregate(scores, how) for how in AGGREGATES}
        scored.append(ScoredSolution(solution.problem_id, solution.solution_id, solution.row_index, scores, aggregates=aggregates))
    mark_best_of_n(scored, select_by)
    return scored


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
