"""Exhaustive Monte-Carlo labelling of a batch of solutions (Math-Shepherd).

Every prefix s1..si gets N sampled continuations in one batched generate call across all solutions;
each continuation's final answer is checked against the reference; the counts become labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from labeler import prompts
from labeler.generation import Completion, GenerationRequest, Generator, SamplingSettings
from labeler.ids import derived_seed
from labeler.records import StepCounts, Solution


class Checker(Protocol):
    def check_many(self, pairs: Sequence[tuple[str, str]]) -> list: ...


@dataclass(frozen=True)
class RolloutRecord:
    """One checked completion, or the check of a final step that states the answer itself."""

    solution_id: str
    step_index: int
    rollout_index: int
    seed: int
    text: str
    extracted_answer: str | None
    verdict: str
    tokens: int
    finish_reason: str


@dataclass
class LabelledSolution:
    solution: Solution
    steps: list[StepCounts]

    @property
    def generated_tokens(self) -> int:
        return sum(step.tokens for step in self.steps)


@dataclass
class BatchOutcome:
    labelled: list[LabelledSolution] = field(default_factory=list)
    rollouts: list[RolloutRecord] = field(default_factory=list)
    failed: list[tuple[Solution, str]] = field(default_factory=list)  # solutions the engine could not run


FINAL_ANSWER_FINISH = "final_answer_check"


def prefix_seed(base_seed: int, solution_id: str, step_index: int) -> int:
    """Seed of the rollouts from prefix s1..s(step_index+1): a function of ids only."""
    return derived_seed(base_seed, solution_id, str(step_index))


@dataclass
class GeneratedRollouts:
    """The engine's half of exhaustive labelling: requests sent and results received, not yet checked."""

    solutions: Sequence[Solution]
    final_step: str
    keys: list[tuple[int, int]]  # (solution position, step index) of each request
    requests: list[GenerationRequest]
    results: list


def generate_rollouts(
    solutions: Sequence[Solution],
    generator: Generator,
    *,
    rollouts: int,
    sampling: SamplingSettings,
    seed: int,
    final_step: str = "check",
) -> GeneratedRollouts:
    """One request per (solution, prefix) that needs sampling, all in one generate call.
    With `final_step="check"` the last prefix, which already states an answer, is not sampled."""
    keys: list[tuple[int, int]] = []
    requests: list[GenerationRequest] = []
    for s, solution in enumerate(solutions):
        sampled_prefixes = len(solution.steps) - (1 if final_step == "check" else 0)
        for i in range(sampled_prefixes):
            keys.append((s, i))
            requests.append(
                GenerationRequest(
                    user_message=prompts.user_message(solution.problem),
                    assistant_prefix=prompts.assistant_prefix(solution.steps[: i + 1]),
                    n=rollouts,
                    seed=prefix_seed(seed, solution.solution_id, i),
                )
            )
    results = generator.generate(requests, sampling) if requests else []
    return GeneratedRollouts(solutions, final_step, keys, requests, results)


def label_exhaustively(solutions: Sequence[Solution], generator: Generator, checker: Checker, **settings) -> BatchOutcome:
    """Label every step of every solution (generate, then check and count)."""
    return count_rollouts(generate_rollouts(solutions, generator, **settings), checker)


def count_rollouts(generated: GeneratedRollouts, checker: Checker) -> BatchOutcome:
    """The checker's half: verdicts for every completion (and final step), counted per step."""
    solutions, final_step = generated.solutions, generated.final_step
    keys, requests, results = generated.keys, generated.requests, generated.results

    # Gather what to check: every completion, plus the final steps checked directly.
    failed: dict[int, str] = {}
    to_check: list[tuple[int, int, int, int, Completion]] = []  # (solution, step, rollout, seed, completion)
    for (s, i), request, result in zip(keys, requests, results):
        if result.error is not None:
            failed.setdefault(s, f"step {i}: {result.error}")
            continue
        for r, completion in enumerate(result.completions):
            to_check.append((s, i, r, request.seed, completion))
    if final_step == "check":
        for s, solution in enumerate(solutions):
            last = len(solution.steps) - 1
            to_check.append((s, last, 0, 0, Completion(solution.steps[last], 0, FINAL_ANSWER_FINISH)))

    verdicts = checker.check_many([(item[4].text, solutions[item[0]].reference_answer) for item in to_check])

    # Count per step and keep each rollout.
    counts = [[StepCounts() for _ in solution.steps] for solution in solutions]
    outcome = BatchOutcome()
    for (s, i, r, request_seed, completion), result in zip(to_check, verdicts):
        if s in failed:
            continue
        step = counts[s][i]
        step.n_rollouts += 1
        step.n_correct += result.verdict == "correct"
        step.tokens += completion.tokens
        if completion.finish_reason == FINAL_ANSWER_FINISH:
            step.measured_by = "final_answer"
        outcome.rollouts.append(
            RolloutRecord(
                solution_id=solutions[s].solution_id,
                step_index=i,
                rollout_index=r,
                seed=request_seed,
                text=completion.text,
                extracted_answer=result.extracted,
                verdict=result.verdict.value,
                tokens=completion.tokens,
                finish_reason=completion.finish_reason,
            )
        )
    for s, solution in enumerate(solutions):
        if s in failed:
            outcome.failed.append((solution, failed[s]))
        else:
            outcome.labelled.append(LabelledSolution(solution, counts[s]))
    return outcome
