"""Step scorers: anything that gives each step of a solution a probability of being on track.

One interface for every PRM a command can use (`labeler score`, `eval`, and the uses of a PRM built
on them), so a trained checkpoint of ours and a public PRM behind an adapter score side by side:

    scorer = load_scorer("runs/prm/best", placement=place("auto", "auto"))
    scores = scorer.step_scores(solutions)   # one list per solution, None for unscored steps

`load_scorer` reads a spec. Today a spec is a folder saved by `labeler train` (a checkpoint, or a
run folder standing for its best/); adapters of other PRM formats register their own kinds here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.devices import Placement
from labeler.prm.model import PRM_CONFIG_NAME, ProcessRewardModel


class StepScorer(Protocol):
    name: str  # how reports and tables name this scorer

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        """Per solution, a probability per step, in order; None for a step it could not score
        (past its length limit). Results come back in the order of `solutions`."""
        ...


class CheckpointScorer:
    """A PRM trained by `labeler train`."""

    def __init__(self, prm: ProcessRewardModel, placement: Placement, batch_size: int = 8, name: str | None = None):
        self.prm = prm.to(placement.device)
        self.placement = placement
        self.batch_size = batch_size
        self.name = name or prm.settings.base_model

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        from labeler.prm.scoring import checkpoint_step_scores

        return checkpoint_step_scores(self.prm, solutions, self.placement, self.batch_size)

    def step_and_trajectory_scores(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[float | None], float | None]]:
        """Step scores and the trajectory score (None without a trajectory head), from one forward pass."""
        from labeler.prm.scoring import checkpoint_scores

        return checkpoint_scores(self.prm, solutions, self.placement, self.batch_size)


def checkpoint_folder(path: str) -> str:
    """A run folder stands for its best checkpoint."""
    best = os.path.join(path, "best")
    return best if not os.path.isfile(os.path.join(path, PRM_CONFIG_NAME)) and os.path.isdir(best) else path


def load_scorer(spec: str, *, placement: Placement, batch_size: int = 8, trust_remote_code: bool = False) -> StepScorer:
    """The scorer a spec names; ValueError (PRMLoadError) with a message for the user when it cannot load."""
    folder = checkpoint_folder(spec)
    prm = ProcessRewardModel.load(folder, dtype=placement.weight_dtype, trust_remote_code=trust_remote_code)
    return CheckpointScorer(prm, placement, batch_size, name=spec)
