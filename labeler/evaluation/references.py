"""Human step labels to evaluate against: ProcessBench and PRM800K files.

Rows are read through the same presets as `labeler label`, so a reference row gets the
problem_id and steps its labelled copy got (`--id-column` must match the labeling run's), and
their labels as `labeler import` reads them (labeler/inputs/human_labels.py).

- ProcessBench rows: `steps` and `label`, the 0-based index of the first wrong step (-1: none).
- PRM800K rows: `label.steps[i]` with completions rated -1 / 0 / +1. The steps are the chosen
  completions; a step the human rewrote (`human_completion`) counts as +1; a step with no chosen
  completion ends the solution and its first completion's rating is the step's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labeler.inputs.human_labels import prm800k_ratings, processbench_first_error
from labeler.inputs.readers import InputError, read_rows
from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.records import RowError
from labeler.evaluation.solutions import ANSWER_PLACEHOLDER, with_placeholder_answer

REFERENCE_FORMATS = ("auto", "processbench", "prm800k")


@dataclass(frozen=True)
class ReferenceSolution:
    problem_id: str
    steps: tuple[str, ...]
    first_error: int | None  # ProcessBench's label; None for PRM800K (it depends on the neutral mode)
    ratings: tuple[int | None, ...] | None = None  # PRM800K only, one per step
    problem: str = ""  # the problem text, for scoring the reference's solutions with a PRM
    row_index: int | None = None


@dataclass
class ReferenceSet:
    name: str  # the subset, from the file name (gsm8k.jsonl -> gsm8k)
    format: str
    solutions: list[ReferenceSolution]
    rejected: int  # rows that could not be read


def read_reference(path: str, format: str = "auto", id_column: str | None = None) -> ReferenceSet:
    if format not in REFERENCE_FORMATS:
        raise InputError(f"unknown reference format {format!r}; expected one of {', '.join(REFERENCE_FORMATS)}")
    solutions: list[ReferenceSolution] = []
    rejected = 0
    options = PresetOptions(id_column=id_column)
    for raw in read_rows(path):
        if raw.data is None:
            rejected += 1
            continue
        if format == "auto":
            format = detect_reference_format(raw.data, path)
        try:
            solutions.append(_READERS[format](raw.row_index, raw.data, options))
        except RowError:
            rejected += 1
    if format == "auto":
        raise InputError(f"{path}: no readable row")
    return ReferenceSet(Path(path).stem, format, solutions, rejected)


def detect_reference_format(row: dict, path: str) -> str:
    label = row.get("label")
    if isinstance(label, int) and not isinstance(label, bool) and isinstance(row.get("steps"), list):
        return "processbench"
    if isinstance(label, dict) and isinstance(label.get("steps"), list):
        return "prm800k"
    raise InputError(f"{path}: neither ProcessBench (steps, integer label) nor PRM800K (label.steps) rows; pass --reference-format")


def _processbench(row_index: int, row: dict, options: PresetOptions) -> ReferenceSolution:
    source = to_source_row("processbench", row_index, with_placeholder_answer("processbench", row, options), options)
    first_error = processbench_first_error(row, len(source.steps))
    return ReferenceSolution(source.problem_id, source.steps, first_error, problem=source.problem, row_index=row_index)


def _prm800k(row_index: int, row: dict, options: PresetOptions) -> ReferenceSolution:
    question = row.get("question")
    if isinstance(question, dict) and not question.get("ground_truth_answer"):
        row = {**row, "question": {**question, "ground_truth_answer": ANSWER_PLACEHOLDER}}
    source = to_source_row("prm800k", row_index, row, options)
    ratings = prm800k_ratings(row, len(source.steps))
    return ReferenceSolution(source.problem_id, source.steps, None, ratings, problem=source.problem, row_index=row_index)


_READERS = {"processbench": _processbench, "prm800k": _prm800k}
