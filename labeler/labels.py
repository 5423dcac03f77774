"""Monte-Carlo step labels from rollout counts (Math-Shepherd): soft = correct/total, hard = any correct."""

from __future__ import annotations

from typing import Sequence

from labeler.records import StepCounts


def soft_label(counts: StepCounts) -> float:
    if counts.n_rollouts < 1:
        raise ValueError("a step needs at least one rollout to be labelled")
    return counts.n_correct / counts.n_rollouts


def hard_label(counts: StepCounts) -> bool:
    return counts.n_correct > 0


def first_error(hard_labels: Sequence[bool]) -> int:
    """Index of the first step whose prefix reached the answer in no rollout, or -1."""
    return next((i for i, hard in enumerate(hard_labels) if not hard), -1)
