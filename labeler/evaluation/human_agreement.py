"""`labeler eval`: how far step labels, or a PRM's step scores, agree with human labels.

Predictions come from labels shards (a step is predicted wrong when its hard label is False, or,
with a threshold, when its soft label is below it), from `labeler score` output, or from a step
scorer run on the reference solutions themselves (wrong when the step's probability is below the
threshold). They are matched to reference rows by problem_id;
when several predicted solutions share a problem_id, the one with the reference's steps is used.
A match whose step count differs from the reference's is not compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from statistics import mean

from labeler.evaluation.metrics import first_error_metrics, first_predicted_error, rating_is_positive, step_metrics
from labeler.store.reader import read_labelled_rows
from labeler.evaluation.references import ReferenceSet, ReferenceSolution
from labeler.evaluation.solutions import SolutionToScore

DEFAULT_SCORE_THRESHOLD = 0.5


class PredictionsError(ValueError):
    """The predictions cannot be read; the message is for the user."""


@dataclass(frozen=True)
class Prediction:
    problem_id: str
    solution_id: str
    steps: tuple[str, ...] | None  # None when the source does not carry the texts (score files)
    n_steps: int
    correct: tuple[bool | None, ...]  # per step: predicted correct, wrong, or no prediction
    scores: tuple[float | None, ...]  # per step, for AUC


def predictions_from_labels(path: str, threshold: float | None = None) -> list[Prediction]:
    predictions = []
    for row in read_labelled_rows(path):
        scores = tuple(row.soft_or_hard(i) for i in range(len(row.steps)))
        if threshold is None:
            correct = row.hard_labels
        else:
            correct = tuple(None if score is None else score >= threshold for score in scores)
        predictions.append(Prediction(row.problem_id, row.solution_id, row.steps, len(row.steps), tuple(correct), scores))
    return predictions


def predictions_from_scores(path: str, threshold: float = DEFAULT_SCORE_THRESHOLD) -> list[Prediction]:
    predictions = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                record = json.loads(line)
                scores = tuple(record["step_scores"])
                correct = tuple(None if score is None else score >= threshold for score in scores)
                predictions.append(Prediction(str(record["problem_id"]), str(record["solution_id"]), None, len(scores), correct, scores))
    except OSError as error:
        raise PredictionsError(f"{path}: cannot read: {error.strerror or error}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise PredictionsError(f"{path}:{number}: not a `labeler score` line ({error})") from error
    return predictions


def reference_solutions(references: list[ReferenceSet]) -> list[SolutionToScore]:
    """The distinct solutions of the reference files (problem and steps), for a PRM to score."""
    seen: dict[tuple[str, tuple[str, ...]], SolutionToScore] = {}
    for reference in references:
        for solution in reference.solutions:
            key = (solution.problem_id, solution.steps)
            if key not in seen:
                solution_id = f"{reference.name}:{solution.row_index}"
                seen[key] = SolutionToScore(solution.problem_id, solution_id, solution.problem, solution.steps, solution.row_index)
    return list(seen.values())


def predictions_from_step_scores(
    solutions: list[SolutionToScore], step_scores: list[list[float | None]], threshold: float = DEFAULT_SCORE_THRESHOLD
) -> list[Prediction]:
    """Predictions from a step scorer's probabilities (as `labeler score` writes them, without the file)."""
    predictions = []
    for solution, scores in zip(solutions, step_scores, strict=True):
        scores = tuple(scores) + (None,) * (len(solution.steps) - len(scores))  # steps past the PRM's length limit
        correct = tuple(None if score is None else score >= threshold for score in scores)
        predictions.append(Prediction(solution.problem_id, solution.solution_id, solution.steps, len(solution.steps), correct, scores))
    return predictions


@dataclass
class Matched:
    reference: ReferenceSolution
    prediction: Prediction


