"""Turning labelled solutions, rollouts and rejected rows into Arrow tables of the data contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from labeler.labeling.monte_carlo import hard_label, soft_label
from schemas.tables import first_error
from labeler.labeling.rollouts import LabelledSolution, RolloutRecord
from labeler.labeling.trajectory import trajectory_label
from labeler.records import RejectedRow
from schemas import LABELS_SCHEMA, REJECTED_SCHEMA, ROLLOUTS_SCHEMA, SCHEMA_VERSION
from schemas.tables import MONTE_CARLO


@dataclass(frozen=True)
class Provenance:
    unit_id: str
    model: str
    strategy: str
    seed: int
    config_hash: str


def labels_table(labelled: Sequence[LabelledSolution], provenance: Provenance) -> pa.Table:
    rows = []
    for item in labelled:
        solution = item.solution
        hard = [hard_label(step) for step in item.steps]
        rows.append(
            {
                "problem_id": solution.problem_id,
                "solution_id": solution.solution_id,
                "problem": solution.problem,
                "reference_answer": solution.reference_answer,
                "steps": list(solution.steps),
                "soft_labels": [soft_label(step) for step in item.steps],
                "hard_labels": hard,
                "n_correct": [step.n_correct for step in item.steps],
                "n_rollouts": [step.n_rollouts for step in item.steps],
                "n_truncated": [step.n_truncated for step in item.steps],
                "n_timeouts": [step.n_timeouts for step in item.steps],
                "label_method": [step.measured_by for step in item.steps],
                "unlabelled_reason": [step.unlabelled_reason for step in item.steps],
                "first_error": first_error(hard),
                "thinking_steps": solution.thinking_steps,
                "trajectory_verdict": item.trajectory_verdict,
                "trajectory_label": None if item.trajectory_verdict is None else trajectory_label(item.trajectory_verdict),
                "generated_tokens": item.generated_tokens,
                "solution_tokens": solution.sampling_tokens,
                "solution_truncated": solution.sampling_truncated,
                "row_index": solution.row_index,
                "unit_id": provenance.unit_id,
                "source": solution.source,
                "model": provenance.model,
                "strategy": provenance.strategy,
                "seed": provenance.seed,
                "config_hash": provenance.config_hash,
                "schema_version": SCHEMA_VERSION,
                "label_source": MONTE_CARLO,
            }
        )
    return pa.Table.from_pylist(rows, schema=LABELS_SCHEMA)


def rollouts_table(records: Sequence[RolloutRecord], problem_ids: dict[str, str]) -> pa.Table:
    rows = [
        {
            "problem_id": problem_ids[record.solution_id],
            "solution_id": record.solution_id,
            "step_index": record.step_index,
            "rollout_index": record.rollout_index,
            "seed": record.seed,
            "text": record.text,
            "extracted_answer": record.extracted_answer,
            "verdict": record.verdict,
            "tokens": record.tokens,
            "finish_reason": record.finish_reason,
            "token_budget": record.token_budget,
        }
        for record in records
    ]
    return pa.Table.from_pylist(rows, schema=ROLLOUTS_SCHEMA)


def rejected_table(rejected: Sequence[RejectedRow], stage: str) -> pa.Table:
    rows = [
        {
            "row_index": item.row_index,
            "problem_id": item.problem_id,
            "stage": stage,
            "field": item.field,
            "reason": item.reason,
            "raw": item.raw,
        }
        for item in rejected
    ]
    return pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA)
