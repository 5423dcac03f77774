"""Solutions to score, from the inputs `labeler label` reads or from labels shards.

Input files and hub datasets go through the same presets as labeling, and solution ids derive
from row content the way the labeling job derives them, so scores and labels of one input line up
by solution_id. A reference answer is not needed to score: rows without one get a placeholder.
Rows that carry no steps (a problem alone) cannot be scored and are rejected with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labeler.inputs.missing_answers import missing_answer
from labeler.inputs.readers import read_rows
from labeler.store.reader import LabelledRow, read_labelled_rows
from labeler.labeling.planning import assign_row_keys
from labeler.inputs.presets import TRACE_COLUMNS, PresetOptions, resolve_preset, to_source_row
from labeler.records import RejectedRow, RowError, SourceRow

ANSWER_PLACEHOLDER = "(no reference answer: not needed here)"


@dataclass(frozen=True)
class SolutionToScore:
    problem_id: str
    solution_id: str
    problem: str
    steps: tuple[str, ...]
    row_index: int | None = None
    thinking_steps: int = 0  # steps[:thinking_steps] are a reasoning trace's thinking (the trace preset)
    reference_answer: str | None = None  # None: the row gives none (scoring needs none; a review queue checks with it)
    complete: bool = True  # False: known to stop before its final answer (a trace cut off, a PRM800K trajectory that gave up)


@dataclass
class SolutionsRead:
    source: str  # "labels" or the preset name
    solutions: list[SolutionToScore]
    rejected: list[RejectedRow] = field(default_factory=list)


def is_labels_input(spec: str) -> bool:
    if "://" in spec:
        return True  # a job on an object store
    path = Path(spec)
    if path.is_dir():
        return True
    if path.suffix == ".parquet" and path.is_file():
        import pyarrow.parquet as pq

        names = set(pq.read_schema(path).names)
        return {"solution_id", "steps", "soft_labels"} <= names
    return False


def read_solutions(
    spec: str, preset: str | None, options: PresetOptions, limit: int | None = None, trust_remote_code: bool = False
) -> SolutionsRead:
    if is_labels_input(spec):
        rows = read_labelled_rows(spec)[:limit]
        return SolutionsRead("labels", [labelled_solution(r) for r in rows])
    sources: list[SourceRow] = []
    rejected: list[RejectedRow] = []
    resolved: str | None = None
    for raw in read_rows(spec, limit, trust_remote_code):
        try:
            if raw.error is not None:
                raise raw.error
            if resolved is None:
                resolved = resolve_preset(preset, raw.data, options)  # file-level: raises InputError
            source = to_source_row(resolved, raw.row_index, with_placeholder_answer(resolved, raw.data, options), options)
            if source.steps is None:
                raise RowError("steps", "the row has a problem but no solution steps to score")
            sources.append(source)
        except RowError as error:
            rejected.append(RejectedRow(raw.row_index, error.field, error.reason, raw=raw.raw))
    solutions = [
        SolutionToScore(
            p.source.problem_id,
            p.given_solution().solution_id,
            p.source.problem,
            p.source.steps,
            p.source.row_index,
            p.source.thinking_steps,
            reference_answer=None if p.source.reference_answer == ANSWER_PLACEHOLDER else p.source.reference_answer,
            complete=p.source.complete,
        )
        for p in assign_row_keys(sources)
    ]
    return SolutionsRead(resolved or preset or "unknown", solutions, rejected)


def labelled_solution(row: LabelledRow) -> SolutionToScore:
    """A labels row as a solution to score: it keeps its solution_id."""
    return SolutionToScore(
        row.problem_id, row.solution_id, row.problem, row.steps, thinking_steps=row.thinking_steps, reference_answer=row.reference_answer
    )


def with_placeholder_answer(preset: str, row: dict, options: PresetOptions) -> dict:
    """The row, with a placeholder where a flat preset expects a reference answer and finds none."""
    if preset not in ("processbench", "columns", "math", "trace"):
        return row
    column = options.answer_column or "answer"
    candidates = (column,) if options.answer_column or preset != "trace" else TRACE_COLUMNS["answer"]
    if any(missing_answer(row.get(name)) is None for name in candidates):  # "nan", NaN, blank: no answer (labeler/inputs/missing_answers.py)
        return row
    if preset == "math" and "\\boxed{" in str(row.get(options.solution_column or "solution") or ""):
        return row  # math takes the answer from the solution's \\boxed{}
    return {**row, column: ANSWER_PLACEHOLDER}
