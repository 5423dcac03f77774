"""Math-Shepherd's generator stage: rows that carry only a problem get M sampled solutions."""

from __future__ import annotations

from typing import Sequence

from labeler.labeling import prompts
from labeler.labeling.generation import GenerationRequest, Generator, SamplingSettings
from labeler.ids import derived_seed
from labeler.labeling.planning import PlannedRow
from labeler.records import RejectedRow, Solution
from labeler.inputs.splitting import DEFAULT_MAX_STEPS, split_steps


def sample_solutions(
    rows: Sequence[PlannedRow],
    generator: Generator,
    *,
    per_problem: int,
    sampling: SamplingSettings,
    seed: int,
    split_rule: str,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> tuple[list[Solution], list[RejectedRow], int]:
    """One batched call for all rows; a sample that splits into no steps is rejected, not dropped.

    Returns the solutions, the rejected rows and the tokens spent on samples that were rejected
    (a kept solution carries its own tokens)."""
    requests = [
        GenerationRequest(
            user_message=prompts.user_message(row.source.problem),
            assistant_prefix="",
            n=per_problem,
            seed=derived_seed(seed, row.row_key, "solutions"),
        )
        for row in rows
    ]
    results = generator.generate(requests, sampling) if requests else []
    solutions: list[Solution] = []
    rejected: list[RejectedRow] = []
    rejected_tokens = 0
    for row, result in zip(rows, results):
        if result.error is not None:
            rejected.append(_rejected(row, "problem", f"solution sampling failed: {result.error}"))
            continue
        for j, completion in enumerate(result.completions):
            steps = split_steps(completion.text, split_rule, max_steps)
            if not steps:
                rejected_tokens += completion.tokens
                rejected.append(_rejected(row, "steps", f"sampled solution {j} has no steps", completion.text))
                continue
            solutions.append(row.sampled_solution(j, steps, completion.tokens, completion.finish_reason == "length"))
    return solutions, rejected, rejected_tokens


def _rejected(row: PlannedRow, field: str, reason: str, raw: str = "") -> RejectedRow:
    return RejectedRow(row_index=row.source.row_index, field=field, reason=reason, problem_id=row.source.problem_id, raw=raw[:2000])
