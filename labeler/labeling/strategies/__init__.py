"""Labelling strategies: which prefixes get how many rollouts.

- exhaustive: N rollouts from every prefix (Math-Shepherd); soft and hard labels everywhere.
- first-error: binary search for the first step whose prefix reaches the answer in no rollout
  (OmegaPRM-style), galloping from the first prefix then bisecting; other steps' hard labels are inferred.
- adaptive: rollouts in rounds; a prefix stops once a correct rollout is found or its soft label's
  Wilson interval is narrower than --ci-width.
- posterior: first-error's search, each probe drawn in rounds and stopped at its first correct rollout or
  once a Beta-Binomial prior fitted to the batch's counts makes a success in its remaining rollouts unlikely.
- final-answer: no rollouts; only the last step, by checking the answer it states (outcome labels,
  and the candidates of `labeler bon`).

Each strategy is started on a batch by `start`, which does the engine's work and returns a
`PendingLabels` whose `finish(checker)` gives the BatchOutcome, each solution's trajectory label
set too (labeler/labeling/trajectory.py). Exhaustive and final-answer leave all checking to
`finish`, so a job can check one unit while the next one generates; the round-based strategies
must check between rounds and so check during `start`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from labeler.labeling.config import AFTER_FIRST_ERROR, STRATEGIES, LabelConfig, settings_view
from labeler.checking import states_answer
from labeler.labeling.generation import Generator, SamplingSettings
from labeler.records import Solution
from labeler.labeling.rollouts import BatchOutcome, Checker
from labeler.labeling.trajectory import label_trajectories

__all__ = ["AFTER_FIRST_ERROR", "STRATEGIES", "StrategySettings", "PendingLabels", "start", "label", "sampled_prefixes", "checked_final_steps"]

# What a strategy reads: these LabelConfig fields (declared there, with their defaults and help) and
# the sampling settings the config derives. `config.strategy_settings` is `StrategySettings.of(config)`.
StrategySettings = settings_view(
    "StrategySettings",
    LabelConfig,
    ("rollouts", "seed", "final_step", "truncated", "min_counted_rollouts", "after_first_error", "round_size", "ci_width", "stop_risk"),
    sampling=SamplingSettings,
)
StrategySettings.__module__ = __name__


@dataclass
class PendingLabels:
    finish: Callable[[Checker], BatchOutcome]


def checks_final_step(solution: Solution, final_step: str, checker: Checker | None = None) -> bool:
    """With --final-step check, a last step that states an answer is labelled by checking it. One
    that cannot succeed is rolled out instead: a solution known to stop before its answer (a PRM800K
    trajectory that ends at an error, a sampled solution cut by its budget) or a last step that states
    no answer for its reference, as the checker reads it (states_answer: the same reading as its check)."""
    return final_step == "check" and solution.complete and states_last_answer(solution, checker)


def states_last_answer(solution: Solution, checker: Checker | None = None) -> bool:
    """The last step states an answer `checker` compares with the reference (what the final check
    reads, with the checker's own settings); a checker that cannot say is read as the default one."""
    reads = getattr(checker, "states_answer", None) or states_answer
    return reads(solution.steps[-1], solution.reference_answer, solution.problem)


def checked_final_steps(solutions: Sequence[Solution], final_step: str, checker: Checker | None = None) -> list[int]:
    """Positions of the solutions whose last step is labelled by checking it."""
    return [s for s, solution in enumerate(solutions) if checks_final_step(solution, final_step, checker)]


def sampled_prefixes(solution: Solution, final_step: str, checker: Checker | None = None) -> int:
    """How many prefixes may be sampled: all but the last when the last step's answer is checked."""
    return len(solution.steps) - (1 if checks_final_step(solution, final_step, checker) else 0)


def start(
    name: str, solutions: Sequence[Solution], generator: Generator, checker: Checker | None, settings: StrategySettings
) -> PendingLabels:
    steps = _start_steps(name, solutions, generator, checker, settings)
    return PendingLabels(finish=lambda checker: label_trajectories(steps.finish(checker), checker))


def _start_steps(
    name: str, solutions: Sequence[Solution], generator: Generator, checker: Checker | None, settings: StrategySettings
) -> PendingLabels:
    from labeler.labeling.strategies import adaptive, exhaustive, final_answer, first_error, posterior

    if name == "exhaustive":
        return exhaustive.start(solutions, generator, settings, checker)
    if name == "final-answer":
        return final_answer.start(solutions, settings)
    if checker is None:
        raise ValueError(f"strategy {name} checks completions between rounds: it needs a checker")
    if name == "first-error":
        outcome = first_error.search(solutions, generator, checker, settings)
    elif name == "adaptive":
        outcome = adaptive.sample(solutions, generator, checker, settings)
    elif name == "posterior":
        outcome = posterior.search(solutions, generator, checker, settings)
    else:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    return PendingLabels(finish=lambda _checker: outcome)


def label(name: str, solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    """Start and finish in one go."""
    return start(name, solutions, generator, checker, settings).finish(checker)
