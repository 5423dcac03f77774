"""The trajectory side of a PRM: its loss in training, and how its score joins the step scores.

A PRM trained on labels with trajectory labels (schema 1.4) has a second linear head beside the
step head (labeler/prm/model.py). Its logit, read at the last step's score position, is trained
with binary cross-entropy on the trajectory label (does the stated final answer, a trace's response,
match the reference), weighted by --trajectory-loss-weight against the step loss.

Scoring combines the two as ReasonFlux-PRM combines its step-level and trajectory-level rewards: a
weighted sum of the mean step reward and the trajectory reward,

    combined = (mean step score + w * trajectory score) / (1 + w)        w = --trajectory-weight

divided by 1 + w so that it stays a probability-like number in [0, 1] (the ranking is that of the
plain sum). w = 0 ranks by the steps alone; a large w by the trajectory alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labeler.labeling.config import check_numbers, setting
from labeler.prm.solution_scores import aggregate, is_score

if TYPE_CHECKING:  # torch is imported where it is used: the CLI builds its flags from CombinedScore without it
    import torch

TRAJECTORY_SCORES = "trajectory scores"


@dataclass(frozen=True)
class CombinedScore:
    """How `labeler score` and `labeler select` join step and trajectory scores (module doc)."""

    trajectory_weight: float = setting(
        1.0,
        at_least=0,
        metavar="W",
        help="combined score = (mean step score + W x trajectory score) / (1 + W), ReasonFlux-PRM's weighted sum "
        "of step and trajectory rewards; 0: the steps alone",
        group=TRAJECTORY_SCORES,
    )

    def __post_init__(self) -> None:
        check_numbers(self)

    def combine(self, step_scores: Sequence[float | None], trajectory_score: float | None) -> float | None:
        """None when the trajectory or any step has no score (a PRM without a trajectory head, a
        solution past its length limit: labeler/prm/solution_scores.py)."""
        mean = aggregate(step_scores, "mean")  # None for a step without a score (None or NaN)
        if mean is None or not is_score(trajectory_score):
            return None
        return (mean + self.trajectory_weight * trajectory_score) / (1 + self.trajectory_weight)


def trajectory_loss(trajectory_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
    """Binary cross-entropy of the solutions' trajectory logits (each read at its last step, [solutions])
    against their trajectory labels; None when the batch has no solution with a trajectory target."""
    import torch

    if not len(trajectory_logits):
        return None
    return torch.nn.functional.binary_cross_entropy_with_logits(trajectory_logits.float(), targets.float())


def trajectory_metrics(logits: Sequence[float | None], targets: Sequence[float | None]) -> dict:
    """Validation loss, accuracy and AUC of the trajectory logits against the trajectory labels."""
    import torch

    from labeler.evaluation.metrics import roc_auc

    pairs = [(x, t) for x, t in zip(logits, targets) if x is not None and t is not None]
    if not pairs:
        return {}
    x = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    t = torch.tensor([p[1] for p in pairs], dtype=torch.float64)
    return {
        "val_trajectory_loss": torch.nn.functional.binary_cross_entropy_with_logits(x, t).item(),
        "val_trajectory_accuracy": sum((a >= 0) == (b >= 0.5) for a, b in pairs) / len(pairs),
        "val_trajectory_auc": roc_auc([a for a, _ in pairs], [b >= 0.5 for _, b in pairs]),
        "val_trajectories": len(pairs),
    }
