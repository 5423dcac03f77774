"""Planning a job into deterministic work units: same input and config, same units, same ids."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from labeler.ids import stable_id
from labeler.records import Solution, SourceRow


@dataclass(frozen=True)
class PlannedRow:
    """A source row with the key that makes its solution ids unique within the job."""

    source: SourceRow
    row_key: str

    @property
    def needs_solutions(self) -> bool:
        return self.source.steps is None

    def given_solution(self) -> Solution:
        """The row's own solution (rows that carry steps)."""
        assert self.source.steps is not None
        return _solution(self.source, self.row_key, self.source.steps)

    def sampled_solution(self, sample_index: int, steps: Sequence[str], tokens: int, truncated: bool) -> Solution:
        """The sample_index-th solution sampled for a problem-only row (`tokens` it cost; cut by its budget?)."""
        solution = _solution(self.source, stable_id(self.row_key, "sample", str(sample_index)), tuple(steps))
        return replace(solution, complete=not truncated, sampling_tokens=tokens, sampling_truncated=truncated)


def _solution(source: SourceRow, solution_id: str, steps: Sequence[str]) -> Solution:
    return Solution(
        problem_id=source.problem_id,
        solution_id=solution_id,
        problem=source.problem,
        reference_answer=source.reference_answer,
        steps=tuple(steps),
        source=source.source,
        row_index=source.row_index,
        complete=source.complete,
        thinking_steps=source.thinking_steps,
    )


@dataclass(frozen=True)
class WorkUnit:
    """A batch of rows labelled together and committed as one shard."""

    index: int
    unit_id: str
    rows: tuple[PlannedRow, ...]
    # a piece of a unit bisected because its checker timed out too often (labeler/labeling/unit_failures.py):
    # judged on its timeout share alone, without MIN_TIMEOUTS, so that the row whose answers time out is found
    strict_timeouts: bool = False

    @property
    def shard_name(self) -> str:
        return f"part-{self.index:05d}.parquet"


def assign_row_keys(rows: Iterable[SourceRow]) -> list[PlannedRow]:
    """Content-derived keys; an identical row seen again gets an occurrence suffix, never the same key."""
    seen: Counter[str] = Counter()
    planned = []
    for row in rows:
        content = ("steps", *row.steps) if row.steps is not None else ("problem-only",)
        if row.thinking_steps:  # the same texts as thinking are another solution than as plain steps
            content += ("thinking", str(row.thinking_steps))
        base = stable_id(row.problem_id, row.problem, row.reference_answer, *content)
        occurrence = seen[base]
        seen[base] += 1
        planned.append(PlannedRow(row, base if occurrence == 0 else stable_id(base, str(occurrence))))
    return planned


def plan_units(rows: Sequence[PlannedRow], shard_size: int, solutions_per_problem: int = 1) -> list[WorkUnit]:
    """Cut rows, in input order, into units of about `shard_size` solutions each.

    A problem-only row counts as `solutions_per_problem` solutions; a unit always holds at least one row.
    """
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    units: list[WorkUnit] = []
    current: list[PlannedRow] = []
    weight = 0
    for row in rows:
        row_weight = solutions_per_problem if row.needs_solutions else 1
        if current and weight + row_weight > shard_size:
            units.append(_unit(len(units), current))
            current, weight = [], 0
        current.append(row)
        weight += row_weight
    if current:
        units.append(_unit(len(units), current))
    return units


def _unit(index: int, rows: list[PlannedRow]) -> WorkUnit:
    return WorkUnit(index=index, unit_id=f"u{index:05d}-{stable_id(*(row.row_key for row in rows), length=12)}", rows=tuple(rows))


def plan_hash(units: Sequence[WorkUnit]) -> str:
    return stable_id(*(unit.unit_id for unit in units))
