"""Scoring solutions: a step scorer's probabilities (`labeler.prm.scorers`), then the solution
scores and best-of-N of `labeler.prm.solution_scores`; with a trajectory head, the trajectory score
and the combined score of `labeler.prm.trajectory` too.

Steps cut off by the PRM's length limit get no score (None); so do all the steps of a solution the
PRM cannot read (its text holds the format's own marker), and each unscored solution says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from labeler.prm.devices import Placement
from labeler.prm.data import flat_spans, pad
from labeler.prm.rendering import render_solution
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scorers import StepScorer
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.solution_scores import AGGREGATES, COMBINED, ScoredSolution, aggregate, checked_scores, mark_best_of_n
from labeler.prm.trajectory import CombinedScore
from labeler.ids import solution_fingerprint


@torch.no_grad()
def step_logits(
    prm: ProcessRewardModel, sequences: Sequence[tuple[list[int], list[int]]], batch_size: int, placement: Placement
) -> list[list[float]]:
    """The head's logit at each score position of each (input_ids, score_positions) sequence.
    Sequences are batched by length to limit padding; results come back in input order."""
    return step_and_trajectory_logits(prm, [(ids, positions, None) for ids, positions in sequences], batch_size, placement)[0]


@torch.no_grad()
def step_and_trajectory_logits(
    prm: ProcessRewardModel, sequences: Sequence[tuple], batch_size: int, placement: Placement
) -> tuple[list[list[float]], list[float | None]]:
    """step_logits, and the trajectory head's logit at each sequence's trajectory position (None where
    it has none, or the PRM has no trajectory head), from the same forward passes. A sequence is
    (input_ids, score_positions, trajectory_position), and for a step-surprise PRM also the steps'
    spans: (..., step_spans)."""
    was_training = prm.training
    prm.eval()
    results: list[list[float]] = [[] for _ in sequences]
    trajectories: list[float | None] = [None for _ in sequences]
    wanted = lambda i: sequences[i][1] or (sequences[i][2] is not None and prm.trajectory_head is not None)
    order = sorted((i for i in range(len(sequences)) if wanted(i)), key=lambda i: len(sequences[i][0]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        input_ids, attention_mask = pad([sequences[i][0] for i in chunk], prm.pad_token_id)
        width = input_ids.shape[1]
        score_index = torch.tensor([row * width + p for row, i in enumerate(chunk) for p in sequences[i][1]], dtype=torch.long)
        ends = [(row, sequences[i][2]) for row, i in enumerate(chunk) if sequences[i][2] is not None]
        trajectory_index = torch.tensor([row * width + p for row, p in ends], dtype=torch.long)
        spans = flat_spans([(sequences[i][3] if len(sequences[i]) > 3 else None, row * width) for row, i in enumerate(chunk)])
        device = placement.device
        with placement.autocast():
            logits, trajectory_logits = prm.step_and_trajectory_logits(
                input_ids.to(device), attention_mask.to(device), score_index=score_index.to(device), trajectory_index=trajectory_index.to(device),
                spans=None if spans is None else spans.to(device),
            )  # fmt: skip
        flat = logits.float().cpu().tolist()
        for row, index in enumerate(chunk):
            results[index], flat = flat[: len(sequences[index][1])], flat[len(sequences[index][1]) :]
        if trajectory_logits is not None:
            for (row, _), value in zip(ends, trajectory_logits.float().cpu().tolist()):
                trajectories[chunk[row]] = value
    prm.train(was_training)
    return results, trajectories


def checkpoint_step_scores(
    prm: ProcessRewardModel, solutions: Sequence[SolutionToScore], placement: Placement, batch_size: int = 8,
    link: Callable[[float], float] | None = None,
) -> list[list[float | None]]:  # fmt: skip
    """Step probabilities of one of our checkpoints: `link` (sigmoid) of the head's logit after each step."""
    return [steps for steps, _ in checkpoint_scores(prm, solutions, placement, batch_size, link)]


def checkpoint_scores(
    prm: ProcessRewardModel, solutions: Sequence[SolutionToScore], placement: Placement, batch_size: int = 8,
    link: Callable[[float], float] | None = None,
) -> list[tuple[list[float | None], float | None]]:  # fmt: skip
    """Per solution, its step probabilities and its trajectory probability: the trajectory head's
    sigmoid at the last step's position (None without a trajectory head, or when the whole solution
    does not fit the PRM's max length). `link` turns a step logit into a probability (default sigmoid;
    the logprob baseline's logit is a log-probability itself)."""
    link = link or sigmoid
    sequences = checkpoint_sequences(prm.tokenizer, prm.settings.max_length, solutions, prm.settings.rendering, spans=prm.step_surprise)
    logits, trajectories = step_and_trajectory_logits(prm, sequences, batch_size, placement)
    return [([link(x) for x in step], None if t is None else sigmoid(t)) for step, t in zip(logits, trajectories)]


def checkpoint_sequences(
    tokenizer, max_length: int, solutions: Sequence[SolutionToScore], rendering: str = "plain", spans: bool = False
) -> list[tuple]:
    """Per solution, as one of our checkpoints reads it: its token ids, the score positions of the steps
    that fit, and the trajectory position (the last step's, when every step fits; else None); with
    `spans`, also the steps' spans (what a step-surprise PRM reads)."""
    rendered = [render_solution(tokenizer, s.problem, s.steps, max_length, s.thinking_steps, rendering) for s in solutions]
    return [
        (r.input_ids, r.score_positions, r.score_positions[-1] if r.steps_kept == len(s.steps) and r.score_positions else None)
        + ((r.step_spans,) if spans else ())
        for r, s in zip(rendered, solutions)
    ]


def score_solutions(
    scorer: StepScorer, solutions: Sequence[SolutionToScore], select_by: str = "min", combined: CombinedScore | None = None
) -> list[ScoredSolution]:
    """Step scores, their aggregates and, from a scorer that also scores trajectories (one of our
    checkpoints with a trajectory head), the trajectory score and the combined score."""
    combined = combined or CombinedScore()
    both = getattr(scorer, "step_and_trajectory_scores", None)
    results = both(solutions) if both is not None else [(steps, None) for steps in scorer.step_scores(solutions)]
    scored = [scored_solution(solution, steps, trajectory, combined, scorer) for solution, (steps, trajectory) in zip(solutions, results, strict=True)]
    mark_best_of_n(scored, select_by)
    return scored


def scored_solution(
    solution: SolutionToScore, step_scores: Sequence[float | None], trajectory: float | None, combined: CombinedScore, scorer=None
) -> ScoredSolution:
    """A solution's step scores (None for each step past them, or not a finite number), their aggregates, its
    trajectory score, the combined score, and why a score is missing (`checked_scores`; `scorer`: the one that
    scored it, for its render check)."""
    scores, trajectory, why = checked_scores(step_scores, len(solution.steps), trajectory, scorer, solution)
    aggregates = {how: aggregate(scores, how) for how in AGGREGATES}
    aggregates[COMBINED] = combined.combine(scores, trajectory)
    return ScoredSolution(
        solution.problem_id, solution.solution_id, solution.row_index, scores, aggregates=aggregates, trajectory_score=trajectory,
        unscored_reason=why, solution_fingerprint=solution_fingerprint(solution.problem, solution.steps),
    )  # fmt: skip


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
