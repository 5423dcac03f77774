"""Judged solutions as the judgments table of the data contract (schemas/judgments.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from labeler.records import Solution
from schemas.judgments import JUDGMENTS_SCHEMA, JUDGMENTS_SCHEMA_VERSION, majority


@dataclass
class Vote:
    """One of a solution's K critiques: the kept sample, or why the last one could not be read."""

    critique: str | None = None
    index: int | None = None  # the earliest wrong paragraph it names, -1: none; None: not read (yet)
    seed: int | None = None  # of the kept sample
    samples: int = 0  # drawn for this vote so far
    problem: str | None = None  # why its last sample could not be read


@dataclass
class JudgedSolution:
    solution: Solution
    votes: list[Vote]  # every one read
    generated_tokens: int = 0


@dataclass(frozen=True)
class JudgmentProvenance:
    unit_id: str
    model: str
    seed: int
    template_hash: str
    config_hash: str


def judgments_table(judged: Sequence[JudgedSolution], provenance: JudgmentProvenance) -> pa.Table:
    rows = []
    for item in judged:
        solution, votes = item.solution, item.votes
        indices = [vote.index for vote in votes]
        verdict, agreement = majority(indices)
        rows.append(
            {
                "problem_id": solution.problem_id,
                "solution_id": solution.solution_id,
                "problem": solution.problem,
                "steps": list(solution.steps),
                "critiques": [vote.critique for vote in votes],
                "critique_indices": indices,
                "critique_seeds": [vote.seed for vote in votes],
                "critique_samples": [vote.samples for vote in votes],
                "first_error": verdict,
                "agreement": agreement,
                "votes": len(votes),
                "generated_tokens": item.generated_tokens,
                "row_index": solution.row_index,
                "unit_id": provenance.unit_id,
                "source": solution.source,
                "model": provenance.model,
                "seed": provenance.seed,
                "template_hash": provenance.template_hash,
                "config_hash": provenance.config_hash,
                "schema_version": JUDGMENTS_SCHEMA_VERSION,
            }
        )
    return pa.Table.from_pylist(rows, schema=JUDGMENTS_SCHEMA)