def match(reference: ReferenceSet, predictions: list[Prediction]) -> tuple[list[Matched], dict[str, int]]:
    by_problem: dict[str, list[Prediction]] = {}
    for prediction in predictions:
        by_problem.setdefault(prediction.problem_id, []).append(prediction)
    matched, counts = [], {"unmatched": 0, "ambiguous": 0, "step_count_mismatch": 0}
    for solution in reference.solutions:
        candidates = by_problem.get(solution.problem_id, [])
        if len(candidates) > 1:
            candidates = [c for c in candidates if c.steps == solution.steps]
            if len(candidates) != 1:
                counts["ambiguous"] += 1
                continue
        if not candidates:
            counts["unmatched"] += 1
        elif candidates[0].n_steps != len(solution.steps):
            counts["step_count_mismatch"] += 1
        else:
            matched.append(Matched(solution, candidates[0]))
    return matched, counts


def subset_result(reference: ReferenceSet, predictions: list[Prediction], neutral: str = "exclude") -> dict:
    matched, counts = match(reference, predictions)
    result = {"subset": reference.name, "format": reference.format, "reference_rows": len(reference.solutions) + reference.rejected}
    result |= {"matched": len(matched), **counts, "reference_rows_unreadable": reference.rejected}
    if reference.format == "processbench":
        pairs = [(m.reference.first_error, first_predicted_error(m.prediction.correct)) for m in matched]
        return result | first_error_metrics(pairs).to_dict()
    return result | _prm800k_result(matched, neutral)


def _prm800k_result(matched: list[Matched], neutral: str) -> dict:
    human, predicted, scores, pairs = [], [], [], []
    for m in matched:
        positive = [rating_is_positive(r, neutral) for r in m.reference.ratings]
        for h, p, s in zip(positive, m.prediction.correct, m.prediction.scores):
            if h is not None and p is not None:
                human.append(h)
                predicted.append(p)
                scores.append(s if s is not None else float(p))
        pairs.append((first_predicted_error(positive), first_predicted_error(m.prediction.correct)))
    steps = step_metrics(human, predicted, scores)
    return {"neutral": neutral} | first_error_metrics(pairs).to_dict() | {f"step_{key}": value for key, value in steps.to_dict().items()}


def evaluate(references: list[ReferenceSet], predictions: list[Prediction], neutral: str = "exclude") -> dict:
    subsets = [subset_result(reference, predictions, neutral) for reference in references]
    f1s = [s["f1"] for s in subsets if s.get("f1") is not None]
    return {"subsets": subsets, "average_f1": mean(f1s) if f1s else None}


def format_table(report: dict) -> str:
    columns = [
        ("subset", "subset", "{}"),
        ("format", "format", "{}"),
        ("matched", "matched", "{}"),
        ("erroneous", "erroneous", "{}"),
        ("erroneous_accuracy", "acc erroneous", "{:.1%}"),
        ("correct", "correct", "{}"),
        ("correct_accuracy", "acc correct", "{:.1%}"),
        ("f1", "F1", "{:.1%}"),
        ("step_accuracy", "step acc", "{:.1%}"),
        ("step_auc", "step AUC", "{:.3f}"),
    ]
    shown = [c for c in columns if any(c[0] in s for s in report["subsets"])]
    rows = [[title for _, title, _ in shown]]
    for subset in report["subsets"]:
        rows.append([_cell(subset.get(key), fmt) for key, _, fmt in shown])
    widths = [max(len(row[i]) for row in rows) for i in range(len(shown))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    if report["average_f1"] is not None and len(report["subsets"]) > 1:
        lines.append(f"average F1: {report['average_f1']:.1%}")
    skipped = {key: sum(s[key] for s in report["subsets"]) for key in ("unmatched", "ambiguous", "step_count_mismatch")}
    if any(skipped.values()):
        lines.append("not compared: " + ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in skipped.items() if value))
    return "\n".join(lines)


def _cell(value, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
