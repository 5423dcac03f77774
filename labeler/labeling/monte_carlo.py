"""Monte-Carlo step labels from rollout counts (Math-Shepherd): soft = correct/total, hard = any correct."""

from __future__ import annotations

from labeler.records import StepCounts


def soft_label(counts: StepCounts) -> float | None:
    """Fraction of counted rollouts that reached the answer; None for a step that was not sampled
    or that stopped before its N rollouts (early_stop: only its hard label is an honest estimate)."""
    if not counts.measured or counts.measured_by == "early_stop":
        return None
    if counts.n_rollouts < 1:
        raise ValueError("a measured step needs at least one rollout")
    return counts.n_correct / counts.n_rollouts


def hard_label(counts: StepCounts) -> bool | None:
    """Any rollout correct; for a step not sampled, the label inferred for it (None: unlabelled)."""
    if counts.measured:
        return counts.n_correct > 0
    return counts.inferred_hard


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default); (0, 1) with no trials."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * ((p * (1 - p) / trials + z * z / (4 * trials * trials)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
